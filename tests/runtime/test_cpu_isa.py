"""The CPU's instruction sets as the probe and the compiled runtime see them, capped by oneDNN's ISA cap."""

import pytest

from tphyolo.runtime.cpu_isa import capped, cpu_info, parse_cpuinfo

SAPPHIRE_RAPIDS = parse_cpuinfo(
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu sse4_1 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 "
    "amx_tile amx_int8\n"
)


def test_a_cpuinfo_gives_its_model_and_extensions():
    assert SAPPHIRE_RAPIDS.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert SAPPHIRE_RAPIDS.isa == ("AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16", "AMX-BF16", "AMX-INT8")
    assert SAPPHIRE_RAPIDS.has_native_bf16


@pytest.mark.parametrize(("cap", "isa", "bf16"), [
    ("AVX512_CORE_AMX", ("AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16", "AMX-BF16", "AMX-INT8"), True),
    ("AVX10_1_512", ("AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16"), True),  # oneDNN's other name for FP16
    ("avx512_core_bf16", ("AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16"), True),
    ("AVX512_CORE_VNNI", ("AVX2", "AVX-512", "AVX512-VNNI"), False),
    ("AVX512_CORE", ("AVX2", "AVX-512"), False),
    ("AVX2", ("AVX2",), False),
    ("SSE41", (), False),
])  # fmt: skip
def test_a_onednn_cap_removes_the_extensions_above_it(cap, isa, bf16):
    cpu = capped(SAPPHIRE_RAPIDS, cap)
    assert (cpu.isa, cpu.has_native_bf16, cpu.model) == (isa, bf16, SAPPHIRE_RAPIDS.model)
    assert "fma" in cpu.flags  # what no cap names stays


@pytest.mark.parametrize("cap", [None, "", "DEFAULT", "AVX9000"])
def test_no_cap_default_or_a_name_onednn_lacks_changes_nothing(cap):
    assert capped(SAPPHIRE_RAPIDS, cap) == SAPPHIRE_RAPIDS


def test_the_machine_cpu_follows_the_cap_in_the_environment(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16\n")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    assert cpu_info(cpuinfo).has_native_bf16
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE")  # the older name
    assert cpu_info(cpuinfo).isa == ("AVX2", "AVX-512")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # the current name wins
    assert cpu_info(cpuinfo).isa == ("AVX2",)
