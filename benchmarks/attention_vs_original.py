"""Our attention blocks against twins that compute the way the original code does, in one run: a study of our
implementation, not a setting a user chooses (the user-facing benchmarks are `tphyolo bench`).

    python benchmarks/attention_vs_original.py --blocks c3tr --scales l --sizes 1536 --batch 2 --json out.json
    python benchmarks/attention_vs_original.py --quick --device cpu      # tiny sizes, seconds

Blocks, at the width and depth they have in the built-in models of each scale:
- "c3tr":  the P5 C3TR of tph-yolov5 (C_in = C_out = 1024 x width, 3 x depth layers), on the P5 map;
- "c3str": the P5 C3STR of tph-yolov5-swin (1024 x width, 2 x depth layers), on the P5 map;
- "clla":  the CLLABlock of the tph-yolov5pp head (P2 source 128 x width, P3 map 256 x width), on P3.

Image sizes map to maps by stride (640 -> 20 x 20 P5 tokens, 1536 -> 48 x 48, 1996 -> 62 x 62). Each case is
first checked: in eval mode, fp32, both blocks must give the same output. Then each is timed in "eval"
(forward under no_grad, eval mode) and "train" (forward + backward of the output sum, train mode, input
requiring grad), per SDPA backend and autocast dtype. The twin does not use SDPA, so it is timed once per
dtype; our block is timed per backend, and the kernel that actually ran is recorded. Both blocks and their
inputs take the compile mode of `AttentionSettings.runtime` (`prepare_model`) and run NCHW unless its
`channels_last` is True (the automatic layout of inference does not apply: both modes time the same layout).

The runtime flags (`--device --amp --compile --channels-last --sdpa-backend ...`) are those of training. On
CUDA, every SDPA backend and fp32/fp16/bf16 are swept unless `--sdpa-backend`, `--dtypes` or `--amp` narrow it
(`--amp off`: fp32 only). Prints a table of ratios against the twin; `--json` also writes the rows.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch
from original_attention import max_relative_difference, original_from
from study_cli import run_study, study_parser
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from tphyolo.bench.report import Row, machine_info, significant
from tphyolo.bench.timing import matmul_flops_per_s, paired_speedup, peak_memory_mb, time_calls
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import InputError
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, check_field_types, flag
from tphyolo.models.attention import C3TR
from tphyolo.models.build import SCALES
from tphyolo.models.clla import CLLABlock
from tphyolo.models.swin import C3STR
from tphyolo.runtime.config import RuntimeConfig, sdpa_backends
from tphyolo.runtime.flags import SDPA_BACKEND_NAMES
from tphyolo.runtime.sdpa_probe import kernel_that_ran

BLOCKS = ("c3tr", "c3str", "clla")
MODES = ("eval", "train")
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
P5_STRIDE = 32
CLLA_OUTPUTS = 45  # 3 anchors x (10 VisDrone classes + 5)


@dataclass(frozen=True)
class AttentionCase:
    """One block at one scale on the maps of one image size."""

    block: str
    scale: str
    image_size: int
    batch: int

    def describe(self) -> str:
        return f"{self.block} {self.scale} img{self.image_size} b{self.batch} tokens{self.tokens}"

    @property
    def tokens(self) -> str:
        side = self.image_size // P5_STRIDE
        return f"{4 * side}x{4 * side}" if self.block == "clla" else f"{side}x{side}"


def _width(channels: int, scale: str) -> int:
    width = channels * SCALES[scale][1]
    return int(-(-width // 8) * 8)


def _depth(number: int, scale: str) -> int:
    return max(round(number * SCALES[scale][0]), 1)


def build_case(case: AttentionCase, *, device: torch.device, seed: int = 0) -> tuple[nn.Module, list[torch.Tensor]]:
    """Our block for `case` (fresh weights from `seed`) and its fp32 inputs on `device`."""
    if case.scale not in SCALES:
        raise InputError(f"unknown scale {case.scale!r}; known: {sorted(SCALES)}")
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    side = case.image_size // P5_STRIDE
    if side < 1:
        raise InputError(f"image size {case.image_size} is smaller than the P5 stride {P5_STRIDE}")
    if case.block == "c3tr":
        c = _width(1024, case.scale)
        block: nn.Module = C3TR(c, c, _depth(3, case.scale), False)
        shapes = [(case.batch, c, side, side)]
    elif case.block == "c3str":
        c = _width(1024, case.scale)
        block = C3STR(c, c, _depth(2, case.scale), False)
        shapes = [(case.batch, c, side, side)]
    elif case.block == "clla":
        c_src, c_p3 = _width(128, case.scale), _width(256, case.scale)
        block = CLLABlock(c_src, c_src, c_p3, CLLA_OUTPUTS)
        shapes = [(case.batch, c_src, 8 * side, 8 * side), (case.batch, c_p3, 4 * side, 4 * side)]
    else:
        raise InputError(f"unknown block {case.block!r}; known: {BLOCKS}")
    inputs = [torch.randn(shape, generator=generator).to(device) for shape in shapes]
    return block.to(device), inputs


def step_function(module: nn.Module, inputs: Sequence[torch.Tensor], mode: str, dtype: torch.dtype) -> Callable:
    """A callable running one eval forward or one train forward + backward of `module` under autocast."""
    device_type = inputs[0].device.type
    autocast = torch.autocast(device_type=device_type, dtype=dtype, enabled=dtype != torch.float32)
    if mode == "eval":

        def run_eval() -> None:
            module.eval()
            with torch.no_grad(), autocast:
                module(*inputs)

        return run_eval
    if mode != "train":
        raise InputError(f"mode must be one of {MODES}, got {mode!r}")
    leaves = [x.detach().requires_grad_(True) for x in inputs]

    def run_train() -> None:
        module.train()
        module.zero_grad(set_to_none=True)
        with autocast:
            out = module(*leaves)
        out.float().sum().backward()

    return run_train


@contextlib.contextmanager
def only_backend(name: str | None) -> Iterator[None]:
    """Allow only SDPA backend `name` (all backends when None)."""
    if name is None:
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(sdpa_backends([name])):
        yield


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call, counted per operator, with attention on the math path (so that it is counted)."""
    counter = FlopCounterMode(display=False)
    with only_backend("math"), counter:
        fn()
    return counter.get_total_flops()


