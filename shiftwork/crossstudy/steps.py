"""The cross-study's steps over all its runs, one function per rule (rule X -> scripts/X.py -> X
here): paths and settings in, tables out. They read the per-checkpoint tables of
:mod:`shiftwork.crossstudy.run_steps` (prompts, variants and the meaning gate per run; responses,
probes and axis deltas per (run, step)), then collect, analyse, calibrate and report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from shiftwork.crossstudy import analysis as an
from shiftwork.crossstudy import replies, stats, template
from shiftwork.crossstudy import report as rep
from shiftwork.logs import LOGGER
from shiftwork.provenance import make_provenance
from shiftwork.tables import read_table, write_table, write_text
from shiftwork.trajectory.sections import AnalysisSettings


def crossstudy_collect(
    delta_paths: Sequence[str],
    generation_paths: Sequence[str],
    runs: Mapping[str, Mapping[str, Any]],
    R: Mapping[str, float],
    alpha: float,
    calibration: Mapping[str, Any],
    outs: Mapping[str, str],
) -> None:
    """Per-prompt instability of every checkpoint (``per_prompt``), with the axes that fit its
    replies (:func:`shiftwork.crossstudy.replies.by_kind`: label consistency where they are
    labels, the text axes where they are free-form), SGS per (run, step, set) and pooled over the
    run's sets (``sgs``), each step's change from step 0 with a paired test over the same prompts
    (``changes``, :func:`shiftwork.crossstudy.stats.changes`) and those tests' false-positive
    rate on null runs (``change_null``, :func:`shiftwork.crossstudy.change_null.change_calibration`,
    ``calibration``: config trajectory.analysis.calibration's ``replicates`` and ``seed``), and, for
    organism checkpoints, how their parsed responses to baselines and variants fare (``behaviour``,
    :func:`shiftwork.crossstudy.stats.behaviour`). ``runs`` maps each run to its ``study`` and its
    ``answers`` (the answer words; none for free-form runs). ``replies``: each checkpoint's
    replies' kind and precision.

    An organism's variants that keep its trained template (:mod:`shiftwork.crossstudy.template`)
    are left out of those tables and get their own (``template_per_prompt``, ``template_sgs``,
    ``template_changes``, ``template_change_null``, ``template_behaviour``)."""
    deltas = pd.concat([read_table(p) for p in delta_paths], ignore_index=True)
    generations = pd.concat([read_table(p) for p in generation_paths], ignore_index=True)
    sets, kept = template.variant_sets(deltas, generations, runs)
    tables = _collected(*sets["changed"], runs, R, alpha, calibration)
    tables["behaviour"] = _behaviour(sets["changed"][1])
    if len(kept):
        spec = {run: spec for run, spec in runs.items() if spec["study"] == "organisms"}
        kept_tables = _collected(*sets["kept"], spec, R, alpha, calibration)
        kept_tables["behaviour"] = _behaviour(sets["kept"][1])
    else:
        kept_tables = _no_template_tables()
    LOGGER.info("%d organism variants keep their template, in the template_* tables", len(kept))
    prov = make_provenance("crossstudy_collect", {"R": dict(R), "alpha": alpha, "calibration": dict(calibration)})
    for name, table in tables.items():
        write_table(table, outs[name], prov)
    for name in ("per_prompt", "sgs", "changes", "change_null", "behaviour"):
        write_table(kept_tables[name], outs[f"template_{name}"], prov)


def _behaviour(generations: pd.DataFrame) -> pd.DataFrame:
    """:func:`shiftwork.crossstudy.stats.behaviour` of the parsed (organism) rows of ``generations``."""
    if "correct" not in generations.columns:
        return stats.behaviour(pd.DataFrame())
    parsed = generations[generations["correct"].notna()]
    return stats.behaviour(parsed.astype({"correct": bool}).reset_index(drop=True) if len(parsed) else pd.DataFrame())


def _no_template_tables() -> dict[str, pd.DataFrame]:
    """The template_* tables when no organism variant keeps its template: empty, with their keys."""
    from shiftwork.crossstudy.change_null import CHANGE_NULL_COLUMNS

    keys = ["study", "run", "step", "dataset"]
    return {
        "per_prompt": pd.DataFrame(columns=[*keys, "prompt_id"]),
        "sgs": pd.DataFrame(columns=[*keys, "n_prompts"]),
        "changes": pd.DataFrame(columns=stats.CHANGE_COLUMNS),
        "change_null": pd.DataFrame(columns=CHANGE_NULL_COLUMNS),
        "behaviour": pd.DataFrame(columns=stats.BEHAVIOUR_COLUMNS),
    }


def crossstudy_freeform_collect(
    delta_paths: Sequence[str],
    generation_paths: Sequence[str],
    runs: Sequence[str],
    R: Mapping[str, float],
    alpha: float,
    calibration: Mapping[str, Any],
    outs: Mapping[str, str],
) -> None:
    """The tables of :func:`crossstudy_collect` (per_prompt, sgs, changes, change_null, replies)
    for the free-form probe of the trajectory ``runs`` (:mod:`shiftwork.crossstudy.freeform_steps`),
    whose replies are free-form: no answer words."""
    deltas = pd.concat([read_table(p) for p in delta_paths], ignore_index=True)
    generations = pd.concat([read_table(p) for p in generation_paths], ignore_index=True)
    spec = {run: {"study": "trajectory", "answers": []} for run in runs}
    tables = _collected(deltas, generations, spec, R, alpha, calibration)
    prov = make_provenance(
        "crossstudy_freeform_collect", {"R": dict(R), "alpha": alpha, "calibration": dict(calibration)}
    )
    for name, table in tables.items():
        write_table(table, outs[name], prov)


def _collected(
    deltas: pd.DataFrame,
    generations: pd.DataFrame,
    runs: Mapping[str, Mapping[str, Any]],
    R: Mapping[str, float],
    alpha: float,
    calibration: Mapping[str, Any],
) -> dict[str, pd.DataFrame]:
    """per_prompt, sgs, changes, change_null and replies of the checkpoints' deltas and replies.
    The null runs cover each run's prompts pooled and, for organisms runs, each distribution
    (question 3 reports per distribution)."""
    from shiftwork.crossstudy.change_null import change_calibration

    per_prompt, kinds = stats.per_prompt_by_kind(deltas, generations, runs, R)
    changes = stats.changes(per_prompt, alpha)
    reps, seed = int(calibration["replicates"]), int(calibration["seed"])
    organisms = per_prompt[per_prompt["study"] == "organisms"]
    nulls = [change_calibration(per_prompt, alpha, reps, seed)]
    nulls += [change_calibration(organisms, alpha, reps, seed, d) for d in sorted(organisms["dataset"].unique())]
    null = pd.concat(nulls, ignore_index=True)
    LOGGER.info(
        "%d checkpoints of %d runs; replies:\n%s\nstep-0 tests on null runs:\n%s",
        len(kinds),
        per_prompt["run"].nunique(),
        kinds.to_string(index=False),
        null.to_string(index=False),
    )
    return {
        "per_prompt": per_prompt,
        "sgs": stats.sgs(per_prompt),
        "changes": changes,
        "change_null": null,
        "replies": kinds,
    }


def crossstudy_analyse(
    inputs: Mapping[str, str],
    trajectory: Mapping[str, str],
    organisms: Mapping[str, Mapping[str, Any]],
    analysis: Mapping[str, Any],
    collapse: float,
    outs: Mapping[str, str],
) -> None:
    """Question 2 (``pairs``, :func:`shiftwork.crossstudy.analysis.stability_pairs`) from the
    trajectory study's ``scores`` and ``items`` tables (``trajectory``), and question 3
    (``organisms_steps``, ``organisms_timing``) from each organisms run's evaluation
    (``organisms[run]``: ``scores``, ``identities`` paths and ``trained`` policy names), once for
    the variants that change an organism's template and once (``template_organisms_steps``,
    ``template_organisms_timing``) for those that keep it. ``inputs``: the per_prompt, sgs,
    changes and behaviour tables of :func:`crossstudy_collect` and its template_sgs,
    template_changes and template_behaviour."""
    per_prompt = read_table(inputs["per_prompt"])
    traj = per_prompt[per_prompt["study"] == "trajectory"]
    if len(traj):
        pairs = an.stability_pairs(traj, read_table(trajectory["scores"]), read_table(trajectory["items"]), analysis)
    else:
        pairs = pd.DataFrame(columns=an.PAIR_KEEP)
    prov = make_provenance("crossstudy_analyse", {"analysis": dict(analysis), "collapse": collapse})
    write_table(pairs, outs["pairs"], prov)
    for prefix in ("", "template_"):
        tables = {k: read_table(inputs[f"{prefix}{k}"]) for k in ("sgs", "changes", "behaviour")}
        steps, timing = _organism_tables(tables, organisms, collapse, float(analysis["alpha"]))
        write_table(steps, outs[f"{prefix}organisms_steps"], prov)
        write_table(timing, outs[f"{prefix}organisms_timing"], prov)
    LOGGER.info(
        "pairs:\n%s", pairs[["run", "axis", "ood", "r_primary", "p_primary_holm", "sign"]].to_string(index=False)
    )


def _organism_tables(
    tables: Mapping[str, pd.DataFrame], organisms: Mapping[str, Mapping[str, Any]], collapse: float, alpha: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(organisms_steps, organisms_timing) of one variant set's sgs, changes and behaviour tables."""
    sgs = tables["sgs"]
    if organisms and len(sgs):
        scores = pd.concat([read_table(o["scores"]) for o in organisms.values()], ignore_index=True)
        identities = pd.concat([read_table(o["identities"]) for o in organisms.values()], ignore_index=True)
        trained = {run: list(o["trained"]) for run, o in organisms.items()}
        steps = an.organism_steps(sgs, scores, identities, trained, tables["behaviour"])
    else:
        steps = an.organism_steps(sgs.iloc[0:0], pd.DataFrame(), pd.DataFrame(), {})
    return steps, an.organism_timing(steps, tables["changes"], collapse, alpha)


