"""Assemble one dataset's variant table: baseline, social register, surface noise, structural.

A register or noise variant whose text equals its prompt is no variant: noise is drawn again
from the same seeded generator up to :data:`MAX_REDRAWS` times, then dropped; a register
variant (deterministic) is dropped at once. :func:`build_variants_counted` reports how many
were redrawn and dropped per family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.seeding import rng_for
from shiftwork.stability.variants.noise import apply_noise, default_marks
from shiftwork.stability.variants.register import apply_register

VARIANT_COLUMNS = [
    "dataset",
    "prompt_id",
    "variant_id",
    "family",
    "kind",
    "position",
    "strength",
    "original",
    "text",
]
NOISE_KINDS = ("spacing", "punctuation", "casing")
MAX_REDRAWS = 4  # a noise variant equal to its prompt is drawn again at most this many times
COUNTED_FAMILIES = ("register", "noise")
Variant = tuple[str, str, str, float, str]
"""A variant before it becomes a row: (family, kind, position, strength, text)."""


def variant_id(prompt_id: str, family: str, kind: str, position: str, strength: float) -> str:
    return f"{prompt_id}|{family}|{kind}|{position}|{strength:g}"


def _changed_noise(
    text: str, kind: str, level: float, position: str, rng: np.random.Generator, style: str, marks: str
) -> tuple[str | None, int]:
    """Noise that changes ``text``, drawn from ``rng`` at most ``MAX_REDRAWS + 1`` times, and how
    many redraws it took; ``None`` when every draw left the text as it was."""
    for redraws in range(MAX_REDRAWS + 1):
        new_text = apply_noise(text, kind, level, position, rng, style, marks)
        if new_text != text:
            return new_text, redraws
    return None, MAX_REDRAWS


def build_variants(
    prompts: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    rewrites: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """All variants of every prompt, baseline first. ``settings`` is ``stability.variants``;
    ``rewrites`` holds the structural rewriter's output (prompt_id, kind, strength, rewrite)."""
    return build_variants_counted(prompts, settings, seed, rewrites)[0]


def _rewrites_by_prompt(rewrites: pd.DataFrame) -> dict[str, list[tuple[str, float, str]]]:
    """The structural rewrites of each prompt: (kind, strength, rewrite), in table order."""
    lookup: dict[str, list[tuple[str, float, str]]] = {}
    for r in rewrites.itertuples(index=False):
        lookup.setdefault(r.prompt_id, []).append((r.kind, float(r.strength), r.rewrite))
    return lookup


def _register_variants(text: str, register: Mapping[str, Any]) -> tuple[list[Variant], int]:
    """The register variants of ``text`` (every position, strengths ascending) and how many were
    dropped for leaving it as it was."""
    variants, dropped = [], 0
    for position in register.get("positions", []):
        for s in sorted(register.get("strengths", [])):
            new_text = apply_register(text, int(s), position)
            if new_text == text:
                dropped += 1
                continue
            variants.append(("register", "tone", position, s, new_text))
    return variants, dropped


def _noise_variants(
    prompt: Any, noise: Mapping[str, Any], seed: int, style: str, marks: str
) -> tuple[list[Variant], int, int]:
    """The noise variants of one prompt row (kinds in :data:`NOISE_KINDS` order, then positions,
    then levels ascending), each from its own seeded generator, and how many were redrawn and
    dropped."""
    variants, redrawn, dropped = [], 0, 0
    for kind in NOISE_KINDS:
        for position in noise.get("positions", []):
            for level in sorted(noise.get(kind, []) or []):
                rng = rng_for(seed, prompt.dataset, prompt.prompt_id, kind, position, level)
                new_text, redraws = _changed_noise(prompt.prompt, kind, level, position, rng, style, marks)
                if new_text is None:
                    dropped += 1
                    continue
                redrawn += int(redraws > 0)
                variants.append(("noise", kind, position, level, new_text))
    return variants, redrawn, dropped


def _variant_row(prompt: Any, family: str, kind: str, position: str, strength: float, new_text: str) -> tuple:
    """One row of the variant table (:data:`VARIANT_COLUMNS`)."""
    pid = prompt.prompt_id
    return (
        prompt.dataset,
        pid,
        variant_id(pid, family, kind, position, strength),
        family,
        kind,
        position,
        float(strength),
        prompt.prompt,
        new_text,
    )


def build_variants_counted(
    prompts: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    rewrites: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[str, int]]]:
    """:func:`build_variants` and, per family in :data:`COUNTED_FAMILIES`, how many variants first
    came out equal to their prompt and were ``redrawn`` (then kept) or ``dropped``."""
    register, noise = settings["register"], settings["noise"]
    style = noise.get("style", "method")
    marks = noise.get("marks") or default_marks(style)
    counts = {family: {"redrawn": 0, "dropped": 0} for family in COUNTED_FAMILIES}
    rw_lookup = _rewrites_by_prompt(rewrites) if settings["structural"]["enabled"] and rewrites is not None else {}
    rows: list[tuple] = []
    for p in prompts.itertuples(index=False):
        variants: list[Variant] = [("baseline", "none", "none", 0.0, p.prompt)]
        if register["enabled"]:
            made, dropped = _register_variants(p.prompt, register)
            variants += made
            counts["register"]["dropped"] += dropped
        if noise["enabled"]:
            made, redrawn, dropped = _noise_variants(p, noise, seed, style, marks)
            variants += made
            counts["noise"]["redrawn"] += redrawn
            counts["noise"]["dropped"] += dropped
        rewritten = sorted(rw_lookup.get(p.prompt_id, []), key=lambda t: (t[0], t[1]))
        variants += [("structural", kind, "global", strength, new_text) for kind, strength, new_text in rewritten]
        rows += [_variant_row(p, *v) for v in variants]
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS), counts
