"""Assemble one dataset's variant table: baseline, social register, surface noise, structural."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from shiftwork.seeding import rng_for
from shiftwork.stability.variants.noise import apply_noise
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


def variant_id(prompt_id: str, family: str, kind: str, position: str, strength: float) -> str:
    return f"{prompt_id}|{family}|{kind}|{position}|{strength:g}"


def build_variants(
    prompts: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    rewrites: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """All variants of every prompt, baseline first. ``settings`` is ``stability.variants``;
    ``rewrites`` holds the structural rewriter's output (prompt_id, kind, strength, rewrite)."""
    register, noise = settings["register"], settings["noise"]
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
                    add("register", "tone", position, s, apply_register(text, int(s), position))
        if noise["enabled"]:
            for kind in NOISE_KINDS:
                for position in noise.get("positions", []):
                    for level in sorted(noise.get(kind, []) or []):
                        rng = rng_for(seed, ds, pid, kind, position, level)
                        add("noise", kind, position, level, apply_noise(text, kind, level, position, rng))
        for kind, strength, new_text in sorted(rw_lookup.get(pid, []), key=lambda t: (t[0], t[1])):
            add("structural", kind, "global", strength, new_text)
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS)
