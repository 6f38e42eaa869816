"""What the doctor found, as one value: `DoctorReport` (every probe's section and the `Problem`s, each with
its fix), as JSON-ready data (`to_dict()`, what `tphyolo doctor --json` prints) and in words (`format_report`,
what `tphyolo doctor` prints).

The value and its words live together, below the modules that fill it in (`problems.py` finds the problems,
`checkup.py` runs the probes): they import it, and it imports none of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """Something that will fail or run slowly, and the one-line fix."""

    message: str
    fix: str


@dataclass(frozen=True)
class DoctorReport:
    """What this environment can run. Each section is JSON-ready data (`to_dict()` is `tphyolo doctor --json`);
    `problems` are what will fail or run slowly, each with its fix; `text()` is the human-readable report."""

    tphyolo: str  # the package version
    python: dict[str, Any]  # version, executable
    platform: str
    torch: dict[str, Any]  # version, torchvision, debug, pair_problem (a torch/torchvision mismatch, or None)
    cuda: dict[str, Any]  # built_with, available, driver, cudnn, arch_list, device_count
    devices: tuple[dict[str, Any], ...]  # per GPU: name, arch, arch_in_build, memory_gib, bf16_supported
    sdpa: dict[str, Any]  # enabled backends; per probe case, the kernel that ran and those usable alone
    precision: dict[str, Any]  # fp32 matmul precision, cuDNN TF32 and benchmark
    allocator: dict[str, Any]  # CUDA allocator settings in force; the CPU malloc policy
    compile: dict[str, Any]  # the torch.compile probe: available, backend, error, seconds; or skipped
    compile_cache: dict[str, Any]  # dir, source, exists, files, mb
    cpu: dict[str, Any]  # cores, usable cores, torch threads, model, isa (AVX2 ... AMX-INT8), native_bf16
    runtime_probe: dict[str, Any]  # dir, choices (the decisions `doctor --tune` kept, with their keys and times)
    compiled_models: dict[str, Any]  # dir, tphyolo (its marker), entries (name, mb, tphyolo, verified, problem)
    pinned_memory: dict[str, Any]  # supported, reason
    install: dict[str, Any]  # torch_bytes, cuda_libraries_bytes
    problems: tuple[Problem, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (problems as {"message", "fix"})."""
        return dataclasses.asdict(self)

    def text(self) -> str:
        """The human-readable report, as `tphyolo doctor` prints it."""
        return format_report(self)


def device_summary(report: DoctorReport) -> str:
    """What the report's machine computes on, in words: the GPUs, or "CPU only" and why."""
    cuda = report.cuda
    if cuda["available"]:
        names = ", ".join(f"{d['index']}: {d['name']}" for d in report.devices)
        return f"{cuda['device_count']} CUDA GPU(s) ({names})"
    if cuda["built_with"] is None:
        return "CPU only (this torch build has no CUDA; a CUDA build of torch is needed to use a GPU)"
    return "CPU only (no GPU visible: nvidia-smi, the driver and CUDA_VISIBLE_DEVICES decide)"


def runtime_probe_lines(found: dict) -> list[str]:
    """The decisions kept by `tphyolo doctor --tune`, a line each (or one line saying the rule decides)."""
    choices = found["choices"]
    if not choices:
        return [f"  decisions     {found['dir']}: none kept; the rule decides layout and precision "
                "(tphyolo doctor --tune measures and keeps this machine's)"]  # fmt: skip
    lines = [f"  decisions     {found['dir']}: {len(choices)} kept (tphyolo doctor --tune replaces them; delete the "
             "folder to go back to the rule)"]  # fmt: skip
    for entry in choices:
        if "error" in entry:
            lines.append(f"    {entry['file']}: unreadable ({entry['error']}); the rule decides instead")
            continue
        measured = entry["measured"]
        times = ", ".join(f"{name} {float(seconds) * 1e3:.0f} ms"
                          for name, seconds in dict(measured.get("seconds") or {}).items())  # fmt: skip
        load, cores = measured.get("load"), measured.get("cores")
        busy = (f"  measured on a busy machine (load {load} on {cores} cores): tune again when quiet"
                if isinstance(load, float | int) and isinstance(cores, int) and load > cores else "")  # fmt: skip
        lines.append(f"    {entry['mode']} {entry['architecture']} on {entry['device']} (torch {entry['torch']}, "
                     f"{entry['threads']} threads, {measured.get('date', '?')}): {entry['choice']}  [{times}]{busy}")
    return lines


