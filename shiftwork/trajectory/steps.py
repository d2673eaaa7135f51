"""Workflow steps of the trajectory study: suite, fine-tuning, evaluation, scores, analysis."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from shiftwork.logs import LOGGER
from shiftwork.provenance import make_provenance
from shiftwork.reports.tables import to_markdown
from shiftwork.tables import read_table, write_table, write_text
from shiftwork.trajectory.jobs import EvalOptions
from shiftwork.trajectory.scores import MIN_UNPINNED, analysis_scores, label_scores, prediction_shares
from shiftwork.trajectory.sections import AnalysisSettings, CalibrationSettings
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
    options: EvalOptions,
) -> None:
    """Per-example predictions of one checkpoint (of run ``run`` of ``model``, at ``step``) on every
    test set of the suite, as ``options`` say."""
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.trajectory.evaluate import accuracy_table, predict

    suite = read_table(suite_path, ["example_id", "split", "set", "premise", "hypothesis", "label"])
    tests = suite[suite["split"] == "test"]
    start = time.perf_counter()
    net, tok, device = load_checkpoint(base_dir, checkpoint, options.dtype)
    preds = predict(
        net, tok, device, tests, options.batch_size, options.pattern, options.verbalisers, what=f"evaluate step {step}"
    )
    preds.insert(0, "step", int(step))
    preds.insert(0, "run", run)
    preds.insert(0, "model", model)
    settings = {
        "checkpoint": dict(checkpoint),
        "step": int(step),
        "pattern": options.pattern,
        "verbalisers": dict(options.verbalisers),
    }
    write_table(preds, out, make_provenance("evaluate", settings, model=model))
    acc = accuracy_table(preds)
    LOGGER.info("step %s on %s in %.1f s:\n%s", step, device, time.perf_counter() - start, acc.to_string(index=False))


def collect_scores(
    prediction_paths: Sequence[str],
    id_set: str,
    out_scores: str,
    out_items: str,
    runs: Mapping[str, Mapping[str, Any]],
) -> None:
    """One row per (run, step, test set): accuracy, n, the accuracy among the items of each gold
    label (``accuracy_entailment``, ``accuracy_not_entailment``; NaN where the set has none) and
    the balanced accuracy, their mean over the labels the set holds
    (:func:`~shiftwork.trajectory.scores.label_scores`); role is id or ood. From ``runs`` (run
    name -> its config entry), each row also carries the run's ``suite``, ``shots`` (ID
    training examples; missing for runs that bring their own checkpoints) and ``seed``, so that
    runs that differ only in seed can be grouped. And the items table: every prediction of every
    checkpoint (:data:`~shiftwork.trajectory.analysis.ITEM_COLUMNS`), which the item bootstrap and
    the label bias of the analysis read."""
    from shiftwork.trajectory.analysis import ITEM_COLUMNS

    preds = pd.concat([read_table(p) for p in prediction_paths], ignore_index=True)
    scores = label_scores(preds, ["model", "run", "step", "set"]).rename(columns={"set": "testset"})
    scores = scores.merge(prediction_shares(preds, ["run", "step"]), on=["run", "step"], how="left")
    scores["role"] = ["id" if t == id_set else "ood" for t in scores["testset"]]
    missing = sorted(set(scores["run"]) - set(runs))
    if missing:
        raise ValueError(f"predictions of runs {missing} that the config does not define")
    scores["suite"] = [runs[r]["suite"] for r in scores["run"]]
    scores["shots"] = pd.array([runs[r]["shots"] for r in scores["run"]], dtype="Int64")
    scores["seed"] = pd.array([runs[r]["seed"] for r in scores["run"]], dtype="Int64")
    items = preds[list(ITEM_COLUMNS)].sort_values(["model", "run", "step", "set", "example_id"], kind="stable")
    prov = make_provenance("collect_scores", {"id_set": id_set})
    write_table(scores, out_scores, prov)
    write_table(items.reset_index(drop=True), out_items, prov)


def calibrate_trajectory(
    scores_path: str, items_path: str, analysis: AnalysisSettings, calibration: CalibrationSettings, out: str
) -> None:
    """The calibration table of every run (:func:`~shiftwork.trajectory.calibration.calibrate`):
    the run's pair analysis (``analysis``, config ``trajectory.analysis``) on null runs fitted to it
    and on runs with a planted coupling."""
    from shiftwork.trajectory.analysis import PairOptions
    from shiftwork.trajectory.calibration import calibrate

    start = time.perf_counter()
    scores = analysis_scores(read_table(scores_path), analysis.score, analysis.pinned)
    table = calibrate(scores, read_table(items_path), PairOptions.of(analysis), calibration)
    LOGGER.info("calibration (%d replicates a kind) in %.1f s", calibration.replicates, time.perf_counter() - start)
    LOGGER.info("%s", table.drop(columns=["model"]).to_string(index=False))
    settings = {**analysis.as_dict(), "calibration": calibration.as_dict()}
    prov = make_provenance("calibrate_trajectory", settings, seed=calibration.seed)
    write_table(table, out, prov)


def replicate_trajectory(
    scores_path: str,
    items_path: str,
    pairs_path: str,
    analysis: AnalysisSettings,
    calibration: CalibrationSettings,
    outputs: Mapping[str, str],
) -> None:
    """The paper's claims tested across runs and their calibration
    (:mod:`shiftwork.trajectory.replication`): ``outputs`` maps ``claims``, ``calibration``,
    ``reference`` (the null reference of the between-model test) and ``report`` to their paths. The null replicates are drawn only where a claim has the runs it
    needs (at least two)."""
    from shiftwork.trajectory.analysis import PairOptions
    from shiftwork.trajectory.replication import (
        CLAIM_CALIBRATION_COLUMNS,
        REFERENCE_COLUMNS,
        calibrate_claims,
        claim_table,
        replication_report,
        windows_possible,
    )
    from shiftwork.trajectory.windows import window_table

    scores = analysis_scores(read_table(scores_path), analysis.score, analysis.pinned)
    options = PairOptions.of(analysis)
    windows = None
    if windows_possible(scores):
        windows = window_table(scores, **dataclasses.asdict(dataclasses.replace(options, resamples=0)))
    start = time.perf_counter()
    reference = pd.DataFrame(columns=list(REFERENCE_COLUMNS))
    table = pd.DataFrame(columns=list(CLAIM_CALIBRATION_COLUMNS))
    if scores["run"].nunique() >= 2:
        calibrated = calibrate_claims(
            scores, read_table(items_path), options, calibration.replicates, calibration.seed, calibration.planted_sd
        )
        table, reference = calibrated.table, calibrated.reference
    LOGGER.info(
        "replication calibration (%d replicates) in %.1f s", calibration.replicates, time.perf_counter() - start
    )
    claims = claim_table(read_table(pairs_path), windows, analysis.alpha, None if reference.empty else reference)
    settings = {**analysis.as_dict(), "calibration": calibration.as_dict()}
    prov = make_provenance("replicate_trajectory", settings, seed=calibration.seed)
    write_table(claims, outputs["claims"], prov)
    write_table(table, outputs["calibration"], prov)
    write_table(reference, outputs["reference"], prov)
    write_text(replication_report(claims, table, scores), outputs["report"])


def analyse_trajectory(
    scores_path: str,
    items_path: str,
    analysis: AnalysisSettings,
    outputs: Mapping[str, str],
    figure_dir: str,
    calibration_path: str | None = None,
) -> None:
    """Pairs, summary, label bias, seed summary, report and figures of the trajectory study.

    ``analysis`` is config ``trajectory.analysis``; its ``score`` is the column of the scores
    table the analysis reads (:func:`~shiftwork.trajectory.scores.analysis_scores`). ``outputs``
    maps ``pairs``, ``summary``, ``label_bias``, ``seeds`` and ``report`` to their paths; the
    calibration table (``calibration_path``, rule calibrate_trajectory) goes into the report.
    """
    from shiftwork.trajectory.analysis import PairOptions, label_bias, pair_table, summary

    scores = analysis_scores(read_table(scores_path), analysis.score, analysis.pinned)
    items = read_table(items_path)
    bias = label_bias(items)
    start = time.perf_counter()
    pairs = pair_table(scores, PairOptions.of(analysis), items=items, bias=bias)
    LOGGER.info(
        "pair table (%s on %s, %d resamples) in %.1f s",
        analysis.method,
        analysis.score,
        analysis.boot.resamples,
        time.perf_counter() - start,
    )
    summ = summary(pairs)
    prov = make_provenance("analyse_trajectory", analysis.as_dict())
    write_table(pairs, outputs["pairs"], prov)
    write_table(summ, outputs["summary"], prov)
    write_table(bias, outputs["label_bias"], prov)
    seeds = seed_summary(scores, pairs)
    write_table(seeds, outputs["seeds"], prov)
    _analysis_figures(scores, pairs, Path(figure_dir))
    calibration = read_table(calibration_path) if calibration_path else None
    write_text(_analysis_report(scores, bias, pairs, summ, seeds, analysis, calibration), outputs["report"])


def _analysis_figures(scores: pd.DataFrame, pairs: pd.DataFrame, figs: Path) -> None:
    """Each run's heatmap of partial correlations and the accuracy curves of every run."""
    from shiftwork.trajectory.report import correlation_heatmap, curve_plot

    figs.mkdir(parents=True, exist_ok=True)
    for run in sorted(scores["run"].unique()):
        correlation_heatmap(pairs, run, figs / f"partial_{run}.png", figs / f"partial_{run}.svg")
    curve_plot(scores, figs / "curves.png", figs / "curves.svg")


