"""Controls that the mirroring judge must pass before its verdicts count.

The judge (:mod:`shiftwork.stability.judge`) answers YES or NO to "did REPLY B move the way its
prompt was moved, compared with REPLY A?". Four controls, built from a seeded sample of the
pairs it would judge in the run (register and form variants with their original prompt and
reply, from every model and dataset of the study), each have a known right answer:

* ``identical``: REPLY B is REPLY A itself. Nothing moved: the right verdict is NO.
* ``swapped``: the pair as run, and the same pair with its two replies swapped (pairs whose
  replies differ only). A move one way cannot also be a move the other way: the judge must not
  say YES to both.
* ``opposite``: the pair as run, asked in its direction and in the opposite one (politer and
  ruder; a command and a question). Again, not YES to both.
* ``planted``: REPLY B is REPLY A with a clear change planted in the asked direction
  (:mod:`shiftwork.stability.judge_plants`). The right verdict is YES.

Each control is scored by how many of its pairs the judge gets right (``agree`` of ``n``), the
rate, and its 95% Clopper-Pearson interval. The judge passes when every control's rate is at
least its threshold (``stability.axes.judge_controls.thresholds``); a control without pairs
fails. A judge that says YES (or NO) whatever it is shown cannot pass both ``identical`` and
``planted`` as long as their thresholds add up to more than 1.

The controls ask every question, unchanged replies included (``ask_unchanged``), and judge the
judge's own answers: the politeness-cue guard (``judge_cue_guard``) is a rule applied after the
judge, not part of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from shiftwork.checks import require_columns
from shiftwork.reports.tables import to_markdown
from shiftwork.stability.judge import PAIR_COLUMNS as JUDGED_COLUMNS
from shiftwork.stability.judge import Complete, is_judged, judge_pairs
from shiftwork.stability.judge_plants import plant

CONTROLS: tuple[str, ...] = ("identical", "swapped", "opposite", "planted")
PAIR_KEY: list[str] = ["model", "dataset", "prompt_id", "variant_id"]
PROMPT_KEY: list[str] = ["model", "dataset", "prompt_id"]
GENERATION_COLUMNS: list[str] = [*PAIR_KEY, "family", "kind", "strength", "text", "response"]
PAIR_COLUMNS: list[str] = [*PAIR_KEY, *JUDGED_COLUMNS]
EXPECTED: dict[str, str] = {
    "identical": "NO",
    "swapped": "not both YES",
    "opposite": "not both YES",
    "planted": "YES",
}
CONTROL_COLUMNS: list[str] = [
    "control",
    "pair",
    *PAIR_KEY,
    "question",
    "family",
    "kind",
    "strength",
    "expected",
    "verdict",
    "agrees",
    "answer",
    "parsed",
    "original_prompt",
    "original_reply",
    "variant_prompt",
    "variant_reply",
]
REPORT_COLUMNS: list[str] = ["control", "n", "agree", "rate", "ci_low", "ci_high", "threshold", "passed", "note"]
NO_PAIRS: dict[str, str] = {
    "identical": "no pairs: the run has no register or form variant with a non-empty original reply",
    "swapped": "no pairs whose two replies differ",
    "opposite": "no pairs: the run has no register or form variant with a non-empty original reply",
    "planted": "no pairs: the run has no register or form variant with a non-empty original reply",
}
LEVEL = 0.95
# slack for a rate that equals its threshold up to floating point (4 / 5 against 0.8)
_RATE_EPS = 1e-12


def candidate_pairs(generations: pd.DataFrame) -> pd.DataFrame:
    """The pairs the judge would judge (columns :data:`PAIR_COLUMNS`), sorted by :data:`PAIR_KEY`:
    every register and form variant of non-zero strength in ``generations`` (one or more
    generations tables, any models and datasets), its prompt and reply beside its prompt's
    baseline prompt and reply (the row's own ``baseline_response`` where it has one, as for an
    API model asked for the baseline again on every row). Pairs whose original reply is empty
    are left out: nothing can be planted in it."""
    require_columns(generations, GENERATION_COLUMNS, "generations (for the judge's controls)")
    gens = generations.reset_index(drop=True)
    base = gens.loc[gens["family"] == "baseline", [*PROMPT_KEY, "text", "response"]]
    base = base.rename(columns={"text": "original_prompt", "response": "original_reply"})
    judged = [is_judged(f, k) and s != 0 for f, k, s in zip(gens["family"], gens["kind"], gens["strength"])]
    variants = gens.loc[np.asarray(judged, dtype=bool)]
    out = variants.merge(base, on=PROMPT_KEY, how="inner", validate="many_to_one")
    if "baseline_response" in out.columns:
        own = out["baseline_response"]
        out["original_reply"] = own.where(own.notna(), out["original_reply"])
    out = out.rename(columns={"text": "variant_prompt", "response": "variant_reply"})
    out = out[[bool(str(r).strip()) for r in out["original_reply"]]]
    return out.sort_values(PAIR_KEY, kind="stable")[PAIR_COLUMNS].reset_index(drop=True)


def sample_pairs(pairs: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """Up to ``n`` of ``pairs``, drawn by ``seed`` evenly over the cells of kind and direction
    (tone and form, each at +1 and -1): each cell's pairs in a seeded random order, then the
    first of every cell, the second of every cell, and so on, so a cell with few pairs leaves
    its share to the others. Returned in the order of ``pairs`` with a column ``pair``
    numbering them from 0."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"stability.axes.judge_controls.pairs must be an integer of at least 1, got {n!r}")
    cells = pairs["kind"].astype(str) + np.sign(pairs["strength"].to_numpy(dtype=np.float64)).astype(int).astype(str)
    names = sorted(set(cells))
    code = cells.map({name: i for i, name in enumerate(names)}).to_numpy(dtype=np.int64)
    rank = np.zeros(len(pairs), dtype=np.int64)
    rng = np.random.default_rng(seed)
    for i in range(len(names)):
        where = np.flatnonzero(code == i)
        rank[where] = rng.permutation(len(where))
    take = np.sort(np.lexsort((code, rank))[: int(n)])
    out = pairs.iloc[take].reset_index(drop=True)
    out.insert(0, "pair", np.arange(len(out), dtype=np.int64))
    return out


