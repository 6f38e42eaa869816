"""Original (YOLOv5 / TPH-YOLOv5) state dicts -> state dicts of our models.

Most keys are identical (`model.{i}.…`). Modules whose layout differs define
`from_original_state(state, prefix)`, which rewrites the original keys under `prefix` in place (e.g. the
transformer layer folds q/k/v and the attention input projection into one `qkv`). Original buffers that our
modules recompute instead of storing are dropped when their last name component is in `DERIVED_BUFFER_NAMES`
and the model has no such key.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from tphyolo.errors import InputError

DERIVED_BUFFER_NAMES = frozenset({"relative_position_index", "attn_mask"})
_SHOWN = 12


def convert_original_state_dict(state_dict: Mapping[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """Maps an original state dict onto `model`'s keys; ready for `model.load_state_dict(..., strict=True)`.

    Tensors keep their dtype except folded ones (float64 products stored as at least float32). Raises
    ValueError listing missing keys, unexpected keys and shape mismatches.
    """
    state = dict(state_dict)
    for name, module in model.named_modules():
        hook = getattr(module, "from_original_state", None)
        if callable(hook):
            hook(state, f"{name}." if name else "")
    expected = model.state_dict()
    for key in [k for k in state if k not in expected and k.rsplit(".", 1)[-1] in DERIVED_BUFFER_NAMES]:
        del state[key]
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    mismatched = [
        f"{k}: original {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    if missing or unexpected or mismatched:
        problems = [
            f"{label} ({len(items)}): {items[:_SHOWN]}{' ...' if len(items) > _SHOWN else ''}"
            for label, items in (("missing", missing), ("unexpected", unexpected), ("shape", mismatched))
            if items
        ]
        raise InputError("original state dict does not match the model architecture; " + "; ".join(problems))
    return {k: state[k] for k in expected}