def _analysis_report(
    scores: pd.DataFrame,
    bias: pd.DataFrame,
    pairs: pd.DataFrame,
    summ: pd.DataFrame,
    seeds: pd.DataFrame,
    analysis: AnalysisSettings,
    calibration: pd.DataFrame | None = None,
) -> str:
    """The study's Markdown report: the score the analysis read, its curves, the last checkpoint's
    raw, per-label and balanced accuracy, label bias, the OOD pairs, their shares by sign and the
    pairs over seeds. ``scores`` is the table the analysis read
    (:func:`~shiftwork.trajectory.scores.analysis_scores`)."""
    from shiftwork.trajectory.report import METHOD_TITLES, SCORE_TITLES, last_checkpoint_scores

    method, alpha = analysis.method, analysis.alpha
    curves = scores.pivot_table(index=["run", "step"], columns="testset", values="accuracy").reset_index()
    shown = ["model", "run", "ood_a", "ood_b", "n", "r_raw", "r_primary", "p_primary_holm"]
    shown += ["boot_sign_share", "r_partial_bias", "sign", "reason"]
    left_out = scores.attrs.get("pinned", {})
    pinned = (
        f"Checkpoints whose test predictions are at least {analysis.pinned:g} one label are left out of the "
        "analysis (config `trajectory.analysis.pinned`; the lean pins the answers there): "
        + ("; ".join(f"run {run}: steps {', '.join(map(str, steps))}" for run, steps in left_out.items()) or "none")
        + "."
        + "".join(
            f" Run {run} keeps its pinned steps {', '.join(map(str, steps))}: without them fewer than "
            f"{MIN_UNPINNED} checkpoints would be left."
            for run, steps in scores.attrs.get("pinned_kept", {}).items()
        )
        if analysis.pinned is not None
        else "Every checkpoint is analysed (config `trajectory.analysis.pinned: null`)."
    )
    text = [
        "# Trajectory study",
        "",
        f"The analysis reads each set's {SCORE_TITLES[analysis.score]} (config `trajectory.analysis.score: "
        f"{analysis.score}`).",
        "",
        pinned,
        "",
        f"## {SCORE_TITLES[analysis.score].capitalize()} per checkpoint",
        "",
        to_markdown(curves),
        "## Raw, per-label, balanced and lean-free accuracy at each run's last checkpoint",
        "",
        "accuracy_<label>: accuracy among the set's items of that gold label (empty where it has none); "
        "balanced_accuracy: their mean over the labels the set holds; lean_free_accuracy: expit of the mean of "
        "the labels' log odds, in which a lean towards one label cancels. On a set with one label the raw accuracy "
        "is the checkpoint's share of that label; on a balanced set raw and balanced accuracy agree.",
        "",
        to_markdown(last_checkpoint_scores(scores)),
        "## Label bias per checkpoint",
        "",
        "Share of the checkpoint's test predictions that are 'entailment', over all test sets and per set.",
        "",
        to_markdown(bias),
        f"## OOD pairs: partial correlation controlling ID accuracy, primary method {method}",
        "",
        f"ID removed by {METHOD_TITLES[method]}. p_primary_holm: Holm-adjusted within the run. "
        f"boot_sign_share: share of {analysis.boot.resamples} item-bootstrap resamples with the sign "
        "of r_primary. r_partial_bias: linear partial correlation controlling ID accuracy and label bias. "
        "reason: why r_primary is undefined (n/a), e.g. a test set constant over the run; empty when computed.",
        "",
        to_markdown(pairs[shown]),
        *_calibration_section(calibration, pairs),
        f"## Share of OOD pairs by sign of the primary partial correlation (Holm, alpha {alpha:g})",
        "",
        to_markdown(summ),
        "## Over seeds: each (model, ID set, shots) setting",
        "",
        "r_primary over the setting's seeds: mean, sample SD, range; sign: positive (negative) when every "
        "seed's pair is Holm-significant with that sign, else null.",
        "",
        to_markdown(seeds),
    ]
    return "\n".join(text) + "\n"


