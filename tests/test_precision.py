"""dtype resolution by capability (shiftwork.precision): the CPU's bfloat16 capability injected,
so both kinds of CPU are covered on any machine; the detection itself on this machine."""

import logging

import pytest
import torch

from shiftwork import precision
from shiftwork.precision import CpuBf16, choose, cpu_flags, resolve, training_dtype

NATIVE = CpuBf16(flags=("avx512_bf16", "amx_bf16"), onednn=True, ratio=0.25)
AVX2 = CpuBf16(flags=(), onednn=False, ratio=None)
# flags that promise bfloat16 while the kernels emulate it (oneDNN capped at AVX2, say)
LYING = CpuBf16(flags=("avx512_bf16",), onednn=True, ratio=52.0)


def test_auto_on_cpu_follows_native_bfloat16():
    assert resolve("auto", "cpu", NATIVE).dtype == torch.bfloat16
    assert resolve("auto", "cpu", AVX2).dtype == torch.float32
    assert resolve("auto", "cpu", LYING).dtype == torch.float32
    assert "no native bfloat16" in resolve("auto", "cpu", LYING).reason
    assert "over 8x the float32 time" in resolve("auto", "cpu", LYING).reason
    assert resolve("auto", "cpu", LYING).measured == "; measured 52.00x"


def test_the_recorded_reason_does_not_change_with_the_timing():
    # the reason goes into every table's provenance: a new timing must not change its bytes
    for a, b in ((0.21, 0.28), (52.0, 165.0)):
        first, second = (resolve("auto", "cpu", CpuBf16(("avx512_bf16",), True, r)) for r in (a, b))
        assert first.reason == second.reason and first.measured != second.measured


def test_a_timing_disturbed_by_load_does_not_change_the_choice():
    """A native CPU's timing slowed tenfold, or an emulating CPU's quickened tenfold, by another
    process in the middle of it: the same dtype and the same recorded reason."""
    for flags, fast, slow in ((("avx512_bf16", "amx_bf16"), 0.3, 3.0), (("avx512_bf16",), 160.0, 16.0)):
        first, second = (resolve("auto", "cpu", CpuBf16(flags, True, r)) for r in (fast, slow))
        assert first.dtype == second.dtype and first.reason == second.reason


def test_native_needs_flag_onednn_and_timing():
    assert NATIVE.native and not AVX2.native and not LYING.native
    assert not CpuBf16(("avx512_bf16",), False, None).native  # oneDNN says no
    assert not CpuBf16(("amx_bf16",), True, None).native  # not timed
    assert CpuBf16(("bf16",), True, 8.0).native  # at the threshold
    assert not CpuBf16(("bf16",), True, 8.01).native
    assert CpuBf16(None, True, 0.5).native  # no cpuinfo (macOS): the timing decides


def test_explicit_types_are_kept_and_emulated_bfloat16_warns(caplog):
    assert resolve("float32", "cpu", NATIVE).dtype == torch.float32
    assert resolve("bfloat16", "cpu", NATIVE).dtype == torch.bfloat16
    slow = resolve("bfloat16", "cpu", LYING)
    assert slow.dtype == torch.bfloat16 and "3-70x slower" in slow.reason
    assert slow.measured == "; this one timed about 52x"
    assert "3-70x slower" in resolve("bfloat16", "cpu", AVX2).reason
    with caplog.at_level(logging.INFO, logger="shiftwork"):
        assert choose("bfloat16", "cpu", AVX2) == torch.bfloat16
        assert choose("auto", "cpu", NATIVE) == torch.bfloat16
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert levels[0][0] == logging.WARNING and "no native bfloat16" in levels[0][1]
    assert levels[1][1].endswith("; measured 0.25x")
    assert levels[1][0] == logging.INFO and "dtype bfloat16 (asked auto, cpu)" in levels[1][1]
    with pytest.raises(ValueError, match="got 'half'"):
        resolve("half", "cpu", NATIVE)


def test_cuda_auto_by_device_support(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve("auto", "cuda", AVX2).dtype == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve("auto", "cuda", NATIVE).dtype == torch.float32
    assert resolve("float16", "cuda").dtype == torch.float16


def test_training_dtype(monkeypatch):
    assert training_dtype("bfloat16", False, "cpu") == "bfloat16"
    assert training_dtype("auto", True, "cpu") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert training_dtype("auto", True, "cuda") == "bfloat16"
    assert training_dtype("auto", False, "cuda") == "float32"


def test_choices_reach_the_provenance(monkeypatch):
    from shiftwork.provenance import make_provenance

    monkeypatch.setattr(precision, "_CHOICES", [])
    assert "precision" not in make_provenance("step")
    choose("auto", "cpu", AVX2)
    record = make_provenance("step")["precision"]
    assert record == [
        {"requested": "auto", "dtype": "float32", "device": "cpu", "reason": resolve("auto", "cpu", AVX2).reason}
    ]


def test_cpu_flags_reads_flags_and_arm_features(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    old = tmp_path / "old"
    old.write_text("flags\t\t: fpu sse2 avx avx2 fma\n")
    assert cpu_flags(str(x86)) == ("avx512_bf16", "amx_bf16")
    assert cpu_flags(str(arm)) == ("bf16",)
    assert cpu_flags(str(old)) == ()
    assert cpu_flags(str(tmp_path / "missing")) is None


def test_detection_agrees_with_a_timing_on_this_machine():
    """The detected capability against an independent, larger timing: native bfloat16 must not
    be slower than float32, emulated bfloat16 must be."""
    cap = precision.detect_cpu()
    if cap.ratio is None:
        assert not cap.native
        return
    ratio = precision.time_ratio((256, 1024, 1024), repeats=3)
    assert cap.native == (ratio <= precision.EMULATED_RATIO)
    assert 0 < cap.ratio < 1 if cap.native else cap.ratio > 3  # native ~0.2-0.3, emulated 30-160


def test_capability_label(monkeypatch):
    monkeypatch.setattr(precision, "detect_cpu", lambda: AVX2)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    cap = precision.cpu_capability()
    assert cap["label"] == "AVX2, bf16 emulated" and cap["bf16_over_f32_time"] is None
    monkeypatch.setattr(precision, "detect_cpu", lambda: NATIVE)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    cap = precision.cpu_capability()
    assert cap["label"] == "AVX-512, bf16 native" and cap["bf16_flags"] == ["avx512_bf16", "amx_bf16"]
