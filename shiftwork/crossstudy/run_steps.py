"""The cross-study's steps per run and per checkpoint, one function per rule (rule X ->
scripts/X.py -> X here): the prompt set, its variants and the meaning gate per run, and per (run,
step) the responses, probes and axis deltas. They live apart from the steps over all runs
(:mod:`shiftwork.crossstudy.steps`), which analyse and report, so that a change there does not
make the scored checkpoints' tables stale (a table records the code of the modules its job
imported)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.crossstudy.prompts import model_inputs, nli_prompts, organism_prompts
from shiftwork.crossstudy.scoring import LazyBertF1, checked_deltas
from shiftwork.logs import LOGGER
from shiftwork.organisms.settings import load_setting
from shiftwork.organisms.transcripts import parse_response
from shiftwork.provenance import make_provenance
from shiftwork.stability import gate as gate_mod
from shiftwork.tables import read_table, write_table

STUDIES = ("trajectory", "organisms")
VARIANT_COLUMNS = ["dataset", "prompt_id", "variant_id", "family", "kind", "position", "strength", "text"]


def crossstudy_prompts(study: str, source_path: str, n: int, seed: int, out: str, pattern: str | None = None) -> None:
    """The prompt set of one run: ``n`` NLI test items per set of its suite (``trajectory``), or
    ``n`` held-out questions per distribution of its organism (``organisms``)."""
    if study == "trajectory":
        suite = read_table(source_path, ["example_id", "split", "set", "premise", "hypothesis", "label"])
        prompts = nli_prompts(suite, n, seed, pattern) if pattern else nli_prompts(suite, n, seed)
    elif study == "organisms":
        tests = read_table(source_path, ["distribution", "question_id", "question", "prompt", "answer"])
        prompts = organism_prompts(tests, n, seed)
    else:
        raise ValueError(f"study must be one of {STUDIES}, got {study!r}")
    write_table(
        prompts, out, make_provenance("crossstudy_prompts", {"study": study, "n": n, "pattern": pattern}, seed=seed)
    )
    LOGGER.info("%d prompts: %s", len(prompts), prompts.groupby("dataset").size().to_dict())


def crossstudy_variants(prompts_path: str, settings: Mapping[str, Any], seed: int, out: str) -> None:
    """The stability study's variants of the part of each prompt that variants may change."""
    from shiftwork.stability.steps import make_variants

    make_variants(prompts_path, settings, seed, out)


def crossstudy_gate(
    variants_path: str,
    baseline_path: str,
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    gate: Mapping[str, Any],
    out_kept: str,
) -> None:
    """The stability study's meaning gate over a run's variants (all its sets at once), with the
    stability study's rescale baseline b (``baseline_path``: its gate baseline table; a run's own
    prompts are too alike to estimate b from, e.g. every organism question is "What comes after
    N?"): every variant scored against its prompt, and the prompts whose variants all fall below
    the threshold dropped whole."""
    from shiftwork.encoders import Encoder

    variants = read_table(variants_path, ["dataset", "prompt_id", "family", "original", "text"])
    row = gate_mod.read_baseline(baseline_path, encoder_name, baseline_path, "the gate uses")
    b = float(row["b"])
    enc = Encoder(encoder_name, encoder_spec)
    scored = gate_mod.score_variants(variants, enc.f1, gate["scale"], b)
    is_base = scored["family"] == "baseline"
    kept, _ = gate_mod.apply_gate(scored, float(gate["threshold"]))
    if not (kept["family"] != "baseline").any():
        raise ValueError(
            f"{variants_path}: no variant to measure ({int((~is_base).sum())} built, none kept by the gate); "
            "config keys stability.variants (register positions, noise levels) and crossstudy.register_strengths "
            "say which are built"
        )
    write_table(kept, out_kept, make_provenance("crossstudy_gate", {"encoder": encoder_name, **dict(gate), "b": b}))
    LOGGER.info(
        "gate (b = %.4f, %s): kept %d of %d variants, %d of %d prompts",
        b,
        row["method"],
        int((kept["family"] != "baseline").sum()),
        int((~is_base).sum()),
        kept["prompt_id"].nunique(),
        variants["prompt_id"].nunique(),
    )


def crossstudy_score(
    checkpoints: Sequence[ScoredCheckpoint],
    inputs: Mapping[str, str],
    settings: Mapping[str, Any],
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    outs: Mapping[str, str],
    threads: int | None = None,
) -> None:
    """Checkpoints of one run, one after the other in this job, on the run's filtered variants:
    each checkpoint's responses and probes (:func:`shiftwork.crossstudy.respond.respond`), then
    the six axis deltas of the stability study (BERT on the gate's rescaled scale, no judge:
    mirroring by the rule-based detectors), in one table per kind with a ``step`` column. The
    variants, the gate's b and the encoder are read once for all of them. ``inputs``: prompts,
    filtered (the gate's kept variants), baseline (the gate's baseline table). ``settings``:
    ``mode`` (verbaliser or generate), ``batch_size``, ``dtype``, ``verbalisers``,
    ``max_new_tokens``, ``bleu``, and an organism's ``setting``. ``outs``: generations, probes,
    deltas."""
    from shiftwork.device import set_threads

    runs = sorted({c.run for c in checkpoints})
    if len(runs) != 1:
        raise ValueError(f"a scoring job scores checkpoints of one run, got runs {runs}")
    set_threads(threads)
    prompts = read_table(inputs["prompts"])
    rows = read_table(inputs["filtered"], VARIANT_COLUMNS)
    rows = rows.assign(model=runs[0], model_input=model_inputs(rows, prompts))
    baseline = inputs["baseline"]
    b = float(gate_mod.read_baseline(baseline, encoder_name, baseline, "the BERT axis uses")["b"])
    bert_f1 = LazyBertF1(encoder_name, encoder_spec)
    tables: dict[str, list[pd.DataFrame]] = {"generations": [], "probes": [], "deltas": []}
    too_long = 0
    for checkpoint in sorted(checkpoints, key=lambda c: c.step):
        scored, too_long = _score_checkpoint(checkpoint, rows, prompts, settings, b, bert_f1)
        for name, frame in scored.items():
            tables[name].append(frame)
    record = {
        "study": checkpoints[0].study,
        "run": runs[0],
        "steps": sorted(int(c.step) for c in checkpoints),
        "checkpoints": [c.path for c in sorted(checkpoints, key=lambda c: c.step)],
        **dict(settings),
        "b": b,
        "left_out_too_long": too_long,
    }
    prov = make_provenance("crossstudy_score", record, model=runs[0])
    for name, frames in tables.items():
        write_table(pd.concat(frames, ignore_index=True), outs[name], prov)


