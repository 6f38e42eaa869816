"""A torch and torchvision that do not go together: the pair's diagnosis, and every command (doctor first)
saying it in one line with the pip command of a matching pair, the failure simulated in a child process."""

import os
import subprocess
import sys
import textwrap

import pytest

from tphyolo.runtime.install import (
    BrokenInstallError,
    install_problem,
    installed_version,
    pair_problem,
    torch_install_checked,
)

NMS_ERROR = "operator torchvision::nms does not exist"  # what importing a mismatched torchvision raises


@pytest.mark.parametrize(
    ("torch_version", "torchvision_version"),
    [("2.4.1", "0.19.1"), ("2.5.0+cpu", "0.20.0+cpu"), ("2.14.1+cu130", "0.29.1"), ("2.14.1", "0.29.0+cpu")],
)
def test_pairs_released_together_have_no_problem(torch_version, torchvision_version):
    assert pair_problem(torch_version, torchvision_version) is None


def test_a_mismatched_release_names_both_versions_and_the_matching_pair_from_the_same_index():
    problem = pair_problem("2.14.1+cpu", "0.28.0")
    assert problem.message == "torch 2.14.1+cpu and torchvision 0.28.0 do not go together (torch 2.14 needs " \
                              "torchvision 0.29)"  # fmt: skip
    assert problem.fix == ('pip install --force-reinstall "torch==2.14.1" "torchvision==0.29.*" '
                           "--index-url https://download.pytorch.org/whl/cpu")  # fmt: skip
    assert pair_problem("2.5.1", "0.19.0").fix == 'pip install --force-reinstall "torch==2.5.1" "torchvision==0.20.*"'


def test_builds_for_different_platforms_are_a_problem_too():
    problem = pair_problem("2.14.1+cpu", "0.29.1+cu130")
    assert problem.message.endswith("are different builds (cpu, cu130)") and "whl/cpu" in problem.fix


def test_only_errors_of_torchvision_become_one_line():
    with pytest.raises(BrokenInstallError) as caught, torch_install_checked():
        raise RuntimeError(NMS_ERROR)
    line = str(caught.value)
    assert "\n" not in line and f"torchvision {installed_version('torchvision')}" in line and NMS_ERROR in line
    assert "pip install --force-reinstall" in line and isinstance(caught.value, ValueError)
    with pytest.raises(RuntimeError, match="CUDA out of memory"), torch_install_checked():
        raise RuntimeError("CUDA out of memory")
    assert install_problem(ValueError("torchvision extra missing")) is None  # already one line


BROKEN_TORCHVISION = f'''
import importlib.abc, importlib.machinery, sys

class BrokenTorchvision(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Importing torchvision fails as it does when it was built for another torch."""

    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "torchvision" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise RuntimeError("{NMS_ERROR}")

sys.meta_path.insert(0, BrokenTorchvision())
'''


@pytest.fixture(scope="module")
def broken_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("broken-torchvision")
    (folder / "sitecustomize.py").write_text(textwrap.dedent(BROKEN_TORCHVISION))
    paths = [str(folder), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TPHYOLO_DEBUG": ""}


def tphyolo(env, *argv):
    return subprocess.run([sys.executable, "-m", "tphyolo", *argv], capture_output=True, text=True, env=env,
                          timeout=300, check=False)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ("train", "--epochs", "1", "--device", "cpu"),
        ("predict", "--weights", "w.pt", "--source", "images"),
        ("data", "check", "--data", "synthetic"),
    ],
)
def test_every_command_says_the_broken_pair_in_one_line(broken_env, tmp_path, argv):
    result = tphyolo(broken_env, *argv, *(["--project", str(tmp_path)] if argv[0] != "data" else []))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"tphyolo {argv[0]}: error: torchvision {installed_version('torchvision')} ")
    assert NMS_ERROR in line and "pip install --force-reinstall" in line and '"torchvision==0.' in line


@pytest.mark.slow
def test_doctor_says_the_broken_pair_and_runs_its_other_checks(broken_env):
    result = tphyolo(broken_env, "doctor", "--no-compile-check")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "sdpa small" in result.stdout and "cpu " in result.stdout  # the other checks ran
    assert NMS_ERROR in result.stdout and "fix: pip install --force-reinstall" in result.stdout
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("tphyolo doctor: error: torchvision ") and NMS_ERROR in errors[0]


def test_a_cpu_build_gets_a_fix_from_pypi_too_for_where_the_cpu_index_cannot_be_reached():
    """torch 2.13.0+cpu beside PyPI's torchvision 0.28.0: the index that mixed them may be out of reach, so the
    line also gives PyPI's matching pair, which needs no index."""
    problem = pair_problem("2.13.0+cpu", "0.27.1")
    assert problem.fix.endswith("--index-url https://download.pytorch.org/whl/cpu")
    assert problem.fallback == 'pip install --force-reinstall "torch==2.13.0" "torchvision==0.28.*"'
    assert str(problem).endswith(f"cannot be reached, PyPI's pair (on Linux a larger CUDA build, which runs on a "
                                 f"CPU too): {problem.fallback}")  # fmt: skip
    assert pair_problem("2.5.1", "0.19.0").fallback is None  # PyPI's own: its fix needs no other index
