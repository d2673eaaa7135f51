"""One function per workflow step: paths and settings in, tables out. Scripts call these."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import gate as gate_mod
from .encoders import Encoder, encoder_model_type, packaged_baseline
from .logs import LOGGER
from .models.loading import load_prepared
from .models.prepare import prepare_model as _prepare_model
from .models.prepare import read_info, source_key
from .models.sources import ModelSourceError
from .prompt_sets import load_prompts
from .provenance import make_provenance
from .tables import read_cache, read_table, write_table, write_text
from .variants.build import build_variants
from .variants.structural import merge_cache, rewrite_requests, run_rewrites


def prepare_model(name: str, spec: Mapping[str, Any], out_dir: str) -> None:
    if Path(out_dir).name != source_key(spec):
        raise ModelSourceError(
            f"model '{name}': {out_dir} is not the folder of its configured source, "
            f"{source_key(spec)}; ask for models through the workflow's targets"
        )
    info = _prepare_model(name, spec, out_dir)
    LOGGER.info(
        "prepared %s: %s parameters, digest %s, %.1f s",
        name,
        info["n_parameters"],
        info["weight_digest"][:12],
        info["prepare_seconds"],
    )


def sample_prompts(name: str, spec: Mapping[str, Any], out: str, root: str = ".") -> None:
    table = load_prompts(name, spec, root)
    write_table(table, out, make_provenance("sample_prompts", {"dataset": name, **spec}, seed=spec.get("seed", 0)))
    LOGGER.info("dataset %s: %d prompts", name, len(table))


def rewrite_prompts(
    prompts_path: str,
    model_dir: str,
    settings: Mapping[str, Any],
    out: str,
    cache_path: str,
    batch_size: int = 16,
    dtype: str = "auto",
) -> None:
    """Structural rewrites of every prompt by the rewriter model; cached by content."""
    import json

    from .inference.generation import generate_all
    from .variants.structural import messages_as_plain

    prompts = read_table(prompts_path, ["prompt_id", "prompt"])
    info = read_info(model_dir)
    requests = rewrite_requests(prompts, settings.get("lengths", []), settings.get("form", True))
    cache = read_cache(cache_path, ["cache_key", "instruction", "rewrite"])
    max_new = int(settings.get("max_new_tokens", 160))

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
    scale, threshold = gate.get("scale", "rescaled"), float(gate["threshold"])
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
    from .reports.gate import gate_markdown, gate_overview

    summaries = pd.concat([read_table(p) for p in summary_paths], ignore_index=True)
    dropped = pd.concat([read_table(p) for p in dropped_paths], ignore_index=True)
    n_prompts = {str(v["dataset"].iloc[0]): v["prompt_id"].nunique() for v in map(read_table, variant_paths) if len(v)}
    overview = gate_overview(summaries, dropped, n_prompts)
    write_table(overview, out_table, make_provenance("report_gate", {}))
    write_text(gate_markdown(overview, summaries, dropped), out_markdown)