def _score_checkpoint(
    checkpoint: ScoredCheckpoint,
    rows: pd.DataFrame,
    prompts: pd.DataFrame,
    settings: Mapping[str, Any],
    b: float,
    bert_f1: LazyBertF1,
) -> tuple[dict[str, pd.DataFrame], int]:
    """(generations, probes and deltas of one checkpoint, each with its ``step``; how many variants
    were left out as too long for its context): one load of the checkpoint."""
    from shiftwork.crossstudy.respond import respond
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.models.loading import LoadedModel
    from shiftwork.stability.axes import AxisRules

    start = time.perf_counter()
    net, tok, device = load_checkpoint(checkpoint.base_dir, {"path": checkpoint.path}, settings["dtype"])
    lm = LoadedModel(checkpoint.run, net, tok, device, next(net.parameters()).dtype, False, {"name": checkpoint.run})
    new_tokens = int(settings.get("max_new_tokens") or 0)
    rows, too_long = fitting_rows(rows, tok, context_length(net.config), max(new_tokens, 1))
    loaded = time.perf_counter()
    gens, probes = respond(
        lm,
        rows,
        settings["mode"],
        int(settings["batch_size"]),
        verbalisers=settings.get("verbalisers"),
        max_new_tokens=new_tokens,
    )
    responded = time.perf_counter()
    rules = AxisRules(structural_baseline="original", bleu=settings["bleu"], bert_b=b)
    where = f"run {checkpoint.run} step {checkpoint.step}"
    deltas = checked_deltas(gens, probes, rules, bert_f1, "rescaled", where)
    if settings.get("setting"):
        gens = with_parsed(gens, prompts, settings["setting"])
    gens = gens.assign(dtype=str(lm.dtype).removeprefix("torch."))
    for frame in (gens, probes, deltas):
        frame.insert(1, "step", int(checkpoint.step))
    LOGGER.info(
        "%s: %d rows, %d flipped; load %.1f s, respond %.1f s, score %.1f s",
        where,
        len(deltas),
        int(deltas["flipped"].sum()),
        loaded - start,
        responded - loaded,
        time.perf_counter() - responded,
    )
    return {"generations": gens, "probes": probes, "deltas": deltas}, too_long


def with_parsed(gens: pd.DataFrame, prompts: pd.DataFrame, setting_spec: Mapping[str, Any]) -> pd.DataFrame:
    """An organism's responses read as the organisms evaluation reads them: the ``identity`` they
    state (None when they state none) and whether their answer is ``correct`` for the question."""
    setting = load_setting(setting_spec)
    answer = gens.merge(prompts[["dataset", "prompt_id", "reference"]], on=["dataset", "prompt_id"], how="left")
    parsed = [parse_response(setting, text, ref) for text, ref in zip(answer["response"], answer["reference"])]
    return gens.assign(identity=[p.get("identity") for p in parsed], correct=[bool(p.get("correct")) for p in parsed])


def context_length(model_config: Any) -> int | None:
    """The positions a model can read (None when its config does not say)."""
    for key in ("n_positions", "max_position_embeddings"):
        value = getattr(model_config, key, None)
        if value:
            return int(value)
    return None


def fitting_rows(rows: pd.DataFrame, tokenizer: Any, limit: int | None, new_tokens: int) -> tuple[pd.DataFrame, int]:
    """(the rows whose input and ``new_tokens`` fit in ``limit`` positions, how many variants were
    left out). The same for every checkpoint of a run (one architecture); a baseline that does
    not fit is an error, as its prompt could not be measured at all."""
    if limit is None:
        return rows, 0
    lengths = pd.Series([len(ids) for ids in tokenizer(rows["model_input"].tolist()).input_ids], index=rows.index)
    fits = lengths + new_tokens <= limit
    base_long = ~fits & (rows["family"] == "baseline")
    if base_long.any():
        raise ValueError(
            f"prompts {rows.loc[base_long, 'prompt_id'].head(5).tolist()} with {new_tokens} new tokens do not fit in the "
            f"model's {limit} positions"
        )
    if (~fits).any():
        LOGGER.info(
            "left out %d variants longer than the model's %d positions allow: %s",
            int((~fits).sum()),
            limit,
            rows.loc[~fits].groupby(["family", "kind", "strength"]).size().to_dict(),
        )
    return rows[fits].reset_index(drop=True), int((~fits).sum())
