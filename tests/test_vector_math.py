"""The first parallel call of a vector math function is as accurate as every later one once
:func:`shiftwork.device.pick_device` has run (:mod:`shiftwork.vector_math`)."""

import subprocess
import sys

import pytest
import torch

from shiftwork import vector_math

# A rotary position table like a model's first forward pass computes (89 positions, 64
# dimensions), its cosine taken in float32 by two threads, against float64.
FIRST_COSINE = """
import sys, torch
torch.set_num_threads(2)
(torch.randn(2000, 2000) @ torch.randn(2000, 2000)).sum()
x = torch.randn(1 << 22)
(x + x).sum()
if sys.argv[1] == "warm":
    from shiftwork.device import pick_device
    pick_device()
inv = 1.0 / (100000 ** (torch.arange(0, 64, 2).float() / 64))
f = torch.arange(89)[:, None].float() * inv
table = torch.cat((f, f), -1)
print(float((table.cos().double() - table.double().cos()).abs().max()))
"""


def first_cosine_errors(mode: str, processes: int) -> list[float]:
    """The largest error of the first cosine in each of ``processes`` fresh processes."""
    return [
        float(subprocess.run([sys.executable, "-c", FIRST_COSINE, mode], capture_output=True, text=True).stdout)
        for _ in range(processes)
    ]


@pytest.mark.simulation  # eight fresh processes: about 20 s
def test_the_first_parallel_cosine_after_pick_device_is_accurate():
    # without the warm-up, 5 of 8 processes in one series and 1 of 6 in another were off by
    # 1.5e-4 on a 2-core AVX-512 Xeon
    # (torch 2.13, MKL 2024.2); float32's own error on this table is 4e-8
    errors = first_cosine_errors("warm", 8)
    assert max(errors) < 1e-6, errors


def test_every_warmed_function_is_a_torch_function_defined_at_its_argument():
    for name in vector_math.MKL_FUNCTIONS:
        out = getattr(torch, name)(torch.tensor([vector_math.ARGUMENT], dtype=torch.float64))
        assert torch.isfinite(out).all(), name
    assert vector_math.ELEMENTS < 2048  # one thread: below torch's grain for vector math
