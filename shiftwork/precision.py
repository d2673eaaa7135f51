"""The floating-point type a job computes in, chosen by what its device computes natively.

``auto`` is bfloat16 on a CUDA device that supports it, and on a CPU only where the CPU computes
bfloat16 natively (AVX512-BF16 or AMX on x86, the BF16 extension on Arm): elsewhere torch
emulates bfloat16 and a matrix product runs 3-70x slower than in float32. The CPU's flags are
read from ``/proc/cpuinfo`` and confirmed by oneDNN and by a short timing of one matrix product in
both types, since flags can promise what the kernels do not deliver (a CPU whose oneDNN is capped
at AVX2, a virtual machine that hides instructions). The timing only vetoes bfloat16 when it is
far off native speed (:data:`EMULATED_RATIO`): the choice must be the same on every run of one
machine, busy or quiet, or the same config would compute in another type from one run to the next
(and greedy replies would differ). Every choice is logged with its reason and recorded in the
provenance of the tables the job writes (:func:`choices`).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported by the functions that compute, so provenance stays light
    import torch

LOGGER = logging.getLogger("shiftwork")

NAMES = ("float32", "bfloat16", "float16")
#: CPU flags that mean native bfloat16 arithmetic (x86: AVX512-BF16, AMX; Arm: BF16)
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
#: a bfloat16 product slower than this many float32 ones is emulated, not native. Measured on
#: one product: 0.2-0.4 where bfloat16 is native, 30-160 where it is emulated; a threshold far
#: from both, so that another process's load in the middle of the timing cannot flip the choice
EMULATED_RATIO = 8.0
#: the shape of the timed product (m, k, n): about 0.3 ms in float32 on one core, 30 ms in
#: emulated bfloat16
PROBE_SHAPE = (128, 512, 512)

_CHOICES: list[dict] = []


@dataclass(frozen=True)
class CpuBf16:
    """What this CPU does with bfloat16: its flags, oneDNN's answer and one timed product."""

    flags: tuple[str, ...] | None  # the BF16_FLAGS the CPU lists; None where they cannot be read
    onednn: bool  # oneDNN's own check (it honours ONEDNN_MAX_CPU_ISA)
    ratio: float | None  # bfloat16 time over float32 time of one product; None when not timed

    @property
    def native(self) -> bool:
        listed = self.flags is None or bool(self.flags)
        return listed and self.onednn and self.ratio is not None and self.ratio <= EMULATED_RATIO

    def describe(self) -> str:
        """The evidence in words that are the same on every run of one machine (the timing is
        given as within or over :data:`EMULATED_RATIO`, since its value varies from run to run and
        this text goes into the provenance of tables whose bytes must not change with it)."""
        flags = (
            "flags unreadable"
            if self.flags is None
            else ("flags " + "+".join(self.flags) if self.flags else "no bf16 flag")
        )
        if self.ratio is None:
            timed = "not timed"
        else:
            within = "within" if self.ratio <= EMULATED_RATIO else "over"
            timed = f"a bfloat16 matmul {within} {EMULATED_RATIO:g}x the float32 time"
        return f"{flags}, oneDNN bf16 {'yes' if self.onednn else 'no'}, {timed}"

    def measured(self) -> str:
        """The timing's value, for the log only."""
        return "" if self.ratio is None else f"; measured {self.ratio:.2f}x"


@dataclass(frozen=True)
class Choice:
    """A resolved dtype and why it was chosen."""

    requested: str
    dtype: torch.dtype
    device: str
    reason: str
    emulated: bool = False  # bfloat16 asked for on a CPU that only emulates it
    measured: str = ""  # the timing's value: logged, never recorded (it varies run to run)

    @property
    def name(self) -> str:
        return str(self.dtype).removeprefix("torch.")


