"""The inference steps of the stability study: generate and probe, one model x dataset per job."""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .inference.formatting import model_input
from .inference.generation import generate_batches
from .inference.probe import layer_cosines, probe_batches
from .device import set_threads
from .logs import LOGGER
from .models.loading import load_prepared
from .provenance import make_provenance
from .tables import TableWriter, read_table

KEYS = ["model", "dataset", "prompt_id", "variant_id"]
VARIANT_META = ["family", "kind", "position", "strength"]


def _throughput(step: str, n_rows: int, n_unique: int, n_tokens: int, seconds: float) -> dict[str, Any]:
    stats = {
        "rows": n_rows,
        "unique_inputs": n_unique,
        "tokens": n_tokens,
        "seconds": round(seconds, 3),
        "variant_evals_per_s": round(n_rows / seconds, 3) if seconds else None,
        "tokens_per_s": round(n_tokens / seconds, 3) if seconds else None,
    }
    LOGGER.info("%s throughput: %s", step, stats)
    return stats


def shard_rows(frame: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    """The rows of the ``shard``-th (0-based) of ``n_shards`` groups of prompts.

    Prompts are taken in order of first appearance and split into contiguous groups whose
    sizes differ by at most one; every row of a prompt (its baseline and all its variants)
    lands in the same shard, as probing a variant needs its prompt's baseline."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in 0..{n_shards - 1}, got {shard}")
    if n_shards == 1:
        return frame
    prompts = pd.unique(frame["prompt_id"])
    mine = np.array_split(prompts, n_shards)[shard]
    return frame[frame["prompt_id"].isin(mine)]


def merge_shards(shard_paths: list[str], out: str, keys: list[str] = KEYS) -> int:
    """Concatenate the shard tables of one step into ``out``; its provenance is the shards' shared
    one plus, per shard, where it ran. Fails if the shards disagree on their settings or model,
    or overlap. Returns the number of rows."""
    from .tables import read_provenance, write_table

    if not shard_paths:
        raise ValueError(f"{out}: no shards to merge")
    frames, provs = [], []
    for path in shard_paths:
        frames.append(read_table(path))
        provs.append(read_provenance(path))
    same = ("step", "config_digest", "model", "weight_digest")
    for path, prov in zip(shard_paths[1:], provs[1:]):
        differ = [k for k in same if prov.get(k) != provs[0].get(k)]
        if differ:
            raise ValueError(f"{path} differs from {shard_paths[0]} in {differ}; shards of one table must share them")
    filled = [f for f in frames if len(f)]  # an empty shard carries no column types
    merged = pd.concat(filled, ignore_index=True) if filled else frames[0]
    if len(merged):
        dup = merged.duplicated(keys)
        if dup.any():
            raise ValueError(f"{out}: rows {merged.loc[dup, keys].head(5).to_dict('records')} appear in more than one shard")
    prov = {k: v for k, v in provs[0].items() if k not in ("gpu", "device", "shard", "n_shards")}
    prov["shards"] = [
        {"path": str(path), "rows": len(frame), **{k: p.get(k) for k in ("shard", "gpu", "device") if k in p}}
        for path, frame, p in zip(shard_paths, frames, provs)
    ]
    write_table(merged, out, prov)
    LOGGER.info("merged %d shards into %s: %d rows", len(shard_paths), out, len(merged))
    return len(merged)


def generate_responses(
    filtered_path: str,
    model_dir: str,
    model_name: str,
    out: str,
    max_new_tokens: int,
    batch_size: int,
    dtype: str = "auto",
    threads: int | None = None,
    shard: int = 0,
    n_shards: int = 1,
) -> dict[str, Any]:
    """Greedy responses to the baseline and every kept variant, streamed to ``out`` per batch.
    Identical model inputs are generated once. With ``n_shards`` > 1, only the prompts of
    shard ``shard`` (see :func:`shard_rows`)."""
    variants = read_table(filtered_path, ["dataset", "prompt_id", "variant_id", "text"] + VARIANT_META)
    variants = shard_rows(variants, shard, n_shards).reset_index(drop=True)
    set_threads(threads)
    lm = load_prepared(model_dir, dtype)
    where = f", shard {shard} of {n_shards}" if n_shards > 1 else ""
    LOGGER.info("generate: %s on %s (%s), %d rows%s", model_name, lm.device, lm.dtype, len(variants), where)
    inputs = [model_input(lm.tokenizer, t, lm.chat) for t in variants["text"]]
    variants = variants.assign(model=model_name, model_input=inputs)
    unique = list(dict.fromkeys(inputs))
    rows_of: dict[str, list[int]] = {}
    for i, x in enumerate(inputs):
        rows_of.setdefault(x, []).append(i)
    settings = {"max_new_tokens": max_new_tokens, "batch_size": batch_size, "dtype": str(lm.dtype)}
    extra = {"device": str(lm.device)} | ({"shard": shard, "n_shards": n_shards} if n_shards > 1 else {})
    prov = make_provenance("generate", settings, model=model_name, weight_digest=lm.info["weight_digest"], extra=extra)
    columns = KEYS + VARIANT_META + ["text", "model_input", "response", "n_tokens", "stopped"]
    start = time.perf_counter()
    n_tokens = 0
    with TableWriter(out, prov) as writer:
        for batch in generate_batches(lm, unique, max_new_tokens, batch_size):
            parts = []
            for g in batch:
                idx = rows_of[unique[g.index]]
                part = variants.iloc[idx].assign(response=g.response, n_tokens=g.n_tokens, stopped=g.stopped)
                parts.append(part)
                n_tokens += g.n_tokens
            writer.write(pd.concat(parts)[columns])
        if not unique:  # e.g. a shard whose prompts the gate all dropped: keep the columns
            writer.write(pd.DataFrame(columns=columns))
    return _throughput("generate", len(variants), len(unique), n_tokens, time.perf_counter() - start)


def probe_responses(
    generations_path: str,
    model_dir: str,
    model_name: str,
    out: str,
    batch_size: int,
    dtype: str = "auto",
    store_hidden: bool = False,
    threads: int | None = None,
) -> dict[str, Any]:
    """Probe every variant with its prompt's baseline response r_0 (see :mod:`shiftwork.inference.probe`).

    Baseline inputs run first and their last-token states are kept; each variant's per-layer
    cosine to its baseline is computed as soon as its batch is done, so memory does not grow
    with the number of variants. Identical (input, r_0) pairs are computed once; a variant
    whose input equals its baseline's gets cosine exactly 1."""
    gens = read_table(generations_path, KEYS + ["family", "model_input", "response"])
    base = gens[gens["family"] == "baseline"].set_index("prompt_id")
    if base.index.duplicated().any():
        raise ValueError(f"{generations_path}: more than one baseline row for prompts {sorted(base.index[base.index.duplicated()])}")
    missing = sorted(set(gens["prompt_id"]) - set(base.index))
    if missing:
        raise ValueError(f"{generations_path}: no baseline row for prompts {missing}")
    gens = gens.assign(r0=gens["prompt_id"].map(base["response"]), base_input=gens["prompt_id"].map(base["model_input"]))
    set_threads(threads)
    lm = load_prepared(model_dir, dtype)
    keys = list(zip(gens["model_input"], gens["r0"]))
    base_keys = list(dict.fromkeys(zip(base["model_input"], base["response"])))
    other_keys = [k for k in dict.fromkeys(keys) if k not in set(base_keys)]
    rows_of: dict[tuple[str, str], list[int]] = {}
    for i, k in enumerate(keys):
        rows_of.setdefault(k, []).append(i)
    prov = make_provenance("probe", {"batch_size": batch_size, "dtype": str(lm.dtype), "store_hidden": store_hidden},
                           model=model_name, weight_digest=lm.info["weight_digest"], extra={"device": str(lm.device)})
    base_hidden: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    n_tokens = 0

    def rows_for(keys_batch, results) -> pd.DataFrame:
        recs = []
        for r in results:
            key = keys_batch[r.index]
            for i in rows_of[key]:
                row = gens.iloc[i]
                same_as_base = row["model_input"] == row["base_input"]
                if same_as_base:
                    cos = np.ones(r.last_hidden.shape[0])
                else:
                    cos = layer_cosines(r.last_hidden, base_hidden[row["prompt_id"]])
                rec = {k: row[k] for k in KEYS}
                rec.update(logprob=r.logprob, entropy=r.entropy, n_response_tokens=r.n_response_tokens,
                           act_cos=float(cos.mean()), act_cos_layers=cos.tolist())
                if store_hidden:
                    rec["hidden_last"] = r.last_hidden.tolist()
                recs.append(rec)
        return pd.DataFrame(recs)

    with TableWriter(out, prov) as writer:
        for phase_keys in (base_keys, other_keys):
            if not phase_keys:
                continue
            inputs = [k[0] for k in phase_keys]
            responses = [k[1] for k in phase_keys]
            for results in probe_batches(lm, inputs, responses, batch_size):
                if phase_keys is base_keys:
                    for r in results:
                        for i in rows_of[phase_keys[r.index]]:
                            if gens.iloc[i]["family"] == "baseline":
                                base_hidden[gens.iloc[i]["prompt_id"]] = r.last_hidden
                n_tokens += sum(r.n_response_tokens for r in results)
                writer.write(rows_for(phase_keys, results))
    return _throughput("probe", len(gens), len(base_keys) + len(other_keys), n_tokens, time.perf_counter() - start)


def score_deltas(generations_path: str, probes_path: str, encoder_name: str, encoder_spec: Mapping[str, Any],
                 out: str, judge_dir: str | None = None, judge_batch_size: int = 16) -> None:
    """The six signed axis deltas for every variant (see :mod:`shiftwork.axes`); with
    ``judge_dir``, a prepared chat model judges register mirroring."""
    from .axes import check_ranges, score_axes
    from .encoders import Encoder
    from .tables import write_table

    gens = read_table(generations_path)
    probes = read_table(probes_path)
    encoder: dict[str, Encoder] = {}

    def bert_f1(cands, refs):
        enc = encoder.setdefault("e", Encoder(encoder_name, encoder_spec))
        return enc.f1(cands, refs)

    judge_fn = None
    if judge_dir:
        from functools import partial

        from .judge import judge_tones

        judge_fn = partial(judge_tones, load_prepared(judge_dir), batch_size=judge_batch_size)

    deltas = score_axes(gens, probes, bert_f1, judge_fn)
    problems = check_ranges(deltas)
    if problems:
        raise ValueError(f"{generations_path}: axis values out of range:\n  " + "\n  ".join(problems[:20]))
    model = str(gens["model"].iloc[0]) if len(gens) else ""
    write_table(deltas, out, make_provenance("score_axes", {"encoder": encoder_name, "judge": judge_dir}, model=model))
    LOGGER.info("scored %d variants of %d prompts", len(deltas), deltas["prompt_id"].nunique())


def aggregate(delta_paths: list[str], R: Mapping[str, float], eps: list[float], outs: Mapping[str, str]) -> None:
    """Normalise, per-prompt RMS instability, SGS per dataset and in total, t-tests, breakdown."""
    from . import stats
    from .tables import write_table

    deltas = pd.concat([read_table(p) for p in delta_paths], ignore_index=True)
    normalised = stats.normalise(deltas, R)
    per_prompt = stats.prompt_instability(normalised)
    prov = make_provenance("aggregate", {"R": dict(R), "eps": list(eps)})
    write_table(per_prompt, outs["per_prompt"], prov)
    write_table(stats.dataset_sgs(per_prompt), outs["dataset_sgs"], prov)
    write_table(stats.total_sgs(per_prompt), outs["total_sgs"], prov)
    write_table(stats.ttests(per_prompt, eps, by=["model"]), outs["ttests_model"], prov)
    write_table(stats.ttests(per_prompt, eps, by=["model", "dataset"]), outs["ttests_dataset"], prov)
    write_table(stats.breakdown(normalised), outs["breakdown"], prov)


def report(inputs: Mapping[str, str], eps: float, table_dir: str, figures: Mapping[str, str]) -> None:
    from .reports.stability import family_plot, heatmap, write_tables

    total = read_table(inputs["total_sgs"])
    write_tables(total, read_table(inputs["dataset_sgs"]), read_table(inputs["ttests_model"]),
                 read_table(inputs["ttests_dataset"]), table_dir, eps=eps)
    heatmap(total, figures["heatmap_png"], figures["heatmap_svg"])
    family_plot(read_table(inputs["breakdown"]), figures["family_png"], figures["family_svg"])
