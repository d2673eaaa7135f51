"""The first call of each vector math function, made once per process in the calling thread.

torch hands some elementwise functions of float tensors (cos, sin, exp, log, erf, tanh and
others: :data:`MKL_FUNCTIONS`) to MKL's vector math library, and splits a large tensor into
chunks computed by its threads. With torch 2.13 (MKL 2024.2) on a 2-core Xeon with AVX-512 and
AMX, the first such call of a function in a process, split over two threads, computed one
thread's chunk less accurately in some processes (a cosine off by 1.5e-4 instead of 4e-8, in 1
of 6 to 5 of 8 processes of a series); every later call was accurate. A model's first forward pass is such a first call: its
rotary position table came out in one of two versions, and a job's greedy replies in bfloat16
changed from one run to the next, in transformers and in vLLM alike.

:func:`warm_up` makes every one of these first calls on a few elements, which torch computes in
one thread. :func:`shiftwork.device.pick_device` calls it, so every job that computes does it
before it loads a model.
"""

from __future__ import annotations

import functools

import torch

#: the functions ATen routes to MKL (``ATen/cpu/vml.h``, ``IMPLEMENT_VML_MKL``), warmed in float32
#: and float64
MKL_FUNCTIONS = (
    "acos",
    "asin",
    "atan",
    "cos",
    "erf",
    "erfc",
    "erfinv",
    "exp",
    "log",
    "log10",
    "log2",
    "sin",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
)
#: the warm-up's argument, inside every one of their domains
ARGUMENT = 0.5
#: elements per warm-up call: far below the 2048 at which ATen splits a unary function over threads
ELEMENTS = 16


@functools.cache
def warm_up() -> None:
    """Call each of :data:`MKL_FUNCTIONS` once in float32 and once in float64, on
    :data:`ELEMENTS` elements (once per process)."""
    for dtype in (torch.float32, torch.float64):
        for name in MKL_FUNCTIONS:
            getattr(torch, name)(torch.full((ELEMENTS,), ARGUMENT, dtype=dtype))
