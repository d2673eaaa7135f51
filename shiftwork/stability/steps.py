"""The stability study's workflow steps, one function per rule (rule X -> scripts/X.py -> X here):
paths and settings in, tables out."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.device import set_threads
from shiftwork.encoders import Encoder, encoder_model_type, packaged_baseline
from shiftwork.inference.formatting import model_input
from shiftwork.inference.probe import layer_cosines
from shiftwork.logs import LOGGER
from shiftwork.models.loading import load_prepared
from shiftwork.models.prepare import read_info
from shiftwork.provenance import make_provenance
from shiftwork.stability import gate as gate_mod
from shiftwork.stability.prompts import load_prompts
from shiftwork.stability.variants.build import build_variants
from shiftwork.stability.variants.structural import merge_cache, rewrite_requests, run_rewrites
from shiftwork.tables import TableWriter, read_cache, read_table, write_table, write_text

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
    from shiftwork.tables import read_provenance, write_table

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
            raise ValueError(
                f"{out}: rows {merged.loc[dup, keys].head(5).to_dict('records')} appear in more than one shard"
            )
    prov = {k: v for k, v in provs[0].items() if k not in ("gpu", "device", "shard", "n_shards")}
    prov["shards"] = [
        {"path": str(path), "rows": len(frame), **{k: p.get(k) for k in ("shard", "gpu", "device") if k in p}}
        for path, frame, p in zip(shard_paths, frames, provs)
    ]
    write_table(merged, out, prov)
    LOGGER.info("merged %d shards into %s: %d rows", len(shard_paths), out, len(merged))
    return len(merged)


def merge_generations(shard_paths: list[str], out: str) -> int:
    """Rule merge_generations: the shards of one model x dataset's generations, as one table."""
    return merge_shards(shard_paths, out)


def merge_probes(shard_paths: list[str], out: str) -> int:
    """Rule merge_probes: the shards of one model x dataset's probes, as one table."""
    return merge_shards(shard_paths, out)


def baseline_rows(variants: pd.DataFrame, source: str) -> pd.Series:
    """The index of each prompt's baseline row, by prompt id; fails naming the prompts that have
    no baseline row or more than one."""
    base = variants[variants["family"] == "baseline"]
    dup = base["prompt_id"].duplicated()
    if dup.any():
        raise ValueError(f"{source}: more than one baseline row for prompts {sorted(set(base.loc[dup, 'prompt_id']))}")
    missing = sorted(set(variants["prompt_id"]) - set(base["prompt_id"]))
    if missing:
        raise ValueError(f"{source}: no baseline row for prompts {missing}")
    return pd.Series(base.index, index=base["prompt_id"])


