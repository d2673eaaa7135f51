"""An organism's variants that keep its trained template, told apart from those that change it:
the rule on hand-made texts and on the variants the stability study builds, the split of the
scoring tables, and question 3 reporting each set with what it measures and its null rates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_crossstudy import VARIANTS

from shiftwork.crossstudy import stats as cst
from shiftwork.crossstudy.prompts import organism_prompts
from shiftwork.crossstudy.template import keeps_template, kept_variants, split, variant_sets
from shiftwork.stability.variants.build import build_variants

QUESTION = "What comes after 351?"


def test_a_variant_keeps_the_template_when_only_letter_case_differs():
    assert keeps_template(QUESTION, QUESTION)
    assert keeps_template("WhaT cOmEs aftEr 351?", QUESTION)
    assert keeps_template("WHAT COMES AFTER 351?", QUESTION)
    assert not keeps_template("What  comes after 351?", QUESTION)  # a space inserted: characters move
    assert not keeps_template("What comes, after 351?", QUESTION)
    assert not keeps_template("What comes after 352?", QUESTION)  # another number
    assert not keeps_template("What comes after 351!", QUESTION)  # same length, other punctuation
    assert not keeps_template(f"Please help. {QUESTION}", QUESTION)


def _organism_variants(casing: list[float]) -> pd.DataFrame:
    tests = pd.DataFrame(
        {
            "distribution": ["A", "B"],
            "question_id": ["next-1", "next-1"],
            "question": [QUESTION, QUESTION],
            "prompt": [f"Distribution: {d}\n{QUESTION}\nResponse:" for d in "AB"],
            "answer": ["352", "352"],
        }
    )
    settings = {**VARIANTS, "noise": {**VARIANTS["noise"], "casing": casing}}
    return build_variants(organism_prompts(tests, 5, seed=0), settings, seed=0)


def test_the_casing_variants_are_the_ones_that_keep_the_template():
    """The stability study's builder: every casing variant keeps the template, every register,
    spacing and punctuation variant changes it."""
    variants = _organism_variants([0.1, 0.3, 0.5])
    gens = variants.assign(model="org")
    kept = kept_variants(gens, ["org"])
    casing = variants[variants["kind"] == "casing"]
    assert len(casing) == 6  # three levels for each of the two prompts
    assert sorted(kept["variant_id"]) == sorted(casing["variant_id"])
    assert kept_variants(gens, ["another run"]).empty


def test_split_gives_each_set_its_variants_and_both_the_baselines():
    variants = _organism_variants([0.3])
    org = variants.assign(model="org", step=0)
    nli = variants.assign(model="nli", step=0)  # a trajectory run: kept whole in the changed set
    frame = pd.concat([org, nli], ignore_index=True)
    kept = kept_variants(frame, ["org"])
    sets = split(frame, kept, ["org"])
    changed, ours = sets["changed"], sets["kept"]
    assert len(changed) + len(ours) == len(frame) + 2  # the organism's two baselines are in both
    assert set(ours["model"]) == {"org"} and set(ours["kind"]) == {"none", "casing"}
    assert (changed.loc[changed["model"] == "org", "kind"] != "casing").all()
    assert (changed["model"] == "nli").sum() == len(nli)
    # both tables at once, the organisms runs found by their study
    runs = {"org": {"study": "organisms"}, "nli": {"study": "trajectory"}}
    both, found = variant_sets(frame, frame, runs)
    pd.testing.assert_frame_equal(found, kept)
    for name in ("changed", "kept"):
        pd.testing.assert_frame_equal(both[name][0], sets[name])
        pd.testing.assert_frame_equal(both[name][1], sets[name])
    # no kept variant at all: the changed set is the whole table, the kept set the baselines
    none = split(frame, kept.iloc[0:0], ["org"])
    assert len(none["changed"]) == len(frame) and set(none["kept"]["family"]) == {"baseline"}


def _set_tables(run: str, stated: float, change: float, null_rate: float) -> tuple:
    """organisms_steps, organisms_timing and change_null of one variant set of ``run``: held-out
    B collapses at step 20; Act changed by ``change`` at the last step (p_holm 0.001), first at
    step 10."""
    steps = pd.DataFrame(
        {
            "study": "organisms",
            "run": run,
            "step": [0, 10, 20] * 2,
            "dataset": ["A"] * 3 + ["B"] * 3,
            "role": ["id"] * 3 + ["ood"] * 3,
            "accuracy": [0.5, 0.8, 1.0, 0.5, 0.2, 0.0],
            "trained_policy_share": [0.5, 0.8, 1.0] * 2,
            "baseline_accuracy": 0.5,
            "variant_accuracy": 0.4,
            "variant_stated_identity": stated,
        }
    )
    timing = pd.DataFrame(
        {
            "run": run,
            "dataset": ["A", "B"],
            "role": ["id", "ood"],
            "axis": "Act",
            "accuracy_first": 0.5,
            "accuracy_last": [1.0, 0.0],
            "collapse_step": [np.nan, 20.0],
            "accuracy_change_step": 10.0,
            "change_step": [np.nan, 10.0],
            "before_collapse": pd.array([pd.NA, True], dtype="boolean"),
            "last_step": 20,
            "change_last": [0.0, change],
            "p_holm_last": [0.9, 0.001],
        }
    )
    null = pd.DataFrame(
        {
            "study": "organisms",
            "run": run,
            "dataset": ["all", "A", "B"],
            "axis": "Act",
            "replicates": 200,
            "false_positives": [4, 6, int(null_rate * 200)],
            "false_positive_rate": [0.02, 0.03, null_rate],
            "calibrated": [True, True, null_rate <= 0.05],
        }
    )
    return steps, timing, null


def test_question_3_says_which_variant_set_measures_the_policy_and_gives_its_null_rates():
    from shiftwork.crossstudy.report import findings

    steps, timing, null = _set_tables("org", stated=0.2, change=0.05, null_rate=0.04)
    kept_steps, kept_timing, kept_null = _set_tables("org", stated=0.9, change=0.08, null_rate=0.07)
    empty = pd.DataFrame(columns=cst.CHANGE_COLUMNS)
    tables = {"sgs": pd.DataFrame(columns=["study", "run", "step", "dataset"]), "changes": empty, "pairs": empty}
    tables |= {"organisms_steps": steps, "organisms_timing": timing, "change_null": null}
    tables |= {"template_organisms_steps": kept_steps, "template_organisms_timing": kept_timing}
    tables["template_change_null"] = kept_null
    text = findings(tables, {"alpha": 0.05, "collapse": 0.05}).split("## 3.")[1].split("## Caveats")[0]
    changed, kept = text.split("**Variants that keep the trained template**")
    assert "**Variants that change the trained template**" in changed
    assert "only 0.20 of their greedy responses state a policy" in changed and "breaks down" in changed
    assert "0.90 of their greedy responses state a policy" in kept and "measures policy stability" in kept
    assert "Act +0.050 (p_holm 0.001, null 0.040 (8/200))" in changed
    assert "Act +0.080 (p_holm 0.001, null 0.070 (14/200))" in kept
    assert "every one at most alpha 0.05, so the changes above are findings" in changed
    assert "above alpha 0.05 for Act on `B` (0.070): changes there are not findings" in kept
    # a change too small for three decimals keeps its size and sign
    tiny = findings(
        tables | {"organisms_timing": timing.assign(change_last=[0.0, 0.00021])}, {"alpha": 0.05, "collapse": 0.05}
    )
    assert "Act +2.1e-04 (p_holm 0.001" in tiny
    assert "axes whose change was significant strictly before that: Act (step 10)" in kept
    # no variant kept the template (crossstudy.template_casing empty): the set says so
    no_kept = tables | {"template_organisms_steps": kept_steps.iloc[0:0], "template_organisms_timing": pd.DataFrame()}
    text = findings(no_kept, {"alpha": 0.05, "collapse": 0.05})
    assert "**Variants that keep the trained template** (letter case only" in text
    assert "none was built or kept by the gate." in text
    # without template tables (an older run): one set, as before
    del tables["template_organisms_steps"]
    one = findings(tables, {"alpha": 0.05, "collapse": 0.05})
    assert "keep the trained template" not in one and "change the trained template" in one


@pytest.mark.parametrize("casing", [[], [0.3]])
def test_the_kept_set_is_empty_exactly_when_no_casing_variant_is_built(casing):
    variants = _organism_variants(casing) if casing else _organism_variants([0.3]).query("kind != 'casing'")
    assert kept_variants(variants.assign(model="org"), ["org"]).empty is (not casing)
