"""`tphyolo doctor` shows the CPU's vector and matrix extensions and the runtime probe's kept choices."""

import json

from tphyolo.doctor.findings import runtime_probe_lines
from tphyolo.doctor.probes import cpu_isa
from tphyolo.runtime.cpu_isa import cpu_info
from tphyolo.runtime.probe import cached_choices


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
