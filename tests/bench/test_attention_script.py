"""benchmarks/attention_vs_original.py on tiny cases: the cases are built as documented, rows are complete, and
the script prints its table and writes its JSON."""

import json

import pytest
import torch
from tests.helpers import benchmark_script

from tphyolo.models.attention import C3TR
from tphyolo.models.swin import C3STR

CPU = torch.device("cpu")
study = benchmark_script("attention_vs_original")
AttentionCase, AttentionSettings, build_case = study.AttentionCase, study.AttentionSettings, study.build_case


def test_cases_use_model_widths_and_depths():
    block, (x,) = build_case(AttentionCase("c3tr", "l", 1536, 2), device=torch.device("meta"))
    assert isinstance(block, C3TR) and len(block.m.tr) == 3 and block.m.tr[0].qkv.in_features == 512
    assert x.shape == (2, 1024, 48, 48)
    block, (x,) = build_case(AttentionCase("c3str", "s", 1996, 1), device=torch.device("meta"))
    assert isinstance(block, C3STR) and len(block.m.tr) == 1 and x.shape == (1, 512, 62, 62)
    _, (x1, x2) = build_case(AttentionCase("clla", "n", 640, 1), device=torch.device("meta"))
    assert x1.shape == (1, 32, 160, 160) and x2.shape == (1, 64, 80, 80)


def test_unknown_block_or_scale():
    with pytest.raises(ValueError, match="unknown block"):
        build_case(AttentionCase("nope", "n", 256, 1), device=CPU)
    with pytest.raises(ValueError, match="unknown scale"):
        build_case(AttentionCase("c3tr", "q", 256, 1), device=CPU)


@pytest.mark.slow
def test_flop_count_of_one_transformer_layer():
    """C3TR n=1 on 4 tokens of 64 hidden channels: convs, position embedding, qkv/out/MLP, attention."""
    block = C3TR(128, 128, 1).eval()
    x = torch.randn(1, 128, 2, 2)
    l, c = 4, 64
    convs = 2 * l * (128 * 64 * 2 + 128 * 128)
    layer = 2 * l * c * c * (1 + 3 + 1 + 8) + 2 * 2 * l * l * c
    with torch.no_grad():
        assert study.count_flops(lambda: block(x)) == convs + layer


@pytest.mark.slow
def test_tiny_sweep_rows():
    cases = tuple(AttentionCase(b, "n", 256, 1) for b in ("c3tr", "c3str", "clla"))
    rows = study.bench_attention(
        AttentionSettings(cases=cases, warmup=0, repeats=1, matmul_flops=1e9), device=CPU, log=lambda s: None
    )
    assert [r.name for r in rows] == ["attention/c3tr"] * 2 + ["attention/c3str"] * 2 + ["attention/clla"] * 2
    for row in rows:
        assert row.ours_ms > 0 and row.baseline_ms > 0 and row.ours_peak_mb > 0 and row.baseline_peak_mb > 0
    assert rows[0].extra["kernel"] == "flash (cpu)"
    assert "of_matmul_peak" in rows[0].extra and "kernel" not in rows[-1].extra


@pytest.mark.slow
def test_the_script_prints_ratios_and_writes_json(tmp_path, capsys):
    out = tmp_path / "attention.json"
    argv = ["--quick", "--device", "cpu", "--blocks", "c3tr,clla", "--modes", "eval", "--json", str(out)]
    assert study.main(argv) == 0
    data = json.loads(out.read_text())
    assert [r["name"] for r in data["rows"]] == ["attention/c3tr", "attention/clla"]
    c3tr = data["rows"][0]
    assert c3tr["speedup"] == pytest.approx(c3tr["baseline_ms"] / c3tr["ours_ms"])
    assert c3tr["extra"]["kernel"] == "flash (cpu)" and c3tr["ours_peak_mb"] > 0
    assert data["machine"]["matmul_fp32_gflops"] > 0
    assert "attention/c3tr" in capsys.readouterr().out


def test_the_script_refuses_an_unknown_block(capsys):
    with pytest.raises(SystemExit):
        study.main(["--quick", "--device", "cpu", "--blocks", "nope"])
    assert "unknown block" in capsys.readouterr().err
