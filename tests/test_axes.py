"""The six SAGO deltas on a tiny hand-made table: one model, one dataset, two prompts,
each with a baseline and three variants. Every expected value is worked out in a comment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sacrebleu

from shiftwork.stability.axes import (
    AXES,
    _bleu_delta,
    axis_deltas,
    bert_baseline,
    bleu_score,
    check_ranges,
    rescaled_bert_delta,
    unobservable_axes,
)

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
    out = axis_deltas(make_generations(), make_probes(), bert)
    return out.set_index("variant_id"), bert


def test_shape_columns_and_dtypes():
    out = axis_deltas(make_generations(), make_probes(), FakeBert())
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
        "mr_source",
    ]
    for axis in AXES:
        assert out[axis].dtype == np.float64, axis
    assert out["flipped"].dtype == bool
    assert (out["mr_source"] == "rules").all()  # no judge


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
    out = axis_deltas(make_generations(), probes, FakeBert()).set_index("variant_id")
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
    out = axis_deltas(gens, make_probes(), bert)
    assert bert.calls == []
    assert (out["BERT"] == 0.0).all() and (out["BLEU"] == 0.0).all()


def test_bert_wrong_length_is_an_error():
    with pytest.raises(ValueError, match="bert_f1"):
        axis_deltas(make_generations(), make_probes(), lambda c, r: np.zeros(len(c) + 1))


def test_missing_probe_row_names_the_variant():
    probes = make_probes()
    probes = probes[probes["variant_id"] != "p2-form"]
    with pytest.raises(ValueError, match="p2-form"):
        axis_deltas(make_generations(), probes, FakeBert())


def test_prompt_without_baseline_is_an_error():
    gens = make_generations()
    gens = gens[gens["variant_id"] != "p2-base"]
    with pytest.raises(ValueError, match=r"no baseline.*p2.*p2-form"):
        axis_deltas(gens, make_probes(), FakeBert())


def test_prompt_with_two_baselines_is_an_error():
    gens = make_generations()
    gens.loc[gens["variant_id"] == "p1-reg", "family"] = "baseline"
    with pytest.raises(ValueError, match=r"more than one baseline.*p1"):
        axis_deltas(gens, make_probes(), FakeBert())


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="act_cos"):
        axis_deltas(make_generations(), make_probes().drop(columns="act_cos"), FakeBert())


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
    out = axis_deltas(gens, probes, lambda c, r: np.array([f1[x] for x in c]), structural_baseline="rewrite")
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
    plain = axis_deltas(gens, probes, lambda c, r: np.array([f1[x] for x in c]), structural_baseline="original")
    assert len(plain) == 5 and plain.set_index("variant_id").loc["q-l2", "Prob"] == pytest.approx(-4.0)


def test_structural_variant_without_anchor_is_named():
    gens = make_generations()
    with pytest.raises(ValueError, match="p1-len"):
        axis_deltas(gens, make_probes(), FakeBert(), structural_baseline="rewrite")


# ----------------------------------------------------------------------------- BLEU definitions
# sacrebleu's 13a tokens: "Yes" is 1 token, "Yes." 2 ("Yes", "."), "It is Paris" 3, "It is in Paris" 4.


@pytest.mark.parametrize("reply", ["Yes", "Yes.", "It is Paris"])
def test_identical_short_reply_under_both_definitions(reply):
    # sentence BLEU with effective order scores the orders the reply has: 100 against itself;
    # corpus BLEU takes the log of the empty 4-gram (and for 1-2 tokens 3-gram) precision: 0
    assert bleu_score(reply, reply, "sentence") == 100.0
    assert bleu_score(reply, reply, "corpus") == 0.0
    assert sacrebleu.corpus_bleu([reply], [[reply]]).score == 0.0
    # either way the delta, anchored at the baseline's own score, is 0
    assert _bleu_delta(reply, reply, "sentence") == 0.0
    assert _bleu_delta(reply, reply, "corpus") == 0.0


def test_identical_four_token_reply_scores_100_under_both():
    assert bleu_score("It is in Paris", "It is in Paris", "corpus") == 100.0
    assert bleu_score("It is in Paris", "It is in Paris", "sentence") == 100.0


def test_short_reply_changed_by_hand():
    # r_0 "Yes it is" (3 tokens), r_v "Yes" (1 token). sentence: effective order 1, unigram
    # precision 1/1, brevity penalty exp(1 - 3/1) = 0.135335 -> 13.5335, delta -86.4665.
    # corpus: no 2-gram at all -> 0; r_0 against itself also 0 -> delta 0.
    assert _bleu_delta("Yes", "Yes it is", "sentence") == pytest.approx(13.533528 - 100, abs=1e-5)
    assert _bleu_delta("Yes", "Yes it is", "corpus") == 0.0


def test_reply_lengthened_from_a_short_baseline_by_hand():
    # r_0 "Paris" (1 token), r_v "Paris is the capital of France" (6 tokens): 1-grams 1/6,
    # 2-, 3-, 4-grams none matched of 5, 4, 3 -> exp smoothing 100 / (2 x 5) = 10,
    # 100 / (4 x 4) = 6.25, 100 / (8 x 3) = 4.1667 %; no brevity penalty;
    # BLEU = (16.667 x 10 x 6.25 x 4.1667) ** (1/4) = 8.1167 under both definitions.
    long = "Paris is the capital of France"
    assert bleu_score(long, "Paris", "sentence") == pytest.approx(8.11670, abs=1e-4)
    assert bleu_score(long, "Paris", "corpus") == pytest.approx(8.11670, abs=1e-4)
    assert _bleu_delta(long, "Paris", "sentence") == pytest.approx(8.11670 - 100, abs=1e-4)
    # corpus: "Paris" scores 0 against itself, so the method's delta is positive
    assert _bleu_delta(long, "Paris", "corpus") == pytest.approx(8.11670, abs=1e-4)


def test_long_reply_against_direct_sacrebleu_call():
    # 7 tokens each, one word changed: precisions 6/7, 4/6, 3/5, 2/4, no brevity penalty:
    # (0.857143 x 0.666667 x 0.6 x 0.5) ** (1/4) = 0.643459 -> delta -35.6541 under both
    cand = "The capital of France is Lyon."
    assert _bleu_delta(cand, R1, "corpus") == pytest.approx(64.345888 - 100, abs=1e-5)
    assert _bleu_delta(cand, R1, "sentence") == pytest.approx(64.345888 - 100, abs=1e-5)
    assert bleu_score(cand, R1, "corpus") == sacrebleu.corpus_bleu([cand], [[R1]]).score
    assert bleu_score(cand, R1, "sentence") == sacrebleu.sentence_bleu(cand, [R1]).score


def test_empty_replies_under_both_definitions():
    assert _bleu_delta("", "It is in Paris", "sentence") == -100.0
    assert _bleu_delta("", "It is in Paris", "corpus") == -100.0  # 0 - 100
    assert _bleu_delta("It is in Paris", "", "sentence") == -100.0
    assert _bleu_delta("It is in Paris", "", "corpus") == 0.0  # 0 - 0: the library's scores


def test_score_axes_corpus_bleu_by_hand():
    out = axis_deltas(make_generations(), make_probes(), FakeBert(), bleu="corpus").set_index("variant_id")
    # "Paris." (2 tokens) against R1 (7): no 3-gram -> corpus BLEU 0; R1 against itself 100
    assert out.loc["p1-len", "BLEU"] == -100.0
    # sentence: effective order 2, precisions 1, 1, brevity exp(1 - 7/2) = 0.082085 -> 8.2085
    sentence = axis_deltas(make_generations(), make_probes(), FakeBert()).set_index("variant_id")
    assert sentence.loc["p1-len", "BLEU"] == pytest.approx(8.208500 - 100, abs=1e-5)
    assert out.loc["p1-reg", "BLEU"] == sacrebleu.corpus_bleu([REG], [[R1]]).score - 100
    assert out.loc["p1-noise", "BLEU"] == 0.0 and out.loc["p1-base", "BLEU"] == 0.0
    assert check_ranges(out.reset_index(), bleu="corpus") == []


def test_corpus_bleu_may_be_positive_and_check_ranges_knows():
    out = axis_deltas(make_generations(), make_probes(), FakeBert()).reset_index()
    out.loc[out["variant_id"] == "p1-reg", "BLEU"] = 8.1
    assert check_ranges(out, bleu="corpus") == []
    assert any("p1-reg" in p and "BLEU" in p for p in check_ranges(out))


def test_unknown_bleu_definition_is_named():
    with pytest.raises(ValueError, match="stability.axes.bleu.*'chrf'"):
        axis_deltas(make_generations(), make_probes(), FakeBert(), bleu="chrf")


# ----------------------------------------------------------------------------- BERT scale


def test_rescaled_bert_delta_by_hand():
    # b = 0.5: (F1 - 0.5) / 0.5 - 1; 1 -> 0; 0.93 -> 0.86 - 1; 0.5 -> 0 - 1;
    # 0.2 -> -0.6, clipped to 0 -> -1; 0 (empty reply) -> -1
    got = rescaled_bert_delta(np.array([1.0, 0.93, 0.5, 0.2, 0.0]), 0.5)
    assert got == pytest.approx([0.0, -0.14, -1.0, -1.0, -1.0])
    with pytest.raises(ValueError, match="bert_baseline"):
        rescaled_bert_delta(np.array([0.9]), 1.0)


def test_score_axes_rescaled_bert_by_hand():
    out = axis_deltas(make_generations(), make_probes(), FakeBert(), bert_b=0.5).set_index("variant_id")
    assert out.loc["p1-reg", "BERT"] == pytest.approx(-0.14)  # (0.93 - 0.5) / 0.5 - 1
    assert out.loc["p1-len", "BERT"] == pytest.approx(-0.38)  # (0.81 - 0.5) / 0.5 - 1
    assert out.loc["p2-form", "BERT"] == pytest.approx(-0.76)  # (0.62 - 0.5) / 0.5 - 1
    assert out.loc["p2-empty", "BERT"] == -1.0  # (0 - 0.5) / 0.5 = -1, clipped to 0
    assert out.loc["p2-case", "BERT"] == pytest.approx(-0.06)  # (0.97 - 0.5) / 0.5 - 1
    assert out.loc["p1-noise", "BERT"] == 0.0 and out.loc["p1-base", "BERT"] == 0.0
    assert check_ranges(out.reset_index(), bert_scale="rescaled") == []
    bad = out.reset_index()
    bad.loc[bad["variant_id"] == "p2-form", "BERT"] = -1.5
    assert check_ranges(bad) == []  # raw F1 has no floor
    assert any("p2-form" in p for p in check_ranges(bad, bert_scale="rescaled"))


def test_bert_baseline_from_mismatched_baseline_replies():
    gens = make_generations()
    # a third prompt whose baseline reply is empty: not an unrelated reply, left out
    gens = pd.concat([gens, gens.iloc[[0]].assign(prompt_id="p3", variant_id="p3-base", response=" ")])
    calls = []

    def f1(cands, refs):
        calls.append((list(cands), list(refs)))
        return np.array([{(R1, R2): 0.3, (R2, R1): 0.5}[(c, r)] for c, r in zip(cands, refs)])

    # the two ordered pairs (R1, R2) and (R2, R1): b = (0.3 + 0.5) / 2 = 0.4
    got = bert_baseline(gens, f1, "auto", seed=0)
    assert got == {"b": pytest.approx(0.4), "method": "mismatched baseline reply pairs", "n_pairs": 2}
    assert calls == [([R1, R2], [R2, R1])]
    assert bert_baseline(gens, f1, 0.25) == {"b": 0.25, "method": "config", "n_pairs": 0}
    with pytest.raises(ValueError, match="at least 2 prompts"):
        bert_baseline(gens[gens["prompt_id"] != "p2"], f1, "auto")


# ----------------------------------------------------------------------------- unobservable axes


def test_unobservable_probe_columns_give_missing_axes():
    probes = make_probes().assign(act_cos=np.nan, logprob=np.nan)  # an API model
    out = axis_deltas(make_generations(), probes, FakeBert())
    assert out["Act"].isna().all() and out["Prob"].isna().all()  # baselines too: not 0
    full = axis_deltas(make_generations(), make_probes(), FakeBert())
    for axis in ("BLEU", "BERT", "Ent", "MR"):
        assert out[axis].tolist() == full[axis].tolist(), axis
    assert unobservable_axes(out) == ["Act", "Prob"]
    assert unobservable_axes(full) == []
    assert check_ranges(out) == []


def test_partly_missing_probe_column_is_an_error_naming_rows():
    probes = make_probes()
    probes.loc[probes["variant_id"] == "p2-form", "entropy"] = np.nan
    with pytest.raises(ValueError, match=r"'entropy' \(axis Ent\).*some rows only.*p2-form"):
        axis_deltas(make_generations(), probes, FakeBert())
    out = axis_deltas(make_generations(), make_probes(), FakeBert()).reset_index(drop=True)
    out.loc[out["variant_id"] == "p2-form", "Ent"] = np.nan
    assert any("p2-form" in p and "NaN" in p for p in check_ranges(out))


# ----------------------------------------------------------------------------- the step


# the step's settings the two tests below start from (bleu, bert_scale, ... as the step's defaults were)
STEP_AXES = {"bleu": "sentence", "bert_scale": "raw", "bert_baseline": "auto", "noise_detector": "margin"}


def test_score_axes_step_records_b_and_unobservable_axes(tmp_path, monkeypatch):
    import shiftwork.encoders
    from shiftwork.stability.jobs import AxesJob
    from shiftwork.stability.sections import AxesSettings
    from shiftwork.stability.steps import score_axes as step
    from shiftwork.tables import read_provenance, read_table, write_table

    class FakeEncoder:
        def __init__(self, name, spec):
            self.f1 = self.score

        @staticmethod
        def score(cands, refs):
            # unrelated baseline replies score 0.4 both ways; the variants as in F1
            return np.array([0.4 if (c, r) in {(R1, R2), (R2, R1)} else F1[c] for c, r in zip(cands, refs)])

    monkeypatch.setattr(shiftwork.encoders, "Encoder", FakeEncoder)
    gens, probes = tmp_path / "g.parquet", tmp_path / "p.parquet"
    write_table(make_generations(), gens)
    write_table(make_probes().assign(act_cos=np.nan), probes)
    out = tmp_path / "d.parquet"
    judged = tmp_path / "j.parquet"
    axes = AxesSettings.from_config(STEP_AXES, bleu="corpus", bert_scale="rescaled")
    step(
        str(gens), str(probes), str(out), str(judged), AxesJob(axes, "fake", {}, structural_baseline="original", seed=3)
    )
    assert read_table(judged).empty  # no judge
    deltas = read_table(out).set_index("variant_id")
    assert deltas.loc["p1-reg", "BERT"] == pytest.approx((0.93 - 0.4) / 0.6 - 1)
    assert deltas.loc["p1-len", "BLEU"] == -100.0  # corpus BLEU of "Paris." is 0
    assert deltas["Act"].isna().all()
    prov = read_provenance(out)
    assert prov["settings"]["bleu"] == "corpus" and prov["settings"]["bert_scale"] == "rescaled"
    assert prov["bert_rescale"]["b"] == pytest.approx(0.4)
    assert prov["bert_rescale"]["method"] == "mismatched baseline reply pairs"
    assert prov["bert_rescale"]["n_at_floor"] == 1  # the empty reply
    assert prov["unobservable_axes"] == ["Act"]


def test_check_ranges_widens_for_anchored_structural_rows():
    # a length variant closer to the original than its 1.0x anchor: Act and BLEU above 0
    row = {"variant_id": "v", "family": "structural", "Act": 0.01, "BLEU": 12.0, "BERT": 0.05,
           "Prob": 1.0, "Ent": 0.0, "MR": -1.0}  # fmt: skip
    table = pd.DataFrame([row])
    assert len(check_ranges(table)) == 3  # against the original these are out of range
    assert check_ranges(table, structural_baseline="rewrite") == []
    far = pd.DataFrame([{**row, "Act": 2.5}])
    assert "outside [-2.0, 2.0]" in check_ranges(far, structural_baseline="rewrite")[0]


def test_score_axes_step_takes_the_gates_b(tmp_path, monkeypatch):
    import shiftwork.encoders
    from shiftwork.stability.jobs import AxesJob
    from shiftwork.stability.sections import AxesSettings
    from shiftwork.stability.steps import score_axes as step
    from shiftwork.tables import read_provenance, read_table, write_table

    class FakeEncoder:
        def __init__(self, name, spec):
            self.f1 = lambda cands, refs: np.array([F1[c] for c in cands])

    monkeypatch.setattr(shiftwork.encoders, "Encoder", FakeEncoder)
    gens, probes, gate = tmp_path / "g.parquet", tmp_path / "p.parquet", tmp_path / "b.parquet"
    write_table(make_generations(), gens)
    write_table(make_probes(), probes)
    write_table(pd.DataFrame([{"encoder": "fake", "b": 0.5, "method": "config", "n_pairs": 0}]), gate)
    out, judged = tmp_path / "d.parquet", tmp_path / "j.parquet"
    axes = AxesSettings.from_config(STEP_AXES, bert_scale="rescaled", bert_baseline="gate")
    args = (str(gens), str(probes), str(out), str(judged))
    step(*args, AxesJob(axes, "fake", {}, structural_baseline="original"), gate_baseline_path=str(gate))
    # (0.93 - 0.5) / 0.5 - 1 = -0.14
    assert read_table(out).set_index("variant_id").loc["p1-reg", "BERT"] == pytest.approx(-0.14)
    assert read_provenance(out)["bert_rescale"]["method"] == "the gate's (config)"
    with pytest.raises(ValueError, match="encoder 'fake'"):
        step(*args, AxesJob(axes, "other", {}, structural_baseline="original"), gate_baseline_path=str(gate))