@dataclass(frozen=True)
class AttentionSettings:
    """What to sweep; `backends` entries may be None (all backends allowed)."""

    cases: tuple[AttentionCase, ...]
    modes: tuple[str, ...] = MODES
    dtypes: tuple[str, ...] = ("fp32",)
    backends: tuple[str | None, ...] = (None,)
    warmup: int = 1
    repeats: int = 3
    runtime: RuntimeConfig = RuntimeConfig()  # memory format and compile of both blocks and their inputs
    matmul_flops: float | None = None  # the machine's fp32 matmul rate, for the achieved fraction


def bench_attention(
    settings: AttentionSettings, *, device: torch.device, log: Callable[[str], None] = print
) -> list[Row]:
    """One Row per (case, mode, dtype, backend); raises RuntimeError when a twin disagrees with our block."""
    rows: list[Row] = []
    for case in settings.cases:
        ours, inputs = build_case(case, device=device)
        baseline = original_from(ours)
        diff = max_relative_difference(ours, baseline, inputs)
        tolerance = 1e-4 if device.type == "cpu" else 1e-3  # GPU kernels may sum in other orders
        if diff > tolerance:
            raise RuntimeError(f"{case.describe()}: original-computation twin differs by {diff:.2e} (> {tolerance})")
        log(f"{case.describe()}: same output as the original computation (max rel. diff {diff:.1e})")
        runtime = replace(settings.runtime, channels_last=bool(settings.runtime.channels_last))
        run_ours, run_base = (runtime.prepare_model(block, device) for block in (ours, baseline))
        inputs = [x.contiguous(memory_format=runtime.memory_format(device)) for x in inputs]
        for mode in settings.modes:
            for dtype_name in settings.dtypes:
                dtype = DTYPES[dtype_name]
                base_fn = step_function(run_base, inputs, mode, dtype)
                ours_fn = step_function(run_ours, inputs, mode, dtype)
                base_mb = peak_memory_mb(base_fn, device=device)
                uses_sdpa = case.block != "clla"
                flops = count_flops(ours_fn) if uses_sdpa else None
                probe = step_function(ours, inputs, "eval", dtype) if uses_sdpa else None
                for backend in settings.backends:
                    config = f"{case.describe()} {mode} {dtype_name} sdpa={backend or 'any'}"
                    timed = (base_fn, ours_fn, probe)
                    rows.append(_measure(settings, device, timed, backend, flops, dtype, log, case, config, base_mb))
    return rows


def _measure(settings, device, timed, backend, flops, dtype, log, case, config, base_mb) -> Row:
    """Times the baseline and our step interleaved under one SDPA backend; an error row if ours cannot run.
    `timed` is (baseline step, our step, our eval forward to probe the kernel with, or None)."""

    base_fn, ours_fn, probe = timed
    name = f"attention/{case.block}"
    extra: dict[str, object] = {}
    with only_backend(backend):
        try:
            if probe is not None:
                extra["kernel"] = kernel_that_ran(probe)
            ours_fn()
        except RuntimeError as error:
            message = str(error).splitlines()[0][:120]
            log(f"{config}: not run: {message}")
            return Row(name, config, None, None, baseline_peak_mb=base_mb, extra={"error": message})
        base_t, ours_t = time_calls([base_fn, ours_fn], device=device, warmup=settings.warmup, repeats=settings.repeats)
        ours_mb = peak_memory_mb(ours_fn, device=device)
    extra["paired_speedup"] = significant(paired_speedup(base_t, ours_t))
    if flops is not None:
        rate = flops / (ours_t.median_ms / 1e3)
        extra["gflop"] = significant(flops / 1e9)
        extra["gflops"] = significant(rate / 1e9)
        if settings.matmul_flops and dtype == torch.float32:
            extra["of_matmul_peak"] = significant(rate / settings.matmul_flops)
    row = Row(
        name, config, ours_t.median_ms, base_t.median_ms, ours_peak_mb=ours_mb, baseline_peak_mb=base_mb,
        ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms, extra=extra,
    )  # fmt: skip
    log(f"{config}: baseline {base_t.median_ms:.1f} ms, ours {ours_t.median_ms:.1f} ms, speedup {row.speedup:.2f}x "
        f"(paired {extra['paired_speedup']:.2f}x), peak {base_mb:.0f} -> {ours_mb:.0f} MiB")  # fmt: skip
    return row


