"""The stability study's workflow steps, one function per rule (rule X -> scripts/X.py -> X here):
paths and settings in, tables out."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from shiftwork import encoders
from shiftwork.device import pick_device, pick_dtype, set_threads
from shiftwork.encoders import Encoder, encoder_model_type, packaged_baseline
from shiftwork.inference.api import ApiSettings
from shiftwork.inference.engine import Decoding, generate, make_complete
from shiftwork.inference.formatting import model_input, plain_template
from shiftwork.inference.generation import ENGINES, EngineSize, Generation, VllmEngine, encode_inputs
from shiftwork.inference.probe import layer_cosines, probe_batches
from shiftwork.logs import LOGGER
from shiftwork.models.loading import load_prepared, load_tokenizer
from shiftwork.models.prepare import read_info
from shiftwork.provenance import code_and_job, make_provenance
from shiftwork.reports.tables import to_markdown
from shiftwork.schema import section_defaults
from shiftwork.stability import axes as axes_mod
from shiftwork.stability import gate as gate_mod
from shiftwork.stability import judge_controls as controls_mod
from shiftwork.stability import stats
from shiftwork.stability.api_generation import api_responses, api_weight_digest
from shiftwork.stability.degenerate import (
    LOOP_SHARE,
    MAX_DISTINCT_SHARE,
    MAX_PERIOD,
    MIN_LOOP_WORDS,
    MIN_REPEATS,
    MIN_WORDS_FOR_VARIETY,
    degenerate_shares,
)
from shiftwork.stability.figures import preservation_plot, radar_plot, strength_plot
from shiftwork.stability.gate_report import gate_markdown, gate_overview
from shiftwork.stability.jobs import ApiJob, AxesJob, GenerateJob, JudgeCheckJob, TextModel
from shiftwork.stability.judge import (
    Complete,
    api_completer,
    guard_judgments,
    judge_pairs,
    local_completer,
    validation_sample,
)
from shiftwork.stability.prompts import load_prompts
from shiftwork.stability.report import (
    family_plot,
    sgs_heatmap,
    write_degenerate_tables,
    write_eps_tables,
    write_significance_tables,
    write_tables,
)
from shiftwork.stability.rows import baseline_rows, shard_rows, throughput
from shiftwork.stability.sections import AxesSettings
from shiftwork.stability.variants.build import build_variants_counted
from shiftwork.stability.variants.handwritten import handwritten_rewrites, read_handwritten
from shiftwork.stability.variants.structural import merge_cache, messages_as_plain, rewrite_requests, run_rewrites
from shiftwork.tables import TableWriter, read_cache, read_provenance, read_table, write_table, write_text

KEYS = ["model", "dataset", "prompt_id", "variant_id"]
VARIANT_META = ["family", "kind", "position", "strength"]


def merge_shards(shard_paths: list[str], out: str, keys: list[str] = KEYS) -> int:
    """Concatenate the shard tables of one step into ``out``; its provenance is the shards' shared
    one plus, per shard, where it ran. Fails if the shards disagree on their settings or model,
    or overlap. Returns the number of rows."""
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
    prov = {k: v for k, v in provs[0].items() if k not in ("gpu", "device", "shard", "n_shards", "job", "code")}
    prov.update(code_and_job())  # the merge's own code and job, not the shards'
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


def generate_responses(
    filtered_paths: str | Sequence[str],
    model_dir: str,
    model_name: str,
    out_generations: str | Sequence[str],
    out_probes: str | Sequence[str],
    job: GenerateJob,
) -> dict[str, Any]:
    """Greedy responses to the baseline and every kept variant (``out_generations``), and the probe
    of each with its prompt's baseline response r_0 (``out_probes``). Given several filtered
    tables (one job over a model's datasets), it writes a pair of tables for each, in order.

    Every distinct model input is generated once, by ``job.engine`` (see
    :mod:`shiftwork.inference.generation`); the baselines' responses are the r_0. Then one batched
    transformers pass teacher-forces each input's r_0 (:mod:`shiftwork.inference.probe`) and
    gives the log-probability and entropy axes and the last-prompt-token states, whose per-layer
    cosine with the baseline's is the activation axis. Rows with the same model input and the
    same baseline are probed once; a variant whose input equals its baseline's has cosine
    exactly 1. With ``job.n_shards`` > 1, only the prompts of shard ``job.shard`` (see :func:`shard_rows`)."""
    if job.engine not in ENGINES:
        raise ValueError(f"stability.generation.engine must be one of {ENGINES}, got {job.engine!r}")
    filtered_paths, out_generations, out_probes = (
        [p] if isinstance(p, str) else list(p) for p in (filtered_paths, out_generations, out_probes)
    )
    if not len(filtered_paths) == len(out_generations) == len(out_probes):
        raise ValueError("generate_responses: one generations and one probes table per filtered table")
    variants, base_row = _read_filtered(filtered_paths, job)
    set_threads(job.threads)
    chat = bool(read_info(model_dir).get("chat"))
    tokenizer = load_tokenizer(model_dir, "left")
    template = plain_template(job.plain_format)
    inputs = pd.Series([model_input(tokenizer, t, chat, template) for t in variants["text"]], dtype=object)
    variants = variants.assign(model=model_name, model_input=inputs, base_input=inputs[base_row].to_numpy())
    unique_inputs = list(dict.fromkeys(variants["model_input"]))
    where = f", shard {job.shard} of {job.n_shards}" if job.n_shards > 1 else ""
    LOGGER.info(
        "generate: %s with %s, %d rows, %d distinct inputs%s",
        model_name,
        job.engine,
        len(variants),
        len(unique_inputs),
        where,
    )
    times = {"start": time.perf_counter()}
    lm, answer, engine_settings = _answer_inputs(model_dir, tokenizer, chat, unique_inputs, job, times)
    gen_prov, probe_prov = _generate_provenance(lm, model_name, job, engine_settings)
    gens = variants.assign(
        response=[answer[t].response for t in variants["model_input"]],
        n_tokens=[answer[t].n_tokens for t in variants["model_input"]],
        stopped=[answer[t].stopped for t in variants["model_input"]],
    )
    with ExitStack() as stack:
        writers = [
            (stack.enter_context(TableWriter(g, gen_prov)), stack.enter_context(TableWriter(p, probe_prov)))
            for g, p in zip(out_generations, out_probes)
        ]
        n_keys = _probe_and_write(lm, gens, answer, job, writers)
    times["probed"] = time.perf_counter()
    n_tokens = int(sum(answer[t].n_tokens for t in unique_inputs))
    stats = throughput("generate and probe", len(variants), n_keys, n_tokens, times["probed"] - times["start"])
    return stats | phase_seconds(times)


GEN_COLUMNS = KEYS + VARIANT_META + ["text", "model_input", "response", "n_tokens", "stopped"]
PROBE_COLUMNS = KEYS + ["logprob", "entropy", "n_response_tokens", "act_cos", "act_cos_layers"]


def _read_filtered(filtered_paths: Sequence[str], job: GenerateJob) -> tuple[pd.DataFrame, pd.Series]:
    """The job's rows of every filtered table (its shard of the prompts), numbered across tables,
    with the table each came from (``part``), and each row's baseline row."""
    parts, offset = [], 0
    for part, path in enumerate(filtered_paths):
        table = read_table(path, ["dataset", "prompt_id", "variant_id", "text"] + VARIANT_META)
        table = shard_rows(table, job.shard, job.n_shards).reset_index(drop=True)
        base = table["prompt_id"].map(baseline_rows(table, path)) + offset
        parts.append(table.assign(part=part, base_row=base))
        offset += len(table)
    variants = pd.concat(parts, ignore_index=True)
    base_row = variants.pop("base_row").astype(int)
    return variants, base_row


def _answer_inputs(
    model_dir: str, tokenizer: Any, chat: bool, unique_inputs: list[str], job: GenerateJob, times: dict[str, float]
) -> tuple[Any, dict[str, Generation], dict[str, Any]]:
    """The model loaded in transformers (for the probe), the greedy answer to each distinct input by
    the job's engine, and vLLM's settings (empty with transformers); marks each phase in ``times``.
    vLLM runs and stops before the model loads in transformers, so the two never share memory."""
    decoding = Decoding(job.max_new_tokens, job.batch_size)
    engine_settings: dict[str, Any] = {}
    generations: list[Generation] = []
    if job.engine == "vllm" and unique_inputs:
        device = pick_device()
        longest = max(len(ids) for ids in encode_inputs(tokenizer, unique_inputs, chat))
        size = EngineSize(longest + job.max_new_tokens + 1, len(unique_inputs), threads=job.threads)
        with VllmEngine(model_dir, tokenizer, chat, pick_dtype(job.dtype, device), device, size) as vllm:
            times["engine_ready"] = time.perf_counter()
            engine_settings = vllm.settings
            generations = generate(vllm, unique_inputs, decoding)
            times["generated"] = time.perf_counter()
    lm = load_prepared(model_dir, job.dtype)
    times["model_loaded"] = time.perf_counter()
    if job.engine == "transformers" and unique_inputs:
        generations = generate(lm, unique_inputs, decoding)
        times["generated"] = time.perf_counter()
    return lm, dict(zip(unique_inputs, generations)), engine_settings


def _generate_provenance(
    lm: Any, model_name: str, job: GenerateJob, engine_settings: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The provenance of the generations table and of the probes table."""
    extra = (
        {"device": str(lm.device), "engine": job.engine}
        | ({"vllm": engine_settings} if engine_settings else {})
        | ({"shard": job.shard, "n_shards": job.n_shards} if job.n_shards > 1 else {})
    )
    common = {"model": model_name, "weight_digest": lm.info["weight_digest"], "extra": extra}
    gen_settings = {
        "max_new_tokens": job.max_new_tokens,
        "batch_size": job.batch_size,
        "dtype": str(lm.dtype),
        "engine": job.engine,
    }
    probe_settings = {"batch_size": job.batch_size, "dtype": str(lm.dtype), "store_hidden": job.store_hidden}
    return make_provenance("generate", gen_settings, **common), make_provenance("probe", probe_settings, **common)


def _probe_and_write(
    lm: Any, gens: pd.DataFrame, answer: Mapping[str, Generation], job: GenerateJob, writers: list
) -> int:
    """The probe pass, baselines first (their states are the reference of their variants'
    cosines), each batch's rows written to both tables of its part as it goes. Rows with the same
    (model input, baseline input) are probed once. Returns the number of distinct pairs probed."""
    rows_of: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(gens["model_input"], gens["base_input"])):
        rows_of.setdefault(key, []).append(i)
    keys = list(rows_of)
    probe_columns = PROBE_COLUMNS + (["hidden_last"] if job.store_hidden else [])
    base_hidden: dict[str, np.ndarray] = {}
    written = [False] * len(writers)
    for group in ([k for k in keys if k[0] == k[1]], [k for k in keys if k[0] != k[1]]):
        r0 = [answer[k[1]].response for k in group]
        baselines = bool(group) and group[0][0] == group[0][1]
        what = "probe baselines" if baselines else "probe variants"
        for results in probe_batches(lm, [k[0] for k in group], r0, job.batch_size, what):
            if baselines:
                base_hidden.update((group[p.index][0], p.last_hidden) for p in results)
            rows, recs = _probe_records(gens, group, results, rows_of, base_hidden, job.store_hidden)
            gen_rows, probe_rows = gens.loc[rows], pd.DataFrame(recs, columns=probe_columns + ["part"])
            for part, (gen_writer, probe_writer) in enumerate(writers):
                if (gen_rows["part"] == part).any():
                    gen_writer.write(gen_rows.loc[gen_rows["part"] == part, GEN_COLUMNS])
                    probe_writer.write(probe_rows.loc[probe_rows["part"] == part, probe_columns])
                    written[part] = True
    for (gen_writer, probe_writer), done in zip(writers, written):
        if not done:  # e.g. a shard whose prompts the gate all dropped: keep the columns
            gen_writer.write(pd.DataFrame(columns=GEN_COLUMNS))
            probe_writer.write(pd.DataFrame(columns=probe_columns))
    return len(keys)


def _probe_records(
    gens: pd.DataFrame,
    batch_keys: Sequence[tuple[str, str]],
    results: Sequence[Any],
    rows_of: Mapping[tuple[str, str], list[int]],
    base_hidden: Mapping[str, np.ndarray],
    store_hidden: bool,
) -> tuple[list[int], list[dict[str, Any]]]:
    """A probe batch's generation rows and probe records (with their ``part``): every row sharing
    a probed (input, baseline) pair gets its values; the activation axis is the per-layer cosine
    with the baseline's state, exactly 1 where the input is the baseline's."""
    rows, recs = [], []
    for p in results:
        key = batch_keys[p.index]
        cos = np.ones(p.last_hidden.shape[0]) if key[0] == key[1] else layer_cosines(p.last_hidden, base_hidden[key[1]])
        rows += rows_of[key]
        for i in rows_of[key]:
            rec = {k: gens.at[i, k] for k in KEYS + ["part"]}
            rec.update(
                logprob=p.logprob,
                entropy=p.entropy,
                n_response_tokens=p.n_response_tokens,
                act_cos=float(cos.mean()),
                act_cos_layers=cos.tolist(),
            )
            if store_hidden:
                rec["hidden_last"] = p.last_hidden.tolist()
            recs.append(rec)
    return rows, recs


def generate_api_responses(
    filtered_paths: str | Sequence[str],
    model_name: str,
    out_generations: str | Sequence[str],
    out_probes: str | Sequence[str],
    job: ApiJob,
) -> dict[str, Any]:
    """Rule generate_api_responses: a model behind an OpenAI-compatible API, the same generations
    table and probes with what an API cannot observe missing
    (:func:`shiftwork.stability.api_generation.api_responses`)."""
    return api_responses(filtered_paths, model_name, out_generations, out_probes, job)


def phase_seconds(times: Mapping[str, float]) -> dict[str, float]:
    """Seconds of each phase of the generate job, each from the point before it: ``start``, then
    (in the order the engine takes them) ``engine_ready`` (vLLM started), ``generated``,
    ``model_loaded`` (the model in transformers) and ``probed``."""
    names = {"engine_ready": "engine_start_s", "generated": "generate_s", "model_loaded": "model_load_s"}
    names["probed"] = "probe_s"
    marks = sorted(times.items(), key=lambda kv: kv[1])
    return {names[k]: round(t - before, 3) for (_, before), (k, t) in zip(marks, marks[1:])}


def score_axes(
    generations_path: str,
    probes_path: str,
    out: str,
    out_judgments: str,
    job: AxesJob,
    gate_baseline_path: str | None = None,
    judge_report_path: str | None = None,
) -> None:
    """The six signed axis deltas for every variant (see :mod:`shiftwork.stability.axes`); with a
    judge (``job.judge``: a prepared model, or an ``openai_compatible`` source whose replies are
    cached) that passed its controls (``judge_report_path``, rule check_judge), the judge decides
    register and form mirroring pairwise, and every judged pair is written to ``out_judgments``
    (an empty table without a judge, or with one that failed: the rule-based detectors decide
    then, and the deltas' ``mr_source`` and provenance say so). ``job.axes.bleu`` is the BLEU
    definition; ``bert_scale`` ``rescaled`` puts the BERT axis on the (F1 - b) / (1 - b) scale, b
    from ``bert_baseline`` (a number; ``auto``: mismatched baseline replies, ``job.seed``;
    ``gate``: the gate's b in ``gate_baseline_path``)."""
    gens = read_table(generations_path)
    probes = read_table(probes_path)
    model = str(gens["model"].iloc[0]) if len(gens) else ""
    bert_f1 = _lazy_f1(job.encoder_name, job.encoder_spec)
    axes = job.axes
    check = _judge_check(job.judge, judge_report_path)
    trusted = job.judge if check is None or check.passed else None
    judge_name, judge_fn, judged = _judge(trusted, axes.judge_cue_guard)
    judge_name = judge_name or (check.judge if check else None)
    rescale = _bert_rescale(job, gens, bert_f1, gate_baseline_path)
    deltas = axes_mod.variant_deltas(gens, probes, bert_f1, judge_fn, _axis_rules(job, rescale))
    problems = axes_mod.check_ranges(
        deltas, bleu=axes.bleu, bert_scale=axes.bert_scale, structural_baseline=job.structural_baseline
    )
    if problems:
        raise ValueError(f"{generations_path}: axis values out of range:\n  " + "\n  ".join(problems[:20]))
    settings = {
        "encoder": job.encoder_name,
        "judge": judge_name,
        "structural_baseline": job.structural_baseline,
        "bleu": axes.bleu,
        "bert_scale": axes.bert_scale,
        "noise_detector": axes.noise_detector,
    } | _definition_settings(job)
    extra: dict[str, Any] = {"unobservable_axes": axes_mod.unobservable_axes(deltas)}
    if check is not None:
        extra["judge_check"] = {"judge": check.judge, "passed": check.passed, "reason": check.reason}
    if rescale:  # b, how it was found, and how many replies the clip at 0 set to -1
        settings |= {"bert_baseline": axes.bert_baseline, "seed": job.seed}
        extra["bert_rescale"] = rescale | {"n_at_floor": int((deltas["BERT"] == -1.0).sum())}
    judgments = judged[0] if judged else pd.DataFrame(columns=["variant_id", "verdict", "parsed"])
    judgments.insert(0, "model", model)
    judgments.insert(1, "dataset", str(gens["dataset"].iloc[0]) if len(gens) else "")
    judgments["judge"] = judge_name
    write_table(judgments, out_judgments, make_provenance("score_axes", settings, model=model))
    write_table(deltas, out, make_provenance("score_axes", settings, model=model, extra=extra))
    if judged:
        LOGGER.info(
            "judge %s: %d pairs, %d YES, %d answers without YES/NO (counted NO)",
            judge_name,
            len(judgments),
            int(judgments["verdict"].sum()),
            int((~judgments["parsed"]).sum()),
        )
    if "cue_guard" in judgments.columns:
        LOGGER.info("politeness-cue guard: %d YES turned NO", int(judgments["cue_guard"].sum()))
    LOGGER.info("scored %d variants of %d prompts", len(deltas), deltas["prompt_id"].nunique())


def _judge_check(source: TextModel | None, report_path: str | None) -> controls_mod.JudgeCheck | None:
    """What the report of the judge's controls decides (None without a judge); a judge that
    failed is logged with the reason. A judge without its report is an error."""
    if source is None or not (source.model_dir or source.api):
        return None
    if not report_path:
        raise ValueError(
            f"score_axes: the judge {source.name or ''} comes without the report of its controls "
            "(stability/judge/report.parquet, rule check_judge); its verdicts count only once it passed them"
        )
    check = controls_mod.judge_check(read_table(report_path))
    if not check.passed:
        LOGGER.warning(
            "the judge %s failed its controls (%s): register and form MR from the rule-based detectors",
            check.judge,
            check.reason,
        )
    return check


def check_judge(generation_paths: Sequence[str], job: JudgeCheckJob, outs: Mapping[str, str]) -> bool:
    """Rule check_judge: the four controls of the mirroring judge (see
    :mod:`shiftwork.stability.judge_controls`) on a seeded sample of the register and form pairs
    of every generations table of the study, asked of the judge (loaded once). Writes every
    question with its answer (``outs["controls"]``), one row per control with the verdict
    (``outs["report"]``) and the report as Markdown (``outs["markdown"]``). Returns whether the
    judge passed."""
    frames = [read_table(p) for p in generation_paths]
    filled = [f for f in frames if len(f)]
    gens = pd.concat(filled, ignore_index=True) if filled else frames[0]
    pairs = controls_mod.candidate_pairs(gens)
    sample = controls_mod.sample_pairs(pairs, job.controls.pairs, job.seed)
    questions = controls_mod.control_questions(sample)
    judge_name, complete = _completer(job.judge)
    if complete is None:
        raise ValueError("check_judge: no judge to check (stability.axes.judge)")
    answered = controls_mod.ask_controls(questions, complete)
    report = controls_mod.control_report(answered, job.controls.limits, str(judge_name))
    settings = {"judge": judge_name, "judge_controls": job.controls.as_dict()}
    prov = make_provenance("check_judge", settings, seed=job.seed)
    write_table(answered, outs["controls"], prov)
    write_table(report, outs["report"], prov)
    write_text(controls_mod.report_markdown(report, answered), outs["markdown"])
    check = controls_mod.judge_check(report)
    LOGGER.info(
        "judge %s: %s its controls (%s); %d of %d candidate pairs drawn, %d questions",
        judge_name,
        "passed" if check.passed else "failed",
        check.reason,
        len(sample),
        len(pairs),
        len(answered),
    )
    return check.passed


def _axis_rules(job: AxesJob, rescale: Mapping[str, Any] | None) -> axes_mod.AxisRules:
    """How the job's deltas are defined: its axes' settings, its structural anchoring and the
    BERT axis's rescale baseline (None on the raw scale)."""
    axes = job.axes
    return axes_mod.AxisRules(
        structural_baseline=job.structural_baseline,
        bleu=axes.bleu,
        bert_b=rescale["b"] if rescale else None,
        noise_detector=axes.noise_detector,
        length_anchor=job.length_anchor,
        length_mirroring=axes.length_mirroring,
        empty_baseline=axes.empty_baseline,
        act_layers=axes.act_layers,
    )


def _definition_settings(job: AxesJob) -> dict[str, Any]:
    """The options of the method's definitions that a job sets away from their defaults, for the
    deltas' provenance (a job at the defaults records none, as before they were options)."""
    axes = job.axes
    chosen = {
        "length_anchor": job.length_anchor,
        "length_mirroring": axes.length_mirroring,
        "empty_baseline": axes.empty_baseline,
        "act_layers": axes.act_layers,
        "judge_cue_guard": axes.judge_cue_guard,
    }
    structural = section_defaults(("stability", "variants", "structural"))
    defaults = AxesSettings.defaults().as_dict() | {"length_anchor": structural["length_anchor"]}
    return {k: v for k, v in chosen.items() if v != defaults[k]}


def _lazy_f1(encoder_name: str, encoder_spec: Mapping[str, Any]) -> Callable[[list[str], list[str]], np.ndarray]:
    """BERTScore F1 of (candidate, reference) pairs by the encoder, which loads on the first call
    (a table whose replies all equal their baseline's never loads it)."""
    encoder: dict[str, encoders.Encoder] = {}

    def bert_f1(cands, refs):
        enc = encoder.setdefault("e", encoders.Encoder(encoder_name, encoder_spec))
        return enc.f1(cands, refs)

    return bert_f1


def _completer(source: TextModel | None) -> tuple[str | None, Complete | None]:
    """The judge's name and its ``complete(prompts) -> answers`` (None without a judge): a
    prepared local model, loaded here, or an ``openai_compatible`` source."""
    judge_name = source.name if source else None
    if source is None or not (source.model_dir or source.api):
        return judge_name, None
    if source.model_dir:
        judge_name = read_info(source.model_dir)["name"]
        return judge_name, local_completer(load_prepared(source.model_dir), batch_size=source.batch_size)
    judge_name = judge_name or source.api["model"]
    return judge_name, api_completer(judge_name, source.api, source.cache)


def _judge(
    source: TextModel | None, cue_guard: bool = False
) -> tuple[str | None, Callable[[pd.DataFrame], np.ndarray] | None, list]:
    """The judge's name, the function the axes call with the pairs to judge (None without a judge),
    and the list that collects each judged table; with ``cue_guard`` the method's politeness-cue
    guard is applied to the verdicts (:func:`~shiftwork.stability.judge.guard_judgments`)."""
    judged: list[pd.DataFrame] = []
    judge_name, complete = _completer(source)
    if complete is None:
        return judge_name, None, judged

    def judge_fn(pairs: pd.DataFrame):
        table = judge_pairs(pairs, complete)
        if cue_guard:
            table = guard_judgments(table)
        judged.append(table)
        return table["verdict"].to_numpy()

    return judge_name, judge_fn, judged


def _bert_rescale(
    job: AxesJob, gens: pd.DataFrame, bert_f1: Callable, gate_baseline_path: str | None
) -> dict[str, Any] | None:
    """The rescale baseline of the BERT axis (``{"b", "method", "n_pairs"}``), or None on the raw scale."""
    bert_scale, bert_baseline = job.axes.bert_scale, job.axes.bert_baseline
    if bert_scale not in axes_mod.BERT_SCALES:
        raise ValueError(f"stability.axes.bert_scale must be one of {list(axes_mod.BERT_SCALES)}, got {bert_scale!r}")
    if bert_scale == "rescaled" and bert_baseline == "gate":
        if not gate_baseline_path:
            raise ValueError("stability.axes.bert_baseline gate needs the gate's baseline table")
        row = gate_mod.read_baseline(
            gate_baseline_path, job.encoder_name, "stability.axes.bert_baseline gate", "the BERT axis uses"
        )
        return {"b": float(row["b"]), "method": f"the gate's ({row['method']})", "n_pairs": int(row["n_pairs"])}
    if bert_scale == "rescaled":
        return axes_mod.bert_baseline(gens, bert_f1, bert_baseline, job.seed)
    return None


def judge_sample(judgment_paths: list[str], per_cell: int, seed: int, out_table: str, out_md: str) -> None:
    """A seeded sample of judged pairs of each verdict, for checking the judge by hand."""
    frames = [read_table(p) for p in judgment_paths]
    judgments = (
        pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else frames[0]
    )
    sample = validation_sample(judgments, per_cell, seed)
    write_table(sample, out_table, make_provenance("judge_sample", {"per_cell": per_cell}, seed=seed))
    shown = [
        "model",
        "family",
        "kind",
        "strength",
        "original_reply",
        "variant_prompt",
        "variant_reply",
        "answer",
        "verdict",
    ]
    lines = [
        "# Judged pairs to check by hand",
        "",
        f"{len(sample)} of {len(judgments)} judged pairs: up to {per_cell} per model, family, kind and verdict "
        f"(seed {seed}). A verdict of 1 means the judge said the variant's reply mirrors the change of its prompt.",
        "",
        to_markdown(sample[[c for c in shown if c in sample.columns]]) if len(sample) else "(no judged pairs)",
        "",
    ]
    write_text("\n".join(lines), out_md)


def aggregate_stability(
    delta_paths: list[str], R: Mapping[str, float], eps: list[float], outs: Mapping[str, str]
) -> None:
    """Normalise, per-prompt RMS instability, SGS per dataset and in total, t-tests, breakdown, and
    instability against strength (``outs["strength"]``, :func:`shiftwork.stability.stats.strength_curves`)."""
    deltas = pd.concat([read_table(p) for p in delta_paths], ignore_index=True)
    normalised = stats.normalise(deltas, R)
    per_prompt = stats.prompt_instability(normalised)
    unobservable = stats.unobservable_by_table(deltas).to_dict("records")
    prov = make_provenance("aggregate", {"R": dict(R), "eps": list(eps)}, extra={"unobservable_axes": unobservable})
    write_table(per_prompt, outs["per_prompt"], prov)
    write_table(stats.dataset_sgs(per_prompt), outs["dataset_sgs"], prov)
    write_table(stats.total_sgs(per_prompt), outs["total_sgs"], prov)
    write_table(stats.ttests(per_prompt, eps, by=["model"]), outs["ttests_model"], prov)
    write_table(stats.ttests(per_prompt, eps, by=["model", "dataset"]), outs["ttests_dataset"], prov)
    write_table(stats.breakdown(normalised), outs["breakdown"], prov)
    write_table(stats.strength_curves(normalised), outs["strength"], prov)


def count_degenerate_replies(generation_paths: Sequence[str], out: str) -> None:
    """The share of degenerate replies (empty, a loop, a jumble of a few words) per model and
    dataset, for the baselines' replies, the variants' and all
    (:func:`shiftwork.stability.degenerate.degenerate_shares`), from every generations table."""
    columns = ["model", "dataset", "family", "response"]
    generations = pd.concat([read_table(p, columns)[columns] for p in generation_paths], ignore_index=True)
    table = degenerate_shares(generations)
    rule = {
        "max_period": MAX_PERIOD,
        "min_repeats": MIN_REPEATS,
        "min_loop_words": MIN_LOOP_WORDS,
        "loop_share": LOOP_SHARE,
        "min_words_for_variety": MIN_WORDS_FOR_VARIETY,
        "max_distinct_share": MAX_DISTINCT_SHARE,
    }
    write_table(table, out, make_provenance("count_degenerate_replies", rule))
    every = table[(table["dataset"] == stats.ALL) & (table["replies"] == "all")]
    for r in every.itertuples(index=False):
        LOGGER.info("%s: %d of %d replies degenerate", r.model, r.n_degenerate, r.n_replies)


def report_stability(
    inputs: Mapping[str, Any],
    eps_values: Sequence[float],
    primary_eps: float,
    table_dir: str,
    figures: Mapping[str, str],
) -> None:
    """The tables (at the primary eps, at every eps, and the counts of significant cells) and the
    figures (heatmap with the primary eps's significance stars, families with t-intervals over
    prompts from the strength curves, radar, prompt preservation, strength curves), and the shares
    of degenerate replies. ``inputs`` names the statistics tables, ``degenerate``
    (:func:`count_degenerate_replies`), ``gate_scores``, the gate's per-variant scores of every
    dataset, and with a judge ``judge_report``, the report of its controls, whose verdict the main
    and dataset tables name in a footnote (:func:`~shiftwork.stability.judge_controls.check_footnote`);
    ``figures`` maps ``<name>_png`` / ``<name>_svg`` to paths."""
    total = read_table(inputs["total_sgs"])
    per_dataset = read_table(inputs["dataset_sgs"])
    tests_total = read_table(inputs["ttests_model"])
    tests_dataset = read_table(inputs["ttests_dataset"])
    prov = make_provenance("report_stability", {"eps": list(eps_values), "primary_eps": primary_eps})
    footnote = None
    if inputs.get("judge_report"):
        footnote = controls_mod.check_footnote(controls_mod.judge_check(read_table(inputs["judge_report"])))
    write_tables(total, per_dataset, tests_total, tests_dataset, table_dir, eps=primary_eps, footnote=footnote)
    write_eps_tables(total, per_dataset, tests_total, tests_dataset, table_dir, eps_values, prov)
    write_significance_tables(tests_total, tests_dataset, table_dir, prov)
    write_degenerate_tables(read_table(inputs["degenerate"]), table_dir)
    curves = read_table(inputs["strength"])
    sgs_heatmap(total, figures["heatmap_png"], figures["heatmap_svg"], tests_total, primary_eps)
    family_plot(read_table(inputs["breakdown"]), figures["family_png"], figures["family_svg"], curves)
    radar_plot(total, per_dataset, figures["radar_png"], figures["radar_svg"])
    scores = pd.concat([read_table(p) for p in inputs["gate_scores"]], ignore_index=True)
    preservation_plot(scores, figures["preservation_png"], figures["preservation_svg"])
    strength_plot(curves, figures["strength_png"], figures["strength_svg"])


def sample_prompts(name: str, spec: Mapping[str, Any], out: str, root: str = ".") -> None:
    table = load_prompts(name, spec, root)
    write_table(table, out, make_provenance("sample_prompts", {"dataset": name, **spec}, seed=spec["seed"]))
    LOGGER.info("dataset %s: %d prompts", name, len(table))


def rewrite_prompts(
    prompts_path: str, settings: Mapping[str, Any], rewriter: TextModel, out: str, cache_path: str
) -> None:
    """Structural rewrites of every prompt by the rewriter model (``settings``:
    ``stability.variants.structural``); cached by content in ``cache_path``. The rewriter is a
    prepared local model or, with ``rewriter.api``, an ``openai_compatible`` source."""
    prompts = read_table(prompts_path, ["prompt_id", "prompt"])
    if rewriter.api is not None:
        api_settings = ApiSettings.from_source(settings["rewriter"], rewriter.api)
        info = {"name": settings["rewriter"], "weight_digest": api_weight_digest(api_settings)}
        public = api_settings.public()
    else:
        info = read_info(rewriter.model_dir)
        public = None
    structural = section_defaults(("stability", "variants", "structural")) | dict(settings)
    requests = rewrite_requests(
        prompts, structural["lengths"], structural["form"], structural["baseline"], structural["length_anchor"]
    )
    cache = read_cache(cache_path, ["cache_key", "instruction", "rewrite"])
    max_new = int(settings["max_new_tokens"])
    start = time.perf_counter()
    rewrite_fn = partial(_rewrite, settings["rewriter"], rewriter, max_new)
    table, n_new = run_rewrites(requests, rewrite_fn, info["weight_digest"], max_new, cache)
    LOGGER.info(
        "rewrites: %d requests, %d generated, %d from cache, %.1f s",
        len(table),
        n_new,
        len(table) - n_new,
        time.perf_counter() - start,
    )
    prov = make_provenance(
        "rewrite_prompts",
        dict(settings) | ({"api": public} if public else {}),
        model=info["name"],
        weight_digest=info["weight_digest"],
    )
    if n_new:
        write_table(merge_cache(cache, table), cache_path, prov)
    write_table(table, out, prov)


def select_handwritten_rewrites(prompts_path: str, variants_path: str, settings: Mapping[str, Any], out: str) -> None:
    """The structural variants of every prompt from its prompt set's hand-written file, in the
    table :func:`rewrite_prompts` writes (``settings``: ``lengths``, ``form``, ``baseline`` and
    ``length_anchor`` of ``stability.variants.structural``, which choose the rows as they choose
    a rewriter's requests)."""
    prompts = read_table(prompts_path, ["dataset", "prompt_id", "prompt"])
    table = handwritten_rewrites(prompts, read_handwritten(variants_path), settings, variants_path)
    write_table(table, out, make_provenance("select_handwritten_rewrites", dict(settings) | {"file": variants_path}))
    LOGGER.info("%d hand-written rewrites of %d prompts, from %s", len(table), len(prompts), variants_path)


def _rewrite(name: str, rewriter: TextModel, max_new: int, instructions: Sequence[str]) -> list[str]:
    """The rewriter's replies to the instructions (chat messages as JSON). run_rewrites calls this
    once, with every request the cache lacks, and not at all when the cache holds them all: the
    model loads only when it has work to do."""
    chats = [json.loads(ins) for ins in instructions]
    if rewriter.api is not None:
        complete = make_complete(name, rewriter.api, rewriter.cache)
        return complete(chats, max_new)
    lm = load_prepared(rewriter.model_dir, rewriter.dtype)
    if lm.chat:
        inputs = [lm.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    else:
        inputs = [messages_as_plain(c) for c in chats]
    return [g.response for g in generate(lm, inputs, Decoding(max_new, rewriter.batch_size), what="rewrite")]


def make_variants(
    prompts_path: str, settings: Mapping[str, Any], seed: int, out: str, rewrites_path: str | None = None
) -> None:
    prompts = read_table(prompts_path, ["dataset", "prompt_id", "prompt"])
    rewrites = read_table(rewrites_path) if rewrites_path else None
    table, unchanged = build_variants_counted(prompts, settings, seed, rewrites)
    prov = make_provenance("make_variants", dict(settings), seed=seed, extra={"unchanged": unchanged})
    write_table(table, out, prov)
    LOGGER.info("%d variants of %d prompts; equal to their prompt: %s", len(table), len(prompts), unchanged)


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
    outs: Mapping[str, str],
) -> None:
    """The meaning gate on one dataset's variants: the kept variants (``outs["kept"]``), the dropped
    prompts (``dropped``), the mean scores per family x kind x position x strength (``summary``),
    and every variant's score (``scores``, :func:`shiftwork.stability.gate.variant_scores`)."""
    variants = read_table(variants_path, ["prompt_id", "family", "original", "text"])
    b = float(read_table(baseline_path, ["b"])["b"].iloc[0])
    scale, threshold = gate["scale"], float(gate["threshold"])
    enc = Encoder(encoder_name, encoder_spec)
    scored = gate_mod.score_variants(variants, enc.f1, scale, b)
    kept, dropped = gate_mod.apply_gate(scored, threshold)
    summary = gate_mod.gate_summary(scored, threshold)
    scores = gate_mod.variant_scores(scored, dropped)
    dataset = str(variants["dataset"].iloc[0]) if len(variants) else ""
    for frame in (summary, dropped, scores):
        frame.insert(0, "dataset", dataset)
        frame["b"] = b
        frame["scale"] = scale
        frame["threshold"] = threshold
    prov = make_provenance("filter_variants", {"encoder": encoder_name, **gate, "b": b})
    write_table(summary, outs["summary"], prov)
    write_table(dropped, outs["dropped"], prov)
    write_table(scores, outs["scores"], prov)
    write_table(kept, outs["kept"], prov)
    LOGGER.info("gate: kept %d of %d prompts", kept["prompt_id"].nunique(), variants["prompt_id"].nunique())


def report_gate(
    summary_paths: Sequence[str],
    dropped_paths: Sequence[str],
    variant_paths: Sequence[str],
    out_table: str,
    out_markdown: str,
) -> None:
    summaries = pd.concat([read_table(p) for p in summary_paths], ignore_index=True)
    dropped = pd.concat([read_table(p) for p in dropped_paths], ignore_index=True)
    n_prompts, unchanged = {}, {}
    for path in variant_paths:
        v = read_table(path)
        if len(v):
            dataset = str(v["dataset"].iloc[0])
            n_prompts[dataset] = v["prompt_id"].nunique()
            unchanged[dataset] = read_provenance(path).get("unchanged", {})
    overview = gate_overview(summaries, dropped, n_prompts, unchanged)
    write_table(overview, out_table, make_provenance("report_gate", {}))
    write_text(gate_markdown(overview, summaries, dropped), out_markdown)
