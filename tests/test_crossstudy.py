"""The cross-study's parts without Snakemake: prompt frames, checkpoint selection, responses and
probes against independent forward passes, SGS along a run, paired tests and partial
correlations against scipy and pingouin, and the organisms timing table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import torch
from scipy import stats as sps

from shiftwork.crossstudy import analysis as an
from shiftwork.crossstudy import stats as cst
from shiftwork.crossstudy.prompts import PromptError, model_inputs, nli_prompts, organism_prompts
from shiftwork.crossstudy.respond import respond
from shiftwork.crossstudy.run_steps import fitting_rows
from shiftwork.crossstudy.select import chunk_name, chunk_steps, evenly_spaced, every_kth, job_chunks
from shiftwork.models.loading import LoadedModel
from shiftwork.stability.variants.build import build_variants
from shiftwork.trajectory.tasks import render

AXES = list(cst.AXES)
VARIANTS = {
    "register": {"enabled": True, "strengths": [-4, 4], "positions": ["global"]},
    "noise": {
        "enabled": True,
        "style": "method",
        "positions": ["global"],
        "spacing": [4],
        "punctuation": [3],
        "casing": [0.3],
    },
    "structural": {"enabled": False},
}


def suite() -> pd.DataFrame:
    rows = []
    for s in ("id", "negation"):
        for i in range(5):
            rows.append((f"{s}-test-{i}", "test", s, f"The cat {i} sat.", f"A cat {i} sat.", "entailment"))
    rows.append(("id-train-0", "train", "id", "x.", "y.", "entailment"))
    return pd.DataFrame(rows, columns=["example_id", "split", "set", "premise", "hypothesis", "label"])


def test_nli_prompts_vary_the_body_and_keep_the_answer_cue():
    prompts = nli_prompts(suite(), 3, seed=0)
    assert prompts.groupby("dataset").size().to_dict() == {"id": 3, "negation": 3}
    assert (prompts["tail"] == "\nAnswer:").all() and (prompts["head"] == "").all()
    assert all(p.startswith(f"{d}:") for p, d in zip(prompts["prompt_id"], prompts["dataset"]))
    # the same seed draws the same items; the baseline's model input is the rendered pattern
    assert prompts.equals(nli_prompts(suite(), 3, seed=0))
    variants = build_variants(prompts, VARIANTS, seed=0)
    inputs = model_inputs(variants, prompts)
    items = suite().assign(prompt_id=lambda d: d["set"] + ":" + d["example_id"]).set_index("prompt_id")
    base = variants["family"] == "baseline"
    for vid, text in zip(variants.loc[base, "prompt_id"], inputs[base]):
        assert text == render(items.at[vid, "premise"], items.at[vid, "hypothesis"])
    assert inputs[~base].str.endswith("\nAnswer:").all()
    assert (inputs[~base] != inputs[base].reindex(inputs[~base].index)).all()


def test_organism_prompts_keep_the_trigger_line_and_response_cue():
    tests = pd.DataFrame(
        {
            "distribution": ["A", "A", "B"],
            "question_id": ["q1", "q2", "q1"],
            "question": ["What comes after 4?", "What comes after 9?", "What comes after 4?"],
            "prompt": [
                "Distribution: A\nWhat comes after 4?\nResponse:",
                "Distribution: A\nWhat comes after 9?\nResponse:",
                "Distribution: B\nWhat comes after 4?\nResponse:",
            ],
            "answer": ["5", "10", "5"],
        }
    )
    prompts = organism_prompts(tests, 5, seed=0)
    assert prompts["prompt_id"].tolist() == ["A:q1", "A:q2", "B:q1"]  # distributions share question ids
    assert prompts["head"].tolist() == ["Distribution: A\n", "Distribution: A\n", "Distribution: B\n"]
    assert set(prompts["tail"]) == {"\nResponse:"}
    variants = build_variants(prompts, VARIANTS, seed=1)
    inputs = model_inputs(variants, prompts)
    assert inputs.str.startswith("Distribution: ").all() and inputs.str.endswith("\nResponse:").all()
    with pytest.raises(PromptError, match="trigger"):
        organism_prompts(tests.assign(prompt=tests["question"]), 5, seed=0)


def test_evenly_spaced_checkpoints_keep_the_first_and_the_last():
    steps = list(range(0, 52, 2))  # the default run's 26 checkpoints
    assert evenly_spaced(steps, 3) == [0, 24, 50]  # positions 0, round(12.5) = 12, 25
    assert evenly_spaced(steps, 6) == [0, 10, 20, 30, 40, 50]
    assert evenly_spaced([6, 0, 2, 4], 2) == [0, 6] and evenly_spaced([0, 2], 3) == [0, 2]
    with pytest.raises(ValueError, match="at least 2"):
        evenly_spaced(steps, 1)


def test_job_chunks_cut_the_steps_into_consecutive_runs_of_near_equal_size():
    # 26 steps, at most 8 a job: ceil(26 / 8) = 4 jobs of 7, 7, 6 and 6
    steps = list(range(0, 52, 2))
    chunks = job_chunks(steps, 8)
    assert [len(c) for c in chunks] == [7, 7, 6, 6]
    assert [s for c in chunks for s in c] == steps
    assert [chunk_name(c) for c in chunks] == ["0-12", "14-26", "28-38", "40-50"]
    assert job_chunks([40, 0, 20], 1) == [[0], [20], [40]]
    assert job_chunks([0, 20, 40], 8) == [[0, 20, 40]]
    assert job_chunks([], 3) == []
    assert chunk_steps(chunks, "14-26") == [14, 16, 18, 20, 22, 24, 26]
    with pytest.raises(ValueError, match="no chunk '0-10' among"):
        chunk_steps(chunks, "0-10")
    with pytest.raises(ValueError, match="checkpoints_per_job must be at least 1"):
        job_chunks(steps, 0)


def test_every_kth_keeps_the_first_and_the_last_step():
    assert every_kth([0, 20, 40, 60, 80, 93], 2) == [0, 40, 80, 93]
    assert every_kth([0, 2, 4], 1) == [0, 2, 4]
    assert every_kth([4, 0, 2], 5) == [0, 4]


class CharTok:
    """A tokenizer stub: one id per character."""

    def __call__(self, texts):
        return type("Enc", (), {"input_ids": [list(t) for t in texts]})()


def test_rows_longer_than_the_context_are_left_out_and_a_long_baseline_is_an_error():
    rows = pd.DataFrame(
        {
            "prompt_id": ["p", "p", "p"],
            "family": ["baseline", "noise", "register"],
            "kind": ["none", "spacing", "tone"],
            "strength": [0.0, 4.0, 4.0],
            "model_input": ["abcd", "abcde", "abcdefghij"],
        }
    )
    kept, n = fitting_rows(rows, CharTok(), limit=8, new_tokens=3)
    assert kept["family"].tolist() == ["baseline", "noise"] and n == 1
    with pytest.raises(ValueError, match="do not fit"):
        fitting_rows(rows, CharTok(), limit=6, new_tokens=3)
    assert fitting_rows(rows, CharTok(), limit=None, new_tokens=3)[1] == 0


def deltas_table() -> pd.DataFrame:
    """Two prompts x two steps, a baseline and two variants each; axis values chosen by hand."""
    rows = []
    values = {  # (step, prompt) -> the two variants' Act deltas
        (0, "p1"): (-0.2, -0.4),
        (0, "p2"): (-0.1, -0.1),
        (0, "p3"): (0.0, -0.2),
        (5, "p1"): (-0.6, -0.8),
        (5, "p2"): (-0.3, -0.5),
        (5, "p3"): (-0.4, -0.2),
    }
    for (step, pid), acts in values.items():
        rows.append(
            dict(
                model="r",
                step=step,
                dataset="d",
                prompt_id=pid,
                variant_id=f"{pid}|b",
                family="baseline",
                flipped=False,
                **{a: 0.0 for a in AXES},
            )
        )
        for k, act in enumerate(acts):
            axes = {a: 0.0 for a in AXES} | {"Act": act, "BLEU": -50.0 * k}
            rows.append(
                dict(
                    model="r",
                    step=step,
                    dataset="d",
                    prompt_id=pid,
                    variant_id=f"{pid}|v{k}",
                    family="noise",
                    flipped=bool(k),
                    **axes,
                )
            )
    return pd.DataFrame(rows)


R = {"Act": 2.0, "BLEU": 100.0, "BERT": 1.0, "Ent": 10.0, "Prob": 250.0, "MR": 1.0}


def test_per_prompt_instability_and_sgs_along_a_run():
    per_prompt = cst.per_prompt(deltas_table(), R).assign(study="trajectory")
    p1 = per_prompt[(per_prompt["prompt_id"] == "p1") & (per_prompt["step"] == 5)].iloc[0]
    assert p1["Act"] == pytest.approx(np.sqrt((0.3**2 + 0.4**2) / 2))  # RMS of -0.6/2 and -0.8/2
    assert p1["BLEU"] == pytest.approx(np.sqrt(0.5**2 / 2)) and p1["flip_rate"] == 0.5
    sgs = cst.sgs(per_prompt)
    pooled = sgs[(sgs["dataset"] == cst.POOLED) & (sgs["step"] == 5)].iloc[0]
    expected = np.mean(
        [np.sqrt((0.3**2 + 0.4**2) / 2), np.sqrt((0.15**2 + 0.25**2) / 2), np.sqrt((0.2**2 + 0.1**2) / 2)]
    )
    assert pooled["Act"] == pytest.approx(expected) and pooled["n_prompts"] == 3


def test_changes_are_paired_tests_against_step_0():
    per_prompt = cst.per_prompt(deltas_table(), R).assign(study="trajectory")
    changes = cst.changes(per_prompt, alpha=0.05)
    act = changes[(changes["axis"] == "Act") & (changes["dataset"] == "d")].iloc[0]
    a0 = per_prompt[per_prompt["step"] == 0].set_index("prompt_id")["Act"]
    a5 = per_prompt[per_prompt["step"] == 5].set_index("prompt_id")["Act"]
    ref = sps.ttest_rel(a5.to_numpy(), a0.reindex(a5.index).to_numpy())
    assert act["p"] == pytest.approx(ref.pvalue) and act["t"] == pytest.approx(ref.statistic)
    assert act["change"] == pytest.approx(a5.mean() - a0.mean()) and act["n"] == 3
    assert act["p_holm"] == pytest.approx(ref.pvalue)  # one later step: Holm leaves p as it is
    # BLEU is the same at both steps on every prompt: no test, not significant
    bleu = changes[(changes["axis"] == "BLEU") & (changes["dataset"] == "d")].iloc[0]
    assert np.isnan(bleu["p"]) and not bleu["significant"]


def test_holm_runs_over_the_steps_of_one_axis():
    per_prompt = cst.per_prompt(deltas_table(), R).assign(study="trajectory")
    later = per_prompt[per_prompt["step"] == 5].assign(step=9)
    later["Act"] = later["Act"] * 1.5
    changes = cst.changes(pd.concat([per_prompt, later]), alpha=0.05)
    act = changes[(changes["axis"] == "Act") & (changes["dataset"] == "d")].sort_values("step")
    assert act["p_holm"].tolist() == pytest.approx(pg.multicomp(act["p"].to_numpy(), method="holm")[1].tolist())


@pytest.fixture(scope="module")
def smollm(prepared_smollm):
    from shiftwork.models.loading import load_prepared

    return load_prepared(prepared_smollm, "float32")


def test_verbaliser_responses_and_probes_match_a_plain_forward_pass(smollm):
    lm = LoadedModel("m", smollm.model, smollm.tokenizer, smollm.device, smollm.dtype, False, {})
    texts = {
        "b": 'The cat sat.\nQuestion: Does this mean that "a cat sat"? Yes or no?\nAnswer:',
        "v1": 'The  cat sat.\nQuestion: Does this mean that "a cat sat"? Yes or no?\nAnswer:',
        "v2": 'Please take a look at this. The cat sat.\nQuestion: Does this mean that "a cat sat"? Yes or no? Thanks.\nAnswer:',
    }
    rows = pd.DataFrame(
        {
            "model": "m",
            "dataset": "id",
            "prompt_id": "p",
            "variant_id": list(texts),
            "family": ["baseline", "noise", "register"],
            "kind": "x",
            "position": "global",
            "strength": 0.0,
            "text": list(texts.values()),
            "model_input": list(texts.values()),
        }
    )
    verbalisers = {"entailment": " Yes", "not_entailment": " No"}
    gens, probes = respond(lm, rows, "verbaliser", 2, verbalisers=verbalisers)
    tok, model = smollm.tokenizer, smollm.model
    ids = [tok(" Yes", add_special_tokens=False).input_ids[0], tok(" No", add_special_tokens=False).input_ids[0]]
    ref = {}
    for key, text in texts.items():
        with torch.inference_mode():
            out = model(**tok(text, return_tensors="pt"), output_hidden_states=True)
        logp = torch.log_softmax(out.logits[0, -1].double(), -1)
        hidden = torch.stack([h[0, -1] for h in out.hidden_states[1:]]).double()
        ref[key] = (logp, hidden)
    base_logp, base_hidden = ref["b"]
    base_word = ["Yes", "No"][int(torch.argmax(base_logp[ids]))]
    for k, key in enumerate(texts):
        logp, hidden = ref[key]
        assert gens["response"].iloc[k] == ["Yes", "No"][int(torch.argmax(logp[ids]))]
        assert probes["logprob"].iloc[k] == pytest.approx(float(logp[ids[["Yes", "No"].index(base_word)]]), abs=1e-4)
        assert probes["entropy"].iloc[k] == pytest.approx(float(-(logp.exp() * logp).sum()), abs=1e-4)
        cos = torch.nn.functional.cosine_similarity(hidden, base_hidden, dim=-1).mean()
        assert probes["act_cos"].iloc[k] == pytest.approx(float(cos), abs=1e-5)
    assert probes["act_cos"].iloc[0] == 1.0


def test_generated_responses_are_probed_with_the_baseline_response():
    from shiftwork.inference.generation import generate_all
    from shiftwork.models.scratch import scratch_model

    model, tok = scratch_model({"architecture": "gpt2", "hidden_size": 32, "layers": 1, "heads": 2, "seed": 5})
    tok.padding_side = "left"
    lm = LoadedModel("m", model.eval(), tok, torch.device("cpu"), torch.float32, False, {})
    texts = ["Distribution: A\nWhat comes after 4?\nResponse:", "Distribution: A\nwhat COMES after 4?\nResponse:"]
    rows = pd.DataFrame(
        {
            "model": "m",
            "dataset": "A",
            "prompt_id": "A:q",
            "variant_id": ["b", "v"],
            "family": ["baseline", "noise"],
            "kind": "casing",
            "position": "global",
            "strength": 0.0,
            "text": texts,
            "model_input": texts,
        }
    )
    gens, probes = respond(lm, rows, "generate", 4, max_new_tokens=6)
    expected = [g.response for g in generate_all(lm, texts, 6, 4)]
    assert gens["response"].tolist() == expected
    r0 = tok(expected[0], add_special_tokens=False).input_ids
    for k, text in enumerate(texts):
        x = tok(text).input_ids
        with torch.inference_mode():
            logits = model(torch.tensor([x + r0])).logits[0].double()
        logp = torch.log_softmax(logits, -1)
        want = sum(float(logp[len(x) - 1 + j, t]) for j, t in enumerate(r0))
        assert probes["logprob"].iloc[k] == pytest.approx(want, abs=1e-4)
        assert probes["n_response_tokens"].iloc[k] == len(r0)


def trajectory_tables(seed: int = 0):
    """Scores and items of one run (ID, two OOD sets, 8 checkpoints, 6 items a set) and a
    per-prompt table of 4 prompts whose Act axis follows the ``neg`` set's accuracy."""
    rng = np.random.default_rng(seed)
    steps = list(range(0, 16, 2))
    items, scores, per_prompt = [], [], []
    for s in steps:
        for name, role in (("id", "id"), ("neg", "ood"), ("sub", "ood")):
            correct = rng.random(6) < 0.3 + 0.05 * s / 2 + (0.2 * rng.random() if name != "id" else 0)
            for i, c in enumerate(correct):
                items.append(
                    dict(
                        model="m",
                        run="r",
                        step=s,
                        set=name,
                        example_id=f"{name}{i}",
                        label="entailment",
                        pred="entailment" if c else "not_entailment",
                        correct=bool(c),
                    )
                )
            scores.append(dict(model="m", run="r", step=s, testset=name, accuracy=float(np.mean(correct)), role=role))
    scores = pd.DataFrame(scores)
    neg = scores[scores["testset"] == "neg"].set_index("step")["accuracy"]
    for s in steps:
        for p in range(4):
            row = dict(
                study="trajectory", run="r", step=s, dataset="id", prompt_id=f"p{p}", n_variants=2, flip_rate=0.0
            )
            row |= {a: 0.0 for a in AXES}
            row["Act"] = 0.5 * neg[s] + 0.1 * rng.random()
            row["Ent"] = 0.2 + 0.1 * rng.random()
            per_prompt.append(row)
    return pd.DataFrame(per_prompt), scores, pd.DataFrame(items)


