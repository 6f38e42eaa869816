"""Every command block of the README and the docs pages is checked against the code, so that none can drift:

- each `tphyolo ...` command (also after `torchrun ... -m tphyolo` and in `docker run IMAGE tphyolo ...`) is
  parsed by the command line's own parser: its command, flags, values and choices must all exist;
- `python benchmarks/X.py` and `bash benchmarks/X.sh` name scripts that exist, and each flag given to a Python
  script is one it declares (or a runtime flag, when it adds them); `pip install -e ".[extra]"` names extras of
  pyproject.toml; `docker build -f F` names a Dockerfile that exists;
- Python blocks compile, and every `import` / `from tphyolo... import` in them resolves.

A command whose first word none of these rules knows fails the test: a new kind of block needs a rule here.
The commands are parsed, not run: the task pages' commands train on VisDrone at 1536 px, use GPUs and cameras.
The README's set-up commands run in CI as they are (`.ci/run`).
"""

import argparse
import ast
import importlib
import re
import shlex
from pathlib import Path

import pytest

from tphyolo.cli import build_parser
from tphyolo.runtime.flags import add_runtime_arguments

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)])
FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", re.M | re.S)
ALLOWED = {  # first words of shell commands that name nothing of this project's to check
    "python3": lambda argv: argv[1:3] == ["-m", "venv"],
    ".": lambda argv: argv[1] == ".venv/bin/activate",
    "mkdocs": lambda argv: argv[1] in ("serve", "build"),
    "apt-get": lambda argv: argv[1] == "install",
    "tensorboard": lambda argv: argv[1].startswith("--logdir"),
    "jupyter": lambda argv: argv[1] == "nbconvert" and (ROOT / argv[-1]).is_file(),
    # docs/serving.md's requests to a local service, which tests/serve/test_docs_examples.py runs
    "curl": lambda argv: any(a.startswith(("http://127.0.0.1:8000/", "'http://127.0.0.1:8000/")) for a in argv),
    # docs/labelling-tools.md: starting the labelling tools, CVAT from its repository's compose file
    "git": lambda argv: argv[1:] == ["clone", "https://github.com/cvat-ai/cvat"],
    "cd": lambda argv: argv[1:] == ["cvat"],
    "label-studio": lambda argv: argv[1:] == ["start"],
}
TOOLS = ("label-studio",)  # what pip installs beside this project's extras (docs/labelling-tools.md)
DOCKER_TOOLS = (["compose", "up", "-d"], ["exec", "-it", "cvat_server"])  # CVAT's compose file and server


def _blocks(kind: str) -> list[tuple[str, str]]:
    """(page name, block text) of every fenced block of `kind` in the README and the docs pages."""
    found = []
    for page in PAGES:
        for match in FENCE.finditer(page.read_text()):
            if match.group(2) == kind:
                text = "\n".join(line[len(match.group(1)) :] for line in match.group(3).splitlines())
                found.append((str(page.relative_to(ROOT)), text))
    return found