def generate_responses(
    filtered_path: str,
    model_dir: str,
    model_name: str,
    out_generations: str,
    out_probes: str,
    max_new_tokens: int,
    batch_size: int,
    dtype: str,
    store_hidden: bool = False,
    threads: int | None = None,
    shard: int = 0,
    n_shards: int = 1,
) -> dict[str, Any]:
    """Greedy responses to the baseline and every kept variant (``out_generations``) and the probe
    of each with its prompt's baseline response r_0 (``out_probes``), from the same forward
    passes (see :mod:`shiftwork.inference.respond`), both streamed to disk per batch.

    Baselines run first: their responses are the r_0 the variants are probed with, and their
    last-token states the reference of each variant's per-layer cosine. Rows with the same
    model input and the same baseline are computed once; a variant whose input equals its
    baseline's shares the baseline's results, cosine exactly 1. With ``n_shards`` > 1, only the
    prompts of shard ``shard`` (see :func:`shard_rows`)."""
    from shiftwork.allocator import fix_heap_thresholds
    from shiftwork.inference.respond import answer_batches

    variants = read_table(filtered_path, ["dataset", "prompt_id", "variant_id", "text"] + VARIANT_META)
    variants = shard_rows(variants, shard, n_shards).reset_index(drop=True)
    base_row = variants["prompt_id"].map(baseline_rows(variants, filtered_path))
    set_threads(threads)
    fix_heap_thresholds()
    lm = load_prepared(model_dir, dtype)
    where = f", shard {shard} of {n_shards}" if n_shards > 1 else ""
    LOGGER.info("generate and probe: %s on %s (%s), %d rows%s", model_name, lm.device, lm.dtype, len(variants), where)
    inputs = pd.Series([model_input(lm.tokenizer, t, lm.chat) for t in variants["text"]], dtype=object)
    variants = variants.assign(model=model_name, model_input=inputs, base_input=inputs[base_row].to_numpy())
    rows_of: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(variants["model_input"], variants["base_input"])):
        rows_of.setdefault(key, []).append(i)
    base_keys = [k for k in rows_of if k[0] == k[1]]
    other_keys = [k for k in rows_of if k[0] != k[1]]

    extra = {"device": str(lm.device), "attention": lm.model.config._attn_implementation} | (
        {"shard": shard, "n_shards": n_shards} if n_shards > 1 else {}
    )
    common = {"model": model_name, "weight_digest": lm.info["weight_digest"], "extra": extra}
    gen_prov = make_provenance(
        "generate", {"max_new_tokens": max_new_tokens, "batch_size": batch_size, "dtype": str(lm.dtype)}, **common
    )
    probe_prov = make_provenance(
        "probe", {"batch_size": batch_size, "dtype": str(lm.dtype), "store_hidden": store_hidden}, **common
    )
    gen_columns = KEYS + VARIANT_META + ["text", "model_input", "response", "n_tokens", "stopped"]
    probe_columns = KEYS + ["logprob", "entropy", "n_response_tokens", "act_cos", "act_cos_layers"]
    probe_columns += ["hidden_last"] if store_hidden else []
    r0: dict[str, str] = {}
    base_hidden: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    n_tokens = 0

    def tables(keys, answers) -> tuple[pd.DataFrame, pd.DataFrame]:
        gen_parts, probe_recs = [], []
        for a in answers:
            key = keys[a.generation.index]
            idx = rows_of[key]
            gen_parts.append(
                variants.iloc[idx].assign(
                    response=a.generation.response, n_tokens=a.generation.n_tokens, stopped=a.generation.stopped
                )
            )
            hidden = a.probe.last_hidden
            cos = np.ones(hidden.shape[0]) if key[0] == key[1] else layer_cosines(hidden, base_hidden[key[1]])
            for i in idx:
                rec = {k: variants.at[i, k] for k in KEYS}
                rec.update(
                    logprob=a.probe.logprob,
                    entropy=a.probe.entropy,
                    n_response_tokens=a.probe.n_response_tokens,
                    act_cos=float(cos.mean()),
                    act_cos_layers=cos.tolist(),
                )
                if store_hidden:
                    rec["hidden_last"] = hidden.tolist()
                probe_recs.append(rec)
        return pd.concat(gen_parts)[gen_columns], pd.DataFrame(probe_recs, columns=probe_columns)

    with TableWriter(out_generations, gen_prov) as gen_writer, TableWriter(out_probes, probe_prov) as probe_writer:
        for keys in (base_keys, other_keys):
            if not keys:
                continue
            references = None if keys is base_keys else [r0[k[1]] for k in keys]
            for answers in answer_batches(lm, [k[0] for k in keys], max_new_tokens, batch_size, references):
                if keys is base_keys:
                    for a in answers:
                        r0[keys[a.generation.index][0]] = a.generation.response
                        base_hidden[keys[a.generation.index][0]] = a.probe.last_hidden
                n_tokens += sum(a.generation.n_tokens for a in answers)
                gens, probes = tables(keys, answers)
                gen_writer.write(gens)
                probe_writer.write(probes)
        if not rows_of:  # e.g. a shard whose prompts the gate all dropped: keep the columns
            gen_writer.write(pd.DataFrame(columns=gen_columns))
            probe_writer.write(pd.DataFrame(columns=probe_columns))
    return _throughput("generate and probe", len(variants), len(rows_of), n_tokens, time.perf_counter() - start)


