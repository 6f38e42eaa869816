"""The suite's own machinery: the process-state restore behind the autouse fixture, and the switch that makes a
missing shared fixture a failure."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from tests.helpers import (
    REQUIRE_FIXTURES_ENV,
    process_state,
    process_state_restored,
    relative_error,
    require_shared,
    torch_flags,
)
from tphyolo.runtime.config import RuntimeConfig, configure_process
from tphyolo.runtime.flags import ALLOC_ENV_VARS

UNSET = "TPHYOLO_TEST_UNSET_VARIABLE"


def test_every_test_runs_under_the_restore_fixture(request: pytest.FixtureRequest) -> None:
    assert "_restore_process_state" in request.fixturenames


def _older_flags() -> tuple[str, bool, bool]:
    """The TF32 flags as torch < 2.9 spells them (views of the `fp32_precision` settings in newer torch)."""
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )


def test_configure_process_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """What configure_process sets (variables that were unset: monkeypatch would not know of them) and what a
    test may change by hand is put back, and only that."""
    for name in (*ALLOC_ENV_VARS, UNSET):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TPHYOLO_TEST_CHANGED", "before")
    monkeypatch.setenv("TPHYOLO_TEST_REMOVED", "kept")
    before, older_flags, threads = process_state(), _older_flags(), torch.get_num_threads()
    with process_state_restored() as saved:
        assert saved == before
        configure_process(RuntimeConfig(alloc_conf="expandable_segments:True", tf32=True, cudnn_benchmark=True))
        assert all(os.environ[name] == "expandable_segments:True" for name in ALLOC_ENV_VARS)
        os.environ[UNSET] = "1"
        os.environ["TPHYOLO_TEST_CHANGED"] = "after"
        del os.environ["TPHYOLO_TEST_REMOVED"]
        torch.backends.cudnn.deterministic = not torch.backends.cudnn.deterministic
        torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # after "high" above: mixes the old and new precision APIs
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_num_threads(threads + 1)
        assert torch_flags() != before.torch_flags
    assert process_state() == before
    assert all(name not in os.environ for name in (*ALLOC_ENV_VARS, UNSET))
    assert os.environ["TPHYOLO_TEST_CHANGED"] == "before" and os.environ["TPHYOLO_TEST_REMOVED"] == "kept"
    assert torch.get_num_threads() == threads
    assert not torch.are_deterministic_algorithms_enabled()
    assert _older_flags() == older_flags


def test_float32_matmul_precision_is_restored() -> None:
    before = _older_flags()
    for precision in ("medium", "high", "highest"):
        with process_state_restored():
            torch.set_float32_matmul_precision(precision)
        assert _older_flags() == before, precision


def test_a_sigchld_handler_installed_by_a_test_is_put_back() -> None:
    """A multi-worker DataLoader installs torch's SIGCHLD handler; it must not outlive the test (helpers.py)."""
    before = signal.getsignal(signal.SIGCHLD)
    with process_state_restored():
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        assert signal.getsignal(signal.SIGCHLD) is not before
    assert signal.getsignal(signal.SIGCHLD) is before


def test_missing_shared_file_is_a_skip_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(REQUIRE_FIXTURES_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="reference fixtures not found at .*TPHYOLO_SHARED"):
        require_shared(tmp_path / "missing", "reference fixtures")
    monkeypatch.setenv(REQUIRE_FIXTURES_ENV, "0")
    with pytest.raises(pytest.skip.Exception):
        require_shared(tmp_path / "missing", "reference fixtures")


def test_missing_shared_file_fails_when_fixtures_are_required(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REQUIRE_FIXTURES_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"VisDrone sample data not found at .*{REQUIRE_FIXTURES_ENV}"):
        require_shared(tmp_path / "missing", "VisDrone sample data")
    assert require_shared(tmp_path, "a folder that exists") == tmp_path


def test_relative_error_is_norm_wise() -> None:
    ref = torch.tensor([3.0, 4.0])  # norm 5
    assert relative_error(ref + torch.tensor([0.0, 0.5]), ref) == pytest.approx(0.1)
    assert relative_error(torch.tensor([0.0, 0.0]), ref) == pytest.approx(1.0)  # all zeros is 100 % off
