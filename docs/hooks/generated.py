"""MkDocs hook: the pages written from the code when the site is built, so that no hand copy can drift.

- `reference/cli.md`: every command of `tphyolo.cli.COMMANDS` with every flag, its default and help text, read
  from the parsers `tphyolo COMMAND -h` prints.
- The YOLOv5 flag table of `from-yolov5.md` (in place of its `<!-- yolov5-flags -->` line): each flag of YOLOv5
  v6.0's scripts with the tphyolo flag that takes it, or the hint `tphyolo` prints for it
  (`tphyolo.commands.options.yolov5`).
- The table of ultralytics' keys tphyolo names otherwise, in the same page (in place of `<!-- ultralytics-keys -->`),
  from `tphyolo.commands.options.ultralytics.ULTRALYTICS_KEYS`, the table the command line reads them through.

`tests/docs/test_generated_pages.py` compares both with the parsers.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

CLI_PAGE = "reference/cli.md"
YOLOV5_PAGE = "from-yolov5.md"
YOLOV5_MARKER = "<!-- yolov5-flags -->"
ULTRALYTICS_MARKER = "<!-- ultralytics-keys -->"


# ------------------------------------------------------------------------------------------------ parsers
def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parser of each top-level command, in the order `tphyolo -h` lists them."""
    from tphyolo.cli import build_parser

    return dict(_subcommands(build_parser()))


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse has no public accessor for its subparsers
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _shown_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------- formatting
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`"


def default_text(action: argparse.Action) -> str:
    """A flag's default as the reference shows it: a switch `off` (not given), lists space-separated, None `-`
    (the help says what happens then)."""
    value = action.default
    if action.nargs == 0:
        return "-" if value is None else "off"
    if value is None or value == argparse.SUPPRESS:
        return "-"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help `-h` prints (%-expanded), without a trailing `(default: X)` that repeats the default column,
    and with the choices and the value of a bare flag where they are not obvious from it."""
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    default = default_text(action)
    for suffix in (f" (default: {default})", f" (default {default})"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    notes = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        notes.append("one of " + ", ".join(_code(str(c)) for c in action.choices))
    if action.option_strings and action.nargs == "?" and action.const not in (None, ""):
        notes.append(f"given bare: {_code(str(action.const))}")
    return "; ".join([_cell(text), *notes]) if text else "; ".join(notes)


def _flags_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> list[str]:
    rows = ["| flag | default | what it does |", "| --- | --- | --- |"]
    for action in actions:
        names = ", ".join(_code(o) for o in action.option_strings)
        rows.append(f"| {names} | {_code(default_text(action))} | {help_text(parser, action)} |")
    return rows


def _arguments_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> list[str]:
    rows = ["| argument | what it is |", "| --- | --- |"]
    for action in actions:
        name = action.metavar or action.dest
        rows.append(f"| {_code(str(name))} | {help_text(parser, action)} |")
    return rows


def _groups(parser: argparse.ArgumentParser) -> list[tuple[str, list[argparse.Action]]]:
    """(title, optional actions) per argument group, the command's own flags first."""
    shown = set(map(id, _shown_actions(parser)))
    groups = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if id(a) in shown and a.option_strings]
        if actions:
            groups.append((group.title or "", actions))
    return groups


def command_section(path: str, parser: argparse.ArgumentParser, *, level: int = 2) -> list[str]:
    """The reference of one (sub)command `path` (e.g. 'convert checkpoint'): its description, positional
    arguments, flags by group, then its own subcommands."""
    lines = [f"{'#' * level} tphyolo {path}", ""]
    if parser.description:
        lines += [_cell(parser.description[0].upper() + parser.description[1:]) + ".", ""]
    lines += [f"```text\n{parser.format_usage().strip()}\n```", ""]
    positionals = [a for a in _shown_actions(parser) if not a.option_strings]
    if positionals:
        lines += _arguments_table(parser, positionals) + [""]
    for title, actions in _groups(parser):
        if title not in ("options", "optional arguments"):
            lines += [f"*{title} flags*", ""]
        lines += _flags_table(parser, actions) + [""]
    for name, sub in _subcommands(parser):
        lines += command_section(f"{path} {name}", sub, level=level + 1)
    return lines


def cli_reference_markdown() -> str:
    """The CLI reference page."""
    lines = [
        "# Command-line reference",
        "",
        "Every command and flag of `tphyolo`, generated from its parsers when this site is built: the same text as "
        "`tphyolo COMMAND -h`. Flags listed together on one row are one setting under several names (YOLOv5's "
        "spellings among them, see [Coming from YOLOv5](../from-yolov5.md)). *runtime flags* are shared by the "
        "commands that run models; [Runtime and devices](../runtime.md) says what they do.",
        "",
    ]
    parsers = command_parsers()
    lines += ["| command | what it does |", "| --- | --- |"]
    for name, parser in parsers.items():
        anchor = f"tphyolo-{name}"
        lines.append(f"| [`tphyolo {name}`](#{anchor}) | {_cell(parser.description or '')} |")
    lines.append("")
    for name, parser in parsers.items():
        lines += command_section(name, parser)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- YOLOv5 table
def yolov5_table_markdown() -> str:
    """One table per YOLOv5 script: each of its flags and what tphyolo takes instead."""
    from tphyolo.commands.options.yolov5 import HINTS, YOLOV5_FLAGS, YOLOV5_SCRIPTS

    parsers = command_parsers()
    lines: list[str] = []
    for command, script in YOLOV5_SCRIPTS.items():
        by_option = {o: a for a in parsers[command]._actions for o in a.option_strings}
        lines += [f"### `{script}` → `tphyolo {command}`", "", "| YOLOv5 | tphyolo |", "| --- | --- |"]
        for flag in YOLOV5_FLAGS[command]:
            action = by_option.get(flag)
            if action is None:
                answer = "not taken: " + _cell(HINTS[command][flag])
            elif action.option_strings[0] == flag:
                answer = "the same flag"
            else:
                answer = f"alias of {_code(action.option_strings[0])}"
            lines.append(f"| {_code(flag)} | {answer} |")
        lines.append("")
    return "\n".join(lines)


def ultralytics_table_markdown() -> str:
    """ultralytics' keys whose tphyolo flag has another name: the flags each may be (the first a command takes)."""
    from tphyolo.commands.options.ultralytics import ULTRALYTICS_KEYS

    lines = ["| ultralytics | tphyolo |", "| --- | --- |"]
    for key, flags in ULTRALYTICS_KEYS.items():
        negative = all(f.startswith(("--no", "--hide-")) for f in flags)
        answer = " or ".join(_code(f) for f in flags) + (f" (given for `{key}=False`)" if negative else "")
        lines.append(f"| `{key}=` | {answer} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ hooks
def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, CLI_PAGE, content=cli_reference_markdown()))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != YOLOV5_PAGE:
        return markdown
    for marker, table in ((YOLOV5_MARKER, yolov5_table_markdown), (ULTRALYTICS_MARKER, ultralytics_table_markdown)):
        if marker not in markdown:
            raise ValueError(f"{Path(config['docs_dir']) / YOLOV5_PAGE}: the line {marker} is missing")
        markdown = markdown.replace(marker, table())
    return markdown
