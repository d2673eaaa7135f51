"""The steps of the precision comparison (rule X -> scripts/X.py -> X here): every checkpoint
scored once more in each precision (:func:`shiftwork.crossstudy.run_steps.crossstudy_score` with
the precision fixed), then the comparison (:mod:`shiftwork.crossstudy.precision`). They live apart
from the cross-study's own steps, which do not import them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from shiftwork.crossstudy import analysis as an
from shiftwork.crossstudy import precision, stats, template
from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.logs import LOGGER
from shiftwork.provenance import make_provenance
from shiftwork.tables import read_table, write_table, write_text


def crossstudy_precision_score(
    checkpoints: Sequence[ScoredCheckpoint],
    inputs: Mapping[str, str],
    settings: Mapping[str, Any],
    dtype: str,
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    outs: Mapping[str, str],
    threads: int | None = None,
) -> None:
    """:func:`shiftwork.crossstudy.run_steps.crossstudy_score` with the checkpoints loaded in
    ``dtype`` (one of :data:`~shiftwork.crossstudy.precision.DTYPES`) whatever their run's ``dtype``
    says."""
    from shiftwork.crossstudy.run_steps import crossstudy_score

    if dtype not in precision.DTYPES:
        raise ValueError(f"dtype must be one of {list(precision.DTYPES)}, got {dtype!r}")
    crossstudy_score(checkpoints, inputs, {**dict(settings), "dtype": dtype}, encoder_name, encoder_spec, outs, threads)


def _one_precision(
    paths: Mapping[str, Sequence[str]],
    runs: Mapping[str, Mapping[str, Any]],
    R: Mapping[str, float],
    alpha: float,
    trajectory: Mapping[str, str] | None,
    analysis: Mapping[str, Any],
) -> dict[str, pd.DataFrame]:
    """The generations, sgs, changes and pairs of one precision's scoring (``paths``: deltas and
    generations), as the cross-study's collect and analyse steps make them."""
    deltas = pd.concat([read_table(p) for p in paths["deltas"]], ignore_index=True)
    generations = pd.concat([read_table(p) for p in paths["generations"]], ignore_index=True)
    # the organisms' variants that change the template, as the findings' main tables hold them
    sets, _ = template.variant_sets(deltas, generations, runs)
    per_prompt, _ = stats.per_prompt_by_kind(*sets["changed"], runs, R)
    traj = per_prompt[per_prompt["study"] == "trajectory"]
    if len(traj) and trajectory:
        pairs = an.stability_pairs(traj, read_table(trajectory["scores"]), read_table(trajectory["items"]), analysis)
    else:
        pairs = pd.DataFrame(columns=an.PAIR_KEEP)
    return {
        "generations": generations,
        "sgs": stats.sgs(per_prompt),
        "changes": stats.changes(per_prompt, alpha),
        "pairs": pairs,
    }


def crossstudy_precision(
    paths: Mapping[str, Mapping[str, Sequence[str]]],
    runs: Mapping[str, Mapping[str, Any]],
    R: Mapping[str, float],
    trajectory: Mapping[str, str] | None,
    analysis: Mapping[str, Any],
    outs: Mapping[str, str],
) -> None:
    """Both precisions' scoring compared (``paths[dtype]``: its deltas and generations tables;
    ``runs``: each run's ``study`` and ``answers``; ``trajectory``: the trajectory study's scores
    and items tables, or None; ``analysis``: config ``trajectory.analysis``). ``outs``: agreement,
    sgs, findings (Parquet) and report (Markdown)."""
    missing = [d for d in precision.DTYPES if d not in paths]
    if missing:
        raise ValueError(f"no scoring in {missing}: the comparison needs both {list(precision.DTYPES)}")
    alpha = float(analysis["alpha"])
    each = {d: _one_precision(paths[d], runs, R, alpha, trajectory, analysis) for d in precision.DTYPES}
    first, second = (each[d] for d in precision.DTYPES)
    agreement = precision.reply_agreement(first["generations"], second["generations"])
    differences = precision.sgs_differences(first["sgs"], second["sgs"])
    findings = precision.finding_changes(each)
    prov = make_provenance("crossstudy_precision", {"R": dict(R), "analysis": dict(analysis)})
    write_table(agreement, outs["agreement"], prov)
    write_table(differences, outs["sgs"], prov)
    write_table(findings, outs["findings"], prov)
    write_text(precision.precision_markdown(agreement, differences, findings), outs["report"])
    LOGGER.info(
        "agreement per checkpoint: %.3f-%.3f; %d fragile finding(s) of %d",
        agreement["agree_share"].min(),
        agreement["agree_share"].max(),
        int(findings["fragile"].sum()),
        len(findings),
    )