def compiled_model_lines(found: dict) -> list[str]:
    """The compiled-checkpoint cache's entries, a line each with its size, owner and whether its files still
    match their hashes (or one line saying there are none yet)."""
    entries = found["entries"]
    if not entries:
        return [f"  compiled models {found['dir']}: none yet (checkpoints run on OpenVINO or ONNX Runtime go here)"]
    owner = "" if found["tphyolo"] else "; not a folder tphyolo made: nothing in it is evicted"
    total = sum(e["mb"] for e in entries)
    lines = [f"  compiled models {found['dir']}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, "
             f"{total:.1f} MB{owner}"]  # fmt: skip
    for entry in entries:
        if not entry["tphyolo"]:
            state = "not tphyolo's: left alone"
        elif entry["verified"]:
            state = "tphyolo's, files match their SHA-256"
        else:
            state = f"tphyolo's, compiled again when next used: {entry['problem']}"
        lines.append(f"    {entry['name']}  {entry['mb']:.1f} MB  {state}")
    return lines


def format_report(report: DoctorReport) -> str:
    """The human-readable report."""
    lines = [f"tphyolo {report.tphyolo}  ({report.platform})"]
    lines.append(f"  python        {report.python['version']}  {report.python['executable']}")
    lines.append(f"  torch         {report.torch['version']}   torchvision {report.torch['torchvision']}")
    cuda = report.cuda
    lines.append(f"  device        {device_summary(report)}")
    lines.append(
        f"  cuda          built with {cuda['built_with']}, available: {cuda['available']}, "
        f"driver: {cuda['driver']}, cuDNN: {cuda['cudnn']}"
    )
    if cuda["available"]:
        lines.append(f"  arch list     {' '.join(cuda['arch_list'])}")
    for dev in report.devices:
        lines.append(
            f"  gpu {dev['index']}         {dev['name']}  cc {dev['compute_capability']}  "
            f"{dev['memory_gib']} GiB  arch in build: {dev['arch_in_build']}"
        )
    sdpa = report.sdpa
    enabled = ", ".join(name for name, on in sdpa["enabled"].items() if on)
    lines.append(f"  sdpa enabled  {enabled}")
    for case, row in sdpa["probes"].items():
        ran = row["default"]
        usable = ", ".join(name for name in ("flash", "efficient", "cudnn", "math") if row.get(name) == "ok")
        lines.append(
            f"  sdpa {case:<8} ran: {ran}   usable alone: {usable or 'none'}"
            f"   ({sdpa['probe_device']}, {sdpa['probe_dtype']})"
        )
    prec = report.precision
    lines.append(
        f"  precision     fp32 matmul: {prec['float32_matmul_precision']}, cudnn tf32: {prec['cudnn_allow_tf32']}, "
        f"cudnn.benchmark: {prec['cudnn_benchmark']}"
    )
    alloc = report.allocator
    lines.append(
        f"  allocator     in force: {alloc['in_force'] or '(torch default)'}; "
        f"tphyolo applies {alloc['tphyolo_default']} when unset"
    )
    malloc = alloc["cpu_malloc"]
    if malloc["user_choice"]:
        lines.append(f"  cpu malloc    left to your setting {malloc['user_choice']}")
    elif malloc["glibc"]:
        lines.append(
            f"  cpu malloc    glibc; commands that run models keep freed blocks up to {malloc['keep_bytes'] >> 20} MiB "
            "for reuse (--no-keep-cpu-memory: off)"
        )
    else:
        lines.append("  cpu malloc    not glibc: left as it is")
    comp = report.compile
    if comp.get("skipped"):
        lines.append("  compile       not checked (tphyolo doctor --compile-check probes it: tens of seconds on a CPU)")
    else:
        state = "works" if comp["available"] else f"FAILS: {comp['error']}"
        lines.append(f"  compile       {comp['backend']}: {state} ({comp['seconds']} s for a tiny function)")
    cache = report.compile_cache
    held = f"{cache['files']} files, {cache['mb']} MB" if cache["exists"] else "empty (not created yet)"
    lines.append(f"  compile cache {cache['dir']} ({cache['source']}): {held}; used by --compile runs")
    cpu = report.cpu
    lines.append(
        f"  cpu           {cpu['processor']}, {cpu['usable_cores']}/{cpu['logical_cores']} cores usable, "
        f"torch threads {cpu['torch_threads']} (interop {cpu['torch_interop_threads']})"
    )
    lines.append(f"  cpu isa       {' '.join(cpu['isa']) or 'none of AVX2/AVX-512/AMX'} "
                 f"(native bf16: {'yes' if cpu['native_bf16'] else 'no'}); {cpu['model']}")  # fmt: skip
    lines.extend(runtime_probe_lines(report.runtime_probe))
    lines.extend(compiled_model_lines(report.compiled_models))
    pinned = report.pinned_memory
    lines.append(f"  pinned memory {'supported' if pinned['supported'] else 'no: ' + pinned['reason']}")
    if report.problems:
        lines.append("problems:")
        lines.extend(f"  - {p.message}\n    fix: {p.fix}" for p in report.problems)
    else:
        lines.append("no problems found")
    return "\n".join(lines)