def crossstudy_calibrate(
    per_prompt_path: str, scores_path: str, items_path: str, analysis: Mapping[str, Any], out: str
) -> None:
    """The stability pairs' calibration (:func:`shiftwork.crossstudy.calibration.calibrate_stability_pairs`)
    for every trajectory run the cross-study scored, at the checkpoints the pairs read
    (:func:`shiftwork.crossstudy.analysis.pair_steps`); ``analysis`` is config ``trajectory.analysis``."""
    from shiftwork.crossstudy.calibration import calibrate_stability_pairs

    per_prompt = read_table(per_prompt_path)
    scores = read_table(scores_path)
    traj = per_prompt[per_prompt["study"] == "trajectory"]
    pinned = AnalysisSettings.from_config(analysis).pinned
    traj = an.analysed_rows(traj, an.pair_steps(traj, scores, pinned))
    axes = {run: an.axis_columns(traj, run, replies.CROSS_AXES)[0] for run in sorted(traj["run"].unique())}
    axes = {run: table for run, table in axes.items() if not table.empty}
    table = calibrate_stability_pairs(axes, scores, read_table(items_path), analysis)
    LOGGER.info("%s", table.to_string(index=False))
    write_table(table, out, make_provenance("crossstudy_calibrate", dict(analysis)))


