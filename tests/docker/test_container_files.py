"""The container images: what can be checked without a Docker engine (none runs on CI's machines).

The scripts parse, the start script's dry run shows what it would do, the Dockerfiles follow the rules the
README promises (non-root user, health check, caches cleaned in the layer that made them, the shared install
script), and the extras the images install exist. CI also runs docker/install.sh in its own environment.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = [DOCKER / "Dockerfile", DOCKER / "Dockerfile.cpu"]


def run_script(*args, env=None, unset=()):
    """Runs bash with the caller's environment, `env` added and the names in `unset` removed."""
    full_env = {k: v for k, v in os.environ.items() if k not in unset} | (env or {})
    return subprocess.run(["bash", *args], capture_output=True, text=True, env=full_env, timeout=60)


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("script", ["start-dev.sh", "install.sh"])
def test_scripts_parse(script):
    result = run_script("-n", str(DOCKER / script))
    assert result.returncode == 0, result.stderr


def test_start_script_dry_run_sets_the_environment_and_starts_jupyterlab():
    env = {"TPHYOLO_DRY_RUN": "1", "CUDA_LAUNCH_BLOCKING": "1", "JUPYTER_PORT": "9999"}
    result = run_script(str(DOCKER / "start-dev.sh"), env=env, unset=("PYTORCH_CUDA_ALLOC_CONF",))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "PYTHONFAULTHANDLER=1" in lines
    assert "PYTORCH_CUDA_ALLOC_CONF=<unset: tphyolo applies --alloc-conf>" in lines
    assert "CUDA_LAUNCH_BLOCKING=<unset>" in lines  # removed even when the caller set it
    assert "would run: tphyolo doctor --no-compile-check" in lines
    assert any(line.startswith("would run: jupyter lab") and "--port=9999" in line for line in lines)


def test_start_script_keeps_the_callers_allocator_setting():
    env = {"TPHYOLO_DRY_RUN": "1", "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}
    result = run_script(str(DOCKER / "start-dev.sh"), env=env)
    assert result.returncode == 0, result.stderr
    assert "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64" in result.stdout.splitlines()


def test_start_script_runs_a_given_command_and_can_skip_the_doctor():
    env = {"TPHYOLO_DRY_RUN": "1", "TPHYOLO_DOCTOR": "0"}
    result = run_script(str(DOCKER / "start-dev.sh"), "tphyolo", "train", "--epochs", "1", env=env)
    assert result.returncode == 0, result.stderr
    assert "would run: tphyolo train --epochs 1" in result.stdout
    assert "doctor" not in result.stdout and "jupyter" not in result.stdout


def test_install_script_installs_the_project_with_the_image_extras():
    result = run_script(str(DOCKER / "install.sh"), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"python3 -m pip install --no-cache-dir {ROOT}[export,notebook]"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"export", "notebook"} <= set(extras)
    assert any(req.startswith("jupyterlab") for req in extras["notebook"])


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_rules(dockerfile):
    steps = instructions(dockerfile)
    words = [word for word, _ in steps]
    assert words.count("FROM") == 1 and "ENTRYPOINT" in words
    users = [arg for word, arg in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    health = [arg for word, arg in steps if word == "HEALTHCHECK"]
    assert len(health) == 1 and "tphyolo doctor --json" in health[0]
    for word, arg in steps:
        if word == "RUN" and "apt-get install" in arg:
            assert "rm -rf /var/lib/apt/lists/*" in arg  # the lists go in the layer that made them
        if word == "RUN" and "pip install" in arg:
            assert "--no-cache-dir" in arg
    assert any(word == "RUN" and "docker/install.sh" in arg for word, arg in steps)
    assert "start-dev.sh" in dict(steps)["ENTRYPOINT"]
    copied = " ".join(arg for word, arg in steps if word == "COPY")
    for path in ("pyproject.toml", "src", "docker", "notebooks"):
        assert path in copied


def test_dockerignore_sends_only_what_the_image_installs():
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[[i for i, line in enumerate(lines) if not line.startswith("#")][0]] == "*"
    for kept in ("!src/", "!docker/", "!notebooks/", "!pyproject.toml"):
        assert kept in lines