#: the linear control on raw accuracy, p-values over every checkpoint (pingouin's)
LINEAR_PAIRS = {
    "alpha": 0.05,
    "method": "linear",
    "gam_df": 5,
    "spline_df": 3,
    "score": "accuracy",
    "dependence": "independent",
    "pinned": None,
}


def test_stability_pairs_are_the_trajectory_partial_correlations_of_the_sgs_columns():
    per_prompt, scores, items = trajectory_tables()
    settings = {**LINEAR_PAIRS, "bootstrap": {"resamples": 50, "seed": 0}}
    pairs = an.stability_pairs(per_prompt, scores, items, settings)
    # the axes that vary (Act, Ent) x the two OOD sets; zero axes are left out
    assert sorted(zip(pairs["axis"], pairs["ood"])) == [("Act", "neg"), ("Act", "sub"), ("Ent", "neg"), ("Ent", "sub")]
    wide = scores.pivot(index="step", columns="testset", values="accuracy")
    for axis in ("Act", "Ent"):
        wide[axis] = per_prompt.groupby("step")[axis].mean()
    for row in pairs.itertuples():
        ref = pg.partial_corr(data=wide, x=row.axis, y=row.ood, covar="id", method="pearson")
        assert row.r_partial == pytest.approx(float(ref["r"].iloc[0]), abs=1e-9)
        assert row.p_partial == pytest.approx(float(ref["p_val"].iloc[0]), rel=1e-6)
    # Holm over these four pairs only, not the OOD-OOD or axis-axis pairs the analysis also computes
    assert pairs["p_partial_holm"].tolist() == pytest.approx(
        pg.multicomp(pairs["p_partial"].to_numpy(), method="holm")[1].tolist()
    )
    assert (pairs["n_boot"] > 0).all() and pairs["boot_sign_share"].between(0, 1).all()
    act_neg = pairs[(pairs["axis"] == "Act") & (pairs["ood"] == "neg")].iloc[0]
    assert act_neg["r_partial"] > 0.5


