"""The six SAGO deltas on a tiny hand-made table: one model, one dataset, two prompts,
each with a baseline and three variants. Every expected value is worked out in a comment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sacrebleu

from shiftwork.stability.axes import AXES, check_ranges, score_axes

R1 = "The capital of France is Paris."
R2 = "Water boils at 100 degrees Celsius at sea level."
REG = "Thank you for asking! The capital of France is Paris."
SHORT = "Paris."
FORM = "Use a thermometer to measure boiling water."
CASED = "WATER boils at 100 degrees Celsius at sea level."

# (prompt_id, variant_id, family, kind, position, strength, model_input, response)
GEN_ROWS = [
    ("p1", "p1-base", "baseline", "none", "none", 0.0, "<in>Q1", R1),
    ("p1", "p1-reg", "register", "tone", "prefix", 6.0, "<in>Please Q1", REG),
    # same reply up to surrounding whitespace: not a flip, BLEU = BERT = 0
    ("p1", "p1-noise", "noise", "spacing", "global", 3.0, "<in>Q  1 ", "  " + R1 + "\n"),
    # the rewriter gave back the prompt unchanged: same model input as the baseline
    ("p1", "p1-len", "structural", "length", "global", 2.0, "<in>Q1", SHORT),
    ("p2", "p2-base", "baseline", "none", "none", 0.0, "<in>Q2", R2),
    ("p2", "p2-form", "structural", "form", "global", 1.0, "<in>State Q2.", FORM),
    ("p2", "p2-empty", "noise", "punctuation", "suffix", 2.0, "<in>Q2;", ""),
    ("p2", "p2-case", "noise", "casing", "global", 0.3, "<in>q2", CASED),
]
# (variant_id, logprob, entropy, act_cos)
PROBE_ROWS = [
    ("p1-base", -10.0, 1.5, 1.0),
    ("p1-reg", -12.5, 2.0, 0.9),
    ("p1-noise", -11.0, 1.25, 0.95),
    ("p1-len", -10.000001, 1.5000001, 0.9999999),  # numerical noise only: must come out 0
    ("p2-base", -20.0, 0.8, 1.0),
    ("p2-form", -26.0, 1.1, 0.7),
    ("p2-empty", -21.0, 0.9, 0.8),
    ("p2-case", -23.0, 1.0, 0.85),
]
# What the fake BERTScore returns for each candidate reply.
F1 = {REG: 0.93, SHORT: 0.81, FORM: 0.62, "": 0.0, CASED: 0.97}


def make_generations() -> pd.DataFrame:
    rows = []
    for pid, vid, fam, kind, pos, s, inp, resp in GEN_ROWS:
        rows.append(
            {
                "model": "m",
                "dataset": "d",
                "prompt_id": pid,
                "variant_id": vid,
                "family": fam,
                "kind": kind,
                "position": pos,
                "strength": s,
                "text": inp.removeprefix("<in>"),
                "model_input": inp,
                "response": resp,
                "n_tokens": len(resp.split()),
            }
        )
    return pd.DataFrame(rows)


def make_probes() -> pd.DataFrame:
    pid = {vid: p for p, vid, *_ in GEN_ROWS}
    return pd.DataFrame(
        [
            {
                "model": "m",
                "dataset": "d",
                "prompt_id": pid[vid],
                "variant_id": vid,
                "logprob": lp,
                "entropy": ent,
                "act_cos": act,
            }
            for vid, lp, ent, act in PROBE_ROWS
        ]
    )


class FakeBert:
    """Stands in for BERTScore: fixed F1 per candidate, and a record of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def __call__(self, candidates: list[str], references: list[str]) -> np.ndarray:
        self.calls.append((list(candidates), list(references)))
        return np.array([F1[c] for c in candidates])


@pytest.fixture()
def scored():
    bert = FakeBert()
    out = score_axes(make_generations(), make_probes(), bert)
    return out.set_index("variant_id"), bert


