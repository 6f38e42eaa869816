"""ultralytics' `key=value` arguments and YOLOv5's `--switch=True`, read as tphyolo's flags.

`yolo predict model=best.pt source=img/ conf=0.3 save_txt=True` names settings as tphyolo's flags do, without
the dashes. `translate(parser, words)` spells each such word as the flag of `parser` it names and says so in one
line (`weights=x.pt -> --weights x.pt`):

- a key is the flag of its name with dashes (`max_det` -> `--max-det`), or that flag's negative (`plots=False`
  -> `--no-plots`, `val=False` -> `--noval`), or, for a key tphyolo names otherwise, the first flag of
  `ULTRALYTICS_KEYS[key]` the command takes (`show_labels=False` -> `--hide-labels`); `model=` is `--weights`,
  except for a model yaml or name in a command that builds models (`train`: `--model`);
- a switch takes True/False (also true/false/1/0, any case): on gives the switch, off leaves it out (its
  default) or gives its negative form (`--channels-last=False` -> `--no-channels-last`, `amp=False` ->
  `--no-amp`), as YOLOv5's `--save-txt=True` does; a flag whose value may be left out (`--cache`) takes True for
  its bare form;
- a list flag takes `0,2` or `[0, 2]` (`classes=0,2` -> `--classes 0 2`).

A key no flag takes is refused with what to type instead: the closest flag with its value (`sorce=y` ->
`--source y`), or for a hyperparameter (`lr0=0.02`) a hyp yaml given to `--hyp`. The docs' table of
ultralytics' keys (`docs/hooks/generated.py`) is rendered from `ULTRALYTICS_KEYS`.
Importing this module imports nothing.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# ultralytics key -> the tphyolo flags it may be (the first the command takes), where its name with dashes is
# not one. A flag named --no-..., --no... or --hide-... is the key's negative: key=False gives it.
ULTRALYTICS_KEYS: dict[str, tuple[str, ...]] = {
    "model": ("--weights",),  # a checkpoint; a model yaml or name goes to --model where a command has it
    "save": ("--no-save-img", "--no-save-video"),  # of the drawn images (predict, track) or video (analyze)
    "show_labels": ("--hide-labels",),
    "show_conf": ("--hide-conf",),
    "split": ("--task",),  # the split val scores
}

_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)=(.*)", re.DOTALL)
_TRUE, _FALSE = ("true", "1"), ("false", "0")
_CHECKPOINT = (".pt", ".pth", ".onnx", ".xml", ".torchscript", ".engine")


@dataclass
class Translation:
    """`argv` with every word read as a tphyolo flag, a line per word saying what it became (`notes`) and the
    words no flag takes, each with what to type instead (`unknown`: the closest flag and its value; None when
    nothing is close)."""

    argv: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unknown: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Spelled:
    argv: list[str]  # the words argparse gets
    shown: list[str]  # the same, as a user would type them


@dataclass(frozen=True)
class Unknown:
    instead: str | None  # what to type instead, as the error says it after the word; None: nothing close


def translate(parser: argparse.ArgumentParser, words: Sequence[str]) -> Translation:
    """`words` (the arguments of the command `parser` parses) with ultralytics' `key=value` and YOLOv5's
    `--switch=True|False` spelled as `parser`'s flags (see the module docstring). A word that is the value of
    the flag before it, or that follows `--`, stays as it is."""
    options = parser._option_string_actions  # argparse has no public map of a parser's options
    out = Translation()
    takes_value = False
    for position, word in enumerate(words):
        if word == "--":
            out.argv += words[position:]
            break
        spelled = None if takes_value else _spelled(options, word)
        action = options.get(word)
        takes_value = action is not None and (action.nargs is None or isinstance(action.nargs, int))
        if spelled is None:
            out.argv.append(word)
        elif isinstance(spelled, Unknown):
            out.argv.append(word)
            out.unknown.append((word, spelled.instead))
        else:
            out.argv += spelled.argv
            out.notes.append(f"{word} -> {' '.join(spelled.shown) or '(nothing to give: the default)'}")
    return out


def _spelled(options: dict[str, argparse.Action], word: str) -> Spelled | Unknown | None:
    """What `word` becomes: Spelled, Unknown (a key no flag takes), or None (not a word this module reads)."""
    if word.startswith("--") and "=" in word:
        name, value = word.split("=", 1)
        action = options.get(name)
        if action is None or _truth(value, action) is None:
            return None  # argparse's own: a value, or an unknown flag with its hints
        return _switched(options, action, name, on=_truth(value, action))
    match = _KEY.fullmatch(word)
    if match is None:
        return None
    key, value = match.groups()
    name = _flag_for(options, key, value)
    if name is None:
        return Unknown(_instead(options, key, value))
    action = options[name]
    truth = _truth(value, action)
    if truth is not None:
        return _switched(options, action, name, on=truth != _is_negative(name))
    if action.nargs == 0:
        return Unknown(f"{name} is a switch: give {key}=True or {key}=False")
    if action.nargs in ("+", "*") or isinstance(action.nargs, int):
        items = [item.strip() for item in value.strip("[]()").split(",") if item.strip()]
        return Spelled([name, *items], [name, *items])
    return Spelled([f"{name}={value}"], [name, value])


def _flag_for(options: dict[str, argparse.Action], key: str, value: str) -> str | None:
    """The flag of `options` that ultralytics' `key` names, or None."""
    dashed = key.replace("_", "-")
    if key == "model" and value.lower().endswith(_CHECKPOINT):
        dashed = "weights"  # a checkpoint, also where a command builds models (--model: a yaml or a name)
    candidates = (f"--{dashed}", f"--no-{dashed}", f"--no{dashed}", *ULTRALYTICS_KEYS.get(key, ()))
    return next((name for name in candidates if name in options), None)


