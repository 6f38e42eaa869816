"""Whether the installed torch and torchvision go together, and what to install when they do not.

torchvision is compiled against one torch release: torchvision 0.(m + 15) goes with torch 2.m (0.19 with 2.4,
0.20 with 2.5, ..., 0.29 with 2.14), and a CPU build (`+cpu`) with a CPU build. pip does not enforce either when
the two come from different indexes (PyTorch's CPU index for one, PyPI for the other), and the mismatch shows
only when torchvision is imported: `RuntimeError: operator torchvision::nms does not exist`, or an undefined
symbol in its compiled extension.

- `pair_problem(torch_version, torchvision_version)`: the mismatch of two version strings, as a `PairProblem`
  (what is wrong, the pip command that installs a matching pair), None when they go together;
- `install_problem(error)`: the same for an error raised while importing torchvision, naming the installed
  versions (read from the package metadata, without importing either);
- `torchvision_status()`: torchvision's version and the pair's problem, whatever importing it does (`tphyolo
  doctor` reports it and goes on with its other checks);
- `torch_install_checked()`: a context in which such an error becomes `BrokenInstallError`, one line on the
  command line. Importing this module imports neither torch nor torchvision.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib import metadata

from tphyolo.errors import InputError

TORCHVISION_MINOR_OFFSET = 15  # torchvision 0.(m + 15) is built for torch 2.m
PYTORCH_INDEX = "https://download.pytorch.org/whl"  # PyTorch's wheel indexes: /cpu, /cu126, ...


class BrokenInstallError(RuntimeError, InputError):
    """torch and torchvision are installed but do not work together. A ValueError too, so that the command line
    reports it in one line (as bad input) instead of a traceback."""


@dataclass(frozen=True)
class PairProblem:
    """What is wrong with the installed pair (`message`), the pip command that installs one that works from the
    index of the installed build (`fix`) and, when that is PyTorch's own index, the one that installs PyPI's
    pair instead (`fallback`, for a machine that cannot reach that index: how the pair got mixed)."""

    message: str
    fix: str
    fallback: str | None = None

    def __str__(self) -> str:
        text = f"{self.message}; install a matching pair: {self.fix}"
        if self.fallback is not None:
            text += f"; where {PYTORCH_INDEX} cannot be reached, PyPI's pair (on Linux a larger CUDA build, which " \
                    f"runs on a CPU too): {self.fallback}"  # fmt: skip
        return text


def installed_version(package: str) -> str | None:
    """The version of `package` as pip installed it, None when it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, int] | None:
    parts = version.split("+")[0].split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def _build(version: str) -> str | None:
    """The local build tag of a PyTorch wheel version (`cpu`, `cu126`, `rocm6.2`), None for a plain one."""
    return version.partition("+")[2] or None


def matching_torchvision(torch_version: str) -> str | None:
    """The torchvision release (`0.29`) built for torch `torch_version` (`2.14.1+cpu`); None for a torch that
    is not 2.x."""
    release = _release(torch_version)
    if release is None or release[0] != 2:
        return None
    return f"0.{release[1] + TORCHVISION_MINOR_OFFSET}"


def pip_command(torch_version: str, *, from_pypi: bool = False) -> str:
    """The pip command that installs torch `torch_version` with the torchvision built for it, from the index of
    its build (PyTorch's CPU index for `+cpu`; PyPI for a plain version), or from PyPI with `from_pypi`."""
    torchvision = matching_torchvision(torch_version)
    wanted = f'"torchvision=={torchvision}.*"' if torchvision else "torchvision"
    build = None if from_pypi else _build(torch_version)
    index = f" --index-url {PYTORCH_INDEX}/{build}" if build else ""
    return f'pip install --force-reinstall "torch=={torch_version.split("+")[0]}" {wanted}{index}'


def _problem(message: str, torch_version: str) -> PairProblem:
    """A PairProblem with the fixes for torch `torch_version`: from its build's index, and from PyPI when that
    index is PyTorch's own."""
    fallback = pip_command(torch_version, from_pypi=True) if _build(torch_version) else None
    return PairProblem(message, pip_command(torch_version), fallback)


def pair_problem(torch_version: str, torchvision_version: str | None) -> PairProblem | None:
    """Why torch `torch_version` and torchvision `torchvision_version` do not go together (release or build),
    None when they do or torchvision is not installed."""
    if torchvision_version is None:
        return None
    wanted = matching_torchvision(torch_version)
    release = _release(torchvision_version)
    pair = f"torch {torch_version} and torchvision {torchvision_version}"
    if wanted is not None and release is not None and f"{release[0]}.{release[1]}" != wanted:
        needs = f"torch {'.'.join(map(str, _release(torch_version)))} needs torchvision {wanted}"
        return _problem(f"{pair} do not go together ({needs})", torch_version)
    builds = _build(torch_version), _build(torchvision_version)
    if None not in builds and builds[0] != builds[1]:
        return _problem(f"{pair} are different builds ({builds[0]}, {builds[1]})", torch_version)
    return None


def _raised_by_torchvision(error: BaseException) -> bool:
    if "torchvision" in str(error):
        return True
    frames = traceback.extract_tb(error.__traceback__)
    return any("/torchvision/" in frame.filename.replace("\\", "/") for frame in frames)


def install_problem(error: BaseException) -> PairProblem | None:
    """The pair problem behind `error`, an exception raised while importing torchvision (its operators not
    registered, its extension not loading), naming the installed versions; None for any other error."""
    if isinstance(error, ValueError) or not isinstance(error, (RuntimeError, ImportError, OSError)):
        return None  # a ValueError (a missing extra, bad input) is already one line
    if not _raised_by_torchvision(error):
        return None
    torch_version = getattr(sys.modules.get("torch"), "__version__", None) or installed_version("torch")
    torchvision_version = installed_version("torchvision")  # with its build tag where the wheel has one
    if torch_version is None or torchvision_version is None:
        return None
    cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    problem = pair_problem(torch_version, torchvision_version)
    if problem is None:  # the versions say they pair: the install itself is broken
        problem = _problem(f"torchvision {torchvision_version} does not load with torch {torch_version}", torch_version)
    return PairProblem(f"{problem.message}: importing torchvision fails with '{cause}'", problem.fix, problem.fallback)


@contextlib.contextmanager
def torch_install_checked() -> Iterator[None]:
    """While open, an error that `install_problem` explains is raised as BrokenInstallError (one line: both
    versions and the pip command), from the original; any other error passes unchanged."""
    try:
        yield
    except (RuntimeError, ImportError, OSError) as error:
        problem = install_problem(error)
        if problem is None:
            raise
        raise BrokenInstallError(str(problem)) from error


def torchvision_status() -> tuple[str | None, dict | None]:
    """(torchvision's version, None when it is not installed; the problem of the torch/torchvision pair as
    {"message", "fix", "fallback"}, None when they import and go together). Never raises for a broken pair."""
    try:
        import torchvision
    except Exception as error:  # a broken pair fails in many ways; install_problem says which it knows
        problem = install_problem(error)
        if problem is None and not isinstance(error, ImportError):
            raise
        version = installed_version("torchvision") if problem is not None else None
        return version, (asdict(problem) if problem is not None else None)
    import torch

    problem = pair_problem(torch.__version__, torchvision.__version__)
    return torchvision.__version__, (asdict(problem) if problem is not None else None)
