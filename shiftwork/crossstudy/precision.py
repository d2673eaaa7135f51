"""Whether the cross-study's findings hold at another numeric precision.

``dtype: auto`` scores a checkpoint in bfloat16 where the CPU (or GPU) runs it natively and in
float32 elsewhere, so two users of one config can get different replies, SGS and findings. The
precision comparison (``make crossstudy-precision``) scores every checkpoint the cross-study
scores in both precisions and compares, per checkpoint, how many replies agree; per (checkpoint,
axis), the SGS in each precision; and per finding (a question-2 pair or a question-1 change at a
step), whether it is significant in each. A finding significant in one precision only is
*fragile*: it rests on rounding, not on the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.crossstudy import replies, stats
from shiftwork.reports.tables import to_markdown

DTYPES: tuple[str, str] = ("float32", "bfloat16")
"""The two precisions compared, in the tables' order."""
REPLY_KEYS = ["model", "step", "dataset", "prompt_id", "variant_id"]
AGREEMENT_COLUMNS = ["run", "step", "n", "agree", "agree_share"]
SGS_DIFF_COLUMNS = ["study", "run", "step", "axis", *(f"sgs_{d}" for d in DTYPES), "difference"]
FINDING_COLUMNS = ["question", "run", "axis", "where", *(f"significant_{d}" for d in DTYPES), "fragile"]