def _calibration_section(calibration: pd.DataFrame | None, pairs: pd.DataFrame) -> list[str]:
    """The report's calibration section: the table and, per run, whether its significant pairs
    are findings (the run's family-wise false-positive rate on its null at most alpha)."""
    if calibration is None:
        return []
    lines = [
        "## Calibration: the same analysis on null runs shaped like each run",
        "",
        "Each run's pair analysis (same score, control, dependence correction and Holm family) on null runs "
        "fitted to the run: its ID trajectory, label lean, autocorrelation, set levels and item counts, with "
        "the test sets coupled by nothing else (shiftwork.trajectory.null). kind null: rate is the family-wise "
        "false-positive rate, the share of null runs with at least one Holm-significant pair; kind planted: "
        "rate is the power, the share of runs with a shared log-odds component of standard deviation "
        "planted_sd on one pair in which that pair is Holm-significant and positive. ci_low, ci_high: exact "
        "95% interval. phi: the fitted AR(1) coefficient; lean_sd: the lean's standard deviation (log odds).",
        "",
        to_markdown(calibration.drop(columns=["model"])),
    ]
    for run, part in calibration.groupby("run", sort=True):
        n_sig = int(((pairs["run"] == run) & (pairs["sign"] != "null")).sum())
        null = part[part["kind"] == "null"].iloc[0]
        if bool(null["calibrated"]):
            verdict = (
                f"calibrated (false-positive rate {null['rate']:.3f} <= alpha {null['alpha']:g}): its "
                f"{n_sig} Holm-significant pair(s) are findings."
            )
        elif n_sig:
            verdict = (
                f"NOT calibrated (false-positive rate {null['rate']:.3f} > alpha {null['alpha']:g}): its "
                f"{n_sig} Holm-significant pair(s) are not findings; the design or the method can produce them "
                "without any coupling."
            )
        else:
            verdict = (
                f"NOT calibrated (false-positive rate {null['rate']:.3f} > alpha {null['alpha']:g}); it has no "
                "Holm-significant pair, and one would not have been a finding."
            )
        lines += [f"- run {run}: {verdict}"]
    return [*lines, ""]


