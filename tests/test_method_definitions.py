"""The method's definitions that shiftwork offers as named options beside its own (the reference
code is the public repository Mahmoudbj48/Styled-Prompts-Shifted-Behavior-v2; each test names
the file and function it follows). Every expected value is worked out by hand in a comment, and
every option has a test that its default keeps shiftwork's earlier behaviour."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import sacrebleu

from shiftwork.stability import steps
from shiftwork.stability.axes import (
    AxisRules,
    axis_deltas,
    last_layer_cosine,
    variant_deltas,
    zero_against_empty,
)
from shiftwork.stability.jobs import AxesJob, TextModel
from shiftwork.stability.judge import (
    POLITENESS_CUES,
    cue_guarded,
    guard_judgments,
    judge_pairs,
    politeness_cues,
)
from shiftwork.stability.mirroring import length_mirroring_delta
from shiftwork.stability.prompts import DatasetError, load_prompts, subsample
from shiftwork.stability.sections import AxesSettings
from shiftwork.stability.variants.structural import anchor_strengths, length_multiples, rewrite_requests

FOUR = "a b c d"  # a 4-word baseline reply
EIGHT = "a b c d e f g h"  # 8 words: twice FOUR


def _table(rows):
    """Generations and probes of one prompt from (variant_id, family, kind, strength, input, reply,
    logprob, entropy, act_cos[, act_cos_layers])."""
    gens = pd.DataFrame(
        [
            dict(model="m", dataset="d", prompt_id="q", variant_id=r[0], family=r[1], kind=r[2],
                 position="global", strength=r[3], text=r[4], model_input="<in>" + r[4], response=r[5])
            for r in rows
        ]
    )  # fmt: skip
    probes = pd.DataFrame(
        [
            dict(model="m", dataset="d", prompt_id="q", variant_id=r[0], logprob=r[6], entropy=r[7], act_cos=r[8],
                 act_cos_layers=r[9] if len(r) > 9 else None)
            for r in rows
        ]
    )  # fmt: skip
    return gens, probes


def _f1(value: float = 0.5):
    return lambda cands, refs: np.full(len(cands), value)


# ------------------------------------------------------------------ 1. the 1.0 length level


def test_length_anchor_original_is_the_prompt_itself():
    """Follows utils/styles.py: apply_length_variation, which returns the text itself when
    |m - 1| < 0.05, and experiments/length_variation.py, which measures every multiple against
    the original prompt's reply: no 1.0x rewrite is asked for, and a length variant keeps its
    deltas against the original while the form rewrite stays anchored at the interrogative one."""
    assert length_multiples([2, 0.5], "rewrite", "original") == [0.5, 2.0]
    assert anchor_strengths("original") == {"form": -1.0}
    prompts = pd.DataFrame({"prompt_id": ["a"], "prompt": ["Why is the sky blue?"]})
    got = rewrite_requests(prompts, [2, 0.5], form=True, baseline="rewrite", length_anchor="original")
    assert [(r.kind, r.strength) for r in got.itertuples()] == [
        ("length", 0.5), ("length", 2.0), ("form", -1.0), ("form", 1.0)
    ]  # fmt: skip
    # baseline reply R (logprob -10); 2x rewrite: logprob -14, F1 0.7 -> Prob -4, BERT -0.3 against
    # the original, with no 1.0x row to take off; the imperative rewrite (logprob -26) minus the
    # interrogative one (logprob -12): Prob -14
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0),
            ("l2", "structural", "length", 2.0, "Q long", EIGHT, -14.0, 2.0, 0.8),
            ("fq", "structural", "form", -1.0, "Q?", "x y", -12.0, 1.5, 0.9),
            ("fc", "structural", "form", 1.0, "Do Q", "x y z", -26.0, 1.5, 0.7),
        ]
    )
    rules = AxisRules(structural_baseline="rewrite", length_anchor="original")
    out = variant_deltas(gens, probes, _f1(0.7), rules=rules).set_index("variant_id")
    assert sorted(out.index) == ["base", "fc", "l2"]
    assert out.loc["l2", "Prob"] == pytest.approx(-4.0) and out.loc["l2", "BERT"] == pytest.approx(-0.3)
    assert out.loc["fc", "Prob"] == pytest.approx(-14.0)


def test_length_anchor_default_keeps_the_unit_rewrite():
    """The default asks for the 1.0x rewrite and anchors length at it, as before the option."""
    assert length_multiples([2, 0.5]) == [0.5, 1.0, 2.0]
    assert length_multiples([2], "original", "rewrite") == [2.0]  # baseline original: no anchors
    assert anchor_strengths() == {"length": 1.0, "form": -1.0}
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0),
            ("l1", "structural", "length", 1.0, "Q same", FOUR, -11.0, 1.5, 0.9),
            ("l2", "structural", "length", 2.0, "Q long", EIGHT, -14.0, 2.0, 0.8),
        ]
    )
    old = axis_deltas(gens, probes, _f1(), structural_baseline="rewrite")
    new = variant_deltas(gens, probes, _f1(), rules=AxisRules(structural_baseline="rewrite"))
    pd.testing.assert_frame_equal(old, new)
    assert new.set_index("variant_id").loc["l2", "Prob"] == pytest.approx(-3.0)  # -4 minus the anchor's -1
    with pytest.raises(ValueError, match=r"length_anchor must be one of \['rewrite', 'original'\], got 'prompt'"):
        variant_deltas(gens, probes, _f1(), rules=AxisRules(length_anchor="prompt"))


# ------------------------------------------------------------------ 2. length mirroring


def test_length_mirroring_at_one_follows_the_method():
    """Follows experiments/length_variation.py (YES when the word ratio lies in m (1 +/- 0.25))
    and utils/compute_delta_metrics.py: add_delta_columns, which subtracts the baseline row, the
    1.0 length level, whose reply is the baseline reply itself and so always YES.

    Baseline reply 4 words. An 8-word reply at 2x: ratio 2 -> YES (1); minus 1 -> 0. The baseline
    reply itself at 2x: ratio 1 -> NO (0); minus 1 -> -1. An empty baseline reply: no ratio, 0 - 0."""
    assert length_mirroring_delta(EIGHT, FOUR, 2.0, "at_one") == 0
    assert length_mirroring_delta(FOUR, FOUR, 2.0, "at_one") == -1
    assert length_mirroring_delta("a b", FOUR, 0.5, "at_one") == 0  # 2/4 = 0.5 meets 0.5
    assert length_mirroring_delta(EIGHT, "", 2.0, "at_one") == 0
    # against the original prompt (the method's 1.0 level) the values are -1 and 0
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0),
            ("l2", "structural", "length", 2.0, "Q long", EIGHT, -14.0, 2.0, 0.8),
            ("l05", "structural", "length", 0.5, "Q?", FOUR, -12.0, 1.5, 0.9),
        ]
    )
    rules = AxisRules(structural_baseline="rewrite", length_anchor="original", length_mirroring="at_one")
    out = variant_deltas(gens, probes, _f1(), rules=rules).set_index("variant_id")
    assert out.loc["l2", "MR"] == 0.0 and out.loc["l05", "MR"] == -1.0


def test_length_mirroring_default_is_unchanged_and_reaches_two_against_a_rewrite():
    """The default (at_multiple) as before: against the 1.0x rewrite, a 2x reply identical to its
    anchor's 8 words (baseline reply 4) gets MR = (1 - 0) - (0 - 1) = 2, while at_one gives
    (1 - 1) - (0 - 1) = 1; against the original prompt at_multiple gives 1 and 0."""
    assert length_mirroring_delta(EIGHT, FOUR, 2.0) == 1
    assert length_mirroring_delta(FOUR, FOUR, 2.0) == 0
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0),
            ("l1", "structural", "length", 1.0, "Q same", EIGHT, -11.0, 1.5, 0.9),
            ("l2", "structural", "length", 2.0, "Q long", EIGHT, -11.0, 1.5, 0.9),
        ]
    )
    default = axis_deltas(gens, probes, _f1(), structural_baseline="rewrite").set_index("variant_id")
    assert default.loc["l2", "MR"] == 2.0
    assert default.loc["l2", ["BLEU", "BERT", "Act", "Prob", "Ent"]].tolist() == [0.0] * 5
    at_one = AxisRules(structural_baseline="rewrite", length_mirroring="at_one")
    assert variant_deltas(gens, probes, _f1(), rules=at_one).set_index("variant_id").loc["l2", "MR"] == 1.0
    with pytest.raises(ValueError, match=r"stability.axes.length_mirroring must be one of"):
        length_mirroring_delta(EIGHT, FOUR, 2.0, "at_two")


# ------------------------------------------------------------------ 3. an empty baseline reply


def test_empty_baseline_zero_follows_the_method():
    """Follows utils/metrics.py: compute_bleu (corpus_bleu([candidate], [[reference]])) and
    compute_bertscore (bert-score, which scores a pair with an empty side 0), with
    utils/compute_delta_metrics.py: add_delta_columns (minus the baseline row, which scores the
    empty reply against itself): 0 - 0 on both axes, for any reply."""
    # the library's own scores of an empty reference, as the method computes them
    assert sacrebleu.corpus_bleu(["Paris is the capital."], [[""]]).score == 0.0
    assert sacrebleu.corpus_bleu([""], [[""]]).score == 0.0
    assert zero_against_empty(np.array([-100.0, -40.0]), ["  ", "Paris."]).tolist() == [0.0, -40.0]
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", "", -10.0, 1.5, 1.0),
            ("v", "noise", "spacing", 1.0, "Q  x", "Paris is the capital.", -11.0, 1.5, 0.9),
        ]
    )
    zero = variant_deltas(gens, probes, _f1(0.0), rules=AxisRules(empty_baseline="zero")).set_index("variant_id")
    assert zero.loc["v", ["BLEU", "BERT"]].tolist() == [0.0, 0.0]
    assert bool(zero.loc["v", "flipped"])  # the reply still changed


def test_empty_baseline_default_scores_the_floor():
    """The default (floor) as before: sentence BLEU -100 and BERT F1 0 - 1 = -1 against an empty
    baseline reply; corpus BLEU 0 - 0."""
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", "", -10.0, 1.5, 1.0),
            ("v", "noise", "spacing", 1.0, "Q  x", "Paris is the capital.", -11.0, 1.5, 0.9),
        ]
    )
    out = axis_deltas(gens, probes, _f1(0.0)).set_index("variant_id")
    assert out.loc["v", ["BLEU", "BERT"]].tolist() == [-100.0, -1.0]
    assert axis_deltas(gens, probes, _f1(0.0), bleu="corpus").set_index("variant_id").loc["v", "BLEU"] == 0.0


# ------------------------------------------------------------------ 4. the TruthfulQA subsample


def test_subsample_within_the_prompts_every_model_ran():
    """Follows utils/sgs_core.py: subsample_truthful_qa: the 16 ids are drawn from the ids every
    model ran; the closed models ran the first 16 rows of the shuffle (run_closed_models.py,
    --sample_size 16) that the open models ran 128 of, so the draw of 16 from those 16 is all of
    them, in sample order."""
    df = pd.DataFrame({"prompt_id": [f"t{i}" for i in range(128)]})
    assert subsample(df, 16, 42, within=16)["prompt_id"].tolist() == [f"t{i}" for i in range(16)]
    # the reference's own steps on the ids: intersection, then a sorted seeded choice of 16
    common = sorted(set(range(128)) & set(range(16)))
    assert sorted(np.random.default_rng(42).choice(common, size=16, replace=False).tolist()) == list(range(16))
    # a wider pool draws among its first rows only
    assert all(int(p[1:]) < 20 for p in subsample(df, 16, 42, within=20)["prompt_id"])
    with pytest.raises(ValueError, match="a subsample of 16 rows cannot be drawn from the first 8 rows"):
        subsample(df, 16, 42, within=8)


def test_subsample_within_in_the_prompt_sampling(tmp_path):
    """With datasets.NAME.subsample.within 16, the 16 prompts are the first 16 of the shuffle,
    the same as a sample of 16; a pool smaller than the subsample is refused, naming the keys."""
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"q": f"Q{i}?"}) + "\n" for i in range(300)))
    base = {"source": {"kind": "file", "path": str(path)}, "fields": {"prompt": "q"}, "seed": 42, "sampler": "shuffle"}
    reference = load_prompts("tqa", {**base, "n": 128, "subsample": {"n": 16, "seed": 42, "within": 16}})
    assert reference["prompt"].tolist() == load_prompts("tqa", {**base, "n": 16})["prompt"].tolist()
    with pytest.raises(DatasetError) as err:
        load_prompts("tqa", {**base, "n": 128, "subsample": {"n": 16, "seed": 42, "within": 8}})
    assert str(err.value) == (
        "dataset 'tqa': subsample.n = 16 is larger than the 8 rows it is drawn from (subsample.within = 8, n = 128)"
    )


def test_subsample_default_draws_from_the_whole_sample():
    """Without within, as before: sorted(default_rng(seed).choice(all positions, n))."""
    df = pd.DataFrame({"prompt_id": [f"t{i}" for i in range(128)]})
    picks = sorted(np.random.default_rng(42).choice(np.arange(128), size=16, replace=False).tolist())
    assert subsample(df, 16, 42)["prompt_id"].tolist() == [f"t{i}" for i in picks]
    assert subsample(df, 16, 42, within=128).equals(subsample(df, 16, 42))
    assert subsample(df.head(3), 5, 0)["prompt_id"].tolist() == ["t0", "t1", "t2"]  # n beyond the sample


# ------------------------------------------------------------------ 6. Act at the last layer


def test_act_at_the_last_layer_follows_the_method():
    """Follows experiments/length_variation.py, which reads the last prompt token's state at
    get_layer_activations_batch(layer_idx=-1) (utils/metrics.py), the last of hidden_states.
    Layers' cosines 0.99, 0.9, 0.6: the last is 0.6, so Act = 0.6 - 1 = -0.4."""
    assert last_layer_cosine([0.99, 0.9, 0.6]) == 0.6
    assert last_layer_cosine(np.array([0.5])) == 0.5
    assert np.isnan(last_layer_cosine(None)) and np.isnan(last_layer_cosine([]))
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0, [1.0, 1.0, 1.0]),
            ("v", "noise", "spacing", 1.0, "Q  x", FOUR, -11.0, 1.5, 0.83, [0.99, 0.9, 0.6]),
        ]
    )
    last = variant_deltas(gens, probes, _f1(), rules=AxisRules(act_layers="last")).set_index("variant_id")
    assert last.loc["v", "Act"] == pytest.approx(-0.4)
    # an API model records no layers: the axis stays unobservable (NaN on every row)
    api = probes.assign(act_cos=np.nan, act_cos_layers=None)
    assert variant_deltas(gens, api, _f1(), rules=AxisRules(act_layers="last"))["Act"].isna().all()