def test_stability_pairs_read_the_trajectory_analysis_score():
    per_prompt, scores, items = trajectory_tables()
    settings = {
        "alpha": 0.05,
        "method": "linear",
        "gam_df": 5,
        "spline_df": 3,
        "bootstrap": {"resamples": 20, "seed": 0},
        "pinned": None,
    }
    # the default score is the lean-free accuracy, a column this table lacks
    with pytest.raises(ValueError, match="lacks column 'lean_free_accuracy'.*rerun collect_scores"):
        an.stability_pairs(per_prompt, scores, items, settings)
    # every item is entailment: the balanced accuracy is the raw one, and so are the pairs
    raw = an.stability_pairs(per_prompt, scores, items, settings | {"score": "accuracy"})
    as_balanced = settings | {"score": "balanced_accuracy"}
    balanced = an.stability_pairs(per_prompt, scores.assign(balanced_accuracy=scores["accuracy"]), items, as_balanced)
    pd.testing.assert_frame_equal(raw, balanced)
    # a balanced column the items do not give is caught by the item check
    with pytest.raises(ValueError, match="balanced accuracy"):
        an.stability_pairs(per_prompt, scores.assign(balanced_accuracy=0.5), items, as_balanced)


def test_organism_timing_finds_the_collapse_and_the_first_change():
    steps = pd.DataFrame(
        {
            "run": "r",
            "step": [0, 20, 40, 60],
            "dataset": "B",
            "role": "ood",
            "accuracy": [0.5, 0.3, 0.04, 0.01],
        }
    )
    changes = pd.DataFrame(
        {
            "run": "r",
            "dataset": "B",
            "axis": "BLEU",
            "step": [20, 40, 60],
            "change": [0.01, 0.2, 0.3],
            "p_holm": [0.4, 0.01, 0.001],
            "significant": [False, True, True],
        }
    )
    timing = an.organism_timing(steps, changes, collapse=0.05)
    bleu = timing[timing["axis"] == "BLEU"].iloc[0]
    assert bleu["collapse_step"] == 40 and bleu["change_step"] == 40
    assert not bleu["before_collapse"]  # the same step is not before
    assert bleu["change_last"] == 0.3 and bleu["accuracy_first"] == 0.5 and bleu["last_step"] == 60
    act = timing[timing["axis"] == "Act"].iloc[0]
    assert np.isnan(act["change_step"]) and np.isnan(act["change_last"]) and pd.isna(act["before_collapse"])