def test_shape_columns_and_dtypes():
    out = score_axes(make_generations(), make_probes(), FakeBert())
    # one row per variant, in the order of the generations table
    assert list(out["variant_id"]) == [vid for _, vid, *_ in GEN_ROWS]
    assert list(out.columns) == [
        "model",
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "kind",
        "position",
        "strength",
        *AXES,
        "flipped",
    ]
    for axis in AXES:
        assert out[axis].dtype == np.float64, axis
    assert out["flipped"].dtype == bool


def test_register_variant_by_hand(scored):
    row = scored[0].loc["p1-reg"]
    assert row["Act"] == pytest.approx(-0.1)  # 0.9 - 1
    assert row["Prob"] == -2.5  # -12.5 - (-10.0)
    assert row["Ent"] == 0.5  # 2.0 - 1.5
    assert row["BLEU"] == sacrebleu.sentence_bleu(REG, [R1]).score - 100
    assert -100 < row["BLEU"] < 0
    assert row["BERT"] == 0.93 - 1.0
    # "Thank you" makes the reply polite (tone +1) for a polite prompt: 1; R1 has tone 0: 0
    assert row["MR"] == 1.0
    assert bool(row["flipped"]) is True


def test_identical_reply_gives_exact_zero_text_deltas(scored):
    row = scored[0].loc["p1-noise"]
    assert row["BLEU"] == 0.0 and row["BERT"] == 0.0
    assert bool(row["flipped"]) is False
    # the model input did change, so the internal deltas are computed
    assert row["Act"] == pytest.approx(-0.05)  # 0.95 - 1
    assert row["Prob"] == -1.0  # -11.0 - (-10.0)
    assert row["Ent"] == -0.25  # 1.25 - 1.5
    assert row["MR"] == 0.0  # no runs of spaces between words in either reply


def test_same_model_input_gives_exact_zero_internal_deltas(scored):
    row = scored[0].loc["p1-len"]
    # probes differ only by numerical noise; the input is the same, so the deltas are set to 0
    assert row["Act"] == 0.0 and row["Prob"] == 0.0 and row["Ent"] == 0.0
    assert row["BLEU"] == sacrebleu.sentence_bleu(SHORT, [R1]).score - 100
    assert row["BERT"] == 0.81 - 1.0
    # 1 word / 6 words = 0.17, far from the multiple 2: 0; R1 against itself: ratio 1: 0
    assert row["MR"] == 0.0
    assert bool(row["flipped"]) is True


def test_second_prompt_by_hand(scored):
    out = scored[0]
    form = out.loc["p2-form"]
    assert form["Act"] == pytest.approx(-0.3)  # 0.7 - 1
    assert form["Prob"] == -6.0  # -26.0 - (-20.0)
    assert form["Ent"] == pytest.approx(0.3)  # 1.1 - 0.8
    assert form["BERT"] == 0.62 - 1.0
    # "Use ..." opens with an imperative (command) for a command prompt: 1; R2 is a statement: 0
    assert form["MR"] == 1.0

    empty = out.loc["p2-empty"]
    assert empty["BLEU"] == -100.0  # BLEU of an empty reply is 0
    assert empty["BERT"] == -1.0  # the caller's scorer gives the empty reply 0
    assert empty["Prob"] == -1.0 and empty["Ent"] == pytest.approx(0.1)
    assert empty["MR"] == 0.0  # an empty reply has no misplaced marks
    assert bool(empty["flipped"]) is True

    case = out.loc["p2-case"]
    assert case["BLEU"] == sacrebleu.sentence_bleu(CASED, [R2]).score - 100
    assert case["BLEU"] < 0  # BLEU is case-sensitive
    # non-initial letters: ATER 4, oils 4, t 1, egrees 6, elsius 6, t 1, ea 2, evel 4 = 28;
    # upper 4 -> 4 / 28 = 0.14 > 0.05 over R2's 0: 1
    assert case["MR"] == 1.0
    assert case["Act"] == pytest.approx(-0.15) and case["Prob"] == -3.0


