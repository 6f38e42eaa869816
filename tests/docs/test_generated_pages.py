"""The pages the docs build writes from the code (docs/hooks/generated.py) against the parsers themselves: the
CLI reference has a section for every command and subcommand with a row for every flag, its default and its
help, and the YOLOv5 table a row for every flag of YOLOv5's scripts with what tphyolo does with it."""

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from tphyolo.cli import COMMANDS, build_parser
from tphyolo.commands.options.ultralytics import ULTRALYTICS_KEYS
from tphyolo.commands.options.yolov5 import HINTS, YOLOV5_FLAGS, YOLOV5_SCRIPTS

ROOT = Path(__file__).resolve().parents[2]


def _load_hooks():
    spec = importlib.util.spec_from_file_location("docs_generated", ROOT / "docs" / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generated = _load_hooks()


def _parsers(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its path ('train', 'convert checkpoint')."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                found[full] = sub
                found.update(_parsers(sub, full))
    return found


PARSERS = _parsers(build_parser())


@pytest.fixture(scope="module")
def sections() -> dict[str, str]:
    """The reference page cut into its sections, by command path."""
    page = generated.cli_reference_markdown()
    parts = re.split(r"^#{2,4} tphyolo (.+)$", page, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _rows(section: str) -> dict[tuple[str, ...], list[str]]:
    """Flag rows of a section: (option strings) -> [default cell, help cell]."""
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`--"):
            rows[tuple(re.findall(r"`([^`]+)`", cells[0]))] = cells[1:]
    return rows


def _expected_default(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "-" if action.default is None else "off"
    if action.default is None:
        return "-"
    if isinstance(action.default, (list, tuple)):
        return " ".join(map(str, action.default))
    return str(action.default)


def test_every_command_and_subcommand_has_a_section(sections):
    assert set(COMMANDS) <= set(sections)
    assert set(sections) == set(PARSERS)


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_flag_has_a_row_with_its_default_and_help(path, sections):
    parser = PARSERS[path]
    rows = _rows(sections[path])
    flags = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    assert set(rows) == {tuple(a.option_strings) for a in flags}, path
    for action in flags:
        default, help_cell = rows[tuple(action.option_strings)]
        assert default == f"`{_expected_default(action)}`", action.option_strings
        words = re.sub(r"\s*\(default:? [^()]*\)$", "", action.help % vars(action) if action.help else "")
        assert words.split(";")[0][:40].replace("*", "\\*").replace("<", "&lt;") in help_cell, action.option_strings


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_positional_argument_is_listed(path, sections):
    parser = PARSERS[path]
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            assert f"| `{action.metavar or action.dest}` |" in sections[path], (path, action.dest)


def test_the_yolov5_table_has_every_flag_of_every_script_with_what_tphyolo_does():
    table = generated.yolov5_table_markdown()
    for command, script in YOLOV5_SCRIPTS.items():
        section = table.split(f"### `{script}`")[1].split("### ")[0]
        options = {o: a for a in PARSERS[command]._actions for o in a.option_strings}
        for flag in YOLOV5_FLAGS[command]:
            row = next(line for line in section.splitlines() if line.startswith(f"| `{flag}` |"))
            if flag not in options:
                assert HINTS[command][flag].replace("|", "\\|") in row
            elif options[flag].option_strings[0] != flag:
                assert f"alias of `{options[flag].option_strings[0]}`" in row
            else:
                assert "the same flag" in row


def test_the_yolov5_page_holds_the_place_of_the_table():
    assert generated.YOLOV5_MARKER in (ROOT / "docs" / generated.YOLOV5_PAGE).read_text()


HELLO = '''"""`tphyolo hello`: a command written for this test."""


def add_arguments(parser):
    parser.add_argument("--name", default="drone", help="who is greeted")


def run(args):
    print(f"hello {args.name}")
    return 0
'''


def test_a_new_command_is_its_module_and_one_row_of_commands(tmp_path, monkeypatch, capsys):
    """What adding a command touches (docs/development.md): its module and its `COMMANDS` row (with the job its
    library unit runs); its help, its place in `tphyolo -h` and its section of the reference follow."""
    from tphyolo.cli import Command, main

    (tmp_path / "hello_command.py").write_text(HELLO)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(COMMANDS, "hello", Command("hello_command", "greet whoever is named"))
    assert main(["hello", "--name", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    with pytest.raises(SystemExit):
        main(["-h"])
    assert "greet whoever is named" in capsys.readouterr().out
    section = dict(re.findall(r"^## tphyolo (\S+)\n(.*?)(?=^## |\Z)", generated.cli_reference_markdown(), re.M | re.S))
    assert _rows(section["hello"]) == {("--name",): ["`drone`", "who is greeted"]}


def test_the_yolov5_page_shows_the_ultralytics_keys_the_command_line_reads():
    assert generated.ULTRALYTICS_MARKER in (ROOT / "docs" / generated.YOLOV5_PAGE).read_text()
    table = generated.ultralytics_table_markdown()
    for key, flags in ULTRALYTICS_KEYS.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{key}=` |"))
        assert all(f"`{flag}`" in row for flag in flags)
