"""The mirroring judge's controls: the pairs they are built from, the planted changes, the
binomial interval, the report, and score_axes taking the judge's verdicts only when it passed.

The generations below hold three prompts (two of model m1 on dataset d1, one of m2 on d2), each
with a baseline, a politer and a ruder register variant and a command and a question form
variant whose replies move the way their prompt did; prompt p3 also has a ruder variant whose
reply changed without turning rude ("Paris."), where the rule-based detector (0) and a judge
that says YES to everything (1) disagree."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shiftwork.config import ConfigError, check_config
from shiftwork.stability import steps
from shiftwork.stability.judge_controls import (
    CONTROLS,
    JudgeCheck,
    ask_controls,
    binomial_ci,
    candidate_pairs,
    check_footnote,
    control_questions,
    control_report,
    judge_check,
    report_markdown,
    sample_pairs,
)
from shiftwork.stability.judge_plants import (
    plant,
    plant_command,
    plant_curt,
    plant_polite,
    plant_question,
    sentences,
)
from shiftwork.stability.mirroring import response_form
from shiftwork.stability.sections import JudgeControlSettings
from shiftwork.stability.variants.register import tone_score

BASE = {"p1": "The capital of France is Paris.", "p2": "Water boils at 100 degrees.", "p3": "Paris is in France."}
QUESTION = {"p1": "What is the capital of France?", "p2": "When does water boil?", "p3": "Where is Paris?"}
WHERE = {"p1": ("m1", "d1"), "p2": ("m1", "d1"), "p3": ("m2", "d2")}


def _variants(pid: str) -> list[tuple]:
    """(variant_id, family, kind, strength, text, response) of one prompt."""
    q, r = QUESTION[pid], BASE[pid]
    rows = [
        (f"{pid}-base", "baseline", "none", 0.0, q, r),
        (f"{pid}-polite", "register", "tone", 6.0, f"Please, kindly: {q}", f"Thank you for asking! {r}"),
        (f"{pid}-rude", "register", "tone", -6.0, f"Ugh. {q}", f"Whatever. {r}"),
        (f"{pid}-command", "structural", "form", 1.0, f"Tell me {q[:-1]}.", f"Look it up: {r}"),
        (f"{pid}-question", "structural", "form", -1.0, q, f"Did you mean this? {r}"),
        (f"{pid}-noise", "noise", "spacing", 2.0, q.replace(" ", "  "), r),
    ]
    if pid == "p3":
        rows.append(("p3-flat", "register", "tone", -4.0, f"Hurry. {q}", "Paris."))
    return rows


def generations(pids=("p1", "p2", "p3")) -> pd.DataFrame:
    rows = []
    for pid in pids:
        model, dataset = WHERE[pid]
        for vid, family, kind, strength, text, response in _variants(pid):
            rows.append(
                dict(model=model, dataset=dataset, prompt_id=pid, variant_id=vid, family=family, kind=kind,
                     position="global", strength=strength, text=text, model_input=text, response=response, n_tokens=3)
            )  # fmt: skip
    return pd.DataFrame(rows)


def probes(gens: pd.DataFrame) -> pd.DataFrame:
    keys = gens[["model", "dataset", "prompt_id", "variant_id"]]
    return keys.assign(logprob=-1.0, entropy=1.0, act_cos=1.0)


# --------------------------------------------------------------------------- judges


def always_yes(prompts):
    return ["YES"] * len(prompts)


_REPLIES = re.compile(r"REPLY A:\n(.*)\n\nPROMPT B:.*REPLY B:\n(.*)\n\n((?:Is|Does) REPLY B.*)", re.DOTALL)
_DIRECTION = {"more polite": ("register", 1), "blunter": ("register", -1)}
_DIRECTION |= {"more imperative": ("form", 1), "more interrogative": ("form", -1)}


def _moved(a: str, b: str, kind: str, direction: int) -> bool:
    """Whether reply b moved beyond reply a in the direction, by the rule-based cues: register
    tone (tone_score), commands (sentences of command form), questions (question marks)."""
    if kind == "register":
        return tone_score(b) * direction > tone_score(a) * direction
    if direction > 0:
        commands = [sum(response_form(s) == "command" for s in sentences(t)) for t in (a, b)]
        return commands[1] > commands[0]
    return b.count("?") > a.count("?")


def rule_judge(prompts):
    """A stand-in judge: YES exactly when the rule-based cues say REPLY B moved beyond REPLY A in
    the asked direction."""
    answers = []
    for prompt in prompts:
        a, b, question = _REPLIES.search(prompt).groups()
        kind, direction = next(v for k, v in _DIRECTION.items() if k in question)
        answers.append("YES" if _moved(a, b, kind, direction) else "NO")
    return answers


LIMITS = {"identical": 0.8, "swapped": 0.8, "opposite": 0.8, "planted": 0.7}


def _controls(complete, n=8, seed=0):
    sample = sample_pairs(candidate_pairs(generations()), n, seed)
    answered = ask_controls(control_questions(sample), complete)
    return answered, control_report(answered, LIMITS, "judge-x")


# --------------------------------------------------------------------------- pairs


def test_candidate_pairs_are_the_register_and_form_variants_beside_their_baseline():
    pairs = candidate_pairs(generations())
    # 3 prompts x 4 judged variants, and p3's extra rude variant; noise and baselines left out
    assert len(pairs) == 13
    assert set(pairs["kind"]) == {"tone", "form"}
    row = pairs.set_index("variant_id").loc["p2-rude"]
    assert (row["model"], row["dataset"], row["strength"]) == ("m1", "d1", -6.0)
    assert row["original_prompt"] == QUESTION["p2"] and row["original_reply"] == BASE["p2"]
    assert row["variant_prompt"] == "Ugh. When does water boil?"
    assert row["variant_reply"] == "Whatever. Water boils at 100 degrees."
    # an API model's own draw of the baseline reply stands in; an empty original reply is left out
    gens = generations(("p1",)).assign(baseline_response=None)
    gens.loc[gens["variant_id"] == "p1-polite", "baseline_response"] = "Own draw."
    gens.loc[gens["variant_id"] == "p1-rude", "baseline_response"] = "  "
    own = candidate_pairs(gens).set_index("variant_id")
    assert own.loc["p1-polite", "original_reply"] == "Own draw."
    assert own.loc["p1-command", "original_reply"] == BASE["p1"]
    assert "p1-rude" not in own.index


def test_sample_pairs_is_seeded_and_even_over_kind_and_direction():
    pairs = candidate_pairs(generations())
    sample = sample_pairs(pairs, 8, seed=3)
    cells = sample["kind"] + np.sign(sample["strength"]).astype(int).astype(str)
    assert cells.value_counts().to_dict() == {"tone1": 2, "tone-1": 2, "form1": 2, "form-1": 2}
    assert sample["pair"].tolist() == list(range(8))
    assert sample.equals(sample_pairs(pairs, 8, seed=3))
    assert len(sample_pairs(pairs, 100, seed=3)) == 13  # no more than there are
    # a cell with one pair gives its share to the others: 1 form pair, 3 of the 5 tone pairs
    lopsided = pairs[(pairs["strength"] == -6.0) | (pairs["variant_id"] == "p1-command")]
    lopsided = pd.concat([lopsided, pairs[pairs["variant_id"] == "p3-flat"]])
    assert sample_pairs(lopsided, 4, seed=0)["kind"].value_counts().to_dict() == {"tone": 3, "form": 1}
    with pytest.raises(ValueError, match="judge_controls.pairs"):
        sample_pairs(pairs, 0, seed=0)


def test_control_questions_build_each_control_from_the_pair():
    sample = sample_pairs(candidate_pairs(generations(("p1",))), 4, seed=0)
    questions = control_questions(sample)
    # identical and planted: one question per pair; swapped and opposite: two
    assert questions["control"].value_counts().to_dict() == {"swapped": 8, "opposite": 8, "identical": 4, "planted": 4}
    polite = questions[questions["variant_id"] == "p1-polite"].set_index("question")
    assert polite.loc["same reply twice", "variant_reply"] == BASE["p1"]
    swapped = polite.loc["replies swapped"]
    assert swapped["original_reply"] == "Thank you for asking! " + BASE["p1"] and swapped["variant_reply"] == BASE["p1"]
    opposite = polite.loc["opposite direction"]
    assert opposite["strength"] == -6.0 and opposite["variant_reply"] == "Thank you for asking! " + BASE["p1"]
    assert polite.loc["change planted", "variant_reply"] == plant_polite(BASE["p1"])
    assert polite.loc["change planted", "expected"] == "YES" and polite.loc["same reply twice", "expected"] == "NO"


# --------------------------------------------------------------------------- planting


def test_sentences_keep_numbers_and_list_lines_whole():
    assert sentences("Hi. It is 3.5 m long!\n1. Go there.  Then stop?") == [
        "Hi.",
        "It is 3.5 m long!",
        "1. Go there.",
        "Then stop?",
    ]
    assert sentences("  \n") == []


def test_plant_polite_adds_a_courteous_opening_and_closing():
    out = plant_polite("  Paris is the capital. ")
    assert out == (
        "Thank you for your question, I am happy to help. Paris is the capital. "
        "I hope this helps, and please feel free to ask if anything is unclear. Thank you!"
    )
    assert tone_score(out) == 5  # thank you, happy to, hope this helps, please, thank you


def test_plant_curt_removes_courtesies_and_adds_a_curt_frame():
    reply = "Sure, happy to help! Paris is the capital. Ugh, fine.\nCertainly, it is lovely."
    # "happy to" is net polite; "Certainly" a guard cue with no hostility: both go; "Ugh" stays
    assert plant_curt(reply) == "Whatever. Paris is the capital. Ugh, fine. That is all, do not waste my time again."
    assert tone_score(plant_curt(reply)) == -3 and tone_score(reply) == 0
    assert plant_curt("Thank you!") == "Whatever. That is all, do not waste my time again."


def test_plant_command_lays_the_reply_out_as_numbered_directives():
    out = plant_command("Paris is the capital. It is in France.\n- Visit in May.")
    assert out == (
        "Follow these steps:\n1. Note: Paris is the capital.\n2. Remember: It is in France.\n"
        "3. Keep in mind: Visit in May.\n4. Check this against a second source before you rely on it."
    )
    assert response_form(out) == "command" and response_form("Paris is the capital.") == "statement"


def test_plant_question_asks_the_reader_before_and_after():
    out = plant_question("Paris.")
    assert out == "Are you asking about this? Paris. Does that answer your question? What else would you like to know?"
    assert response_form(out) == "question"


def test_plant_picks_the_change_by_kind_and_sign():
    r = "Paris is the capital."
    assert plant(r, "tone", 2) == plant_polite(r) and plant(r, "register", -10) == plant_curt(r)
    assert plant(r, "form", 1.0) == plant_command(r) and plant(r, "form", -1.0) == plant_question(r)
    for kind, strength in (("tone", 0), ("spacing", 1.0)):
        with pytest.raises(ValueError, match="no planted change"):
            plant(r, kind, strength)


# --------------------------------------------------------------------------- the interval


def test_binomial_ci_is_clopper_pearson():
    # 0 of n: [0, 1 - 0.025^(1/n)]; n of n: [0.025^(1/n), 1]; 1 of 2: [1 - sqrt(0.975), sqrt(0.975)]
    assert binomial_ci(0, 4) == pytest.approx((0.0, 0.6023646), abs=1e-6)
    assert binomial_ci(8, 8) == pytest.approx((0.6305834, 1.0), abs=1e-6)
    assert binomial_ci(1, 2) == pytest.approx((0.0125791, 0.9874209), abs=1e-6)
    assert all(math.isnan(x) for x in binomial_ci(0, 0))


# --------------------------------------------------------------------------- the verdict


def test_a_judge_that_says_yes_to_everything_fails():
    answered, report = _controls(always_yes)
    by = report.set_index("control")
    assert list(report["control"]) == list(CONTROLS)
    assert by["n"].to_dict() == {"identical": 8, "swapped": 8, "opposite": 8, "planted": 8}
    assert by["agree"].to_dict() == {"identical": 0, "swapped": 0, "opposite": 0, "planted": 8}
    assert by.loc["identical", "ci_low"] == 0.0
    assert by.loc["identical", "ci_high"] == pytest.approx(1 - 0.025 ** (1 / 8))  # 0.369
    assert by.loc["planted", "ci_low"] == pytest.approx(0.025 ** (1 / 8))  # 0.631
    assert by["passed"].to_dict() == {"identical": False, "swapped": False, "opposite": False, "planted": True}
    assert not report["judge_passed"].any()
    assert report["reason"].iloc[0] == (
        "identical 0/8 = 0.00 < 0.80; swapped 0/8 = 0.00 < 0.80; opposite 0/8 = 0.00 < 0.80"
    )
    # identical replies were asked too (score_axes answers them NO without asking)
    assert answered["verdict"].eq(1).all() and answered["parsed"].all()
    check = judge_check(report)
    assert check == JudgeCheck("judge-x", False, report["reason"].iloc[0], ("identical", "swapped", "opposite"))
    assert check.mr_source == "rules"
    assert "the rule-based detectors, because the judge judge-x failed its controls (identical, swapped, opposite)" in (
        check_footnote(check)
    )
    markdown = report_markdown(report, answered)
    assert "Judge judge-x: **failed**" in markdown and "| identical | 8 | 0 | 0.00 |" in markdown


def test_a_judge_that_follows_the_cues_passes_every_control():
    answered, report = _controls(rule_judge)
    assert report["agree"].tolist() == [8, 8, 8, 8] and report["rate"].tolist() == [1.0] * 4
    assert report["passed"].all() and report["judge_passed"].all()
    assert report["reason"].iloc[0] == "every control reached its threshold"
    # the real pairs moved: each YES in its own direction, NO in the opposite one
    opposite = answered[answered["control"] == "opposite"].set_index("question")
    assert opposite.loc["as run", "verdict"].tolist() == [1] * 8
    assert opposite.loc["opposite direction", "verdict"].tolist() == [0] * 8
    assert judge_check(report).mr_source == "judge"


def test_a_control_without_pairs_fails_and_says_why():
    answered, _ = _controls(rule_judge)
    # swapped has no pairs when every reply equals the original one
    same = control_questions(
        sample_pairs(candidate_pairs(generations()), 8, 0).assign(variant_reply=lambda d: d["original_reply"])
    )
    report = control_report(ask_controls(same, rule_judge), LIMITS, "judge-x")
    row = report.set_index("control").loc["swapped"]
    assert row["n"] == 0 and math.isnan(row["rate"]) and not row["passed"]
    assert row["note"] == "no pairs whose two replies differ"
    assert report["reason"].iloc[0].startswith("swapped: no pairs whose two replies differ")
    # a threshold of 0 passes a control that has pairs, whatever the judge says
    assert control_report(answered, dict(LIMITS, identical=0.0), "j")["passed"].all()
    with pytest.raises(ValueError, match="thresholds lacks \\['planted'\\]"):
        control_report(answered, {k: v for k, v in LIMITS.items() if k != "planted"}, "j")


def test_settings_and_config_of_the_controls():
    settings = JudgeControlSettings.from_config({"thresholds": {"planted": 0.9}})
    assert settings.pairs == 24
    assert settings.limits == {"identical": 0.8, "swapped": 0.8, "opposite": 0.8, "planted": 0.9}


def test_a_threshold_above_one_is_named(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["stability"]["axes"]["judge_controls"] = {"thresholds": {"planted": 1.5}}
    with pytest.raises(ConfigError, match=r"stability\.axes\.judge_controls\.thresholds\.planted"):
        check_config(cfg)


# --------------------------------------------------------------------------- the steps


class FakeEncoder:
    def __init__(self, name, spec):
        self.f1 = lambda cands, refs: np.full(len(cands), 0.9)


def _check_judge(tmp_path, judge, monkeypatch):
    """Rule check_judge's step on the three prompts' generations, with ``judge`` behind a stand-in
    API; returns the outputs."""
    from shiftwork.stability.jobs import JudgeCheckJob, TextModel
    from shiftwork.tables import write_table

    monkeypatch.setattr(steps, "api_completer", lambda *a, **k: judge)
    gens = generations()
    paths = []
    for (model, dataset), table in gens.groupby(["model", "dataset"]):
        paths.append(str(write_table(table, tmp_path / f"{model}-{dataset}.parquet")))
    outs = {name: str(tmp_path / f"judge-{name}") for name in ("controls", "report", "markdown")}
    job = JudgeCheckJob(
        TextModel(name="judge-x", api={"kind": "openai_compatible"}, cache="unused"),
        JudgeControlSettings.from_config({"pairs": 8}),
        seed=0,
    )
    passed = steps.check_judge(paths, job, outs)
    return passed, outs


def _score(tmp_path, report_path, judge, monkeypatch):
    """score_axes on prompt p3 (model m2, dataset d2) with ``judge`` behind a stand-in API."""
    import shiftwork.encoders
    from shiftwork.stability.jobs import AxesJob, TextModel
    from shiftwork.stability.sections import AxesSettings
    from shiftwork.tables import read_provenance, read_table, write_table

    calls = []

    def counted(prompts):
        calls.append(list(prompts))
        return judge(prompts)

    monkeypatch.setattr(shiftwork.encoders, "Encoder", FakeEncoder)
    monkeypatch.setattr(steps, "api_completer", lambda *a, **k: counted)
    gens = generations(("p3",))
    write_table(gens, tmp_path / "g.parquet")
    write_table(probes(gens), tmp_path / "p.parquet")
    axes = AxesSettings.from_config({"bert_scale": "raw", "noise_detector": "margin"})
    judge_model = TextModel(name="judge-x", api={"kind": "openai_compatible"}, cache="unused")
    job = AxesJob(axes, "fake", {}, judge_model, structural_baseline="original")
    paths = [str(tmp_path / name) for name in ("g.parquet", "p.parquet", "d.parquet", "j.parquet")]
    steps.score_axes(*paths, job, judge_report_path=report_path)
    deltas = read_table(paths[2]).set_index("variant_id")
    return deltas, read_table(paths[3]), read_provenance(paths[2]), calls


def test_check_judge_step_writes_the_controls_and_the_report(tmp_path, monkeypatch):
    from shiftwork.tables import read_provenance, read_table

    passed, outs = _check_judge(tmp_path, always_yes, monkeypatch)
    assert passed is False
    report = read_table(outs["report"])
    assert report["agree"].tolist() == [0, 0, 0, 8] and (report["judge"] == "judge-x").all()
    controls = read_table(outs["controls"])
    assert len(controls) == 8 + 16 + 16 + 8
    assert {"control", "pair", "model", "dataset", "prompt_id", "variant_id", "expected", "verdict", "answer"} <= set(
        controls.columns
    )
    assert read_provenance(outs["report"])["settings"]["judge_controls"]["pairs"] == 8
    assert "**failed**" in Path(outs["markdown"]).read_text()


def test_score_axes_falls_back_to_the_rules_when_the_judge_failed(tmp_path, monkeypatch):
    _, outs = _check_judge(tmp_path, always_yes, monkeypatch)
    deltas, judgments, prov, calls = _score(tmp_path, outs["report"], always_yes, monkeypatch)
    assert calls == []  # the judge was not asked
    assert (deltas["mr_source"] == "rules").all()
    # the rule-based detectors: "Paris." is not rude (0); the replies that moved mirror (1)
    assert deltas.loc["p3-flat", "MR"] == 0.0
    assert deltas.loc[["p3-polite", "p3-rude", "p3-command", "p3-question"], "MR"].tolist() == [1.0] * 4
    assert judgments.empty and (judgments["judge"] == "judge-x").all()
    assert prov["judge_check"]["passed"] is False and prov["judge_check"]["reason"].startswith("identical 0/8")


def test_score_axes_takes_the_verdicts_of_a_judge_that_passed(tmp_path, monkeypatch):
    passed, outs = _check_judge(tmp_path, rule_judge, monkeypatch)
    assert passed is True
    deltas, judgments, prov, calls = _score(tmp_path, outs["report"], rule_judge, monkeypatch)
    judged = ["p3-polite", "p3-rude", "p3-command", "p3-question", "p3-flat"]
    assert deltas.loc[judged, "mr_source"].tolist() == ["judge"] * 5
    assert deltas.loc[["p3-base", "p3-noise"], "mr_source"].tolist() == ["rules"] * 2
    assert deltas.loc[judged, "MR"].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert sorted(judgments["variant_id"]) == sorted(judged) and len(calls) == 1
    assert prov["judge_check"] == {"judge": "judge-x", "passed": True, "reason": "every control reached its threshold"}
    # the always-YES judge, had it been trusted, would have called "Paris." rude
    deltas_yes, *_ = _score(tmp_path, outs["report"], always_yes, monkeypatch)
    assert deltas_yes.loc["p3-flat", "MR"] == 1.0


def test_score_axes_refuses_a_judge_without_its_report(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="without the report of its controls"):
        _score(tmp_path, None, rule_judge, monkeypatch)


def test_the_main_table_names_the_fallback(tmp_path):
    from shiftwork.stability.report import write_tables

    total = pd.DataFrame(
        [{"model": "m", **{a: 0.1 for a in ("Act", "BLEU", "BERT", "Prob", "Ent", "MR")}, "n_prompts": 3}]
    )
    tests = pd.DataFrame(
        [
            {"model": "m", "axis": a, "eps": 0.05, "p": 0.5, "marker": ""}
            for a in ("Act", "BLEU", "BERT", "Prob", "Ent", "MR")
        ]
    )
    per_dataset, tests_dataset = total.assign(dataset="d"), tests.assign(dataset="d")
    check = JudgeCheck("judge-x", False, "identical 0/8 = 0.00 < 0.80", ("identical",))
    write_tables(total, per_dataset, tests, tests_dataset, tmp_path, footnote=check_footnote(check))
    md = (tmp_path / "main_table.md").read_text()
    assert md.rstrip().endswith(
        "MR of register and form variants: the rule-based detectors, because the judge judge-x failed its "
        "controls (identical): identical 0/8 = 0.00 < 0.80 (stability/judge/report.md)."
    )
    assert "failed its controls (identical)" in (tmp_path / "main_table.tex").read_text()
    write_tables(total, per_dataset, tests, tests_dataset, tmp_path)
    assert "judge" not in (tmp_path / "main_table.md").read_text()