def cpu_flags(path: str = "/proc/cpuinfo") -> tuple[str, ...] | None:
    """The bfloat16 flags (:data:`BF16_FLAGS`) the CPU lists, or None where there is no cpuinfo."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    listed: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            listed.update(value.split())
    return tuple(f for f in BF16_FLAGS if f in listed)


def time_ratio(shape: tuple[int, int, int] = PROBE_SHAPE, repeats: int = 5) -> float:
    """Best-of-``repeats`` time of one (m x k) @ (k x n) product in bfloat16 over float32, on one
    thread and the two types taking turns, so that other processes' load cancels out."""
    import torch

    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    operands = {torch.float32: (a, b), torch.bfloat16: (a.bfloat16(), b.bfloat16())}
    best = dict.fromkeys(operands, float("inf"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for x, y in operands.values():
            x @ y  # first call: kernel selection, allocation
        for _ in range(repeats):
            for dtype, (x, y) in operands.items():
                start = time.perf_counter()
                x @ y
                best[dtype] = min(best[dtype], time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best[torch.bfloat16] / max(best[torch.float32], 1e-9)


@functools.lru_cache(maxsize=1)
def detect_cpu() -> CpuBf16:
    """This CPU's bfloat16 capability; the product is timed only where flags and oneDNN agree."""
    import torch

    flags = cpu_flags()
    try:
        onednn = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        onednn = False
    listed = flags is None or bool(flags)
    ratio = time_ratio() if listed and onednn else None
    return CpuBf16(flags, onednn, ratio)


def resolve(name: str, device: torch.device | str, cpu: CpuBf16 | None = None) -> Choice:
    """The dtype a job computes in on ``device`` for the configured ``name`` (auto, float32,
    bfloat16, float16). ``cpu`` replaces the detected capability (tests)."""
    import torch

    dev = torch.device(device)
    if name != "auto" and name not in NAMES:
        raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {name!r}")
    if dev.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        if name == "auto":
            return Choice(
                name,
                torch.bfloat16 if bf16 else torch.float32,
                dev.type,
                "auto: the GPU " + ("supports bfloat16" if bf16 else "has no bfloat16"),
            )
        return Choice(name, getattr(torch, name), dev.type, "configured")
    if name in ("float32", "float16"):
        return Choice(name, getattr(torch, name), dev.type, "configured")
    if dev.type != "cpu":
        return Choice(
            name,
            torch.float32 if name == "auto" else torch.bfloat16,
            dev.type,
            "auto: float32 off CUDA" if name == "auto" else "configured",
        )
    cap = cpu if cpu is not None else detect_cpu()
    if name == "auto":
        chosen = torch.bfloat16 if cap.native else torch.float32
        verdict = "native bfloat16" if cap.native else "no native bfloat16"
        return Choice(name, chosen, dev.type, f"auto: CPU with {verdict} ({cap.describe()})", measured=cap.measured())
    if not cap.native:
        slow = f"; this one timed about {cap.ratio:.0f}x" if cap.ratio else ""
        return Choice(
            name,
            torch.bfloat16,
            dev.type,
            f"configured, but this CPU has no native bfloat16 ({cap.describe()}): matrix products run 3-70x slower than in float32; dtype auto or float32 avoids it",
            emulated=True,
            measured=slow,
        )
    return Choice(name, torch.bfloat16, dev.type, f"configured ({cap.describe()})", measured=cap.measured())


def choose(name: str, device: torch.device | str, cpu: CpuBf16 | None = None) -> torch.dtype:
    """:func:`resolve`, logged (a warning for emulated bfloat16) and kept for :func:`choices`."""
    choice = resolve(name, device, cpu)
    LOGGER.log(
        logging.WARNING if choice.emulated else logging.INFO,
        "dtype %s (asked %s, %s): %s%s",
        choice.name,
        name,
        choice.device,
        choice.reason,
        choice.measured,
    )
    _record({"requested": name, "dtype": choice.name, "device": choice.device, "reason": choice.reason})
    return choice.dtype


def _record(choice: dict) -> None:
    """Keep a choice for :func:`choices`, once however often a job makes it."""
    if choice not in _CHOICES:
        _CHOICES.append(choice)


def choices() -> list[dict]:
    """Every dtype this process chose, with its reason (recorded in each table's provenance)."""
    return [dict(c) for c in _CHOICES]


def training_dtype(name: str, lora: bool, device: torch.device | str) -> str:
    """The weights' type for training. ``auto`` is bfloat16 only for LoRA on a GPU with bfloat16
    (frozen base weights, float32 adapters under autocast); full fine-tuning and every CPU job
    keep float32 weights, whose small updates bfloat16 would round away."""
    if name != "auto":
        return name
    import torch

    dev = torch.device(device)
    bf16 = lora and dev.type == "cuda" and torch.cuda.is_bf16_supported()
    chosen = "bfloat16" if bf16 else "float32"
    why = "LoRA on a GPU with bfloat16" if bf16 else ("full fine-tuning" if not lora else "not on a GPU with bfloat16")
    LOGGER.info("training dtype %s (asked auto): %s", chosen, why)
    _record({"requested": "auto", "dtype": chosen, "device": dev.type, "reason": f"training, auto: {why}"})
    return chosen


def cpu_capability() -> dict:
    """What timings depend on: torch's vector ISA, and whether bfloat16 is native here, with a
    short ``label`` ("AVX2, bf16 emulated", "AVX-512, bf16 native") to print beside a figure."""
    import torch

    isa = torch.backends.cpu.get_cpu_capability()
    cap = detect_cpu()
    name = {"AVX512": "AVX-512", "AVX2": "AVX2"}.get(isa, isa)
    return {
        "isa": isa,
        "bf16_native": cap.native,
        "bf16_flags": list(cap.flags) if cap.flags is not None else None,
        "onednn_bf16": cap.onednn,
        "bf16_over_f32_time": None if cap.ratio is None else round(cap.ratio, 3),
        "label": f"{name}, bf16 {'native' if cap.native else 'emulated'}",
    }
