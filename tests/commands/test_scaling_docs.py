"""The commands of the README's "Scaling out" section and of docs/scaling.md parse as written: torchrun's flags
by torchrun's own parser, tphyolo's by the command line's. (Tests elsewhere run the same commands on small data:
tests/evaluation/test_distributed_eval.py, tests/predict/test_distributed_predict.py,
tests/training/tune/test_tune_search.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from torch.distributed.run import get_args_parser

from tphyolo.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def shell_commands(markdown: str) -> list[list[str]]:
    """The commands of the bash blocks of `markdown`: continuation lines joined, comments and `&&` split off,
    environment assignments in front dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words = words[1:]
                if words:
                    commands.append(words)
    return commands


def readme_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("### Scaling out")
    return text[start : text.index("\n### ", start + 1)]


def tphyolo_argv(words: list[str]) -> list[str] | None:
    """The tphyolo arguments of a command line (checking torchrun's own flags on the way), or None."""
    if words[0] == "torchrun":
        args = get_args_parser().parse_args(words[1:])
        assert args.module and args.training_script == "tphyolo", words
        return list(args.training_script_args)
    return words[1:] if words[0] == "tphyolo" else None


@pytest.mark.parametrize("source", ["README.md", "docs/scaling.md"])
def test_every_command_parses(source):
    text = readme_section() if source == "README.md" else (REPO / source).read_text()
    commands = shell_commands(text)
    parsed = 0
    for words in commands:
        argv = tphyolo_argv(words)
        if argv is None:
            assert words[:2] == ["pip", "install"], words
            continue
        args = build_parser([argv[0]]).parse_args(argv)
        assert args.command == argv[0]
        parsed += 1
    assert parsed >= 7  # train, val, eval, predict, predict --resume, tune on a machine and on a cluster
    assert {w[0] for w in commands} >= {"torchrun", "tphyolo", "pip"}


def test_the_readme_section_is_short_and_points_to_the_page():
    section = readme_section()
    assert len(section.strip().splitlines()) <= 21 and "docs/scaling.md" in section