def _commands(block: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, comments dropped, `&&` chains split, leading
    VAR=value assignments dropped."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            command, words = words[:cut], words[cut + 1 :]
            while command and re.fullmatch(r"[A-Z_]+=\S*", command[0]):
                command = command[1:]
            if command:
                commands.append(command)
    return commands


SHELL = [(page, command) for page, block in _blocks("bash") for command in _commands(block)]
PYTHON = _blocks("python")


def _parse_tphyolo(argv: list[str]) -> None:
    try:
        build_parser(commands=argv[:1]).parse_args(argv)
    except SystemExit as stop:
        pytest.fail(f"tphyolo {shlex.join(argv)}: the parser refused it (exit {stop.code})")


def _check_script(argv: list[str]) -> None:
    script = ROOT / argv[0]
    assert script.is_file(), f"{argv[0]} does not exist"
    if script.suffix == ".py":
        source = script.read_text()
        adds_runtime = "add_runtime_arguments(" in source or "study_parser(" in source  # itself or by study_cli
        runtime = _runtime_flags() if adds_runtime else set()
        for flag in (a.split("=")[0] for a in argv[1:] if a.startswith("--")):
            assert f'"{flag}"' in source or flag in runtime, f"{argv[0]} declares no {flag}"


def _runtime_flags() -> set[str]:
    """The runtime flags of training (`add_runtime_arguments`), which a script may take as the commands do."""
    parser = argparse.ArgumentParser()
    add_runtime_arguments(parser)
    return set(parser._option_string_actions)


def _extras() -> set[str]:
    """The names of pyproject.toml's optional-dependencies (read as text: tomllib is Python 3.11+)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]")[1].split("\n[")[0]
    return set(re.findall(r"^([\w-]+) = \[", section, flags=re.M))


def _check_pip(argv: list[str]) -> None:
    extras = _extras()
    for target in argv[2:]:
        if target.startswith("-"):
            continue
        wanted = re.fullmatch(r"(?:\.|tphyolo)\[([\w,-]+)\]", target)
        if wanted:
            assert set(wanted.group(1).split(",")) <= extras, f"pip install {target}: no such extra"
        else:
            assert target in (".", "torch", "torchvision", *TOOLS) or target.startswith("https://"), target


def check_command(argv: list[str]) -> None:
    """Fails unless `argv` is a command the module docstring's rules accept."""
    word = argv[0]
    if word == "tphyolo":
        _parse_tphyolo(argv[1:])
    elif word == "torchrun":
        assert "-m" in argv and argv[argv.index("-m") + 1] == "tphyolo", shlex.join(argv)
        _parse_tphyolo(argv[argv.index("-m") + 2 :])
    elif word in ("python", "bash") and argv[1].startswith("benchmarks/"):
        _check_script(argv[1:])
    elif word == "pip":
        assert argv[1] == "install", shlex.join(argv)
        _check_pip(argv)
    elif word == "pytest":
        for path in (a for a in argv[1:] if a.startswith("tests/")):
            assert (ROOT / path).exists(), path
    elif word == "docker" and argv[1] == "build":
        assert (ROOT / argv[argv.index("-f") + 1]).is_file(), shlex.join(argv)
    elif word == "docker" and any(argv[1 : 1 + len(tool)] == tool for tool in DOCKER_TOOLS):
        pass
    elif word == "docker" and argv[1] == "run":
        if "tphyolo" in argv:
            _parse_tphyolo(argv[argv.index("tphyolo") + 1 :])
    else:
        assert word in ALLOWED and ALLOWED[word](argv), f"no rule checks: {shlex.join(argv)}"


def test_the_pages_have_command_blocks():
    pages = {page for page, _ in SHELL}
    assert {"README.md", "docs/train.md", "docs/predict.md", "docs/val.md", "docs/export.md"} <= pages
    assert sum(command[0] == "tphyolo" for _, command in SHELL) > 50


@pytest.mark.parametrize(("page", "argv"), SHELL, ids=[f"{p}:{' '.join(c)[:60]}" for p, c in SHELL])
def test_shell_command(page, argv):
    check_command(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["tphyolo", "predict", "--source", "a.jpg", "--weights", "w.pt", "--no-such-flag"],
        ["tphyolo", "val", "--weights", "w.pt", "--data", "d", "--protocol", "nope"],
        ["python", "benchmarks/cpu_memory.py", "--no-such-flag"],
        ["pip", "install", "-e", ".[no-such-extra]"],
        ["rm", "-rf", "/"],
    ],
)
def test_the_rules_refuse_what_does_not_exist(argv):
    with pytest.raises(pytest.fail.Exception if argv[0] == "tphyolo" else AssertionError):
        check_command(argv)


@pytest.mark.parametrize(("page", "code"), PYTHON, ids=[f"{p}:{i}" for i, (p, _) in enumerate(PYTHON)])
def test_python_block_compiles_and_its_imports_resolve(page, code):
    tree = ast.parse(code, filename=page)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{page}: {node.module} has no {alias.name}"
