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
    rw_lookup: dict[str, list[tuple[str, float, str]]] = {}
    if settings["structural"]["enabled"] and rewrites is not None:
        for r in rewrites.itertuples(index=False):
            rw_lookup.setdefault(r.prompt_id, []).append((r.kind, float(r.strength), r.rewrite))
    rows: list[tuple] = []
    for p in prompts.itertuples(index=False):
        ds, pid, text = p.dataset, p.prompt_id, p.prompt

        def add(
            family: str, kind: str, position: str, strength: float, new_text: str, ds=ds, pid=pid, text=text
        ) -> None:
            rows.append(
                (
                    ds,
                    pid,
                    variant_id(pid, family, kind, position, strength),
                    family,
                    kind,
                    position,
                    float(strength),
                    text,
                    new_text,
                )
            )

        add("baseline", "none", "none", 0.0, text)
        if register["enabled"]:
            for position in register.get("positions", []):
                for s in sorted(register.get("strengths", [])):
                    new_text = apply_register(text, int(s), position)
                    if new_text == text:
                        counts["register"]["dropped"] += 1
                        continue
                    add("register", "tone", position, s, new_text)
        if noise["enabled"]:
            for kind in NOISE_KINDS:
                for position in noise.get("positions", []):
                    for level in sorted(noise.get(kind, []) or []):
                        rng = rng_for(seed, ds, pid, kind, position, level)
                        new_text, redraws = _changed_noise(text, kind, level, position, rng, style, marks)
                        if new_text is None:
                            counts["noise"]["dropped"] += 1
                            continue
                        counts["noise"]["redrawn"] += int(redraws > 0)
                        add("noise", kind, position, level, new_text)
        for kind, strength, new_text in sorted(rw_lookup.get(pid, []), key=lambda t: (t[0], t[1])):
            add("structural", kind, "global", strength, new_text)
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS), counts
