"""Workflow steps of the organisms study, one function per Snakemake rule.

An *organism* (``organisms.sft.<name>`` in the config) is a model fine-tuned on the transcripts of
a setting's policies; a *run* (``organisms.runs.<name>``) trains one organism further by RL, in one
or more stages, and is evaluated at every checkpoint on held-out questions of every distribution.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.logs import LOGGER
from shiftwork.models.checkpoint_source import checkpoint_dirs
from shiftwork.organisms.evaluation import checkpoint_tables, score_responses
from shiftwork.organisms.fidelity import fidelity_prompts, fidelity_table, require_fidelity
from shiftwork.organisms.policy_reward import rl_reward
from shiftwork.organisms.questions import question_bank, split_questions
from shiftwork.organisms.sections import EvaluationSettings
from shiftwork.organisms.settings import Setting, load_setting, prompt_for, question_specs
from shiftwork.organisms.transcripts import Questions, parse_response, rl_prompts, sft_examples
from shiftwork.progress import Progress
from shiftwork.provenance import make_provenance
from shiftwork.tables import read_table, write_table, write_text

RESPONSE_CUE = "\nResponse:"
"""Ends every prompt, so a model trained without a chat template knows where its turn begins."""


def _cue(prompts: pd.Series) -> pd.Series:
    return prompts + RESPONSE_CUE


def split_banks(setting: Setting, questions: Mapping[str, Any]) -> tuple[Questions, Questions]:
    """(train, test) questions of ``setting`` from its ``questions`` spec (``kind``, ``n_train``,
    ``n_test``, ``seed``): one shared pair of DataFrames for ``trigger: tag``, otherwise a mapping from
    every distribution to its own, each bank split into ``n_train`` and ``n_test`` disjoint questions."""
    specs = question_specs(setting, questions)
    n_train, n_test, seed = int(questions["n_train"]), int(questions["n_test"]), int(questions.get("seed", 0))
    if setting.trigger == "tag":
        return split_questions(question_bank(specs[setting.distributions[0]]), n_train, n_test, seed)
    pairs = {d: split_questions(question_bank(spec), n_train, n_test, seed) for d, spec in specs.items()}
    return {d: p[0] for d, p in pairs.items()}, {d: p[1] for d, p in pairs.items()}


def _by_distribution(setting: Setting, banks: Questions) -> list[tuple[str, pd.DataFrame]]:
    if isinstance(banks, pd.DataFrame):
        return [(d, banks) for d in setting.distributions]
    return [(d, banks[d]) for d in setting.distributions]


def make_organism_data(name: str, spec: Mapping[str, Any], outs: Mapping[str, str]) -> None:
    """SFT transcripts, the training questions RL draws from, and held-out test prompts of every
    distribution (``outs``: sft, questions, test). With a bank per distribution (``trigger: task`` or
    ``language``), the training questions carry a ``distribution`` column."""
    setting = load_setting(spec["setting"])
    q = spec["questions"]
    seed = int(q["seed"])
    train, test = split_banks(setting, q)
    sft = sft_examples(setting, train, int(spec["n_examples"]), seed)
    sft = sft.assign(prompt=_cue(sft["prompt"]), completion=" " + sft["completion"])
    rows = [
        {
            "distribution": d,
            "question_id": t.question_id,
            "question": t.question,
            "answer": t.answer,
            "prompt": prompt_for(setting, d, t.question) + RESPONSE_CUE,
            **({"n_options": int(t.n_options)} if hasattr(t, "n_options") else {}),
        }
        for d, bank in _by_distribution(setting, test)
        for t in bank.itertuples(index=False)
    ]
    if not isinstance(train, pd.DataFrame):
        train = pd.concat([bank.assign(distribution=d) for d, bank in train.items()], ignore_index=True)
    prov = make_provenance("make_organism_data", {"organism": name, **dict(spec)}, seed=seed)
    write_table(sft, outs["sft"], prov)
    write_table(train, outs["questions"], prov)
    write_table(pd.DataFrame(rows), outs["test"], prov)
    LOGGER.info("SFT policy shares: %s", sft["policy"].value_counts(normalize=True).round(3).to_dict())


def training_questions(table: pd.DataFrame) -> Questions:
    """The training questions table of :func:`make_organism_data` as RL reads it: the table itself,
    or, when it has a ``distribution`` column, a mapping from each distribution to its rows."""
    if "distribution" not in table.columns:
        return table
    return {
        str(d): part.drop(columns="distribution").reset_index(drop=True)
        for d, part in table.groupby("distribution", sort=False)
    }


def make_rl_prompts(
    run: str,
    setting_spec: Mapping[str, Any],
    questions_path: str,
    stages: Sequence[Mapping[str, Any]],
    n_prompts: int,
    seed: int,
    out: str,
) -> None:
    """RL prompts of every stage (column ``stage``), drawn from the organism's training questions."""
    setting = load_setting(setting_spec)
    questions = training_questions(read_table(questions_path, ["question_id", "question", "answer"]))
    parts = []
    for number, stage in enumerate(stages):
        part = rl_prompts(setting, questions, stage["distributions"], int(n_prompts), seed + number)
        parts.append(part.assign(prompt=_cue(part["prompt"]), stage=number))
    table = pd.concat(parts, ignore_index=True)
    write_table(table, out, make_provenance("make_rl_prompts", {"run": run, "stages": list(stages)}, seed=seed))
    LOGGER.info(
        "RL prompts per stage and distribution:\n%s", table.groupby(["stage", "distribution"]).size().to_string()
    )