def test_act_default_is_the_mean_over_layers():
    """The default (mean) reads act_cos as stored: 0.83 - 1 = -0.17."""
    gens, probes = _table(
        [
            ("base", "baseline", "none", 0.0, "Q", FOUR, -10.0, 1.5, 1.0, [1.0, 1.0, 1.0]),
            ("v", "noise", "spacing", 1.0, "Q  x", FOUR, -11.0, 1.5, 0.83, [0.99, 0.9, 0.6]),
        ]
    )
    assert axis_deltas(gens, probes, _f1()).set_index("variant_id").loc["v", "Act"] == pytest.approx(-0.17)


# ------------------------------------------------------------------ 6. the politeness-cue guard


def test_politeness_cue_guard_follows_the_method():
    """Follows utils/metrics.py: apply_false_positive_guard (judge_with_retries with
    use_false_positive_guard True): a politeness YES becomes NO when neither reply holds any of
    its cues, matched as lower-cased substrings."""
    assert len(POLITENESS_CUES) == 15
    assert politeness_cues("Thank you! Of course.") == 2  # "thank", "of course" ("thanks" is not in it)
    assert politeness_cues("Thanks, sorry, I apologise") == 4  # "thank", "thanks", "sorry", "apolog"
    assert politeness_cues("if it\u2019s not too much trouble") == 1  # the typographic apostrophe only
    assert politeness_cues("if it's not too much trouble") == 0
    assert cue_guarded(1, "register", "Paris.", "It is Paris.") == 0
    assert cue_guarded(1, "register", "Paris.", "Happy to help: Paris.") == 1
    assert cue_guarded(1, "register", "Please note: Paris.", "Paris.") == 1
    assert cue_guarded(1, "structural", "Paris.", "Name it.") == 1  # form verdicts pass
    assert cue_guarded(0, "register", "Please.", "Please.") == 0
    pairs = pd.DataFrame(
        [
            ("register", "tone", 6.0, "Q?", "Paris.", "Please, Q?", "It is Paris."),
            ("register", "tone", 6.0, "Q?", "Paris.", "Please, Q?", "Certainly! Paris."),
            ("structural", "form", 1.0, "Q?", "Paris.", "Say Q.", "Name Paris."),
        ],
        columns=["family", "kind", "strength", "original_prompt", "original_reply", "variant_prompt", "variant_reply"],
    )
    table = guard_judgments(judge_pairs(pairs, lambda prompts: ["YES"] * len(prompts)))
    assert table["verdict"].tolist() == [0, 1, 1]
    assert table["cue_guard"].tolist() == [True, False, False]


