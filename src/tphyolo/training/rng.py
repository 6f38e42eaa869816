"""Process random-number generators: seeding a run, and their state as checkpoint-safe data for resuming."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (called by a run itself, never at import)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (and initialised CUDA) RNG states as tensors, ints and lists, which
    `weights_only` checkpoints can hold. `set_rng_state` restores them."""
    np_state = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    state = {
        "python": list(py_state),
        "python_version": py_version,
        "python_gauss": py_gauss,
        "numpy": torch.from_numpy(np_state[1].copy()),
        "numpy_pos": int(np_state[2]),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the RNG states `rng_state()` returned (the CUDA ones only when CUDA is available)."""
    random.setstate((state["python_version"], tuple(state["python"]), state["python_gauss"]))
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), state["numpy_pos"], 0, 0.0))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
