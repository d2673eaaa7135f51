"""Stable seeds derived from names, so every random choice is reproducible across runs and machines."""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any sequence of printable parts (Python's ``hash`` is salted per process)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def rng_for(*parts: object) -> np.random.Generator:
    """A numpy generator seeded by :func:`derive_seed` of ``parts``."""
    return np.random.default_rng(derive_seed(*parts))