@dataclass(frozen=True)
class SweepFlags:
    """The command line: which blocks, scales, sizes, modes and dtypes; None: the default on the device."""

    quick: bool = flag(False, "--quick", help="tiny sizes and one repeat: checks that it runs")
    warmup: int | None = flag(None, "--warmup", bounds=NON_NEGATIVE, help="untimed calls before timing (default 1)")
    repeats: int | None = flag(None, "--repeats", bounds=AT_LEAST_ONE, help="timed calls (default 3)")
    batch: int = flag(2, "--batch", bounds=AT_LEAST_ONE, help="batch size")
    blocks: tuple[str, ...] = flag(BLOCKS, "--blocks", sep=",", help="attention blocks")
    scales: tuple[str, ...] = flag(("s",), "--scales", sep=",", help="model scales n,s,m,l,x")
    sizes: tuple[int, ...] = flag((640, 1536), "--sizes", sep=",", bounds=IMGSZ_BOUNDS, help="image sizes")
    modes: tuple[str, ...] = flag(MODES, "--modes", sep=",", help="eval,train")
    dtypes: tuple[str, ...] | None = flag(None, "--dtypes", sep=",",
                                          help="fp32,fp16,bf16 (default: fp32 on CPU, all on CUDA)")  # fmt: skip
    json: str | None = flag(None, "--json", metavar="PATH", help="also write the results as JSON to PATH")

    def __post_init__(self) -> None:
        check_field_types(self)


def sweep_dtypes(flags: SweepFlags, runtime: RuntimeConfig, device: torch.device) -> tuple[str, ...]:
    """The autocast dtypes to time: `--dtypes`, else the runtime's amp, else all on CUDA and fp32 on the CPU;
    raises InputError for an unknown one or one that autocasts under `--amp off`."""
    if flags.dtypes is not None:
        dtypes = flags.dtypes
    elif runtime.amp in ("bf16", "fp16"):
        dtypes = (runtime.amp,)
    elif runtime.amp == "off":
        dtypes = ("fp32",)
    else:
        dtypes = tuple(DTYPES) if device.type == "cuda" else ("fp32",)
    if any(d not in DTYPES for d in dtypes):
        raise InputError(f"unknown dtype in {dtypes}; known: {list(DTYPES)}")
    if runtime.amp == "off" and set(dtypes) != {"fp32"}:
        raise InputError(f"--dtypes {','.join(dtypes)} autocasts; it cannot run under --amp off")
    return dtypes


def sweep(flags: SweepFlags, runtime: RuntimeConfig, *, log: Callable[[str], None] = print) -> tuple[list[Row], dict]:
    """The rows of the sweep `flags` names under `runtime`, and the machine (with its fp32 matmul rate)."""
    unknown = [b for b in flags.blocks if b not in BLOCKS] + [m for m in flags.modes if m not in MODES]
    if unknown:
        raise InputError(f"unknown block or mode {unknown}; blocks: {BLOCKS}, modes: {MODES}")
    device = runtime.torch_device()
    dtypes = sweep_dtypes(flags, runtime, device)
    if flags.quick:
        cases = tuple(AttentionCase(block, "n", 256, 1) for block in flags.blocks)
    else:
        cases = tuple(AttentionCase(block, scale, size, flags.batch)
                      for block in flags.blocks for scale in flags.scales for size in flags.sizes)  # fmt: skip
    rate = matmul_flops_per_s(device=device, size=512 if flags.quick else 2048)
    log(f"measured fp32 matmul rate: {rate / 1e9:.1f} GFLOP/s")
    tiny = flags.quick
    settings = AttentionSettings(
        cases=cases, modes=flags.modes, dtypes=dtypes,
        backends=runtime.sdpa_backends or (SDPA_BACKEND_NAMES if device.type == "cuda" else (None,)),
        warmup=flags.warmup if flags.warmup is not None else (0 if tiny else 1),
        repeats=flags.repeats if flags.repeats is not None else (1 if tiny else 3), runtime=runtime, matmul_flops=rate,
    )  # fmt: skip
    rows = bench_attention(settings, device=device, log=log)
    return rows, machine_info(device, matmul_fp32_gflops=significant(rate / 1e9))


def build_parser() -> argparse.ArgumentParser:
    """The script's flags (`SweepFlags`) and the runtime flags of training."""
    return study_parser(SweepFlags, __doc__)


def main(argv: list[str] | None = None) -> int:
    return run_study(build_parser(), SweepFlags, sweep, argv)


if __name__ == "__main__":
    raise SystemExit(main())