def test_baseline_rows_are_exactly_zero(scored):
    out = scored[0]
    for vid in ("p1-base", "p2-base"):
        for axis in AXES:
            assert out.loc[vid, axis] == 0.0, (vid, axis)
        assert bool(out.loc[vid, "flipped"]) is False


def test_baseline_zero_is_set_not_computed():
    probes = make_probes()
    probes.loc[probes["variant_id"] == "p1-base", "act_cos"] = 0.9999  # would give Act -1e-4
    out = score_axes(make_generations(), probes, FakeBert()).set_index("variant_id")
    assert out.loc["p1-base", "Act"] == 0.0
    assert out.loc["p1-reg", "Act"] == pytest.approx(-0.1)  # still against 1, not the baseline


def test_bert_called_once_without_identical_replies(scored):
    _, bert = scored
    assert len(bert.calls) == 1
    candidates, references = bert.calls[0]
    assert candidates == [REG, SHORT, FORM, "", CASED]  # not p1-noise, not the baselines
    assert references == [R1, R1, R2, R2, R2]


def test_bert_not_called_when_nothing_changed():
    gens = make_generations()
    gens = gens[gens["variant_id"].isin(["p1-base", "p1-noise"])]
    bert = FakeBert()
    out = score_axes(gens, make_probes(), bert)
    assert bert.calls == []
    assert (out["BERT"] == 0.0).all() and (out["BLEU"] == 0.0).all()


def test_bert_wrong_length_is_an_error():
    with pytest.raises(ValueError, match="bert_f1"):
        score_axes(make_generations(), make_probes(), lambda c, r: np.zeros(len(c) + 1))


def test_missing_probe_row_names_the_variant():
    probes = make_probes()
    probes = probes[probes["variant_id"] != "p2-form"]
    with pytest.raises(ValueError, match="p2-form"):
        score_axes(make_generations(), probes, FakeBert())


def test_prompt_without_baseline_is_an_error():
    gens = make_generations()
    gens = gens[gens["variant_id"] != "p2-base"]
    with pytest.raises(ValueError, match=r"no baseline.*p2.*p2-form"):
        score_axes(gens, make_probes(), FakeBert())


def test_prompt_with_two_baselines_is_an_error():
    gens = make_generations()
    gens.loc[gens["variant_id"] == "p1-reg", "family"] = "baseline"
    with pytest.raises(ValueError, match=r"more than one baseline.*p1"):
        score_axes(gens, make_probes(), FakeBert())


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="act_cos"):
        score_axes(make_generations(), make_probes().drop(columns="act_cos"), FakeBert())


def test_check_ranges_clean_table(scored):
    assert check_ranges(scored[0].reset_index()) == []


def test_check_ranges_catches_violations(scored):
    out = scored[0].reset_index()
    at = {vid: i for i, vid in enumerate(out["variant_id"])}
    out.loc[at["p1-reg"], "Act"] = -2.5
    out.loc[at["p1-len"], "BLEU"] = 5.0
    out.loc[at["p2-form"], "BERT"] = 1e-5  # more than 1e-6 above 0
    out.loc[at["p2-case"], "BERT"] = 5e-7  # within the 1e-6 slack: fine
    out.loc[at["p2-base"], "Prob"] = 0.1
    problems = check_ranges(out)
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    for vid, axis in [("p1-reg", "Act"), ("p1-len", "BLEU"), ("p2-form", "BERT"), ("p2-base", "Prob")]:
        assert any(vid in p and axis in p for p in problems), (vid, axis, joined)
    assert "p2-case" not in joined


