"""benchmarks/gpu_check.sh: valid bash, and every tphyolo command line in it parses with today's flags."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.helpers import benchmark_script

from tphyolo.cli import build_parser

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"


def _tphyolo_command_lines() -> list[list[str]]:
    text = SCRIPT.read_text().replace("\\\n", " ")
    lines = []
    for line in text.splitlines():
        match = re.search(r"-m tphyolo (.*)$", line)
        if match:
            command = match.group(1).split(">", 1)[0]  # drop a shell redirection
            lines.append(shlex.split(command.replace("$OUT_DIR", "out")))
    train = re.search(r'main\(\["train", (.*?)\]\)', SCRIPT.read_text(), re.S)
    assert train, "the script runs tphyolo train in-process"
    lines.append(["train", *re.findall(r'"([^"]*)"', train.group(1))])
    return lines


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_every_command_parses():
    commands = _tphyolo_command_lines()
    assert {argv[0] for argv in commands} == {"doctor", "bench", "train"}
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # exits (SystemExit) on an unknown flag or choice


@pytest.mark.parametrize("study", ["attention_vs_original", "model_vs_original"])
def test_the_study_lines_parse(study):
    text = SCRIPT.read_text().replace("\\\n", " ")
    (line,) = re.findall(rf"benchmarks/{study}\.py (.*)$", text, re.M)
    benchmark_script(study).build_parser().parse_args(shlex.split(line.replace("$OUT_DIR", "out")))