def crossstudy_report(
    inputs: Mapping[str, str],
    trajectory_scores: str | None,
    settings: Mapping[str, float],
    figures: Mapping[str, tuple[str, str]],
    out_findings: str,
    calibration: str | None = None,
) -> None:
    """The figures (``figures[run]`` = (png, svg) for every scored run) and the findings page.
    ``inputs``: sgs, changes, pairs, organisms_steps, organisms_timing, replies, and where there
    are any change_null, the template-kept variants' template_organisms_steps,
    template_organisms_timing and template_change_null, and the free-form probe's freeform_sgs,
    freeform_changes and freeform_change_null."""
    sgs, changes = read_table(inputs["sgs"]), read_table(inputs["changes"])
    pairs, steps, timing = (read_table(inputs[k]) for k in ("pairs", "organisms_steps", "organisms_timing"))
    scores = read_table(trajectory_scores) if trajectory_scores else pd.DataFrame()
    studies = sgs.drop_duplicates("run").set_index("run")["study"]
    for run, (png, svg) in figures.items():
        if run not in studies.index:
            raise ValueError(f"run {run} has no stability scores")
        if studies[run] == "trajectory":
            rep.trajectory_figure(sgs, changes, scores, run, png, svg)
        else:
            rep.organism_figure(steps, changes, run, png, svg)
    cal = read_table(calibration) if calibration else None
    kinds = read_table(inputs["replies"])
    traj = sgs[sgs["study"] == "trajectory"]
    left_out = {}
    if len(traj) and len(scores):
        left_out = {run: out for run, (_, out) in an.pair_steps(traj, scores, settings.get("pinned")).items()}
    tables = {"sgs": sgs, "changes": changes, "pairs": pairs, "organisms_steps": steps, "organisms_timing": timing}
    tables |= {"calibration": cal, "replies": kinds, "change_null": _optional(inputs, "change_null")}
    for name in ("organisms_steps", "organisms_timing", "change_null"):
        tables[f"template_{name}"] = _optional(inputs, f"template_{name}")
    if _optional(inputs, "freeform_changes") is not None:
        tables["freeform"] = {k: _optional(inputs, f"freeform_{k}") for k in ("sgs", "changes", "change_null")}
    write_text(rep.findings(tables, settings, left_out), out_findings)


def _optional(inputs: Mapping[str, str], name: str) -> pd.DataFrame | None:
    """The table of input ``name``, or None when the job has no such input."""
    path = inputs.get(name)
    return read_table(path) if path else None
