"""Where torch.compile keeps what it compiled, so that a run does not pay graph compilation again on every
start and resume.

PyTorch's own persistent caches do the work: the inductor FX-graph cache and the AOT-autograd cache (both on by
default in recent PyTorch) keep compiled graphs on disk, keyed by the graph, the inputs' shapes and dtypes, the
PyTorch version and the machine. By default PyTorch puts them under the temporary folder, which containers and
reboots wipe; tphyolo moves them to a folder of its user cache, `<user cache>/compile` (`$XDG_CACHE_HOME/tphyolo`
or `~/.cache/tphyolo`), or to `$TPHYOLO_COMPILE_CACHE`. A `TORCHINDUCTOR_CACHE_DIR` set by the user always wins.

PyTorch's portable cache artifacts (`torch.compiler.save_cache_artifacts`) are not written beside checkpoints:
they carry generated code that loading would run, and loading a file never executes code from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tphyolo.user_cache import user_cache_dir

CACHE_ENV = "TPHYOLO_COMPILE_CACHE"
INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"


def compile_cache_dir(environ: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The folder compiled graphs are kept in, and who chose it: "user" (TORCHINDUCTOR_CACHE_DIR),
    "tphyolo" ($TPHYOLO_COMPILE_CACHE) or "default" (the user cache)."""
    env = os.environ if environ is None else environ
    if env.get(INDUCTOR_ENV) and env[INDUCTOR_ENV] != _torch_default():
        return Path(env[INDUCTOR_ENV]), "user"
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser(), "tphyolo"
    return user_cache_dir() / "compile", "default"


def _torch_default() -> str:
    """PyTorch's own default cache folder, which it writes into TORCHINDUCTOR_CACHE_DIR once it has used it
    (so that value there is not a user's choice)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return os.path.abspath(default_cache_dir())


def use_compile_cache() -> dict[str, str]:
    """Points PyTorch's compile caches at `compile_cache_dir()` (process-wide; `configure_process` calls it when
    compiling) and makes sure the FX-graph and AOT-autograd caches are on. Returns {"dir", "source"}."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    folder, source = compile_cache_dir()
    if source != "user":
        os.environ[INDUCTOR_ENV] = str(folder)
    inductor_config.fx_graph_cache = True
    functorch_config.enable_autograd_cache = True
    return {"dir": str(folder), "source": source}


def cache_counters() -> dict[str, int]:
    """Hits and misses of the compile caches in this process so far: {"fx_graph_hits", "fx_graph_misses",
    "autograd_hits", "autograd_misses"}."""
    from torch._dynamo.utils import counters

    return {
        "fx_graph_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fx_graph_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
        "autograd_hits": int(counters["aot_autograd"]["autograd_cache_hit"]),
        "autograd_misses": int(counters["aot_autograd"]["autograd_cache_miss"]),
    }


def describe_cache(folder: Path) -> dict[str, object]:
    """What the cache folder holds, for `tphyolo doctor`: {"dir", "exists", "files", "mb"}."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    size = sum(p.stat().st_size for p in files)
    return {"dir": str(folder), "exists": folder.is_dir(), "files": len(files), "mb": round(size / 2**20, 1)}