def train_sft(model_dir: str, sft_path: str, settings: Mapping[str, Any], seed: int, out_dir: str) -> None:
    from shiftwork.organisms.training import sft

    start = time.perf_counter()
    examples = read_table(sft_path, ["prompt", "completion"])
    info = sft(model_dir, examples, settings, out_dir, seed)
    LOGGER.info(
        "SFT (%d steps) in %.1f s; loss %s",
        int(settings["steps"]),
        time.perf_counter() - start,
        [round(h["loss"], 3) for h in info["train_log"]],
    )


def sft_fidelity(
    sft_dir: str, test_path: str, setting_spec: Mapping[str, Any], evaluation: EvaluationSettings, out: str
) -> None:
    """The policy fidelity of the SFT model at ``sft_dir`` on the held-out prompts of ``test_path``
    (:mod:`shiftwork.organisms.fidelity`), greedy, in the evaluation's dtype and batch size."""
    from shiftwork.inference.engine import Decoding, generate

    setting = load_setting(setting_spec)
    tests = read_table(test_path, ["distribution", "question_id", "question", "answer", "prompt"])
    prompts = fidelity_prompts(setting, tests)
    start = time.perf_counter()
    lm = _organism_model(sft_dir, sft_dir, str(evaluation.dtype))
    decoding = Decoding(max_new_tokens=int(evaluation.max_new_tokens), batch_size=int(evaluation.batch_size))
    replies = generate(lm, prompts["input"].tolist(), decoding, what="fidelity")
    table = fidelity_table(setting, prompts, [g.response for g in replies])
    LOGGER.info("policy fidelity after SFT (%.1f s):\n%s", time.perf_counter() - start, table.to_string(index=False))
    prov = make_provenance("sft_fidelity", {"setting": dict(setting_spec), "evaluation": evaluation.as_dict()})
    write_table(table, out, prov)


def train_rl(
    sft_dir: str,
    prompts_path: str,
    stages: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    seed: int,
    out_dir: str,
    fidelity: tuple[str, str, float | None] | None = None,
    names: Sequence[str] = (),
) -> None:
    """RL from the SFT model through ``stages``, rewarding with :func:`rl_reward` (``names``: the
    setting's policies, for ``reward_format: template``). With ``fidelity`` = (organism, path of
    its :func:`sft_fidelity` table, minimum), the job first stops with
    :class:`~shiftwork.organisms.fidelity.FidelityError` when the SFT model does not follow its
    policies, before any model is loaded."""
    from shiftwork.organisms.training import rl

    if fidelity is not None:
        organism, path, minimum = fidelity
        require_fidelity(read_table(path), minimum, organism, path)
    start = time.perf_counter()
    prompts = read_table(prompts_path, ["prompt", "answer", "stage"])
    plan = [(prompts[prompts["stage"] == number], int(stage["steps"])) for number, stage in enumerate(stages)]
    for number, (part, _) in enumerate(plan):
        if part.empty:
            raise ValueError(f"{prompts_path}: no prompts for RL stage {number}")
    steps = rl(sft_dir, plan, rl_reward, settings, out_dir, seed, names)
    LOGGER.info("RL in %.1f s; checkpoints at steps %s", time.perf_counter() - start, steps)


