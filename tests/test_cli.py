"""The command line: version, help, one-line errors with exit code 2, `python -m tphyolo`."""

import subprocess
import sys

import pytest

from tphyolo import __version__
from tphyolo.cli import COMMANDS, main
from tphyolo.errors import InputError


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tphyolo {__version__}"


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["-h"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["doctor", "--no-such-flag"], ["no-such-command"], ["--bogus"]],
)
def test_bad_arguments_give_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error:" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["val", "--weights", "w.pt", "--data", "d", "--imgsz-x", "640"],
         "tphyolo val: error: unrecognized argument --imgsz-x; did you mean --imgsz? (see 'tphyolo val -h')"),
        (["train", "--epocs=3"],
         "tphyolo train: error: unrecognized argument --epocs; did you mean --epochs? (see 'tphyolo train -h')"),
        (["predict", "--weights", "w.pt", "--source", "s", "extra"],
         "tphyolo predict: error: unrecognized arguments: extra (see 'tphyolo predict -h')"),
        (["doctor", "--zzz"], "tphyolo doctor: error: unrecognized argument --zzz (see 'tphyolo doctor -h')"),
    ],
)  # fmt: skip
def test_an_unknown_argument_is_named_by_its_command_with_the_closest_flag(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == expected


def test_a_model_name_given_as_weights_says_where_model_names_and_checkpoints_go(capsys):
    assert main(["val", "--weights", "tph-yolov5n", "--data", "visdrone", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tphyolo val: error: weights file tph-yolov5n does not exist; tph-yolov5n names a "
                          "model architecture, not weights: train one with 'tphyolo train --model tph-yolov5n'")
    assert "TPH-YOLOv5's VisDrone checkpoints" in err and "yolov5s.pt" in err and "\n" not in err


def test_python_dash_m_runs():
    result = subprocess.run(
        [sys.executable, "-m", "tphyolo", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"tphyolo {__version__}"


def test_importing_tphyolo_changes_no_global_state():
    # Third-party imports come first: OpenCV's loader edits LD_LIBRARY_PATH itself and Ray sets RAY_CLIENT_MODE,
    # which are not ours to judge.
    code = (
        "import os, importlib.util, torch, torchvision, numpy, cv2;"
        "importlib.util.find_spec('ray') and __import__('ray.tune');"
        "before = (dict(os.environ), torch.get_num_threads(), torch.backends.cudnn.benchmark,"
        " torch.get_float32_matmul_precision());"
        "import pkgutil, importlib, tphyolo;"
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(tphyolo.__path__, 'tphyolo.')];"
        "after = (dict(os.environ), torch.get_num_threads(), torch.backends.cudnn.benchmark,"
        " torch.get_float32_matmul_precision());"
        "assert before == after, 'import changed global state'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("flag", ["--version", "-h"])
def test_version_and_help_do_not_import_torch(flag):
    # `python -m tphyolo FLAG` in a fresh interpreter, then the modules it loaded.
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['tphyolo', {flag!r}]\n"
        "try:\n"
        "    runpy.run_module('tphyolo', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    assert stop.code == 0, stop.code\n"
        "print('LOADED', sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
    if flag == "-h":
        assert all(name in result.stdout for name in COMMANDS)


def test_every_command_parses_its_flags_without_torch():
    # `tphyolo COMMAND -h` and argument errors build only that command's parser: for every command, in one
    # fresh interpreter, neither help nor a bad flag may import torch (or anything of it).
    code = (
        "import sys\n"
        "from tphyolo.cli import COMMANDS, main\n"
        "for name in COMMANDS:\n"
        "    for argv in ([name, '-h'], [name, '--no-such-flag']):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as stop:\n"
        "            assert stop.code == (0 if argv[1] == '-h' else 2), (argv, stop.code)\n"
        "        else:\n"
        "            raise AssertionError(f'{argv} did not exit')\n"
        "print('LOADED', sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LOADED []" in result.stdout
    assert "usage: tphyolo train" in result.stdout and "--no-such-flag" in result.stderr


def test_a_closed_pipe_ends_quietly():
    # `tphyolo doctor | head -1`: the reader goes away after the first line; no traceback, exit code 141.
    process = subprocess.Popen(
        [sys.executable, "-m", "tphyolo", "doctor", "--no-compile-check"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert process.returncode == 141, err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_a_command_leaves_logging_as_it_found_it(capsys):
    # The CLI shows tphyolo's log lines for the duration of a command only: in-process callers (tests, notebooks)
    # keep their logging configuration.
    import logging

    root, package = logging.getLogger(), logging.getLogger("tphyolo")
    before = (list(root.handlers), root.level, list(package.handlers), package.level, package.propagate)
    main(["eval", "--gt", "/nonexistent", "--pred", "/nonexistent"])
    assert "error" in capsys.readouterr().err
    assert (list(root.handlers), root.level, list(package.handlers), package.level, package.propagate) == before


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (InputError("w.pt: not a checkpoint"), "bad input"),
        (FileNotFoundError(2, "No such file or directory", "w.pt"), "bad input"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "bad input"),
        (ValueError("too many values to unpack (expected 2)"), "fault"),
        (TypeError("unsupported operand"), "fault"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_a_fault_of_the_program_propagates(error, kind, monkeypatch, capsys):
    def fails(job, **_):
        raise error

    monkeypatch.setattr("tphyolo.export.exporter.run_export", fails)
    if kind == "fault":  # a bug is not blamed on the input: its traceback shows (python's exit code 1)
        with pytest.raises(type(error)):
            main(["export", "--weights", "w.pt"])
        return
    assert main(["export", "--weights", "w.pt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tphyolo export: error: ") and err.count("\n") == 1