def _replies_differ(sample: pd.DataFrame) -> np.ndarray:
    pairs = zip(sample["original_reply"], sample["variant_reply"])
    return np.array([str(a).strip() != str(b).strip() for a, b in pairs], dtype=bool)


def control_questions(sample: pd.DataFrame) -> pd.DataFrame:
    """The questions of the four controls for the sampled pairs (:func:`sample_pairs`): the
    sample's columns with ``control``, ``question`` (which form of the pair is asked) and
    ``expected`` (:data:`EXPECTED`). ``identical`` and ``planted`` ask one question per pair;
    ``swapped`` (pairs whose replies differ) and ``opposite`` ask two."""
    asked = sample.assign(question="as run")
    differ = _replies_differ(sample)
    swapped = asked[differ].assign(
        question="replies swapped",
        original_reply=sample.loc[differ, "variant_reply"],
        variant_reply=sample.loc[differ, "original_reply"],
    )
    planted = [plant(r, k, s) for r, k, s in zip(sample["original_reply"], sample["kind"], sample["strength"])]
    parts = [
        asked.assign(control="identical", question="same reply twice", variant_reply=sample["original_reply"]),
        asked[differ].assign(control="swapped"),
        swapped.assign(control="swapped"),
        asked.assign(control="opposite"),
        asked.assign(control="opposite", question="opposite direction", strength=-sample["strength"]),
        asked.assign(control="planted", question="change planted", variant_reply=planted),
    ]
    out = pd.concat(parts, ignore_index=True)
    out["expected"] = out["control"].map(EXPECTED)
    return out


def unit_agreement(answered: pd.DataFrame) -> pd.DataFrame:
    """Per control and pair, whether the judge's verdicts (``verdict``, 0/1) are right:
    ``identical`` NO, ``planted`` YES, ``swapped`` and ``opposite`` not YES to both questions.
    Columns ``control``, ``pair``, ``yes`` (YES verdicts) and ``agrees``."""
    units = answered.groupby(["control", "pair"], sort=False)["verdict"].sum().reset_index(name="yes")
    most_yes = {"identical": 0, "swapped": 1, "opposite": 1}
    units["agrees"] = [
        bool(yes == 1) if control == "planted" else bool(yes <= most_yes[control])
        for control, yes in zip(units["control"], units["yes"])
    ]
    return units


def ask_controls(questions: pd.DataFrame, complete: Complete) -> pd.DataFrame:
    """The control questions put to the judge (every distinct question once, unchanged replies
    included), one row each (columns :data:`CONTROL_COLUMNS` and ``judge_prompt``), with each
    pair's ``agrees`` (:func:`unit_agreement`) on its questions' rows."""
    answered = judge_pairs(questions, complete, ask_unchanged=True)
    agreement = unit_agreement(answered)[["control", "pair", "agrees"]]
    out = answered.merge(agreement, on=["control", "pair"], how="left", validate="many_to_one")
    return out[[*CONTROL_COLUMNS, "judge_prompt"]]