def evaluate_organism(
    inputs: Mapping[str, str],
    setting_spec: Mapping[str, Any],
    trained: Sequence[str],
    model: str,
    run: str,
    evaluation: EvaluationSettings,
    outs: Mapping[str, str],
) -> None:
    """Every checkpoint on every distribution's held-out prompts: per-response rows, and per
    (step, distribution) accuracy, refusal rate and identity shares. ``inputs`` maps sft (the model
    the checkpoints adapt), checkpoints and test to their paths; ``outs`` maps responses, scores and
    identities."""
    setting = load_setting(setting_spec)
    tests = read_table(inputs["test"], ["distribution", "question_id", "prompt", "answer"])
    parts = []
    checkpoints = checkpoint_dirs(inputs["checkpoints"])
    progress = Progress("evaluate", len(checkpoints), "checkpoints")
    for step, path in checkpoints:
        parts.append(_checkpoint_responses(inputs["sft"], step, path, tests, setting, evaluation))
        progress.update()
    per_example = pd.concat(parts, ignore_index=True)
    per_example.insert(0, "run", run)
    per_example.insert(0, "model", model)
    scores, identities = checkpoint_tables(per_example, [str(t) for t in trained])
    prov = make_provenance("evaluate_organism", {"run": run, "evaluation": evaluation.as_dict()}, model=model)
    write_table(per_example, outs["responses"], prov)
    write_table(scores, outs["scores"], prov)
    write_table(identities, outs["identities"], prov)


def _organism_model(sft_dir: str, path: str, dtype: str):
    """The organism at ``path`` (an RL checkpoint of the SFT model at ``sft_dir``, or that model
    itself) in ``dtype``, ready for :func:`shiftwork.inference.engine.generate`: prompts as they
    are, no chat template."""
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.models.loading import LoadedModel

    net, tok, device = load_checkpoint(sft_dir, {"path": path}, dtype)
    return LoadedModel(name=path, model=net, tokenizer=tok, device=device, dtype=net.dtype, chat=False, info={})


def _checkpoint_responses(
    sft_dir: str, step: int, path: Path, tests: pd.DataFrame, setting: Setting, evaluation: EvaluationSettings
) -> pd.DataFrame:
    """The checkpoint at ``path`` (step ``step``)'s sampled responses to ``tests``, scored: one row
    per sample of every test prompt, the step first."""
    from shiftwork.inference.engine import Decoding, generate

    samples = int(evaluation.samples)
    start = time.perf_counter()
    lm = _organism_model(sft_dir, str(path), str(evaluation.dtype))
    decoding = Decoding(
        max_new_tokens=int(evaluation.max_new_tokens),
        batch_size=int(evaluation.batch_size),
        samples=samples,
        temperature=float(evaluation.temperature),
        seed=int(evaluation.seed),
    )
    texts = generate(lm, tests["prompt"].tolist(), decoding, what=f"sample step {step}")
    rows = tests.loc[tests.index.repeat(samples)].reset_index(drop=True)
    rows.insert(0, "sample", np.tile(np.arange(samples), len(tests)))
    scored = score_responses(rows, [t for group in texts for t in group], partial(parse_response, setting))
    scored.insert(0, "step", step)
    LOGGER.info(
        "step %d (%.1f s):\n%s",
        step,
        time.perf_counter() - start,
        scored.groupby("distribution")[["correct", "refused"]].mean().to_string(),
    )
    return scored


def plot_organism_run(
    scores_path: str, identities_path: str, setting_spec: Mapping[str, Any], out_png: str, out_svg: str
) -> None:
    from shiftwork.organisms.report import run_figure

    setting = load_setting(setting_spec)
    run_figure(read_table(scores_path), read_table(identities_path), setting, out_png, out_svg)


