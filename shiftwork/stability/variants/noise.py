"""Surface noise variants: stray spaces, stray punctuation and random upper-casing.

Noise is confined to a region of the prompt (its first third, last third, or all of it) so that
position effects can be measured. All randomness comes from the caller's ``numpy`` generator.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from shiftwork.checks import non_negative_int

KINDS: tuple[str, ...] = ("spacing", "punctuation", "casing")
POSITIONS: tuple[str, ...] = ("prefix", "suffix", "global")
MARKS: str = ".,;:!-"  # deliberately no "?": a stray question mark could change what is being asked


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")


def region(text: str, position: str) -> tuple[int, int]:
    """Half-open span ``(start, end)`` of ``text`` that noise at ``position`` may touch.

    With ``m = ceil(len(text) / 3)``: prefix is ``(0, m)``, suffix is ``(len - m, len)``,
    global is ``(0, len)``.
    """
    _check_text(text)
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    n = len(text)
    m = math.ceil(n / 3)
    if position == "prefix":
        return (0, m)
    if position == "suffix":
        return (n - m, n)
    return (0, n)


def _insert(text: str, points: np.ndarray, chars: list[str]) -> str:
    """Insert ``chars[j]`` into the gap before original index ``points[j]``, all in one pass."""
    order = np.argsort(points, kind="stable")
    pieces: list[str] = []
    last = 0
    for j in order:
        p = int(points[j])
        pieces.append(text[last:p])
        pieces.append(chars[j])
        last = p
    pieces.append(text[last:])
    return "".join(pieces)


def _gaps(text: str, k: int, position: str, rng: np.random.Generator) -> np.ndarray:
    """``k`` insertion gaps drawn uniformly with replacement from ``start..end`` (inclusive)."""
    start, end = region(text, position)
    return rng.integers(start, end + 1, size=k)


def insert_spaces(text: str, k: int, position: str, rng: np.random.Generator) -> str:
    """Insert exactly ``k`` extra spaces at random gaps within the region of ``position``."""
    _check_text(text)
    k = non_negative_int("k", k)
    points = _gaps(text, k, position, rng)
    return _insert(text, points, [" "] * k)


def insert_punctuation(text: str, k: int, position: str, rng: np.random.Generator, marks: str = MARKS) -> str:
    """Insert exactly ``k`` marks, each drawn uniformly from ``marks``, at random gaps in the region."""
    _check_text(text)
    k = non_negative_int("k", k)
    if not isinstance(marks, str) or not marks:
        raise ValueError(f"marks must be a non-empty str, got {marks!r}")
    if "?" in marks:
        raise ValueError(f"marks must not contain '?', got {marks!r}")
    points = _gaps(text, k, position, rng)
    picks = rng.integers(0, len(marks), size=k)
    return _insert(text, points, [marks[int(i)] for i in picks])


def _upper_candidates(text: str, start: int, end: int) -> list[int]:
    # Lower-case letters only; letters whose upper case is not one different character
    # (e.g. "ß" -> "SS") are skipped so every change stays a one-for-one substitution.
    out = []
    for i in range(start, end):
        c = text[i]
        if c.isalpha() and c.islower():
            u = c.upper()
            if len(u) == 1 and u != c:
                out.append(i)
    return out


def upper_case(text: str, share: float, position: str, rng: np.random.Generator) -> str:
    """Upper-case ``round(share * len(L))`` randomly chosen lower-case letters ``L`` in the region.

    ``round`` is Python's (ties go to the even number). Letters are chosen without replacement;
    every other character is left as it was.
    """
    _check_text(text)
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"share must be a number in [0, 1], got {share!r}")
    start, end = region(text, position)
    candidates = _upper_candidates(text, start, end)
    n = round(float(share) * len(candidates))
    if n == 0:
        return text
    chosen = rng.choice(len(candidates), size=n, replace=False)
    chars = list(text)
    for j in chosen:
        i = candidates[int(j)]
        chars[i] = chars[i].upper()
    return "".join(chars)


def apply_noise(text: str, kind: str, intensity: float, position: str, rng: np.random.Generator) -> str:
    """Apply noise of ``kind`` at ``position``.

    spacing/punctuation: ``intensity`` is the whole number of characters to insert;
    casing: ``intensity`` is the share of lower-case letters in the region to upper-case.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "casing":
        return upper_case(text, intensity, position, rng)
    if (
        isinstance(intensity, bool)
        or not isinstance(intensity, numbers.Real)
        or not math.isfinite(float(intensity))
        or not float(intensity).is_integer()
    ):
        raise ValueError(f"intensity for {kind} must be a whole number, got {intensity!r}")
    k = int(intensity)
    if kind == "spacing":
        return insert_spaces(text, k, position, rng)
    return insert_punctuation(text, k, position, rng)