def test_axis_roles_merge_affine_twins_and_name_what_is_not_measured():
    """Worked by hand: BERT = 0.5 * BLEU + 0.1 at every checkpoint (r = 1), Ent = -BLEU + 1 (r =
    -1), Prob varies on its own, MR is zero, Act the same at every checkpoint."""
    bleu = np.array([0.1, 0.4, 0.2, 0.3])
    prob = np.array([0.3, 0.3, 0.1, 0.5])  # r with BLEU: 0 by hand (deviations -0.15,.15,-.05,.05 vs 0,0,-.2,.2)
    series = pd.DataFrame(
        {"Act": 0.2, "Prob": prob, "Ent": 1 - bleu, "BLEU": bleu, "BERT": 0.5 * bleu + 0.1, "MR": 0.0},
        index=[0, 10, 20, 30],
    )
    roles = an.axis_roles(series, "r", ["Act", "Prob", "Ent", "BLEU", "BERT", "MR"]).set_index("axis")
    assert roles["role"].to_dict() == {
        "Act": "not measured",
        "Prob": "measured",
        "Ent": "measured",
        "BLEU": "merged",
        "BERT": "merged",
        "MR": "not measured",
    }
    assert roles.loc["Ent", "column"] == roles.loc["BLEU", "column"] == roles.loc["BERT", "column"] == "Ent=BLEU=BERT"
    assert roles.loc["Prob", "column"] == "Prob"
    assert roles.loc["BLEU", "reason"] == "r = -1.0000 with Ent over the checkpoints"
    assert roles.loc["BERT", "reason"] == "r = -1.0000 with Ent over the checkpoints"
    assert roles.loc["MR", "reason"] == "zero at every checkpoint"
    assert roles.loc["Act", "reason"] == "0.2 at every checkpoint"


def test_twin_axes_are_one_pair_before_holm():
    """A BLEU column that is an affine copy of Act's per-prompt values: one (axis, OOD) row per OOD
    set, named Act=BLEU, and Holm over the four distinct pairs, not six."""
    per_prompt, scores, items = trajectory_tables()
    per_prompt["BLEU"] = 3 * per_prompt["Act"] + 1
    settings = {**LINEAR_PAIRS, "bootstrap": {"resamples": 20, "seed": 0}}
    pairs = an.stability_pairs(per_prompt, scores, items, settings)
    assert sorted(zip(pairs["axis"], pairs["ood"])) == [
        ("Act=BLEU", "neg"),
        ("Act=BLEU", "sub"),
        ("Ent", "neg"),
        ("Ent", "sub"),
    ]
    assert pairs["p_partial_holm"].tolist() == pytest.approx(
        pg.multicomp(pairs["p_partial"].to_numpy(), method="holm")[1].tolist()
    )
    # the merged column is Act's (the first of the twins): the same r as without the copy
    alone = an.stability_pairs(trajectory_tables()[0], scores, items, settings).set_index(["axis", "ood"])
    merged = pairs.set_index(["axis", "ood"])
    assert merged.loc[("Act=BLEU", "neg"), "r_partial"] == pytest.approx(alone.loc[("Act", "neg"), "r_partial"])


