"""What this environment can run, probed rather than guessed, with a fix for each problem.

    from tphyolo.doctor import report
    found = report()            # a DoctorReport: versions, GPUs, attention kernels, allocator, threads, problems
    print(found.text())         # what `tphyolo doctor` prints; found.to_dict() is what `--json` prints

A CPU-only machine is a fact of the report ("device: CPU only"), not a problem. The torch.compile probe takes
tens of seconds on a CPU (a C++ build of a tiny function), so it runs by default only where a GPU is visible,
and on request (`compile_check=True`) elsewhere.
"""

from tphyolo.doctor.checkup import report
from tphyolo.doctor.findings import DoctorReport, Problem, device_summary, format_report
from tphyolo.doctor.problems import find_problems

__all__ = ["DoctorReport", "Problem", "device_summary", "find_problems", "format_report", "report"]