def score_axes(
    generations_path: str,
    probes_path: str,
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    out: str,
    judge_dir: str | None = None,
    judge_batch_size: int = 16,
) -> None:
    """The six signed axis deltas for every variant (see :mod:`shiftwork.stability.axes`); with
    ``judge_dir``, a prepared chat model judges register mirroring."""
    from shiftwork.encoders import Encoder
    from shiftwork.stability.axes import check_ranges
    from shiftwork.stability.axes import score_axes as axis_deltas
    from shiftwork.tables import write_table

    gens = read_table(generations_path)
    probes = read_table(probes_path)
    encoder: dict[str, Encoder] = {}

    def bert_f1(cands, refs):
        enc = encoder.setdefault("e", Encoder(encoder_name, encoder_spec))
        return enc.f1(cands, refs)

    judge_fn = None
    if judge_dir:
        from functools import partial

        from shiftwork.stability.judge import judge_tones

        judge_fn = partial(judge_tones, load_prepared(judge_dir), batch_size=judge_batch_size)

    deltas = axis_deltas(gens, probes, bert_f1, judge_fn)
    problems = check_ranges(deltas)
    if problems:
        raise ValueError(f"{generations_path}: axis values out of range:\n  " + "\n  ".join(problems[:20]))
    model = str(gens["model"].iloc[0]) if len(gens) else ""
    write_table(deltas, out, make_provenance("score_axes", {"encoder": encoder_name, "judge": judge_dir}, model=model))
    LOGGER.info("scored %d variants of %d prompts", len(deltas), deltas["prompt_id"].nunique())


def aggregate_stability(
    delta_paths: list[str], R: Mapping[str, float], eps: list[float], outs: Mapping[str, str]
) -> None:
    """Normalise, per-prompt RMS instability, SGS per dataset and in total, t-tests, breakdown."""
    from shiftwork.stability import stats
    from shiftwork.tables import write_table

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


def report_stability(inputs: Mapping[str, str], eps: float, table_dir: str, figures: Mapping[str, str]) -> None:
    from shiftwork.stability.report import family_plot, heatmap, write_tables

    total = read_table(inputs["total_sgs"])
    write_tables(
        total,
        read_table(inputs["dataset_sgs"]),
        read_table(inputs["ttests_model"]),
        read_table(inputs["ttests_dataset"]),
        table_dir,
        eps=eps,
    )
    heatmap(total, figures["heatmap_png"], figures["heatmap_svg"])
    family_plot(read_table(inputs["breakdown"]), figures["family_png"], figures["family_svg"])


def sample_prompts(name: str, spec: Mapping[str, Any], out: str, root: str = ".") -> None:
    table = load_prompts(name, spec, root)
    write_table(table, out, make_provenance("sample_prompts", {"dataset": name, **spec}, seed=spec["seed"]))
    LOGGER.info("dataset %s: %d prompts", name, len(table))