def binomial_ci(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The Clopper-Pearson (exact) interval of a rate of ``k`` in ``n`` at ``level``; NaN for n = 0."""
    if n == 0:
        return float("nan"), float("nan")
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def score_controls(answered: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """One row per control (columns :data:`REPORT_COLUMNS`, in the order of :data:`CONTROLS`):
    its pairs ``n``, those the judge got right ``agree``, the ``rate``, its 95% interval
    (:func:`binomial_ci`), the ``threshold`` and whether the rate reached it (``passed``). A
    control without pairs has a NaN rate, fails, and says why in ``note``."""
    missing = [c for c in CONTROLS if c not in thresholds]
    if missing:
        raise ValueError(f"stability.axes.judge_controls.thresholds lacks {missing}")
    units = answered.drop_duplicates(["control", "pair"])
    rows = []
    for control in CONTROLS:
        agrees = units.loc[units["control"] == control, "agrees"].astype(bool)
        n, k = len(agrees), int(agrees.sum())
        low, high = binomial_ci(k, n)
        rate = k / n if n else float("nan")
        threshold = float(thresholds[control])
        passed = bool(n) and rate + _RATE_EPS >= threshold
        rows.append((control, n, k, rate, low, high, threshold, passed, "" if n else NO_PAIRS[control]))
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def overall_verdict(scores: pd.DataFrame) -> tuple[bool, str]:
    """Whether the judge passed (every control passed) and why, naming each failed control with
    its count, rate and threshold, or its note."""
    failed = scores[~scores["passed"].astype(bool)]
    if failed.empty:
        return True, "every control reached its threshold"
    reasons = [
        f"{r.control}: {r.note}" if r.n == 0 else f"{r.control} {r.agree}/{r.n} = {r.rate:.2f} < {r.threshold:.2f}"
        for r in failed.itertuples(index=False)
    ]
    return False, "; ".join(reasons)


def control_report(answered: pd.DataFrame, thresholds: Mapping[str, float], judge: str) -> pd.DataFrame:
    """:func:`score_controls` with the ``judge``'s name and the overall verdict on every row
    (``judge_passed``, ``reason``: :func:`overall_verdict`)."""
    scores = score_controls(answered, thresholds)
    passed, reason = overall_verdict(scores)
    return scores.assign(judge=judge, judge_passed=passed, reason=reason)


@dataclass(frozen=True)
class JudgeCheck:
    """What the report of the judge's controls decides: the judge, whether it passed, why, and
    the controls it failed."""

    judge: str
    passed: bool
    reason: str
    failed: tuple[str, ...] = ()

    @property
    def mr_source(self) -> str:
        """Where register and form MR come from: ``judge`` when it passed, else ``rules``."""
        return "judge" if self.passed else "rules"


def judge_check(report: pd.DataFrame) -> JudgeCheck:
    """The :class:`JudgeCheck` of a :func:`control_report` table."""
    require_columns(report, ["control", "passed", "judge", "judge_passed", "reason"], "judge report")
    if report.empty:
        raise ValueError("the judge report has no rows")
    first = report.iloc[0]
    failed = tuple(str(c) for c in report.loc[~report["passed"].astype(bool), "control"])
    return JudgeCheck(str(first["judge"]), bool(first["judge_passed"]), str(first["reason"]), failed)


def check_footnote(check: JudgeCheck) -> str:
    """The line under the stability tables saying where register and form MR come from."""
    if check.passed:
        return (
            f"MR of register and form variants: verdicts of the judge {check.judge}, which passed its controls "
            "(stability/judge/report.md)."
        )
    return (
        f"MR of register and form variants: the rule-based detectors, because the judge {check.judge} failed "
        f"its controls ({', '.join(check.failed)}): {check.reason} (stability/judge/report.md)."
    )


def report_markdown(report: pd.DataFrame, answered: pd.DataFrame) -> str:
    """The judge report as Markdown: the verdict, the table of the controls, how to read it."""
    check = judge_check(report)
    unparsed = int((~answered["parsed"].astype(bool)).sum()) if len(answered) else 0
    verdict = "passed" if check.passed else "failed"
    source = "the judge's verdicts" if check.passed else "the rule-based detectors"
    lines = [
        "# Mirroring judge: controls",
        "",
        f"Judge {check.judge}: **{verdict}** ({check.reason}). MR of register and form variants comes from {source}.",
        "",
        to_markdown(report[REPORT_COLUMNS], floatfmt=".2f"),
        "",
        f"{len(answered)} questions; {unparsed} answers held neither YES nor NO and count as NO.",
        "",
        "- identical: REPLY B is REPLY A itself; right: NO.",
        "- swapped: the pair as run and with its two replies swapped (replies that differ); right: not YES to both.",
        "- opposite: the pair as run, asked in its own direction and the opposite one; right: not YES to both.",
        "- planted: REPLY B is REPLY A with a clear change in the asked direction planted in it; right: YES.",
        "",
        "The judge passes when every control's rate is at least its threshold "
        "(stability.axes.judge_controls.thresholds); a control without pairs fails. ci_low and ci_high are the "
        f"{LEVEL:.0%} Clopper-Pearson interval of the rate; they show how much the rate of n pairs can "
        "vary, and are not part of the rule. controls.parquet holds every question, answer and verdict.",
        "",
    ]
    return "\n".join(lines)