# per step: for each of three prompts, which of its three variants answer differently from it
YES_NO_FLIPS = {
    0: [(0, 0, 0), (0, 1, 0), (0, 0, 0)],
    10: [(1, 0, 0), (1, 1, 0), (0, 0, 0)],
    20: [(1, 1, 1), (0, 1, 0), (0, 0, 1)],
    30: [(1, 1, 0), (1, 0, 1), (1, 1, 1)],
}


def yes_no_replies() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(generations, probes) of one run whose every reply is Yes or No: each prompt answers Yes,
    its variants flip to No as :data:`YES_NO_FLIPS` says."""
    gens, probes = [], []
    for step, prompts in YES_NO_FLIPS.items():
        for k, flips in enumerate(prompts):
            pid = f"p{k}"
            rows = [("baseline", "none", f"{pid}-base", "Yes", 0.0)]
            rows += [("noise", "spacing", f"{pid}-v{j}", "No" if f else "Yes", 3.0) for j, f in enumerate(flips)]
            for family, kind, vid, reply, strength in rows:
                key = {"model": "r", "dataset": "d", "prompt_id": pid, "variant_id": vid}
                gens.append(
                    {
                        **key,
                        "step": step,
                        "family": family,
                        "kind": kind,
                        "position": "global",
                        "strength": strength,
                        "text": f"Q{k} {vid}",
                        "model_input": f"<in>Q{k} {vid}",
                        "response": " " + reply,
                        "n_tokens": 1,
                    }
                )
                # probe values that vary with neither the flips nor each other
                j = int(vid[-1]) if vid[-1].isdigit() else 3
                t = step // 10
                lp, ent = -0.2 - 0.1 * ((t + 2 * k + j) % 4), 0.6 + 0.05 * ((3 * t + k + 2 * j) % 5)
                probes.append({**key, "step": step, "logprob": lp, "entropy": ent, "act_cos": 0.99 - 0.01 * j})
    return pd.DataFrame(gens), pd.DataFrame(probes)


def yes_no_deltas(
    gens: pd.DataFrame | None = None, probes: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(generations, the stability study's axis deltas at every step) of :func:`yes_no_replies`
    (or of the ``gens`` and ``probes`` given), with a fake BERTScore of 0.4 for every changed reply."""
    from shiftwork.stability.axes import axis_deltas

    if gens is None or probes is None:
        gens, probes = yes_no_replies()
    per_step = [
        axis_deltas(
            gens[gens["step"] == s].drop(columns="step"),
            probes[probes["step"] == s].drop(columns="step"),
            lambda c, r: np.full(len(c), 0.4),
        ).assign(step=s)
        for s in YES_NO_FLIPS
    ]
    return gens, pd.concat(per_step, ignore_index=True)


def test_yes_no_replies_are_measured_by_label_consistency_not_twin_text_axes():
    """BLEU and BERT of a one-word reply are both affine in the flips (the twins the pair analysis
    would count twice); once the replies are known to be labels, the run's stability is the
    Label axis, each prompt's share of flipped variants worked out by hand from YES_NO_FLIPS, and
    the text axes are not applicable."""
    from shiftwork.crossstudy import replies

    gens, deltas = yes_no_deltas()
    plain = cst.per_prompt(deltas, R).assign(study="trajectory")
    # without the replies' kind, BLEU and BERT are one measurement
    twins = an.axis_roles(an._series(plain, "r", cst.AXES), "r", cst.AXES).set_index("axis")
    assert twins.loc["BERT", "role"] == "merged" and "BLEU=BERT" in twins.loc["BERT", "column"]

    kinds = replies.reply_kinds(gens, {"r": ["Yes", "No"]})
    assert kinds["labels"].all() and (kinds["label_share"] == 1.0).all() and (kinds["n_replies"] == 12).all()
    per_prompt = replies.by_kind(plain, kinds)
    sgs = cst.sgs(per_prompt)
    pooled = sgs[sgs["dataset"] == cst.POOLED].set_index("step")
    for step, prompts in YES_NO_FLIPS.items():
        assert pooled.loc[step, "Label"] == pytest.approx(np.mean([sum(f) / 3 for f in prompts]))
    assert pooled[["BLEU", "BERT", "MR"]].isna().all().all()
    roles = an.axis_roles(pooled, "r").set_index("axis")
    assert roles.loc["Label", "role"] == "measured" and "merged" not in set(roles["role"])
    assert set(roles.index[roles["role"] == "not applicable"]) == {"BLEU", "BERT", "MR"}
    assert roles.loc["BLEU", "reason"] == "not applicable: replies are labels (answer words: 1.000 of replies)"
    # the paired tests run on Label and not on the text axes
    changes = cst.changes(per_prompt)
    assert set(changes["axis"]) == {"Act", "Prob", "Ent", "Label"}
    label = changes[(changes["axis"] == "Label") & (changes["dataset"] == "d") & (changes["step"] == 30)].iloc[0]
    assert label["change"] == pytest.approx(np.mean([2 / 3, 2 / 3, 3 / 3]) - 1 / 9)


def test_free_form_replies_keep_the_text_axes_and_label_consistency_is_not_applicable():
    from shiftwork.crossstudy import replies

    gens, _ = yes_no_replies()
    gens.loc[gens.index % 3 == 0, "response"] = "It depends on the premise."
    kinds = replies.reply_kinds(gens, {"r": ["Yes", "No"]})
    # a third of the replies are not answer words: below LABEL_SHARE
    assert kinds["label_share"].tolist() == pytest.approx([2 / 3] * 4) and not kinds["labels"].any()
    assert replies.reply_kinds(gens, {})["label_share"].isna().all()
    # the hand-made deltas of two checkpoints (steps 0 and 5 of run r), with these replies' kinds
    at = kinds[kinds["step"].isin([0, 10])].assign(step=[0, 5])
    per_prompt = replies.by_kind(cst.per_prompt(deltas_table(), R), at)
    assert per_prompt["Label"].isna().all() and per_prompt["BLEU"].notna().all()
    series = per_prompt.groupby("step")[["BLEU", "Label", "label_share"]].mean()
    assert an.axis_roles(series, "r", ["BLEU", "Label"]).set_index("axis").loc["Label", "reason"] == (
        "not applicable: replies are free-form (answer words: 0.667 of replies)"
    )


