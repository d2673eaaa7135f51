"""Prompt sets of the stability study: the prompt table of a registered data set, each row checked, sampled."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.data import DatasetError, get_field, read_source

PROMPT_COLUMNS = ["dataset", "prompt_id", "row", "prompt", "answer"]

#: the turn and sequence markers of common chat templates (ChatML, Llama 2 and 3, Gemma,
#: Mistral, Phi): a prompt holding one would be read as a marker of the template's own, so a
#: sampled prompt may hold none unless its dataset sets ``allow_control_tokens``
CONTROL_TOKENS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|im_sep|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
)

#: the longest sampled prompt, in characters, where a dataset does not set ``max_prompt_chars``
#: (the gate's encoder reads only a prompt's first ~512 tokens)
MAX_PROMPT_CHARS = 4000


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def prompt_texts(
    name: str, raw: pd.DataFrame, prompt: str | Sequence[str], labels: Sequence[str] | None = None
) -> pd.Series:
    """The prompt of every row: one field, or several fields joined.

    Several fields (``prompt: [instruction, input]``) join their non-empty, stripped values with a
    blank line; with ``labels`` each part is written ``"{label}:\n{value}"``, so Alpaca with
    labels ``[Instruction, Input]`` reads ``"Instruction:\n...\n\nInput:\n..."`` and
    ``"Instruction:\n..."`` where the input is empty, as the method builds it. A missing first
    field is left missing (and rejected by :func:`extract`); a missing later one is skipped."""
    if isinstance(prompt, str):
        return get_field(raw, name, prompt)
    if labels is not None and len(labels) != len(prompt):
        raise DatasetError(f"dataset '{name}': prompt_labels has {len(labels)} entries for {len(prompt)} prompt fields")
    columns = [get_field(raw, name, f) for f in prompt]
    out = []
    for values in zip(*columns):
        if _missing(values[0]) or not isinstance(values[0], str):
            out.append(values[0])
            continue
        parts = []
        for j, v in enumerate(values):
            if _missing(v) or not str(v).strip():
                continue
            text = str(v).strip()
            parts.append(f"{labels[j]}:\n{text}" if labels is not None else text)
        out.append("\n\n".join(parts))
    return pd.Series(out, index=raw.index, dtype=object)


def extract(
    name: str,
    raw: pd.DataFrame,
    fields: Mapping[str, Any],
    where: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Map a source's columns to the prompt table and reject unusable rows.

    Row numbers in errors count data rows from 1; ``where`` (one entry per row) adds the file
    and line each row came from."""
    if raw.empty:
        raise DatasetError(f"dataset '{name}': no rows")

    def bad(i: int, field: str, what: str) -> DatasetError:
        at = f" ({where[i - 1]})" if where is not None else ""
        shown = fields[field] if isinstance(fields[field], str) else fields[field][0]
        return DatasetError(f"dataset '{name}', row {i}{at}: {field} field '{shown}' {what}")

    prompts = prompt_texts(name, raw, fields["prompt"], labels)
    for i, value in enumerate(prompts, start=1):
        if _missing(value):
            raise bad(i, "prompt", "is missing")
        if not isinstance(value, str):
            raise bad(i, "prompt", f"must be a string, got {type(value).__name__}")
        if not value.strip():
            raise bad(i, "prompt", "is empty")
    if "id" in fields:
        raw_ids = get_field(raw, name, fields["id"])
        for i, value in enumerate(raw_ids, start=1):
            if _missing(value) or (isinstance(value, str) and not value.strip()):
                raise bad(i, "id", "is missing")
            if not isinstance(value, (str, int, np.integer)) or isinstance(value, bool):
                raise bad(i, "id", f"must be a string or an integer, got {type(value).__name__}")
        ids = raw_ids.astype(str)
    else:
        ids = pd.Series([f"{name}-{i:05d}" for i in range(1, len(raw) + 1)])
    dup = ids[ids.duplicated()]
    if len(dup):
        raise DatasetError(f"dataset '{name}': duplicate ids {sorted(set(dup))[:5]} in field '{fields.get('id')}'")
    answers = get_field(raw, name, fields["answer"]) if "answer" in fields else pd.Series([None] * len(raw))
    return pd.DataFrame(
        {
            "dataset": name,
            "prompt_id": ids.to_numpy(),
            "row": np.arange(1, len(raw) + 1),
            "prompt": prompts.str.strip().to_numpy(),
            "answer": [None if a is None else json.dumps(a) if not isinstance(a, str) else a for a in answers],
        }
    )


SAMPLERS: tuple[str, ...] = ("choice", "shuffle")