def seed_summary(scores: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The pairs aggregated over the seeds of each (model, suite, shots) setting: the columns of
    :func:`~shiftwork.trajectory.fingerprint.fingerprint` keyed by those three. Runs that bring
    their own checkpoints have no shots (a missing value, one setting per suite)."""
    from shiftwork.trajectory.fingerprint import fingerprint

    keys = ["model", "suite", "shots"]
    if not set(keys) <= set(scores.columns):
        raise ValueError(f"scores table lacks {sorted(set(keys) - set(scores.columns))}; rerun collect_scores")
    meta = scores[["run", "suite", "shots"]].drop_duplicates("run")
    meta = meta.assign(shots=meta["shots"].astype("Int64").astype(str).replace("<NA>", "-"))
    return fingerprint(pairs.merge(meta, on="run", how="left"), by=keys)


def plot_trajectory(
    scores_path: str,
    pairs_path: str,
    analysis: Mapping[str, Any],
    out_raw_vs_partial: str,
    out_fingerprint: str,
    out_windows: str | None,
    out_markdown: str,
    figure_dir: str,
) -> None:
    """The paper's figures from the scores and the pairs table: per-run scatter plots of the
    ID residuals, raw vs partial r, early vs late windows (skipped when ``out_windows`` is
    None) and the cross-model fingerprint; their tables and ``figures.md``. ``analysis`` is
    config ``trajectory.analysis`` (``alpha``, ``spline_df``, the primary ``method``, ``gam_df`` and
    the ``score`` read from the scores table, :func:`~shiftwork.trajectory.scores.analysis_scores`)."""
    from shiftwork.trajectory import figures
    from shiftwork.trajectory.analysis import sorted_mixed
    from shiftwork.trajectory.fingerprint import fingerprint
    from shiftwork.trajectory.primary import raw_vs_primary
    from shiftwork.trajectory.windows import window_table

    settings = AnalysisSettings.from_config(analysis)
    scores = analysis_scores(read_table(scores_path), settings.score, settings.pinned)
    pairs = read_table(pairs_path)
    alpha, spline_df = float(analysis["alpha"]), int(analysis["spline_df"])
    method = str(analysis["method"])
    prov = make_provenance("plot_trajectory", dict(analysis))
    figs = Path(figure_dir)
    runs = sorted_mixed(pairs["run"].unique().tolist())
    for run in runs:
        figures.scatter_grid(scores, pairs, run, figs / f"scatter_{run}.png", figs / f"scatter_{run}.svg", method)
    raw = raw_vs_primary(pairs)
    write_table(raw, out_raw_vs_partial, prov)
    figures.raw_vs_primary_plot(raw, figs / "raw_vs_partial.png", figs / "raw_vs_partial.svg", method)
    windows = None
    if out_windows is not None:
        windows = window_table(
            scores,
            alpha=alpha,
            df=spline_df,
            method=method,
            gam_df=int(analysis["gam_df"]),
            dependence=settings.dependence,
        )
        write_table(windows, out_windows, prov)
        figures.window_plot(windows, figs / "windows.png", figs / "windows.svg")
    finger = fingerprint(pairs)
    write_table(finger, out_fingerprint, prov)
    figures.fingerprint_plot(finger, figs / "fingerprint.png", figs / "fingerprint.svg", method, alpha)
    write_text(figures.figures_markdown(runs, finger, windows, method, alpha) + "\n", out_markdown)
    LOGGER.info("figures of %d run(s) in %s", len(runs), figs)