def _truth(value: str, action: argparse.Action) -> bool | None:
    """True or False for a switch's value (true/false/1/0, any case) or for the bare or left-out form of a flag
    whose value may be left out (true/false only, and not one of its choices); else None."""
    text = value.strip().lower()
    if action.nargs == 0:
        return True if text in _TRUE else False if text in _FALSE else None
    if action.nargs == "?" and text in ("true", "false") and text not in (action.choices or ()):
        return text == "true"
    return None


def _is_negative(name: str) -> bool:
    return name.startswith(("--no", "--hide-"))


def _switched(options: dict[str, argparse.Action], action: argparse.Action, name: str, *, on: bool) -> Spelled:
    """Switch (or bare optional-value flag) `name` given (`on`) or not: its other form when it has one
    (`--no-channels-last`, `--no-amp`), else nothing (its default)."""
    if on:
        return Spelled([name], [name])
    other = next((o for o in action.option_strings if o != name and _is_negative(o) != _is_negative(name)), None)
    if other is None and not _is_negative(name):
        other = f"--no-{name[2:]}" if f"--no-{name[2:]}" in options else None
    return Spelled([other], [other]) if other is not None else Spelled([], [])


def _instead(options: dict[str, argparse.Action], key: str, value: str) -> str | None:
    """What to type in place of `key=value`: a hyperparameter's hyp yaml where the command takes one, else the
    flag closest to `key` with `value`."""
    if "--hyp" in options:
        from tphyolo.training.hyp import HYP_KEYS, OPTIONAL_HYP_KEYS  # lazy: only for this message

        if key in HYP_KEYS or key in OPTIONAL_HYP_KEYS:
            return f"{key} is a hyperparameter: give `{key}: {value}` in a hyp yaml, --hyp FILE"
    close = difflib.get_close_matches(f"--{key.replace('_', '-')}", list(options), n=1, cutoff=0.6)
    return f"did you mean {close[0]} {value}?" if close else None