def test_structural_variants_measured_against_their_anchor_rewrite():
    """The method's anchoring: Length against the 1.0x rewrite, imperative against interrogative.

    Baseline q: reply R1 (6 words), logprob -10, entropy 1.5.
    1.0x rewrite: reply R1 + " Indeed." (7 words), logprob -11, entropy 1.7, act 0.9, F1 0.9.
    2.0x rewrite: 12-word reply, logprob -14, entropy 2.0, act 0.8, F1 0.7.
    Against the original: Prob -1 and -4, Ent 0.2 and 0.5, Act -0.1 and -0.2, BERT -0.1 and -0.3;
    against the anchor: Prob -4 - (-1) = -3, Ent 0.5 - 0.2 = 0.3, Act -0.2 - (-0.1) = -0.1,
    BERT -0.3 - (-0.1) = -0.2. MR (length rule, |ratio - m| <= 0.25, minus the baseline reply's
    own verdict): 2.0x: 12/6 = 2 -> 1, minus 6/6 = 1 vs m = 2 -> 0, so 1; 1.0x: 7/6 = 1.17 -> 1,
    minus 6/6 vs m = 1 -> 1, so 0; difference 1.
    Interrogative rewrite: the same reply as the baseline, same model input -> all zero; the
    imperative one (reply FORM, F1 0.62, logprob -26 vs -10) keeps its deltas against the original.
    """
    anchor_reply = R1 + " Indeed."
    long_reply = " ".join(["word"] * 12)
    f1 = {anchor_reply: 0.9, long_reply: 0.7, FORM: 0.62}
    rows = [
        ("q", "q-base", "baseline", "none", 0.0, "<in>Q", R1, -10.0, 1.5, 1.0),
        ("q", "q-l1", "structural", "length", 1.0, "<in>Q same", anchor_reply, -11.0, 1.7, 0.9),
        ("q", "q-l2", "structural", "length", 2.0, "<in>Q longer", long_reply, -14.0, 2.0, 0.8),
        ("q", "q-fq", "structural", "form", -1.0, "<in>Q", R1, -10.0, 1.5, 1.0),
        ("q", "q-fc", "structural", "form", 1.0, "<in>Do Q", FORM, -26.0, 1.1, 0.7),
    ]
    gens = pd.DataFrame(
        [
            dict(model="m", dataset="d", prompt_id=p, variant_id=v, family=f, kind=k, position="global",
                 strength=s, model_input=i, response=r)
            for p, v, f, k, s, i, r, *_ in rows
        ]
    )  # fmt: skip
    probes = pd.DataFrame(
        [
            dict(model="m", dataset="d", prompt_id=p, variant_id=v, logprob=lp, entropy=e, act_cos=a)
            for p, v, *_, lp, e, a in rows
        ]
    )
    out = score_axes(gens, probes, lambda c, r: np.array([f1[x] for x in c]), structural_baseline="rewrite")
    out = out.set_index("variant_id")
    assert sorted(out.index) == ["q-base", "q-fc", "q-l2"]  # the anchors are not variants
    l2 = out.loc["q-l2"]
    assert l2["Prob"] == pytest.approx(-3.0)
    assert l2["Ent"] == pytest.approx(0.3)
    assert l2["Act"] == pytest.approx(-0.1)
    assert l2["BERT"] == pytest.approx(-0.2)
    assert l2["MR"] == 1.0
    assert bool(l2["flipped"])
    fc = out.loc["q-fc"]
    assert fc["Prob"] == pytest.approx(-16.0) and fc["BERT"] == pytest.approx(0.62 - 1.0)
    # the same table measured against the original prompt keeps every rewrite
    plain = score_axes(gens, probes, lambda c, r: np.array([f1[x] for x in c]), structural_baseline="original")
    assert len(plain) == 5 and plain.set_index("variant_id").loc["q-l2", "Prob"] == pytest.approx(-4.0)


def test_structural_variant_without_anchor_is_named():
    gens = make_generations()
    with pytest.raises(ValueError, match="p1-len"):
        score_axes(gens, make_probes(), FakeBert(), structural_baseline="rewrite")