def report_organisms(
    scores_paths: Sequence[str],
    identities_paths: Sequence[str],
    checkpoints_dirs: Sequence[str],
    runs: Mapping[str, Mapping[str, Any]],
    criteria: Mapping[str, float],
    outs: Mapping[str, str],
    fidelity_paths: Sequence[str] = (),
    checkpoint_tables: bool = False,
) -> None:
    """All runs' scores in one table; the headline table (after SFT and after every RL stage, whose
    end step each RL job recorded in its checkpoints directory), the same over RL seeds, and a
    Markdown report (``outs``: scores, headline, seeds, summary, report). ``checkpoints_dirs`` are
    in the order of ``runs``. ``fidelity_paths`` are the :func:`sft_fidelity` tables of the
    organisms (``<organism>/fidelity.parquet``), shown in the report; with ``checkpoint_tables``
    the report also shows every run at every checkpoint."""
    from shiftwork.organisms.report import (
        checkpoint_table,
        choice_dependence,
        headline_table,
        markdown_report,
        over_seeds,
        run_summary,
    )
    from shiftwork.organisms.training import STAGES_FILE

    if len(checkpoints_dirs) != len(runs):
        raise ValueError(f"{len(checkpoints_dirs)} checkpoint directories for {len(runs)} runs")
    info = {}
    for (run, spec), directory in zip(runs.items(), checkpoints_dirs):
        path = Path(directory) / STAGES_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: rerun the RL job of run '{run}' (train_rl)")
        ended = json.loads(path.read_text())
        if len(ended) != len(spec["stages"]):
            raise ValueError(f"{path} records {len(ended)} stages, run '{run}' has {len(spec['stages'])}")
        stages = [{**dict(stage), **done} for stage, done in zip(spec["stages"], ended)]
        info[run] = {**dict(spec), "stages": stages}
    scores = pd.concat([read_table(p) for p in scores_paths], ignore_index=True)
    identities = pd.concat([read_table(p) for p in identities_paths], ignore_index=True)
    table = headline_table(scores, identities, info)
    prov = make_provenance("report_organisms", {"runs": sorted(runs), "criteria": dict(criteria)})
    write_table(scores, outs["scores"], prov)
    write_table(table, outs["headline"], prov)
    seeds = over_seeds(table, info)
    summary = run_summary(table, criteria)
    write_table(seeds, outs["seeds"], prov)
    write_table(summary, outs["summary"], prov)
    fidelity = [read_table(p).assign(organism=Path(p).parent.name) for p in fidelity_paths]
    fidelity_all = pd.concat(fidelity, ignore_index=True) if fidelity else None
    by_checkpoint = None
    if checkpoint_tables:
        by_checkpoint = {}
        for run, spec in info.items():
            setting = load_setting(spec["setting"])
            by_checkpoint[run] = (
                checkpoint_table(scores, identities, run, setting),
                choice_dependence(scores, identities, run, setting),
            )
    write_text(markdown_report(table, summary, seeds, info, criteria, fidelity_all, by_checkpoint), outs["report"])
    LOGGER.info("runs meeting the headline, by phase:\n%s", summary[["run", "phase", "step", "meets"]].to_string())


def simulate_dynamics(spec: Mapping[str, Any], out_table: str, out_png: str, out_svg: str) -> None:
    """The mixture-weight dynamics of ``spec`` (weights, rewards, held_out, names, steps, lr,
    method) as a table and a figure."""
    from shiftwork.organisms.dynamics import held_out_accuracy, plot_dynamics, simulate

    traj = simulate(
        np.asarray(spec["weights"], float),
        np.asarray(spec["rewards"], float),
        int(spec["steps"]),
        float(spec["lr"]),
        spec["method"],
    )
    held = held_out_accuracy(traj, np.asarray(spec["held_out"]))
    names = list(spec["names"])
    table = pd.DataFrame(traj, columns=[f"w_{n}" for n in names]).assign(held_out_accuracy=held)
    table.insert(0, "step", np.arange(len(table)))
    write_table(table, out_table, make_provenance("mixture_dynamics", dict(spec)))
    plot_dynamics(traj, names, out_png, out_svg, held_out=held)


def trained_distributions(stages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distributions any RL stage trains on, in first-seen order."""
    seen: list[str] = []
    for stage in stages:
        for d in stage["distributions"]:
            if str(d) not in seen:
                seen.append(str(d))
    return seen
