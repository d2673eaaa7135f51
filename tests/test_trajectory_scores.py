"""Per-label and balanced accuracy, the analysis's score option and the stratified item bootstrap."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from shiftwork.trajectory import analysis as ana
from shiftwork.trajectory import bootstrap as boot
from shiftwork.trajectory.scores import SCORES, analysis_scores, balanced_accuracy, label_scores
from shiftwork.trajectory.suite import LABELS, SET_LABELS, generate_suite

ROOT = Path(__file__).resolve().parents[1]
E, N = LABELS


def predictions(rows: list[tuple[str, str, bool]]) -> pd.DataFrame:
    """(set, gold label, correct) rows of one checkpoint."""
    return pd.DataFrame(
        [{"set": s, "example_id": f"{s}-{k}", "label": lab, "correct": c} for k, (s, lab, c) in enumerate(rows)]
    )


# --------------------------------------------------------------------------- the columns


def test_label_scores_are_the_hand_worked_values():
    # a: entailment 2 of 3 right, not_entailment 0 of 1 -> raw 2/4, balanced (2/3 + 0) / 2
    # b: entailment only, 1 of 2 right -> not_entailment NaN, balanced = the entailment accuracy
    preds = predictions(
        [("a", E, True), ("a", E, True), ("a", E, False), ("a", N, False), ("b", E, True), ("b", E, False)]
    )
    got = label_scores(preds, ["set"])
    assert list(got.columns) == [
        "set",
        "accuracy",
        "n",
        "accuracy_entailment",
        "accuracy_not_entailment",
        "balanced_accuracy",
        "lean_free_accuracy",
    ]
    a, b = got.iloc[0], got.iloc[1]
    # lean-free: expit of the mean of log((2 + 1/2) / (1 + 1/2)) and log((0 + 1/2) / (1 + 1/2));
    # a one-label set's is (hits + 1/2) / (n + 1)
    mean_logit = (math.log(2.5 / 1.5) + math.log(0.5 / 1.5)) / 2
    assert a["lean_free_accuracy"] == pytest.approx(1 / (1 + math.exp(-mean_logit)))
    assert b["lean_free_accuracy"] == pytest.approx(1.5 / 3)
    assert (a["set"], a["n"], b["n"]) == ("a", 4, 2)
    assert a["accuracy"] == 0.5 and a["accuracy_entailment"] == pytest.approx(2 / 3)
    assert a["accuracy_not_entailment"] == 0.0 and a["balanced_accuracy"] == pytest.approx(1 / 3)
    assert b["accuracy"] == b["accuracy_entailment"] == b["balanced_accuracy"] == 0.5
    assert math.isnan(b["accuracy_not_entailment"])
    # the matrix form used by the item check: items x checkpoints
    matrix = np.array([[1, 0], [1, 1], [0, 1], [0, 1]])
    assert balanced_accuracy(matrix, [E, E, E, N]).tolist() == pytest.approx([(2 / 3 + 0) / 2, (2 / 3 + 1) / 2])


def test_collect_scores_writes_the_label_columns(tmp_path):
    from shiftwork.tables import read_table, write_table
    from shiftwork.trajectory.steps import collect_scores

    preds = predictions([("id", E, True), ("id", N, True), ("o", E, True), ("o", E, True), ("o", N, False)])
    preds = preds.assign(model="m", run="r", step=0, pred=E, margin=0.0)
    write_table(preds, tmp_path / "p.parquet", {"step": "test"})
    runs = {"r": {"suite": "s", "shots": 4, "seed": 0}}
    collect_scores([str(tmp_path / "p.parquet")], "id", str(tmp_path / "s.parquet"), str(tmp_path / "i.parquet"), runs)
    scores = read_table(tmp_path / "s.parquet").set_index("testset")
    assert scores.loc["o", "accuracy"] == pytest.approx(2 / 3)
    assert scores.loc["o", "balanced_accuracy"] == 0.5  # (1 + 0) / 2
    assert scores.loc["o", ["accuracy_entailment", "accuracy_not_entailment"]].tolist() == [1.0, 0.0]
    assert scores.loc["id", ["accuracy", "balanced_accuracy"]].tolist() == [1.0, 1.0]


def test_analysis_scores_swaps_the_column_and_keeps_the_raw_one():
    scores = pd.DataFrame({"accuracy": [0.75, 0.5], "balanced_accuracy": [0.5, 0.5]})
    got = analysis_scores(scores, "balanced_accuracy")
    assert got["accuracy"].tolist() == [0.5, 0.5] and got["raw_accuracy"].tolist() == [0.75, 0.5]
    assert got.attrs["score"] == "balanced_accuracy"
    assert analysis_scores(scores, "accuracy")["accuracy"].tolist() == [0.75, 0.5]
    assert scores["accuracy"].tolist() == [0.75, 0.5]  # the input is left alone
    assert SCORES[0] == "lean_free_accuracy"
    with pytest.raises(ValueError, match="score must be one of"):
        analysis_scores(scores, "f1")
    with pytest.raises(ValueError, match="rerun collect_scores"):
        analysis_scores(scores.drop(columns="balanced_accuracy"), "balanced_accuracy")


# --------------------------------------------------------------------------- stratified bootstrap


class ScriptedRng:
    """Returns the given index arrays from integers() in turn and records each call."""

    def __init__(self, arrays):
        self.arrays = [np.asarray(a) for a in arrays]
        self.calls = []

    def integers(self, low, high, size):
        self.calls.append((low, high, size))
        return self.arrays.pop(0)


def test_stratified_resamples_draw_each_label_among_its_own_items():
    # items: two entailment (right, wrong), two not_entailment (right, right); one checkpoint
    correct = np.array([[1.0], [0.0], [1.0], [1.0]])
    labels = [E, E, N, N]
    e_draws = [[0, 0], [1, 1], [0, 1]]  # entailment accuracy 1, 0, 1/2
    n_draws = [[1, 0], [0, 0], [1, 1]]  # not_entailment accuracy 1 whatever is drawn
    rng = ScriptedRng([e_draws, n_draws])
    got = boot.resample_accuracies([correct], rng, 3, labels=[labels])
    assert rng.calls == [(0, 2, (3, 2)), (0, 2, (3, 2))]  # entailment first, two of two each
    assert got[:, 0, 0].tolist() == [1.0, 0.5, 0.75]  # (e + 1) / 2
    # raw: one draw over all four items, the mean of the drawn rows
    rng = ScriptedRng([[[0, 1, 1, 1], [2, 3, 2, 3], [0, 0, 0, 0]]])
    raw = boot.resample_accuracies([correct], rng, 3)
    assert rng.calls == [(0, 4, (3, 4))] and raw[:, 0, 0].tolist() == [0.25, 1.0, 1.0]


def test_stratified_resamples_keep_each_labels_item_count():
    # three entailment items, one not_entailment: draws of 3 among 3 and 1 among 1
    correct = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    rng = ScriptedRng([[[2, 2, 2]], [[0]]])
    got = boot.resample_accuracies([correct], rng, 1, labels=[[E, N, E, E]])
    # entailment rows are 0, 2, 3 -> position 2 is row 3 (0, 1); the not_entailment row is 1 (0, 0)
    assert rng.calls == [(0, 3, (1, 3)), (0, 1, (1, 1))]
    assert got[0, :, 0].tolist() == [0.0, 0.5]
    # entailment all right, not_entailment all wrong: every stratified resample has balanced
    # accuracy 1/2, where raw resamples vary with the drawn label mix
    correct = np.array([[1.0]] * 6 + [[0.0]] * 2)
    labels = [E] * 6 + [N] * 2
    strat = boot.resample_accuracies([correct], np.random.default_rng(0), 200, labels=[labels])
    raw = boot.resample_accuracies([correct], np.random.default_rng(0), 200)
    assert np.all(strat == 0.5) and np.ptp(raw) > 0


def test_stratified_sets_resampled_together_share_the_draws_and_need_the_same_labels():
    a = np.array([[1.0], [0.0], [1.0], [0.0]])
    b = np.array([[0.0], [1.0], [1.0], [1.0]])
    labels = [E, E, N, N]
    rng = ScriptedRng([[[0, 0]], [[1, 1]]])
    got = boot.resample_accuracies([a, b], rng, 1, groups=["g", "g"], labels=[labels, labels])
    # one draw for both: entailment rows (0, 0), not_entailment rows (3, 3)
    assert len(rng.calls) == 2 and got[0, 0].tolist() == [(1.0 + 0.0) / 2, (0.0 + 1.0) / 2]
    with pytest.raises(ValueError, match="same labels"):
        boot.resample_accuracies([a, b], np.random.default_rng(0), 2, groups=["g", "g"], labels=[labels, [E, N, E, N]])


# --------------------------------------------------------------------------- the option switch


def mixed_items(patterns: dict[str, list[tuple[str, list[int]]]]) -> pd.DataFrame:
    """Items of run r1 from per-set lists of (gold label, 0/1 per checkpoint); checkpoints 0, 1, ..."""
    rows = []
    for testset, items in patterns.items():
        for k, (label, pattern) in enumerate(items):
            for step, c in enumerate(pattern):
                other = N if label == E else E
                rows.append(
                    dict(model="m1", run="r1", step=step, set=testset, example_id=f"{testset}-{k}", label=label)
                    | dict(pred=label if c else other, correct=bool(c))
                )
    return pd.DataFrame(rows)


def scores_table(items: pd.DataFrame) -> pd.DataFrame:
    scores = label_scores(items, ["model", "run", "step", "set"]).rename(columns={"set": "testset"})
    return scores.assign(role=np.where(scores["testset"] == "id", "id", "ood"))


ID = [(E, [0, 0, 1, 1, 1, 1]), (N, [0, 1, 0, 1, 1, 1])]
A_E = [1, 0, 1, 1, 0, 1]
A_N = [0, 0, 1, 0, 1, 1]
B_E = [1, 1, 0, 1, 0, 1]
B_N = [0, 1, 0, 0, 1, 1]


def test_on_balanced_sets_both_scores_give_the_same_pair_table():
    c = [(N, [1, 0, 0, 1, 1, 0]), (E, [0, 1, 1, 1, 0, 0]), (E, [1, 1, 0, 0, 1, 0]), (N, [0, 0, 1, 1, 1, 1])]
    items = mixed_items({"id": ID, "a": [(E, A_E), (N, A_N)], "b": [(E, B_E), (N, B_N)], "c": c})
    scores = scores_table(items)
    assert np.allclose(scores["accuracy"], scores["balanced_accuracy"])
    tables = {
        s: ana.pair_table(analysis_scores(scores, s), score=s, items=items, resamples=0, method="linear")
        for s in SCORES
    }
    pd.testing.assert_frame_equal(tables["accuracy"], tables["balanced_accuracy"])
    # with the bootstrap, the point estimates still agree; the draws are stratified under balanced
    booted = {s: ana.pair_table(analysis_scores(scores, s), score=s, items=items, resamples=30) for s in SCORES}
    for column in ("r_raw", "r_partial", "r_primary", "sign"):
        np.testing.assert_array_equal(booted["accuracy"][column], booted["balanced_accuracy"][column])
    assert (booted["balanced_accuracy"]["n_boot"] > 0).all()


def test_on_an_unbalanced_set_the_scores_differ_as_worked_out_by_hand():
    # set a: three entailment items, one not_entailment. At each checkpoint raw = (e1 + e2 + e3 + n) / 4,
    # balanced = ((e1 + e2 + e3) / 3 + n) / 2
    a = [(E, [1, 1, 1, 0, 0, 1]), (E, [1, 1, 0, 0, 0, 1]), (E, [1, 0, 0, 0, 1, 1]), (N, [0, 0, 1, 1, 1, 0])]
    items = mixed_items({"id": ID, "a": a, "b": [(E, B_E), (N, B_N)]})
    scores = scores_table(items)
    col = {s: analysis_scores(scores, s).query("testset == 'a'")["accuracy"].tolist() for s in SCORES}
    assert col["accuracy"] == pytest.approx([3 / 4, 2 / 4, 2 / 4, 1 / 4, 2 / 4, 3 / 4])
    assert col["balanced_accuracy"] == pytest.approx([1 / 2, 1 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2])
    raw = ana.pair_table(analysis_scores(scores, "accuracy"), items=items, resamples=0)
    bal = ana.pair_table(
        analysis_scores(scores, "balanced_accuracy"), score="balanced_accuracy", items=items, resamples=0
    )
    # b is balanced, so b's column is the same; r_raw is the correlation of a's two columns with it
    b = scores.query("testset == 'b'")["accuracy"].to_numpy()
    assert raw["r_raw"].iloc[0] == pytest.approx(np.corrcoef(col["accuracy"], b)[0, 1])
    assert bal["r_raw"].iloc[0] == pytest.approx(np.corrcoef(col["balanced_accuracy"], b)[0, 1])
    assert raw["r_raw"].iloc[0] != pytest.approx(bal["r_raw"].iloc[0])
    # the items must reproduce the score the option names
    with pytest.raises(ana.AnalysisError, match="balanced accuracy 0.5, the scores table 0.75"):
        ana.pair_table(analysis_scores(scores, "accuracy"), score="balanced_accuracy", items=items, resamples=5)
    with pytest.raises(ana.AnalysisError, match="score must be one of"):
        ana.pair_table(scores, score="f1")


def test_analyse_trajectory_reads_the_configured_score_and_reports_it(tmp_path):
    from shiftwork.tables import read_table, write_table
    from shiftwork.trajectory.sections import AnalysisSettings
    from shiftwork.trajectory.steps import analyse_trajectory

    a = [(E, [1, 1, 1, 0, 0, 1]), (E, [1, 1, 0, 0, 0, 1]), (E, [1, 0, 0, 0, 1, 1]), (N, [0, 0, 1, 1, 1, 0])]
    items = mixed_items({"id": ID, "a": a, "b": [(E, B_E), (N, B_N)], "c": [(N, A_N), (E, A_E)]})
    scores = scores_table(items).assign(suite="s", shots=4, seed=0)
    write_table(scores, tmp_path / "scores.parquet", {"step": "test"})
    write_table(items, tmp_path / "items.parquet", {"step": "test"})
    outputs = {k: str(tmp_path / f"{k}.parquet") for k in ("pairs", "summary", "label_bias", "seeds")}
    outputs["report"] = str(tmp_path / "report.md")
    settings = {"method": "linear", "pinned": None, "bootstrap": {"resamples": 20, "seed": 1, "together": []}}
    for score in SCORES:
        analysis = AnalysisSettings.from_config(settings | ({"score": score} if score != SCORES[0] else {}))
        assert analysis.score == score  # lean_free_accuracy is the default
        analyse_trajectory(
            str(tmp_path / "scores.parquet"), str(tmp_path / "items.parquet"), analysis, outputs, str(tmp_path / "f")
        )
        expected = ana.pair_table(
            analysis_scores(scores, score),
            method="linear",
            score=score,
            dependence="effective_n",
            items=items,
            resamples=20,
            seed=1,
        )
        pd.testing.assert_frame_equal(read_table(outputs["pairs"]), expected, check_dtype=False)
        report = (tmp_path / "report.md").read_text()
        assert f"`trajectory.analysis.score: {score}`" in report
    assert "## Raw, per-label, balanced and lean-free accuracy at each run's last checkpoint" in report
    header = "| model | run | step | testset | role | accuracy | accuracy_entailment | accuracy_not_entailment |"
    assert header in report
    # set a at the last checkpoint: raw 3/4, entailment 1, not_entailment 0, balanced 1/2
    assert "| m1 | r1 | 5 | a | ood | 0.750 | 1.000 | 0.000 | 0.500 |" in report


# --------------------------------------------------------------------------- the default suite


def test_the_default_and_smoke_suites_hold_both_labels_in_equal_numbers():
    for name in ("config.yaml", "smoke.yaml"):
        config = yaml.safe_load((ROOT / "config" / name).read_text())
        for suite_name, spec in config["trajectory"]["suites"].items():
            ood = spec["ood"]
            assert not set(ood) & set(SET_LABELS), (name, suite_name)
            suite = generate_suite(8, spec["n_test"], spec.get("seed", 0), ood)
            counts = suite[suite["split"] == "test"].groupby(["set", "label"]).size().unstack("label")
            assert list(counts.columns) == list(LABELS)
            assert (counts[E] == counts[N]).all() and (counts.sum(axis=1) == spec["n_test"]).all(), counts
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert config["trajectory"]["suites"]["nli-synthetic"]["ood"] == [
        "overlap",
        "subsequence",
        "negation",
        "typos",
        "casing",
    ]
    assert config["trajectory"]["analysis"]["bootstrap"]["together"] == [["typos", "casing"]]
    assert config["trajectory"]["analysis"]["score"] == "lean_free_accuracy"


def test_balanced_heuristic_sets_are_hans_items_of_both_labels():
    import re

    def words(text: str) -> set[str]:
        return set(re.sub(r"[.,]", "", text).lower().split())

    suite = generate_suite(8, 40, 3, ["overlap", "subsequence"])
    for name in ("overlap", "subsequence"):
        rows = suite[suite["set"] == name]
        assert rows["label"].value_counts().to_dict() == {E: 20, N: 20}
        assert all(words(h) <= words(p) for p, h in zip(rows["premise"], rows["hypothesis"]))
    # overlap is template 0 (four-word premise plus a place); subsequence templates 1 and 2 hold "who" or "near"
    overlap = suite[suite["set"] == "overlap"]["premise"]
    subsequence = suite[suite["set"] == "subsequence"]["premise"]
    assert not any(" who " in p or p.split(" ")[2] == "near" for p in overlap)
    assert all(" who " in p or p.split(" ")[2] == "near" for p in subsequence)


# --------------------------------------------------------------------------- pinned checkpoints


def test_checkpoints_whose_answers_are_pinned_to_one_label_are_left_out():
    # run r: step 0 answers 95% entailment, steps 1-8 half and half, step 9 8% entailment (92%
    # the other label); run q: never pinned; run p: pinned at 3 of its 10 steps, which would leave 7
    shares = {("r", 0): 0.95, **{("r", k): 0.5 for k in range(1, 9)}, ("r", 9): 0.08, ("q", 0): 0.6, ("q", 1): 0.4}
    shares |= {("p", k): 1.0 if k < 3 else 0.5 for k in range(10)}
    scores = pd.DataFrame(
        [
            {"run": run, "step": step, "testset": t, "accuracy": 0.5, "lean_free_accuracy": 0.6, "entailment_share": sh}
            for (run, step), sh in shares.items()
            for t in ("id", "a")
        ]
    )
    got = analysis_scores(scores, "lean_free_accuracy", 0.9)
    assert got.attrs["pinned"] == {"r": [0, 9]} and got.attrs["pinned_kept"] == {"p": [0, 1, 2]}
    assert sorted(set(zip(got["run"], got["step"]))) == [
        *(("p", k) for k in range(10)),
        ("q", 0),
        ("q", 1),
        *(("r", k) for k in range(1, 9)),
    ]
    assert (got["accuracy"] == 0.6).all()
    assert analysis_scores(scores, "lean_free_accuracy", 0.96).attrs["pinned"] == {}
    assert len(analysis_scores(scores, "lean_free_accuracy", None)) == len(scores)
    with pytest.raises(ValueError, match="entailment_share"):
        analysis_scores(scores.drop(columns="entailment_share"), "accuracy", 0.9)


def test_collect_scores_writes_each_checkpoints_prediction_share(tmp_path):
    from shiftwork.tables import read_table, write_table
    from shiftwork.trajectory.steps import collect_scores

    preds = predictions([("id", E, True), ("id", N, False), ("o", E, True), ("o", N, True)])
    preds = preds.assign(model="m", run="r", step=0, margin=0.0)
    preds["pred"] = [E, E, E, N]  # 3 of the checkpoint's 4 predictions are entailment
    write_table(preds, tmp_path / "p.parquet", {"step": "test"})
    runs = {"r": {"suite": "s", "shots": 4, "seed": 0}}
    collect_scores([str(tmp_path / "p.parquet")], "id", str(tmp_path / "s.parquet"), str(tmp_path / "i.parquet"), runs)
    assert read_table(tmp_path / "s.parquet")["entailment_share"].tolist() == [0.75, 0.75]