def test_politeness_cue_guard_is_off_by_default(monkeypatch):
    """Without the guard the judge's verdicts stand and the judgments table keeps its columns."""

    assert AxesSettings.defaults().judge_cue_guard is False
    monkeypatch.setattr(steps, "api_completer", lambda *a, **k: lambda prompts: ["YES"] * len(prompts))
    pairs = pd.DataFrame(
        [(1, "register", "tone", 6.0, "Q?", "Paris.", "Please, Q?", "It is Paris.")],
        columns=["variant_id", "family", "kind", "strength", "original_prompt", "original_reply",
                 "variant_prompt", "variant_reply"],
    )  # fmt: skip
    judge = TextModel(name="j", api={"kind": "openai_compatible"}, cache="unused")
    for guard, verdict in ((False, 1), (True, 0)):
        _, judge_fn, judged = steps._judge(judge, guard)
        assert judge_fn(pairs).tolist() == [verdict]
        assert ("cue_guard" in judged[0].columns) is guard


def test_definitions_enter_the_provenance_only_away_from_their_defaults():
    """A score_axes job at the defaults records the same settings as before the options."""

    assert steps._definition_settings(AxesJob(AxesSettings.defaults(), "enc")) == {}
    paper = AxesSettings.from_config(
        {"length_mirroring": "at_one", "empty_baseline": "zero", "act_layers": "last", "judge_cue_guard": True}
    )
    assert steps._definition_settings(AxesJob(paper, "enc", length_anchor="original")) == {
        "length_anchor": "original",  # length_mirroring at_one: the method's, and the default
        "empty_baseline": "zero",
        "act_layers": "last",
        "judge_cue_guard": True,
    }
    earlier = AxesSettings.from_config({"length_mirroring": "at_multiple"})
    assert steps._definition_settings(AxesJob(earlier, "enc")) == {"length_mirroring": "at_multiple"}
