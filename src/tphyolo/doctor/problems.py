"""The problems a doctor report shows: what will fail or run slowly here, each with a one-line fix."""

from __future__ import annotations

from tphyolo.doctor.findings import DoctorReport, Problem

MIN_TORCH = (2, 4)
CPU_WHEEL_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's index of CPU-only builds


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def find_problems(report: DoctorReport) -> list[Problem]:
    """The problems in `report`, each with a one-line fix."""
    problems: list[Problem] = []
    torch_info, cuda = report.torch, report.cuda
    if _version_tuple(torch_info["version"]) < MIN_TORCH:
        problems.append(Problem(f"torch {torch_info['version']} is too old", "pip install -U 'torch>=2.4'"))
    pair = torch_info.get("pair_problem")
    if torch_info["torchvision"] is None:
        problems.append(Problem("torchvision is not installed", "pip install torchvision (matching your torch)"))
    elif pair is not None:
        problems.append(Problem(pair["message"], pair["fix"]))
    for dev in report.devices:
        if not dev["arch_in_build"]:
            problems.append(
                Problem(
                    f"GPU {dev['index']} ({dev['name']}, {dev['arch']}) is not in this torch build's arch list",
                    f"install a torch build compiled for {dev['arch']} (see pytorch.org for the right CUDA wheel)",
                )
            )
        if dev["bf16_supported"] and not report.precision["cudnn_allow_tf32"]:
            problems.append(
                Problem("TF32 convolutions are disabled on an Ampere-or-newer GPU", "drop --no-tf32 for speed")
            )
    for case, row in report.sdpa["probes"].items():
        if str(row.get("default", "")).startswith("error"):
            problems.append(
                Problem(
                    f"scaled_dot_product_attention fails for the {case} call: {row['default']}",
                    "upgrade torch, or allow the math backend (--sdpa-backend math)",
                )
            )
        elif cuda["available"] and row.get("default") == "math":
            problems.append(
                Problem(
                    f"the {case} attention call falls back to the math kernel on the GPU",
                    "use --amp bf16/fp16 and a GPU with flash/efficient attention support for fused kernels",
                )
            )
    if report.compile.get("available") is False:
        fix = (
            "install Triton matching your torch (pip install triton)"
            if cuda["available"]
            else "install a C++ compiler (e.g. apt-get install g++) for inductor's CPU path"
        )
        problems.append(Problem(f"torch.compile does not work: {report.compile.get('error')}", fix))
    cpu = report.cpu
    if cpu["torch_threads"] > (cpu["usable_cores"] or cpu["torch_threads"]):
        problems.append(
            Problem(
                f"torch uses {cpu['torch_threads']} threads on {cpu['usable_cores']} usable cores",
                f"set OMP_NUM_THREADS={cpu['usable_cores']} to avoid oversubscription",
            )
        )
    install = report.install or {}
    if cuda["built_with"] and not cuda["available"]:  # a CUDA wheel, whether its libraries are packages or inside
        gigabytes = (install.get("torch_bytes", 0) + install.get("cuda_libraries_bytes", 0)) / 1e9
        libraries = install.get("cuda_libraries_bytes", 0) / 1e9
        held = f", {libraries:.1f} GB of it CUDA libraries (nvidia-*, triton)" if libraries else ""
        problems.append(
            Problem(
                f"torch {torch_info['version']} is a CUDA build (CUDA {cuda['built_with']}) and no GPU is "
                f"visible: it takes {gigabytes:.1f} GB here{held}, downloaded for a GPU that is not there",
                "on a machine without a GPU, the CPU build is enough: pip install --force-reinstall torch "
                f"torchvision --index-url {CPU_WHEEL_INDEX}, then pip uninstall triton and the nvidia-* packages",
            )
        )
    if cuda["available"] and not report.pinned_memory["supported"]:
        problems.append(
            Problem("pinned host memory is unavailable", "raise the locked-memory limit (ulimit -l) or use --workers 0")
        )
    return problems
