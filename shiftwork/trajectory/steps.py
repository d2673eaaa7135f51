"""Workflow steps of the trajectory study: suite, fine-tuning, evaluation, scores, analysis."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from shiftwork.logs import LOGGER
from shiftwork.provenance import make_provenance
from shiftwork.tables import read_table, write_table, write_text
from shiftwork.trajectory.suite import suite_stats
from shiftwork.trajectory.tasks import build_suite


def make_suite(spec: Mapping[str, Any], out: str) -> None:
    suite = build_suite(spec)
    write_table(suite, out, make_provenance("make_suite", dict(spec), seed=spec.get("seed")))
    LOGGER.info("suite: %d examples\n%s", len(suite), suite_stats(suite).to_string(index=False))


def finetune_model(
    model_dir: str,
    suite_path: str,
    settings: Mapping[str, Any],
    seed: int,
    out_dir: str,
    pattern: str,
    verbalisers: Mapping[str, str],
) -> None:
    from shiftwork.trajectory.finetune import finetune

    suite = read_table(suite_path, ["split", "set", "premise", "hypothesis", "label"])
    train = suite[(suite["split"] == "train") & (suite["set"] == "id")]
    start = time.perf_counter()
    steps = finetune(model_dir, train, settings, out_dir, seed=seed, pattern=pattern, verbalisers=verbalisers)
    LOGGER.info("fine-tuned in %.1f s; checkpoints at steps %s", time.perf_counter() - start, steps)


def evaluate_checkpoint(
    base_dir: str,
    checkpoint: Mapping[str, Any],
    suite_path: str,
    run: str,
    model: str,
    step: int,
    out: str,
    batch_size: int,
    pattern: str,
    verbalisers: Mapping[str, str],
    dtype: str = "auto",
) -> None:
    """Per-example predictions of one checkpoint on every test set of the suite, each example in
    the suite's ``pattern`` and read through its ``verbalisers``."""
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.trajectory.evaluate import accuracy_table, predict

    suite = read_table(suite_path, ["example_id", "split", "set", "premise", "hypothesis", "label"])
    tests = suite[suite["split"] == "test"]
    start = time.perf_counter()
    net, tok, device = load_checkpoint(base_dir, checkpoint, dtype)
    preds = predict(net, tok, device, tests, batch_size, pattern, verbalisers)
    preds.insert(0, "step", int(step))
    preds.insert(0, "run", run)
    preds.insert(0, "model", model)
    settings = {"checkpoint": dict(checkpoint), "step": int(step), "pattern": pattern, "verbalisers": dict(verbalisers)}
    write_table(preds, out, make_provenance("evaluate", settings, model=model))
    acc = accuracy_table(preds)
    LOGGER.info("step %s on %s in %.1f s:\n%s", step, device, time.perf_counter() - start, acc.to_string(index=False))


def collect_scores(
    prediction_paths: Sequence[str], id_set: str, out: str, runs: Mapping[str, Mapping[str, Any]] | None = None
) -> None:
    """One row per (run, step, test set): accuracy and n; role is id or ood. With ``runs`` (run
    name -> its config entry), each row also carries the run's ``suite``, ``shots`` (ID
    training examples; missing for runs that bring their own checkpoints) and ``seed``, so that
    runs that differ only in seed can be grouped."""
    preds = pd.concat([read_table(p) for p in prediction_paths], ignore_index=True)
    scores = (
        preds.groupby(["model", "run", "step", "set"], sort=True)["correct"]
        .agg(accuracy="mean", n="size")
        .reset_index()
        .rename(columns={"set": "testset"})
    )
    scores["role"] = ["id" if t == id_set else "ood" for t in scores["testset"]]
    if runs is not None:
        missing = sorted(set(scores["run"]) - set(runs))
        if missing:
            raise ValueError(f"predictions of runs {missing} that the config does not define")
        scores["suite"] = [runs[r]["suite"] for r in scores["run"]]
        scores["shots"] = pd.array([runs[r]["shots"] for r in scores["run"]], dtype="Int64")
        scores["seed"] = pd.array([runs[r]["seed"] for r in scores["run"]], dtype="Int64")
    write_table(scores, out, make_provenance("collect_scores", {"id_set": id_set}))


def analyse_trajectory(
    scores_path: str, alpha: float, spline_df: int, out_pairs: str, out_summary: str, out_markdown: str, figure_dir: str
) -> None:
    from shiftwork.reports.tables import to_markdown
    from shiftwork.trajectory.analysis import pair_table, summary
    from shiftwork.trajectory.report import curve_plot, heatmap

    scores = read_table(scores_path)
    pairs = pair_table(scores, alpha=alpha, df=spline_df)
    summ = summary(pairs)
    prov = make_provenance("analyse_trajectory", {"alpha": alpha, "spline_df": spline_df})
    write_table(pairs, out_pairs, prov)
    write_table(summ, out_summary, prov)
    figs = Path(figure_dir)
    figs.mkdir(parents=True, exist_ok=True)
    for run in sorted(scores["run"].unique()):
        heatmap(pairs, run, figs / f"partial_{run}.png", figs / f"partial_{run}.svg")
    curve_plot(scores, figs / "curves.png", figs / "curves.svg")
    curves = scores.pivot_table(index=["run", "step"], columns="testset", values="accuracy").reset_index()
    text = [
        "# Trajectory study",
        "",
        "## Accuracy per checkpoint",
        "",
        to_markdown(curves),
        "## OOD pairs: partial correlation controlling ID accuracy",
        "",
        to_markdown(
            pairs[
                ["model", "run", "ood_a", "ood_b", "n", "r_raw", "r_partial", "p_partial_holm", "r_nonlinear", "sign"]
            ]
        ),
        f"## Share of OOD pairs by sign of the partial correlation (Holm, alpha {alpha:g})",
        "",
        to_markdown(summ),
    ]
    write_text("\n".join(text) + "\n", out_markdown)