def reply_agreement(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint (``run`` = the generations' ``model``, ``step``): how many of its replies
    (one per prompt variant, baselines included) the two precisions give identically, after
    stripping white space. A reply missing from either side is an error naming it."""
    for name, frame in (("first", first), ("second", second)):
        require_columns(frame, [*REPLY_KEYS, "response"], f"{name} precision's generations")
    left = first[[*REPLY_KEYS, "response"]]
    right = second[[*REPLY_KEYS, "response"]]
    both = left.merge(right, on=REPLY_KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    missing = both[both["_merge"] != "both"]
    if len(missing):
        row = missing.iloc[0]
        side = "second" if row["_merge"] == "left_only" else "first"
        raise ValueError(
            f"{len(missing)} repl(ies) scored in one precision only, e.g. run {row['model']} step {row['step']} "
            f"prompt {row['prompt_id']} variant {row['variant_id']}, missing from the {side}"
        )
    both["same"] = both["response_a"].astype(str).str.strip() == both["response_b"].astype(str).str.strip()
    out = both.groupby(["model", "step"], sort=True).agg(n=("same", "size"), agree=("same", "sum")).reset_index()
    out = out.rename(columns={"model": "run"})
    out["agree"] = out["agree"].astype(int)
    out["agree_share"] = out["agree"] / out["n"]
    return out[AGREEMENT_COLUMNS]


def sgs_differences(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Per (run, step, axis) over all of a run's prompts (the ``sgs`` tables' pooled rows): SGS in
    each precision and their difference (second minus first). An axis not applicable in both is
    left out; applicable in one only, its other SGS is NaN."""
    pooled = []
    for frame in (first, second):
        require_columns(frame, ["study", "run", "step", "dataset"], "sgs table")
        part = frame[frame["dataset"] == stats.POOLED]
        axes = [a for a in replies.CROSS_AXES if a in part.columns]
        pooled.append(part.melt(["study", "run", "step"], axes, var_name="axis", value_name="sgs"))
    keys = ["study", "run", "step", "axis"]
    both = pooled[0].merge(pooled[1], on=keys, how="outer", suffixes=(f"_{DTYPES[0]}", f"_{DTYPES[1]}"))
    values = [f"sgs_{d}" for d in DTYPES]
    both = both[both[values].notna().any(axis=1)].copy()
    both["difference"] = both[values[1]] - both[values[0]]
    return both.sort_values(keys, kind="stable").reset_index(drop=True)[SGS_DIFF_COLUMNS]


def _significant(table: pd.DataFrame, question: str) -> pd.DataFrame:
    if question == "Q2":
        require_columns(table, ["run", "axis", "ood", "sign"], "pairs table")
        return table.assign(where=table["ood"], significant=table["sign"] != "null")[
            ["run", "axis", "where", "significant"]
        ]
    require_columns(table, ["run", "dataset", "axis", "step", "significant"], "changes table")
    part = table[table["dataset"] == stats.POOLED]
    return part.assign(where="step " + part["step"].astype(int).astype(str))[["run", "axis", "where", "significant"]]


def finding_changes(tables: Mapping[str, Mapping[str, pd.DataFrame]]) -> pd.DataFrame:
    """Every finding either precision tests: question 2's (axis, OOD set) pairs (significant: a sign
    other than null) and question 1's changes from step 0 over all of a run's prompts (significant
    after Holm), with its significance in each precision (``tables[dtype]``: ``pairs`` and
    ``changes``) and ``fragile`` where the two differ. A finding tested in one precision only
    counts as not significant in the other."""
    parts = []
    for question, name in (("Q1", "changes"), ("Q2", "pairs")):
        sides = [_significant(tables[d][name], question) for d in DTYPES]
        both = sides[0].merge(
            sides[1], on=["run", "axis", "where"], how="outer", suffixes=tuple(f"_{d}" for d in DTYPES)
        )
        both.insert(0, "question", question)
        parts.append(both)
    out = pd.concat(parts, ignore_index=True)
    flags = [f"significant_{d}" for d in DTYPES]
    out[flags] = out[flags].fillna(False).astype(bool)
    out["fragile"] = out[flags[0]] != out[flags[1]]
    return out[FINDING_COLUMNS].sort_values(["question", "run", "axis", "where"], kind="stable").reset_index(drop=True)


def precision_markdown(
    agreement: pd.DataFrame, differences: pd.DataFrame, findings: pd.DataFrame, dtypes: Sequence[str] = DTYPES
) -> str:
    """The precision comparison as the results page shows it: reply agreement per run, the largest
    SGS difference per (run, axis), and every finding significant in either precision."""
    first, second = dtypes
    by_run = agreement.groupby("run", sort=True).agg(
        checkpoints=("step", "size"), n=("n", "sum"), agree=("agree", "sum"), lowest=("agree_share", "min")
    )
    by_run["agree_share"] = by_run["agree"] / by_run["n"]
    agree_table = by_run.reset_index()[["run", "checkpoints", "n", "agree_share", "lowest"]]
    agree_table = agree_table.rename(columns={"lowest": "lowest checkpoint"})
    diff = differences.assign(abs_difference=differences["difference"].abs())
    largest = (
        diff.groupby(["run", "axis"], sort=True)
        .agg(
            mean_abs=("abs_difference", "mean"),
            max_abs=("abs_difference", "max"),
            **{f"mean_sgs_{d}": (f"sgs_{d}", "mean") for d in dtypes},
        )
        .reset_index()
    )
    significant = findings[findings[[f"significant_{d}" for d in dtypes]].any(axis=1)]
    fragile = int(findings["fragile"].sum())
    lines = [
        "## Precision: the findings scored in float32 and in bfloat16",
        "",
        f"Every scored checkpoint answered the same variants once in {first} and once in {second}. "
        f"{len(findings)} findings were tested in either precision; {len(significant)} are significant in at least "
        f"one, and **{fragile} fragile** (significant in one precision only).",
        "",
        "Replies given identically in both precisions (after stripping white space):",
        "",
        to_markdown(agree_table),
        "",
        f"SGS over all of a run's prompts, per axis: the mean in each precision and the mean and largest absolute "
        f"difference over the run's checkpoints ({second} minus {first}).",
        "",
        to_markdown(largest),
        "",
    ]
    if len(significant):
        lines += [
            "Findings significant in at least one precision (Q1: the change from step 0 at a step, all prompts; "
            "Q2: an (axis, OOD set) pair):",
            "",
            to_markdown(significant.reset_index(drop=True)),
            "",
        ]
    else:
        lines += ["No finding is significant in either precision.", ""]
    return "\n".join(lines)
