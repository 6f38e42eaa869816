"""`tphyolo doctor` shows the CPU's vector and matrix extensions and the decisions `doctor --tune` kept."""

import json

from tphyolo.doctor.findings import compiled_model_lines, runtime_probe_lines
from tphyolo.doctor.probes import cpu_isa
from tphyolo.runtime.compiled_cache import describe_entries, write_marker
from tphyolo.runtime.cpu_isa import cpu_info
from tphyolo.runtime.decisions import kept_tunings


def test_the_isa_is_this_machines():
    found = cpu_isa()
    cpu = cpu_info()
    assert found == {"model": cpu.model, "isa": list(cpu.isa), "native_bf16": cpu.has_native_bf16}
    assert found["native_bf16"] == any(name in found["isa"] for name in ("AVX512-BF16", "AMX-BF16"))


def test_kept_decisions_are_listed_a_busy_one_marked_and_a_broken_file_named(tmp_path):
    key = {"version": 1, "machine": "Xeon | flags 0123", "device": "cpu", "threads": 2, "torch": "2.9.0",
           "architecture": "tph-yolov5n", "mode": "train"}  # fmt: skip
    measured = {"date": "2026-12-06 18:00", "load": 0.4, "cores": 2, "seconds": {"NCHW fp32": 0.613, "NHWC bf16": 0.2}}
    entry = {"key": key, "choice": {"channels_last": True, "amp": "bf16"}, "measured": measured}
    (tmp_path / "a.json").write_text(json.dumps(entry))
    (tmp_path / "c.json").write_text(json.dumps({**entry, "measured": {**measured, "load": 3.5}}))
    (tmp_path / "b.json").write_text("{truncated")
    (tmp_path / "d.json").write_text("[]")  # JSON, but no decision
    lines = runtime_probe_lines({"dir": str(tmp_path), "choices": kept_tunings(tmp_path)})
    assert lines[0].startswith(f"  decisions     {tmp_path}: 4 kept")
    assert lines[1] == ("    train tph-yolov5n on cpu (torch 2.9.0, 2 threads, 2026-12-06 18:00): NHWC bf16  "
                        "[NCHW fp32 613 ms, NHWC bf16 200 ms]")  # fmt: skip
    assert lines[2].startswith(f"    {tmp_path / 'b.json'}: unreadable (")
    assert lines[3] == lines[1] + "  measured on a busy machine (load 3.5 on 2 cores): tune again when quiet"
    assert lines[4].startswith(f"    {tmp_path / 'd.json'}: unreadable (not a kept decision)")
    assert runtime_probe_lines({"dir": "/x", "choices": []})[0].startswith("  decisions     /x: none kept; the rule")


def test_a_decision_file_nested_past_reason_is_named_not_a_crash(tmp_path):
    """Before, any run died with RecursionError on a kept file nested 100,000 deep."""
    (tmp_path / "b.json").write_text("[" * 100000)
    (found,) = kept_tunings(tmp_path)
    assert found["file"] == str(tmp_path / "b.json") and "error" in found
    assert runtime_probe_lines({"dir": str(tmp_path), "choices": [found]})[1].startswith(
        f"    {tmp_path / 'b.json'}: unreadable (")


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