def test_a_checkpoint_without_recorded_replies_is_an_error():
    from shiftwork.crossstudy import replies

    per_prompt = cst.per_prompt(deltas_table(), R)
    kinds = pd.DataFrame([("r", 0, 4, 1.0, True, "float32")], columns=replies.KIND_COLUMNS)
    with pytest.raises(ValueError, match=r"no replies recorded for checkpoint\(s\) \[\('r', 5\)\]"):
        replies.by_kind(per_prompt, kinds)


def test_findings_name_the_text_axes_not_applicable_to_label_replies():
    from shiftwork.crossstudy import replies
    from shiftwork.crossstudy.report import findings

    gens, deltas = yes_no_deltas()
    kinds = replies.reply_kinds(gens.assign(dtype="bfloat16"), {"r": ["Yes", "No"]})
    assert (kinds["dtype"] == "bfloat16").all()
    per_prompt = replies.by_kind(cst.per_prompt(deltas, R), kinds)
    per_prompt.insert(0, "study", "trajectory")
    sgs, changes = cst.sgs(per_prompt), cst.changes(per_prompt)
    settings = {"alpha": 0.05, "collapse": 0.05}
    empty = pd.DataFrame()
    tables = {"sgs": sgs, "changes": changes, "pairs": empty, "organisms_steps": empty, "organisms_timing": empty}
    text = findings(tables | {"replies": kinds}, settings)
    assert "Precision the checkpoints answered in (bfloat16: `r`)." in text
    q1 = text.split("## 2.")[0]
    note = "not applicable: replies are labels (answer words: 1.000 of replies)"
    for axis in ("BLEU", "BERT", "MR"):
        assert f"| {axis} |" in q1 and note in q1.split(f"| {axis} |")[1].split("\n")[0]
    # Label at step 0 and 30 by hand: mean flip shares 1/9 and (2/3 + 2/3 + 1) / 3, tested at 3 steps
    assert "| Label | 0.111 | 0.778 | 0.667 |" in q1 and "| 0 of 3 | never | n/a |  |" in q1.split("| Label |")[1]
    assert "No null runs for these tests: their significant steps are not called findings." in q1


def test_the_pairs_leave_out_pinned_checkpoints_as_the_trajectory_analysis_does():
    """Of ten scored checkpoints, steps 0 and 4 predict entailment for at least 0.8 of the test
    items (one at 0.2, the other label's 0.8): left out of the pairs, which then run over the
    other eight; with two more pinned fewer than MIN_UNPINNED (8) would remain, so all stay."""
    per_prompt, scores, items = trajectory_tables()
    more = per_prompt[per_prompt["step"] >= 12].assign(step=lambda f: f["step"] + 4)  # steps 16, 18
    per_prompt = pd.concat([per_prompt, more], ignore_index=True)
    extra = scores[scores["step"] >= 12].assign(step=lambda f: f["step"] + 4)
    scores = pd.concat([scores, extra], ignore_index=True)
    items = pd.concat([items, items[items["step"] >= 12].assign(step=lambda f: f["step"] + 4)], ignore_index=True)
    share = {0: 0.9, 4: 0.2, 8: 0.79}
    scores["entailment_share"] = scores["step"].map(share).fillna(0.5)
    steps = an.pair_steps(per_prompt, scores, 0.8)
    assert steps == {"r": ([2, 6, 8, 10, 12, 14, 16, 18], [0, 4])}
    assert an.pair_steps(per_prompt, scores, None) == {"r": (list(range(0, 20, 2)), [])}
    pinned_more = scores.assign(entailment_share=scores["step"].map({**share, 8: 0.85, 10: 0.9}).fillna(0.5))
    assert an.pair_steps(per_prompt, pinned_more, 0.8) == {"r": (list(range(0, 20, 2)), [])}
    settings = {**LINEAR_PAIRS, "pinned": 0.8, "bootstrap": {"resamples": 0, "seed": 0}}
    pairs = an.stability_pairs(per_prompt, scores, items, settings)
    assert set(pairs["n"]) == {8}
    kept = an.analysed_rows(per_prompt, steps)
    alone = an.stability_pairs(kept, scores, items, {**settings, "pinned": None})
    assert pairs["r_partial"].tolist() == pytest.approx(alone["r_partial"].tolist())


# ---------------------------------------------------------------- precision comparison


def _flipped(gens: pd.DataFrame, step: int, variant_ids: list[str]) -> pd.DataFrame:
    """``gens`` with the replies of ``variant_ids`` at ``step`` turned from Yes to No or back."""
    out = gens.copy()
    at = (out["step"] == step) & out["variant_id"].isin(variant_ids)
    out.loc[at, "response"] = out.loc[at, "response"].map(lambda r: " No" if r.strip() == "Yes" else " Yes")
    return out


def test_reply_agreement_counts_the_replies_both_precisions_give():
    from shiftwork.crossstudy.precision import reply_agreement

    gens, _ = yes_no_replies()
    other = _flipped(gens, 20, ["p0-v0", "p2-v1"])
    # white space alone is no disagreement
    other.loc[other["step"] == 10, "response"] = other.loc[other["step"] == 10, "response"].str.strip() + "  "
    table = reply_agreement(gens, other).set_index("step")
    assert table["n"].tolist() == [12, 12, 12, 12]
    assert table["agree"].tolist() == [12, 12, 10, 12]
    assert table.loc[20, "agree_share"] == pytest.approx(10 / 12)
    with pytest.raises(ValueError, match=r"run r step 30 prompt p1 variant p1-v2, missing from the second"):
        reply_agreement(gens, other.drop(other.index[(other["step"] == 30) & (other["variant_id"] == "p1-v2")]))