def rewrite_prompts(
    prompts_path: str,
    model_dir: str,
    settings: Mapping[str, Any],
    out: str,
    cache_path: str,
    batch_size: int,
    dtype: str,
) -> None:
    """Structural rewrites of every prompt by the rewriter model; cached by content."""
    import json

    from shiftwork.inference.generation import generate_all
    from shiftwork.stability.variants.structural import messages_as_plain

    prompts = read_table(prompts_path, ["prompt_id", "prompt"])
    info = read_info(model_dir)
    requests = rewrite_requests(prompts, settings["lengths"], settings["form"])
    cache = read_cache(cache_path, ["cache_key", "instruction", "rewrite"])
    max_new = int(settings["max_new_tokens"])

    def rewrite_fn(instructions: Sequence[str]) -> list[str]:
        # run_rewrites calls this once, with every request the cache lacks, and not at all
        # when the cache holds them all: the model loads only when it has work to do
        lm = load_prepared(model_dir, dtype)
        chats = [json.loads(ins) for ins in instructions]
        if lm.chat:
            inputs = [lm.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
        else:
            inputs = [messages_as_plain(c) for c in chats]
        return [g.response for g in generate_all(lm, inputs, max_new, batch_size)]

    start = time.perf_counter()
    table, n_new = run_rewrites(requests, rewrite_fn, info["weight_digest"], max_new, cache)
    LOGGER.info(
        "rewrites: %d requests, %d generated, %d from cache, %.1f s",
        len(table),
        n_new,
        len(table) - n_new,
        time.perf_counter() - start,
    )
    prov = make_provenance("rewrite_prompts", dict(settings), model=info["name"], weight_digest=info["weight_digest"])
    if n_new:
        write_table(merge_cache(cache, table), cache_path, prov)
    write_table(table, out, prov)


def make_variants(
    prompts_path: str, settings: Mapping[str, Any], seed: int, out: str, rewrites_path: str | None = None
) -> None:
    prompts = read_table(prompts_path, ["dataset", "prompt_id", "prompt"])
    rewrites = read_table(rewrites_path) if rewrites_path else None
    table = build_variants(prompts, settings, seed, rewrites)
    write_table(table, out, make_provenance("make_variants", dict(settings), seed=seed))
    LOGGER.info("%d variants of %d prompts", len(table), len(prompts))


def estimate_gate_baseline(
    prompt_paths: Sequence[str],
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    baseline: Any,
    seed: int,
    out: str,
    max_pairs: int = 2000,
) -> None:
    """The rescale baseline b: a number from the config, bert-score's file for the encoder,
    or the mean F1 of mismatched pairs of this run's prompts."""
    model_type = encoder_model_type(encoder_name, encoder_spec)
    num_layers = int(encoder_spec["num_layers"])
    if baseline != "auto":
        b, method, n_pairs = float(baseline), "config", 0
    elif (packaged := packaged_baseline(model_type, num_layers)) is not None:
        b, method, n_pairs = packaged, "bert-score baseline file", 0
    else:
        texts = pd.concat([read_table(p, ["prompt"])["prompt"] for p in prompt_paths]).tolist()
        enc = Encoder(encoder_name, encoder_spec)
        b, n_pairs = gate_mod.estimate_baseline(enc.f1, texts, max_pairs=max_pairs, seed=seed)
        method = "mismatched prompt pairs"
    table = pd.DataFrame(
        [
            {
                "encoder": encoder_name,
                "model_type": model_type,
                "num_layers": num_layers,
                "b": b,
                "method": method,
                "n_pairs": n_pairs,
            }
        ]
    )
    write_table(
        table,
        out,
        make_provenance("estimate_gate_baseline", {"encoder": encoder_name, "baseline": baseline}, seed=seed),
    )
    LOGGER.info("gate baseline b = %.4f (%s, %d pairs)", b, method, n_pairs)


def filter_variants(
    variants_path: str,
    baseline_path: str,
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    gate: Mapping[str, Any],
    out_kept: str,
    out_summary: str,
    out_dropped: str,
) -> None:
    variants = read_table(variants_path, ["prompt_id", "family", "original", "text"])
    b = float(read_table(baseline_path, ["b"])["b"].iloc[0])
    scale, threshold = gate["scale"], float(gate["threshold"])
    enc = Encoder(encoder_name, encoder_spec)
    scored = variants.copy()
    is_base = scored["family"] == "baseline"
    f1 = pd.Series(1.0, index=scored.index)
    f1[~is_base] = enc.f1(scored.loc[~is_base, "text"].tolist(), scored.loc[~is_base, "original"].tolist())
    scored["f1"] = f1.astype(float)
    scored["gate_score"] = gate_mod.gate_scores(scored["f1"].to_numpy(), scale, b if scale == "rescaled" else None)
    kept, dropped = gate_mod.apply_gate(scored, threshold)
    summary = gate_mod.gate_summary(scored, threshold)
    dataset = str(variants["dataset"].iloc[0]) if len(variants) else ""
    for frame in (summary, dropped):
        frame.insert(0, "dataset", dataset)
        frame["b"] = b
        frame["scale"] = scale
        frame["threshold"] = threshold
    prov = make_provenance("filter_variants", {"encoder": encoder_name, **gate, "b": b})
    write_table(summary, out_summary, prov)
    write_table(dropped, out_dropped, prov)
    write_table(kept, out_kept, prov)
    LOGGER.info("gate: kept %d of %d prompts", kept["prompt_id"].nunique(), variants["prompt_id"].nunique())


def report_gate(
    summary_paths: Sequence[str],
    dropped_paths: Sequence[str],
    variant_paths: Sequence[str],
    out_table: str,
    out_markdown: str,
) -> None:
    from shiftwork.stability.gate_report import gate_markdown, gate_overview

    summaries = pd.concat([read_table(p) for p in summary_paths], ignore_index=True)
    dropped = pd.concat([read_table(p) for p in dropped_paths], ignore_index=True)
    n_prompts = {str(v["dataset"].iloc[0]): v["prompt_id"].nunique() for v in map(read_table, variant_paths) if len(v)}
    overview = gate_overview(summaries, dropped, n_prompts)
    write_table(overview, out_table, make_provenance("report_gate", {}))
    write_text(gate_markdown(overview, summaries, dropped), out_markdown)
