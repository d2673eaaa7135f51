"""Surface noise variants: stray spaces, stray punctuation and random upper-casing.

Inserted characters only ever go at a word boundary (the start or end of the text, or next to
whitespace) and never inside a grapheme cluster, so a number ("60,316"), an abbreviation
("U.S."), an accented letter or an emoji is never split. Casing upper-cases the base letter of
whole grapheme clusters. Two styles, chosen by ``stability.variants.noise.style``:

* ``method``: the published method's semantics (``utils/variations.py`` of
  Mahmoudbj48/Styled-Prompts-Shifted-Behavior-v2). Spacing and punctuation levels are the number
  of characters to insert; ``prefix`` puts all of them before the text, ``suffix`` after it,
  ``global`` spreads them over the text's start, the end of each whitespace run and its end
  (each draw picks one of these points uniformly). Casing upper-cases
  ``max(1, floor(share * n))`` of the ``n`` letters (of any case) in the first half
  (``prefix``), the second half (``suffix``) or all (``global``) of the text. Marks:
  :data:`METHOD_MARKS`.
* ``region``: noise confined to the first third (``prefix``), last third (``suffix``) or all
  (``global``) of the text, at any word boundary inside it (either side of a whitespace run);
  casing upper-cases ``round(share * n)`` of the ``n`` lower-case letters of the region. Marks:
  :data:`MARKS`.

All randomness comes from the caller's ``numpy`` generator.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from shiftwork.checks import non_negative_int
from shiftwork.stability.variants.graphemes import boundaries

KINDS: tuple[str, ...] = ("spacing", "punctuation", "casing")
POSITIONS: tuple[str, ...] = ("prefix", "suffix", "global")
STYLES: tuple[str, ...] = ("method", "region")
MARKS: str = ".,;:!-"  # region style; deliberately no "?": a stray question mark could change what is asked
METHOD_MARKS: str = ".,!'()[];:-"  # the method's PUNCTUATION_POOL, which leaves out "?" for the same reason


def default_marks(style: str) -> str:
    """The mark set a style draws from when the config names none."""
    _check_style(style)
    return METHOD_MARKS if style == "method" else MARKS


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")


def _check_position(position: object) -> None:
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")


def _check_style(style: object) -> None:
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")


def _check_marks(marks: object) -> str:
    if not isinstance(marks, str) or not marks:
        raise ValueError(f"marks must be a non-empty str, got {marks!r}")
    if "?" in marks:
        raise ValueError(f"marks must not contain '?', got {marks!r}")
    if any(c.isspace() or c.isalnum() or c == "_" for c in marks):
        raise ValueError(f'marks must hold no whitespace, letters, digits or "_", got {marks!r}')
    return marks


def region(text: str, position: str) -> tuple[int, int]:
    """Half-open span ``(start, end)`` of ``text`` that ``region``-style noise at ``position`` may touch.

    With ``m = ceil(len(text) / 3)``: prefix is ``(0, m)``, suffix is ``(len - m, len)``,
    global is ``(0, len)``.
    """
    _check_text(text)
    _check_position(position)
    n = len(text)
    m = math.ceil(n / 3)
    if position == "prefix":
        return (0, m)
    if position == "suffix":
        return (n - m, n)
    return (0, n)


def _cluster_spans(text: str) -> list[tuple[int, int]]:
    b = boundaries(text)
    return [(b[j], b[j + 1]) for j in range(len(b) - 1)]


def word_boundaries(text: str) -> list[int]:
    """Every offset where an insert splits neither a word nor a grapheme cluster: the start, the
    end, and each cluster boundary that touches a whitespace cluster on either side."""
    _check_text(text)
    spans = _cluster_spans(text)
    white = [text[s].isspace() for s, _ in spans]
    out = [0]
    for j in range(1, len(spans)):
        if white[j - 1] or white[j]:
            out.append(spans[j][0])
    if text:
        out.append(len(text))
    return out


def insertion_points(text: str, position: str, style: str) -> list[int]:
    """The offsets one insert may go to; each draw picks one entry uniformly (entries may repeat).

    ``method``: prefix ``[0]``, suffix ``[len]``, global ``[0, end of each whitespace run, len]``
    (as the method's ``valid_indices``; a text ending in whitespace lists ``len`` twice).
    ``region``: the :func:`word_boundaries` inside :func:`region` (its ends included).
    """
    _check_text(text)
    _check_position(position)
    _check_style(style)
    n = len(text)
    if style == "region":
        start, end = region(text, position)
        return [p for p in word_boundaries(text) if start <= p <= end]
    if position == "prefix":
        return [0]
    if position == "suffix":
        return [n]
    spans = _cluster_spans(text)
    points = [0]
    for j, (s, e) in enumerate(spans):
        if text[s].isspace() and (j + 1 == len(spans) or not text[spans[j + 1][0]].isspace()):
            points.append(e)
    points.append(n)
    return points


def _insert(text: str, points: list[int], chars: list[str]) -> str:
    """Insert ``chars[j]`` at offset ``points[j]``; inserts at one offset keep their draw order."""
    order = sorted(range(len(points)), key=lambda j: points[j])
    pieces: list[str] = []
    last = 0
    for j in order:
        p = points[j]
        pieces.append(text[last:p])
        pieces.append(chars[j])
        last = p
    pieces.append(text[last:])
    return "".join(pieces)


def _draw_points(text: str, k: int, position: str, style: str, rng: np.random.Generator) -> list[int]:
    candidates = insertion_points(text, position, style)
    return [candidates[int(i)] for i in rng.integers(0, len(candidates), size=k)]


def insert_spaces(text: str, k: int, position: str, rng: np.random.Generator, style: str = "method") -> str:
    """Insert exactly ``k`` extra spaces at :func:`insertion_points` drawn with replacement."""
    _check_text(text)
    k = non_negative_int("k", k)
    points = _draw_points(text, k, position, style, rng)
    return _insert(text, points, [" "] * k)


def insert_punctuation(
    text: str,
    k: int,
    position: str,
    rng: np.random.Generator,
    marks: str | None = None,
    style: str = "method",
) -> str:
    """Insert exactly ``k`` marks, each drawn uniformly from ``marks`` (default: the style's set),
    at :func:`insertion_points` drawn with replacement (all points first, then all marks)."""
    _check_text(text)
    k = non_negative_int("k", k)
    marks = _check_marks(default_marks(style) if marks is None else marks)
    points = _draw_points(text, k, position, style, rng)
    picks = rng.integers(0, len(marks), size=k)
    return _insert(text, points, [marks[int(i)] for i in picks])


def _upper_one(base: str) -> str:
    # letters whose upper case is not one character (e.g. "ß" -> "SS") are kept as they are,
    # so every change is a one-for-one substitution
    u = base.upper()
    return u if len(u) == 1 else base


def upper_case(text: str, share: float, position: str, rng: np.random.Generator, style: str = "method") -> str:
    """Upper-case the base letter of randomly chosen grapheme clusters (without replacement).

    ``method``: ``max(1, floor(share * n))`` of the ``n`` clusters whose base is a letter (of any
    case) in the first half (prefix), second half (suffix) or all (global) of the clusters.
    ``region``: ``round(share * n)`` (Python's round) of the ``n`` clusters whose base is a
    lower-case letter with a one-character upper case, starting inside :func:`region`.
    Combining marks and every other character are left as they were.
    """
    _check_text(text)
    _check_position(position)
    _check_style(style)
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"share must be a number in [0, 1], got {share!r}")
    if float(share) == 0.0:
        return text
    spans = _cluster_spans(text)
    if style == "method":
        half = len(spans) // 2
        lo, hi = {"prefix": (0, half), "suffix": (half, len(spans)), "global": (0, len(spans))}[position]
        candidates = [j for j in range(lo, hi) if text[spans[j][0]].isalpha()]
        if not candidates:
            return text
        n = max(1, math.floor(len(candidates) * float(share) + 1e-9))
    else:
        start, end = region(text, position)
        candidates = []
        for j, (s, _) in enumerate(spans):
            c = text[s]
            if start <= s < end and c.isalpha() and c.islower() and _upper_one(c) != c:
                candidates.append(j)
        n = round(float(share) * len(candidates))
        if n == 0:
            return text
    chosen = set(int(candidates[int(i)]) for i in rng.choice(len(candidates), size=n, replace=False))
    pieces = []
    for j, (s, e) in enumerate(spans):
        pieces.append(_upper_one(text[s]) + text[s + 1 : e] if j in chosen else text[s:e])
    return "".join(pieces)


def apply_noise(
    text: str,
    kind: str,
    intensity: float,
    position: str,
    rng: np.random.Generator,
    style: str = "method",
    marks: str | None = None,
) -> str:
    """Apply noise of ``kind`` at ``position`` in ``style``.

    spacing/punctuation: ``intensity`` is the whole number of characters to insert;
    casing: ``intensity`` is the share of letters (see :func:`upper_case`) to upper-case.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    _check_style(style)
    if kind == "casing":
        return upper_case(text, intensity, position, rng, style)
    if (
        isinstance(intensity, bool)
        or not isinstance(intensity, numbers.Real)
        or not math.isfinite(float(intensity))
        or not float(intensity).is_integer()
    ):
        raise ValueError(f"intensity for {kind} must be a whole number, got {intensity!r}")
    k = int(intensity)
    if kind == "spacing":
        return insert_spaces(text, k, position, rng, style)
    return insert_punctuation(text, k, position, rng, marks, style)