def sample(df: pd.DataFrame, n: int, seed: int, sampler: str = "choice") -> pd.DataFrame:
    """``n`` rows drawn without replacement by ``seed``; all rows if fewer.

    ``choice``: ``numpy`` ``default_rng(seed).choice``, rows kept in source order.
    ``shuffle``: the first ``n`` rows of ``default_rng(seed).permutation``, in that order, which is
    what ``datasets.Dataset.shuffle(seed=seed).select(range(n))`` returns (the method's sampler)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    rng = np.random.default_rng(seed)
    if sampler == "shuffle":
        return df.iloc[rng.permutation(len(df))[: min(n, len(df))]].reset_index(drop=True)
    if n >= len(df):
        return df.reset_index(drop=True)
    keep = np.sort(rng.choice(len(df), size=n, replace=False))
    return df.iloc[keep].reset_index(drop=True)


def subsample(df: pd.DataFrame, n: int, seed: int, within: int | None = None) -> pd.DataFrame:
    """``n`` of the sampled rows, as the method narrows TruthfulQA to 16 prompts
    (``utils/sgs_core.py``, ``subsample_truthful_qa``): ``sorted(default_rng(seed).choice(pool, n,
    replace=False))``, positions in sample order. The pool is the positions every model of the
    method ran, the first ``within`` rows of the sample (its closed models ran the first 16 of
    the shuffle its open models ran 128 of); every row when ``within`` is None, and then all rows
    where ``n`` is not smaller than the sample. Raises ValueError when the first ``within`` rows
    are fewer than ``n``."""
    if within is None and n >= len(df):
        return df.reset_index(drop=True)
    pool = np.arange(len(df) if within is None else min(int(within), len(df)))
    if n > len(pool):
        raise ValueError(f"a subsample of {n} rows cannot be drawn from the first {len(pool)} rows of the sample")
    rng = np.random.default_rng(seed)
    keep = sorted(rng.choice(pool, size=n, replace=False).tolist())
    return df.iloc[keep].reset_index(drop=True)


def read_prompts(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    """Every row of a prompt set as the prompt table, each row checked."""
    raw, where = read_source(name, spec, root)
    return extract(name, raw, spec["fields"], where, spec.get("prompt_labels"))


def load_prompts(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    """Read, check and sample a prompt set (then subsample it, with ``subsample``), and check the
    prompts drawn (:func:`check_sampled_prompts`). A sample size ``n`` larger than the set is an
    error (a silently smaller sample would change every statistic downstream)."""
    table = read_prompts(name, spec, root)
    n = int(spec["n"])
    if n > len(table):
        origin = spec["source"].get("path") or spec["source"].get("id")
        raise DatasetError(
            f"dataset '{name}': n = {n} but {origin} has {len(table)} prompts; "
            f"set datasets.{name}.n to at most {len(table)}"
        )
    table = sample(table, n, int(spec["seed"]), spec.get("sampler", "choice"))
    sub = spec.get("subsample")
    if sub:
        if int(sub["n"]) > n:
            raise DatasetError(f"dataset '{name}': subsample.n = {sub['n']} is larger than n = {n}")
        within = sub.get("within")
        if within is not None and int(sub["n"]) > min(int(within), n):
            raise DatasetError(
                f"dataset '{name}': subsample.n = {sub['n']} is larger than the {min(int(within), n)} rows "
                f"it is drawn from (subsample.within = {within}, n = {n})"
            )
        table = subsample(table, int(sub["n"]), int(sub["seed"]), within)
    check_sampled_prompts(name, table, spec)
    return table


def invisible_problem(prompt: str) -> str | None:
    """Why ``prompt`` shows nothing (only whitespace and format characters, Unicode category Cf:
    zero-width spaces and joiners, word joiners, byte-order marks), or None."""
    if any(not ch.isspace() and unicodedata.category(ch) != "Cf" for ch in prompt):
        return None
    shown = ", ".join(
        f"U+{ord(ch):04X} {unicodedata.name(ch, 'FORMAT CHARACTER')}"
        for ch in dict.fromkeys(prompt)
        if not ch.isspace()
    )
    return f"the prompt holds only invisible characters ({shown}); give it visible text or leave the row out"


def control_token_problem(name: str, prompt: str) -> str | None:
    """Which chat control tokens (:data:`CONTROL_TOKENS`) ``prompt`` holds, in order, or None."""
    found = sorted((prompt.find(token), token) for token in CONTROL_TOKENS if token in prompt)
    if not found:
        return None
    tokens = ", ".join(f"'{token}'" for _, token in found)
    return (
        f"the prompt holds the chat control token{'s' if len(found) > 1 else ''} {tokens}, which a chat "
        f"template would take for its own markers; remove {'them' if len(found) > 1 else 'it'}, or set "
        f"datasets.{name}.allow_control_tokens: true if the prompts are meant to hold such tokens"
    )


def length_problem(name: str, prompt: str, limit: int) -> str | None:
    """Why ``prompt`` is too long for the gate (more than ``limit`` characters), or None."""
    if len(prompt) <= limit:
        return None
    return (
        f"the prompt is {len(prompt)} characters long, more than max_prompt_chars ({limit}); the gate's "
        "encoder reads only its first ~512 tokens, so the meaning check would not see the rest; shorten "
        f"it, or raise datasets.{name}.max_prompt_chars"
    )


def check_sampled_prompts(name: str, table: pd.DataFrame, spec: Mapping[str, Any]) -> None:
    """Refuse, naming the row, a sampled prompt that shows nothing, holds a chat control token
    (unless the dataset sets ``allow_control_tokens``) or is longer than ``max_prompt_chars``
    (:data:`MAX_PROMPT_CHARS` when unset). Only the rows a study uses are checked, so an unused
    row of a large hub set does not stop it."""
    allow = bool(spec.get("allow_control_tokens"))
    limit = int(spec.get("max_prompt_chars") or MAX_PROMPT_CHARS)
    for row, prompt_id, prompt in zip(table["row"], table["prompt_id"], table["prompt"], strict=True):
        problem = (
            invisible_problem(prompt)
            or (None if allow else control_token_problem(name, prompt))
            or length_problem(name, prompt, limit)
        )
        if problem:
            raise DatasetError(f"dataset '{name}', row {row} (prompt_id '{prompt_id}'): {problem}")
