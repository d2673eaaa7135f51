"""Hand-written structural variants: the length levels and sentence forms of the packaged prompt
sets, written by hand and served in the rewriter's table shape, so that a run without a
rewriter model (``stability.variants.structural.rewriter: null``) still has structural variants.

A prompt set read from ``DIR/prompts/NAME.jsonl`` has its hand-written variants in
``DIR/structural/NAME.jsonl`` (:func:`handwritten_path`): one JSON object a line with ``id`` (the
prompt's id), ``kind`` (``length`` or ``form``), ``strength`` (the length multiple, or
:data:`~shiftwork.stability.variants.structural.FORM_STRENGTH`: -1 the interrogative form, +1 the
imperative) and ``text``. A run takes the rows that
:func:`~shiftwork.stability.variants.structural.rewrite_requests` would ask a rewriter for, so
``lengths``, ``form``, ``baseline`` and ``length_anchor`` mean the same with either source.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import pandas as pd

from shiftwork.data import DatasetError
from shiftwork.stability.config import needs_rewrites
from shiftwork.stability.prompts import load_prompts
from shiftwork.stability.variants.structural import FORM_STRENGTH, REWRITE_COLUMNS, rewrite_requests

HANDWRITTEN_COLUMNS = ["id", "kind", "strength", "text"]
KINDS: tuple[str, ...] = ("length", "form")
#: a hand-written length variant's word count may differ from its target
#: (:func:`~shiftwork.stability.variants.structural.target_words`) by this share of the target
LENGTH_TOLERANCE = 0.25
#: the key that says where structural variants come from
REWRITER_KEY = "stability.variants.structural.rewriter"


def handwritten_path(source: Mapping[str, Any]) -> str | None:
    """Where the hand-written variants of a dataset with this ``source`` are: for a file
    ``DIR/prompts/NAME.jsonl``, ``DIR/structural/NAME.jsonl`` (which may not exist); None for a
    dataset from the hub or a file in no ``prompts`` folder."""
    if source.get("kind") != "file":
        return None
    path = PurePath(str(source["path"]))
    if path.parent.name != "prompts":
        return None
    return str(path.parent.parent / "structural" / f"{path.stem}.jsonl")


def _row_problem(row: Any) -> str | None:
    """Why one parsed line of a hand-written file is no variant, or None."""
    if not isinstance(row, dict):
        return f"is not a JSON object (got {type(row).__name__})"
    missing = [f for f in HANDWRITTEN_COLUMNS if f not in row]
    if missing:
        return f"lacks {missing}"
    if row["kind"] not in KINDS:
        return f"kind {row['kind']!r} is not one of {list(KINDS)}"
    strength = row["strength"]
    if isinstance(strength, bool) or not isinstance(strength, (int, float)):
        return f"strength {strength!r} is not a number"
    if row["kind"] == "length" and strength <= 0:
        return f"a length variant's strength is its multiple of the prompt's length, got {strength!r}"
    if row["kind"] == "form" and float(strength) not in FORM_STRENGTH.values():
        return f"a form variant's strength must be one of {sorted(FORM_STRENGTH.values())}, got {strength!r}"
    if not isinstance(row["text"], str) or not row["text"].strip():
        return "text is empty"
    return None


def read_handwritten(path: str | Path) -> pd.DataFrame:
    """The variants of a hand-written file (:data:`HANDWRITTEN_COLUMNS`, strength as float);
    ValueError naming the file and line of a row that is no variant or repeats an (id, kind,
    strength)."""
    rows, seen = [], {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} line {number}: not JSON ({err.msg})") from None
        if problem := _row_problem(row):
            raise ValueError(f"{path} line {number}: {problem}")
        key = (str(row["id"]), row["kind"], float(row["strength"]))
        if key in seen:
            raise ValueError(f"{path} line {number}: repeats {key} of line {seen[key]}")
        seen[key] = number
        rows.append((*key, row["text"].strip()))
    return pd.DataFrame(rows, columns=HANDWRITTEN_COLUMNS)


def _level_key(kind: str, strength: float, lengths: list[float]) -> str:
    """The config key that asks for the structural variant (kind, strength)."""
    if kind == "form":
        return "stability.variants.structural.form"
    if strength in lengths:
        return "stability.variants.structural.lengths"
    return "stability.variants.structural.length_anchor"


def handwritten_errors(
    dataset: str, prompts: pd.DataFrame, variants: pd.DataFrame, settings: Mapping[str, Any], path: str
) -> list[str]:
    """What the hand-written ``variants`` (from ``path``) lack of what ``settings``
    (``stability.variants.structural``) asks for ``prompts`` of ``dataset``: a level no prompt has,
    named by the config key that asks for it; a prompt that lacks a variant others have."""
    requests = _requests(prompts, settings)
    have = set(zip(variants["id"], variants["kind"], variants["strength"].astype(float)))
    lengths = [float(m) for m in settings["lengths"]]
    levels = sorted(variants.loc[variants["kind"] == "length", "strength"].astype(float).unique())
    errors = []
    for (kind, strength), group in requests.groupby(["kind", "strength"], sort=True):
        lacking = [p for p in group["prompt_id"] if (p, kind, strength) not in have]
        if len(lacking) == len(group) and not ((variants["kind"] == kind) & (variants["strength"] == strength)).any():
            errors.append(
                f"config key '{_level_key(kind, strength, lengths)}': dataset '{dataset}' has no hand-written "
                f"{kind} variants at strength {strength:g} in {path} (its length levels: "
                f"{', '.join(f'{m:g}' for m in levels) or 'none'}); leave the level out, or name a rewriter "
                f"model in {REWRITER_KEY}"
            )
        elif lacking:
            errors.append(
                f"{path}: dataset '{dataset}' prompt_id(s) {lacking[:5]} have no hand-written {kind} variant at "
                f"strength {strength:g}; add them to the file, or name a rewriter model in {REWRITER_KEY}"
            )
    return errors


def _requests(prompts: pd.DataFrame, settings: Mapping[str, Any]) -> pd.DataFrame:
    """The (prompt, kind, strength) rows a rewriter would be asked for."""
    return rewrite_requests(
        prompts, settings["lengths"], settings["form"], settings["baseline"], settings["length_anchor"]
    )


def handwritten_rewrites(
    prompts: pd.DataFrame, variants: pd.DataFrame, settings: Mapping[str, Any], path: str
) -> pd.DataFrame:
    """The rewrites table (:data:`~shiftwork.stability.variants.structural.REWRITE_COLUMNS`) of
    ``prompts`` from hand-written ``variants``: the rows a rewriter would be asked for, each with
    its hand-written text; ``instruction`` names the file, ``cache_key`` is empty (no cache).
    ValueError with :func:`handwritten_errors` when the file lacks any of them."""
    dataset = str(prompts["dataset"].iloc[0]) if "dataset" in prompts.columns and len(prompts) else "?"
    errors = handwritten_errors(dataset, prompts, variants, settings, path)
    if errors:
        raise ValueError("hand-written structural variants missing:\n  - " + "\n  - ".join(errors))
    texts = {(i, k, float(s)): t for i, k, s, t in variants[HANDWRITTEN_COLUMNS].itertuples(index=False)}
    table = _requests(prompts, settings)
    keys = zip(table["prompt_id"], table["kind"], table["strength"].astype(float))
    table = table.assign(instruction=f"hand-written: {path}", rewrite=[texts[k] for k in keys], cache_key="")
    return table[REWRITE_COLUMNS]


def handwritten_config_errors(config: Mapping[str, Any], root: str | Path = ".") -> list[str]:
    """Where a config takes its structural variants from the hand-written files (no rewriter
    named), what they lack for each dataset of the study (:func:`dataset_handwritten_errors`).
    Checked before any job."""
    st = config.get("stability") or {}
    structural = (st.get("variants") or {}).get("structural") or {}
    if not needs_rewrites(structural) or structural.get("rewriter") is not None:
        return []
    datasets = config.get("datasets") or {}
    return [
        error
        for name in st.get("datasets") or []
        for error in dataset_handwritten_errors(name, datasets.get(name) or {}, structural, root)
    ]


def dataset_handwritten_errors(
    name: str, spec: Mapping[str, Any], structural: Mapping[str, Any], root: str | Path = "."
) -> list[str]:
    """What dataset ``name`` lacks to take its structural variants (``structural``:
    ``stability.variants.structural``) from a hand-written file: the file (a dataset from the
    hub, or a file with no hand-written twin), or what :func:`handwritten_errors` finds for its
    sampled prompts. A prompt set that cannot be read is left to the prompt checks."""
    source = spec.get("source") or {}
    if source.get("kind") == "file":
        try:
            prompts = load_prompts(name, spec, root)
        except DatasetError:
            return []
    path = handwritten_path(source)
    if path is None or not (Path(root) / path).is_file():
        where = f"no file {path}" if path else "only a prompt set read from DIR/prompts/NAME.jsonl has them"
        return [
            f"config key '{REWRITER_KEY}': dataset '{name}' has no hand-written structural variants ({where}); "
            "name a rewriter model, or set stability.variants.structural.enabled: false"
        ]
    try:
        variants = read_handwritten(Path(root) / path)
    except ValueError as err:
        return [f"config key '{REWRITER_KEY}': {err}"]
    return handwritten_errors(name, prompts, variants, structural, path)
