"""`tphyolo doctor` shows the CPU's vector and matrix extensions and the runtime probe's kept choices."""

import json
import logging

from tphyolo.doctor.findings import compiled_model_lines, runtime_probe_lines
from tphyolo.doctor.probes import cpu_isa
from tphyolo.runtime.compiled_cache import describe_entries, write_marker
from tphyolo.runtime.cpu_isa import cpu_info
from tphyolo.runtime.probe import Candidate, cached_choices, read_cached


def test_the_isa_is_this_machines():
    found = cpu_isa()
    cpu = cpu_info()
    assert found == {"model": cpu.model, "isa": list(cpu.isa), "native_bf16": cpu.has_native_bf16}
    assert found["native_bf16"] == any(name in found["isa"] for name in ("AVX512-BF16", "AMX-BF16"))


def test_kept_choices_are_listed_and_a_broken_file_is_named(tmp_path):
    key = {"version": 1, "machine": "Xeon | flags 0123", "device": "cpu", "threads": 2, "torch": "2.9.0",
           "model": "abcd", "mode": "train", "imgsz": 320, "batch": 8,
           "candidates": ["NCHW fp32", "NHWC fp32"]}  # fmt: skip
    entry = {"key": key, "choice": {"channels_last": True, "amp": "off"}, "name": "NHWC fp32",
             "seconds": {"NCHW fp32": 0.613, "NHWC fp32": 0.437}}  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps(entry))
    busy = {"measured_at": 1.8e9, "load": 3.5, "cores": 2, "spread": 0.02, "margin": 0.3, "remeasures": 0}
    (tmp_path / "c.json").write_text(json.dumps({**entry, "measured": busy}))
    (tmp_path / "b.json").write_text("{truncated")
    lines = runtime_probe_lines({"dir": str(tmp_path), "choices": cached_choices(tmp_path)})
    assert lines[0] == f"  runtime probe {tmp_path}: 3 choice(s) (delete the folder to measure again)"
    assert lines[1] == ("    train 320 px batch 8 on cpu (model abcd, torch 2.9.0, 2 threads): NHWC fp32  "
                        "[NCHW fp32 613 ms, NHWC fp32 437 ms]")  # fmt: skip
    assert lines[2].startswith(f"    {tmp_path / 'b.json'}: unreadable (")
    assert lines[3] == lines[1] + "  provisional: measured again on a quieter run"  # measured under load
    assert runtime_probe_lines({"dir": "/x", "choices": []}) == [
        "  runtime probe /x: no choice measured yet (train, val, predict and bench measure one)"
    ]


def test_a_probe_file_that_is_not_a_choice_is_named_not_a_crash(tmp_path, caplog):
    """Before, `tphyolo doctor` died with AttributeError on a file holding [], and any run with RecursionError
    on one nested 100,000 deep."""
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / "b.json").write_text("[" * 100000)
    found = cached_choices(tmp_path)
    assert [row["file"] for row in found] == [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert all("error" in row for row in found) and "nested 100000 levels deep" in found[1]["error"]
    lines = runtime_probe_lines({"dir": str(tmp_path), "choices": found})
    assert lines[2].startswith(f"    {tmp_path / 'b.json'}: unreadable (")
    options = (Candidate(channels_last=False, amp="off"),)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        assert read_cached(tmp_path / "b.json", {"version": 1}, options) is None
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"{tmp_path / 'b.json'}: ignoring an unreadable runtime probe cache file (")


def test_the_compiled_models_are_listed_with_their_sizes(tmp_path):
    assert compiled_model_lines(describe_entries(tmp_path / "none")) == [
        f"  compiled models {tmp_path / 'none'}: none yet (checkpoints run on OpenVINO or ONNX Runtime go here)"
    ]
    write_marker(tmp_path, "cache")
    entry = tmp_path / "tiny-0123456789abcdef"
    entry.mkdir()
    write_marker(entry, "entry")
    (entry / "model.onnx").write_bytes(b"\0" * (1 << 20))
    (tmp_path / "notes").mkdir()
    lines = compiled_model_lines(describe_entries(tmp_path))
    assert lines[0] == f"  compiled models {tmp_path}: 2 entries, 1.0 MB"
    assert lines[1] == "    notes  0.0 MB  not tphyolo's: left alone"
    assert lines[2].startswith("    tiny-0123456789abcdef  1.0 MB  tphyolo's, compiled again when next used: ")