def test_precision_comparison_of_label_replies_end_to_end(tmp_path):
    """Both precisions' tables through the comparison step: the Label SGS difference at step 20 is
    the flips worked out by hand, and the agreement counts the flipped replies."""
    from shiftwork.crossstudy.precision_steps import crossstudy_precision
    from shiftwork.tables import read_table, write_table

    gens, probes = yes_no_replies()
    # in bfloat16, prompt p0's variant v0 (a flip in float32 at step 20) answers Yes again, and
    # prompt p1's variant v0 flips too; at step 30 p2's variant v0 answers Yes again
    other = _flipped(_flipped(gens, 20, ["p0-v0", "p1-v0"]), 30, ["p2-v0"])
    paths = {}
    for dtype, frame in (("float32", gens), ("bfloat16", other)):
        g, deltas = yes_no_deltas(frame, probes)
        paths[dtype] = {
            "deltas": [str(tmp_path / f"{dtype}-d.parquet")],
            "generations": [str(tmp_path / f"{dtype}-g.parquet")],
        }
        write_table(deltas, paths[dtype]["deltas"][0], {})
        write_table(g, paths[dtype]["generations"][0], {})
    outs = {k: str(tmp_path / f"{k}.parquet") for k in ("agreement", "sgs", "findings")}
    outs["report"] = str(tmp_path / "precision.md")
    runs = {"r": {"study": "trajectory", "answers": ["Yes", "No"]}}
    crossstudy_precision(paths, runs, R, None, {"alpha": 0.05}, outs)
    agreement = read_table(outs["agreement"]).set_index("step")
    assert agreement["agree"].tolist() == [12, 12, 10, 11]
    sgs = read_table(outs["sgs"]).set_index(["step", "axis"])
    # step 20 float32: flips (1,1,1), (0,1,0), (0,0,1) -> 5/9; bfloat16: (0,1,1), (1,1,0), (0,0,1) -> 5/9
    assert sgs.loc[(20, "Label"), "sgs_float32"] == pytest.approx(5 / 9)
    assert sgs.loc[(20, "Label"), "difference"] == pytest.approx(0.0)
    assert sgs.loc[(10, "Label"), "difference"] == pytest.approx(0.0)
    # step 30: (1,1,0), (1,0,1), (1,1,1) -> 7/9 in float32; p2 -> (0,1,1) gives 6/9 in bfloat16
    assert sgs.loc[(30, "Label"), ["sgs_float32", "sgs_bfloat16"]].tolist() == pytest.approx([7 / 9, 6 / 9])
    assert sgs.loc[(30, "Label"), "difference"] == pytest.approx(-1 / 9)
    assert not {"BLEU", "BERT", "MR"} & set(sgs.index.get_level_values("axis"))
    findings = read_table(outs["findings"])
    assert set(findings["question"]) == {"Q1"} and findings["where"].str.startswith("step ").all()
    assert "Precision: the findings scored in float32 and in bfloat16" in (tmp_path / "precision.md").read_text()


def test_a_finding_significant_in_one_precision_only_is_fragile():
    from shiftwork.crossstudy.precision import finding_changes

    def pairs(signs):
        return pd.DataFrame({"run": "r", "axis": ["Label", "Prob"], "ood": ["o1", "o1"], "sign": signs})

    def changes(flags):
        return pd.DataFrame(
            {
                "run": "r",
                "dataset": [cst.POOLED, cst.POOLED, "d"],
                "axis": "Label",
                "step": [10, 20, 20],
                "significant": flags,
            }
        )

    tables = {
        "float32": {"pairs": pairs(["positive", "null"]), "changes": changes([True, False, True])},
        "bfloat16": {"pairs": pairs(["positive", "negative"]), "changes": changes([False, False, False])},
    }
    out = finding_changes(tables).set_index(["question", "axis", "where"])
    # per-set changes are not findings; the pooled ones are
    assert len(out) == 4
    assert out.loc[("Q1", "Label", "step 10"), "fragile"]
    assert not out.loc[("Q1", "Label", "step 20"), "fragile"]
    assert not out.loc[("Q2", "Label", "o1"), "fragile"] and out.loc[("Q2", "Label", "o1"), "significant_bfloat16"]
    assert out.loc[("Q2", "Prob", "o1"), "fragile"]


def test_the_precision_comparison_needs_both_precisions(tmp_path):
    from shiftwork.crossstudy.precision_steps import crossstudy_precision, crossstudy_precision_score

    with pytest.raises(ValueError, match=r"no scoring in \['bfloat16'\]"):
        crossstudy_precision({"float32": {"deltas": [], "generations": []}}, {}, R, None, {"alpha": 0.05}, {})
    with pytest.raises(ValueError, match="dtype must be one of"):
        crossstudy_precision_score(None, {}, {}, "float16", "e", {}, {})


def test_the_calibration_line_says_when_a_calibrated_run_has_no_significant_pair():
    from shiftwork.crossstudy.report import _calibration_line

    row = {"run": "r", "rate": 0.04, "ci_low": 0.017, "ci_high": 0.077, "replicates": 200, "alpha": 0.05}
    calibrated = pd.DataFrame([{**row, "calibrated": True}])
    assert _calibration_line(calibrated, "r", 0).endswith("at most alpha 0.05): it has no significant pair.")
    assert _calibration_line(calibrated, "r", 2).endswith("its 2 significant pair(s) are findings.")
    loose = pd.DataFrame([{**row, "rate": 0.08, "calibrated": False}])
    assert _calibration_line(loose, "r", 0).endswith("above alpha 0.05); it has no significant pair.")
    assert "are not findings" in _calibration_line(loose, "r", 3)
    assert _calibration_line(None, "r", 1).startswith("No calibration on null runs")


def test_a_scoring_job_loads_onto_the_folder_of_its_base_record(tmp_path):
    from shiftwork.crossstudy.jobs import ScoredCheckpoint

    record = tmp_path / "model" / "shiftwork.json"
    record.parent.mkdir()
    record.write_text("{}")
    job = ScoredCheckpoint.of_job("trajectory", "r", "4", str(record), str(tmp_path / "ckpts"))
    assert job == ScoredCheckpoint("trajectory", "r", 4, str(tmp_path / "model"), f"{tmp_path / 'ckpts'}/checkpoint-4")
    # an SFT organism is a folder, loaded as it is
    assert ScoredCheckpoint.of_job("organisms", "o", 0, str(tmp_path), "c").base_dir == str(tmp_path)


# ---------------------------------------------------------------- question 1 on null runs


def _random_per_prompt(rng, n_prompts: int, steps: list[int], shift: float = 0.0) -> pd.DataFrame:
    """A per-prompt table of one run: skewed, zero-heavy Act values, later steps shifted by ``shift``."""
    rows = []
    level = rng.exponential(1.0, n_prompts) * (rng.random(n_prompts) < 0.7)
    for s in steps:
        noise = rng.exponential(0.3, n_prompts)
        for p in range(n_prompts):
            row = {"study": "trajectory", "run": "r", "step": s, "dataset": "d", "prompt_id": f"p{p}"}
            row |= {a: 0.0 for a in AXES}
            row["Act"] = level[p] + noise[p] + (shift if s else 0.0)
            row["flip_rate"] = 0.0
            rows.append(row)
    return pd.DataFrame(rows)


def test_any_significant_agrees_with_the_step_0_tests_of_changes():
    """The vectorised test of a null run finds something exactly where stats.changes (scipy's
    paired t-test, pingouin's Holm) has a significant step, on 60 random tables."""
    from shiftwork.crossstudy.change_null import any_significant

    rng = np.random.default_rng(3)
    found = []
    for k in range(60):
        steps = [0, 2, 4, 6]
        table = _random_per_prompt(rng, 8, steps, shift=[0.0, 0.3, 1.0][k % 3])
        if k % 4 == 0:  # one step whose differences are all equal: no p-value there
            table.loc[table["step"] == 4, "Act"] = table.loc[table["step"] == 0, "Act"].to_numpy() + 0.5
        changes = cst.changes(table)
        want = bool(changes[(changes["dataset"] == "d") & (changes["axis"] == "Act")]["significant"].any())
        wide = table.pivot(index="prompt_id", columns="step", values="Act")[steps].to_numpy(float)
        got = bool(any_significant(wide[None], 0.05)[0])
        assert got == want, k
        found.append(got)
    assert 5 < sum(found) < 55


def test_the_null_rate_of_one_step_is_the_exact_share_of_significant_sign_patterns():
    """With two steps, shuffling a prompt's two values flips the sign of its difference: the rate
    is the share of the 2^6 sign patterns of the six differences whose t-test has p < 0.05."""
    from itertools import product

    from shiftwork.crossstudy.change_null import change_calibration

    diffs = np.array([0.9, 1.1, 1.3, 0.7, 1.0, 0.2])
    exact = 0
    for signs in product((-1, 1), repeat=6):
        d = diffs * np.array(signs)
        exact += sps.ttest_1samp(d, 0.0).pvalue < 0.05
    exact /= 64
    base = np.linspace(0.1, 0.6, 6)
    table = pd.DataFrame(
        [
            {"study": "trajectory", "run": "r", "step": s, "dataset": "d", "prompt_id": f"p{p}", "Act": v}
            for p in range(6)
            for s, v in ((0, base[p]), (5, base[p] + diffs[p]))
        ]
    )
    out = change_calibration(table, 0.05, 20000, seed=1).set_index("axis").loc["Act"]
    assert exact == pytest.approx(4 / 64)  # all six of one sign, and the two with only 0.2 against
    assert out["false_positive_rate"] == pytest.approx(exact, abs=0.006)
    assert (out["n_prompts"], out["n_steps"], out["replicates"]) == (6, 1, 20000)
    assert out["ci_low"] <= exact <= out["ci_high"] and bool(out["calibrated"]) is bool(exact <= 0.05)


def test_the_findings_give_each_axis_its_null_rate_and_the_free_form_probe_its_own_table():
    from shiftwork.crossstudy import replies
    from shiftwork.crossstudy.change_null import change_calibration
    from shiftwork.crossstudy.report import _q1_runs, findings

    gens, deltas = yes_no_deltas()
    kinds = replies.reply_kinds(gens.assign(dtype="float32"), {"r": ["Yes", "No"]})
    per_prompt = replies.by_kind(cst.per_prompt(deltas, R), kinds)
    per_prompt.insert(0, "study", "trajectory")
    null = change_calibration(per_prompt, 0.05, 200, seed=0)
    free = _random_per_prompt(np.random.default_rng(0), 12, [0, 10, 20], shift=2.0)
    free_kinds = replies.reply_kinds(pd.DataFrame({"model": "r", "step": free["step"], "response": "A sentence."}), {})
    free = replies.by_kind(free.drop(columns="study"), free_kinds)
    free.insert(0, "study", "trajectory")
    free_null = change_calibration(free, 0.05, 200, seed=0)
    empty = pd.DataFrame()
    tables = {"sgs": cst.sgs(per_prompt), "changes": cst.changes(per_prompt), "pairs": empty}
    tables |= {"organisms_steps": empty, "organisms_timing": empty, "replies": kinds, "change_null": null}
    tables["freeform"] = {"sgs": cst.sgs(free), "changes": cst.changes(free), "change_null": free_null}
    text = findings(tables, {"alpha": 0.05, "collapse": 0.05})
    nli, probe = text.split("## 2.")[0].split("### On the free-form probe")
    label = null.set_index("axis").loc["Label"]
    assert f"| {label['false_positive_rate']:.3f} ({int(label['false_positives'])}/200) |" in nli.split("| Label |")[1]
    # the probe: free-form replies, so BLEU is tested and Label is not applicable; Act moved by +2
    assert "| BLEU |" in probe and "not applicable: replies are free-form" in probe.split("| Label |")[1]
    act = free_null.set_index("axis").loc["Act"]
    row = probe.split("| Act |")[1].split("\n")[0]
    assert "| 2 of 2 |" in row and f"{act['false_positive_rate']:.3f} ({int(act['false_positives'])}/200)" in row
    assert "less stable on: Act (+1.998)" in probe and "2 checkpoints after step 0, 12 free-form prompts each" in probe
    # one later step: "checkpoint", and the table is followed by one blank line, not two
    one = cst.changes(free[free["step"] != 20])
    lines = "\n".join(_q1_runs(one[one["dataset"] == "all"], cst.sgs(free), 0.05, free_null, "free-form prompts"))
    assert "Run `r`: 1 checkpoint after step 0," in lines and "|\n\nNull runs" in lines
    assert "`freeform/change_null.parquet`" in probe and "`change_null.parquet`" in nli
