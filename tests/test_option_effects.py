"""Whether a definition option changes a conclusion of a finished run
(:mod:`shiftwork.stability.option_effects`), on a tiny run made by the steps themselves.

The run: one model, one dataset, two prompts, each with a baseline reply of four words, a 1.0x
length rewrite (the anchor) and a 2x one; MiniLM is replaced by an encoder that scores every
pair 0.75. Prompt a's replies all equal the baseline's; prompt b's anchor and 2x replies have
eight words. With one prompt-level value per prompt, the t-test has one degree of freedom, whose
upper tail is that of the Cauchy distribution: p = 1/2 - atan(t) / pi.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

import shiftwork.encoders
from shiftwork.models.prepare import INFO_FILE, prepared_dir
from shiftwork.schema import ConfigError
from shiftwork.stability import option_effects as oe
from shiftwork.stability import steps
from shiftwork.tables import read_table, write_table

MODEL, DATASET = "smollm2-135m-instruct", "misconceptions"
FOUR = "a b c d"
EIGHT = "a b c d e f g h"


def cauchy_p(t: float) -> float:
    """One-sided p of a t statistic with one degree of freedom."""
    return 0.5 - math.atan(t) / math.pi


class FakeEncoder:
    def __init__(self, name, spec):
        self.f1 = lambda cands, refs: np.full(len(cands), 0.75)


def run_config(root) -> dict:
    cfg = yaml.safe_load((root / "config" / "config.yaml").read_text())
    st = cfg["stability"]
    st["models"], st["datasets"] = [MODEL], [DATASET]
    st["statistics"] = {"eps": [0.05, 0.1], "primary_eps": 0.05}
    return cfg


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    for prompt, anchor, double in (("a", FOUR, FOUR), ("b", EIGHT, EIGHT)):
        rows += [
            (prompt, f"{prompt}-base", "baseline", "none", 0.0, FOUR),
            (prompt, f"{prompt}-l1", "structural", "length", 1.0, anchor),
            (prompt, f"{prompt}-l2", "structural", "length", 2.0, double),
        ]
    gens = pd.DataFrame(
        [
            dict(model=MODEL, dataset=DATASET, prompt_id=p, variant_id=v, family=f, kind=k, position="global",
                 strength=s, text=v, model_input="<in>" + v, response=r)
            for p, v, f, k, s, r in rows
        ]
    )  # fmt: skip
    probes = gens[["model", "dataset", "prompt_id", "variant_id"]].assign(
        logprob=-10.0, entropy=1.5, act_cos=1.0, act_cos_layers=[[1.0, 1.0]] * len(gens)
    )
    return gens, probes


@pytest.fixture()
def finished_run(tmp_path, root, monkeypatch):
    """A run's results folder as the workflow leaves it (the tables score_axes, aggregate_stability
    and the gate read or write), made by the steps at the config's settings, and its config."""
    monkeypatch.setattr(shiftwork.encoders, "Encoder", FakeEncoder)
    monkeypatch.chdir(tmp_path)
    cfg = run_config(root)
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg))
    results = tmp_path / "results" / "default"
    st = results / "stability"
    gens, probes = tables()
    write_table(gens, st / "generations" / MODEL / f"{DATASET}.parquet")
    write_table(probes, st / "probes" / MODEL / f"{DATASET}.parquet")
    write_table(
        pd.DataFrame([{"encoder": "minilm-l6", "b": 0.5, "method": "config", "n_pairs": 0}]),
        st / "gate/baseline.parquet",
    )
    scores = pd.DataFrame(
        [("a", "a-l1", "structural", "length", 1.0, 0.9, True), ("x", "x-l1", "structural", "length", 1.0, 0.05, False),
         ("x", "x-reg", "register", "tone", 10.0, 0.5, False), ("y", "y-l1", "structural", "length", 1.0, 0.05, False),
         ("y", "y-reg", "register", "tone", 10.0, 0.05, False)],
        columns=["prompt_id", "variant_id", "family", "kind", "strength", "gate_score", "kept"],
    ).assign(position="global", f1=0.5, threshold=0.11)  # fmt: skip
    write_table(scores, st / "gate" / f"{DATASET}.scores.parquet")
    plan = oe.run_plan(oe.checked_config(cfg), results)
    deltas = st / "deltas" / MODEL / f"{DATASET}.parquet"
    steps.score_axes(str(st / "generations" / MODEL / f"{DATASET}.parquet"), str(st / "probes" / MODEL / f"{DATASET}.parquet"),
                     str(deltas), str(st / "judgments.parquet"), plan.job, gate_baseline_path=plan.gate_baseline)  # fmt: skip
    outs = {name: str(st / "stats" / f"{name}.parquet") for name in oe.STATS_TABLES}
    steps.aggregate_stability([str(deltas)], plan.R, plan.eps, outs)
    return cfg, configfile, results


def mr_cells(effects: pd.DataFrame, option: str) -> pd.DataFrame:
    cells = effects[(effects["option"] == option) & (effects["axis"] == "MR")]
    return cells.set_index(["tests", "eps"])


def test_the_run_and_its_recomputation_agree(finished_run):
    cfg, _, results = finished_run
    run = oe.read_run_tests(results)["model"].set_index(["axis", "eps"])
    # default: MR of a's 2x row: 0 - 1 (the baseline reply meets the 1.0 level) minus its anchor's
    # 1 - 1 = -1; b's: 1 - 1 minus its anchor's 0 - 1 = 1; per prompt |MR| = 1, 1: constant above
    # eps, p = 0. Every other axis is 0 on both prompts: p = 1.
    assert run.loc[("MR", 0.05), "p"] == 0.0 and run.loc[("MR", 0.05), "marker"] == "***"
    assert run.loc[("BLEU", 0.1), "p"] == 1.0 and run.loc[("BLEU", 0.1), "marker"] == ""
    effects, reproduced, _ = oe.measure(cfg, results, [])
    assert effects.empty
    assert len(reproduced) == 2 * 6 * 2  # (per model, per model and dataset) x 6 axes x 2 eps
    assert not reproduced["changed"].any()
    assert (reproduced["p_default"] == reproduced["p_option"]).all()


def test_an_option_that_acts_on_nothing_changes_nothing(finished_run):
    cfg, _, results = finished_run
    # no judge: the cue guard has no verdict to act on; no baseline reply is empty
    options = [
        oe.parse_option("stability.axes.judge_cue_guard=true"),
        oe.parse_option("stability.axes.empty_baseline=zero"),
    ]
    effects, _, notes = oe.measure(cfg, results, options)
    assert len(effects) == 2 * 24
    assert not effects["changed"].any()
    assert (effects["p_default"] == effects["p_option"]).all()
    assert "The run has no judge" in " ".join(notes["stability.axes.judge_cue_guard=true"])


def test_length_mirroring_at_multiple_flips_the_mr_verdict(finished_run):
    cfg, _, results = finished_run
    effects, _, _ = oe.measure(cfg, results, [oe.parse_option("stability.axes.length_mirroring=at_multiple")])
    label = "stability.axes.length_mirroring=at_multiple"
    # at_multiple adds 1 to an anchored length row: a's MR 0, b's 2; mean 1, sd sqrt(2), standard
    # error sqrt(2) / sqrt(2) = 1, t = (1 - eps) / 1
    mr = mr_cells(effects, label)
    for tests in ("model", "dataset"):
        for eps in (0.05, 0.1):
            cell = mr.loc[(tests, eps)]
            assert cell["p_default"] == 0.0 and cell["significant_default"]
            assert cell["p_option"] == pytest.approx(cauchy_p(1 - eps), abs=1e-12)
            assert not cell["significant_option"] and cell["changed"]
    assert set(effects.loc[effects["changed"], "axis"]) == {"MR"}
    assert (effects.loc[effects["tests"] == "model", "dataset"] == "all").all()


def test_length_anchor_original_leaves_out_the_unit_rewrites(finished_run):
    cfg, _, results = finished_run
    label = "stability.variants.structural.length_anchor=original"
    effects, _, notes = oe.measure(cfg, results, [oe.parse_option(label)])
    # against the prompt itself: a's 2x row 0 - 1 = -1, b's 1 - 1 = 0; per prompt |MR| 1, 0: mean
    # 0.5, sd sqrt(0.5), standard error 0.5, t = (0.5 - eps) / 0.5
    mr = mr_cells(effects, label)
    for eps in (0.05, 0.1):
        assert mr.loc[("model", eps), "p_option"] == pytest.approx(cauchy_p((0.5 - eps) / 0.5), abs=1e-12)
        assert mr.loc[("model", eps), "changed"]
    # b's 2x reply now differs from r_0: BERT (0.75 - 0.5) / 0.5 - 1 = -0.5; per prompt 0, 0.5:
    # t = (0.25 - eps) / 0.25, not significant, as before (p = 1)
    bert = effects[(effects["axis"] == "BERT") & (effects["tests"] == "model")].set_index("eps")
    assert bert.loc[0.05, "p_option"] == pytest.approx(cauchy_p(0.2 / 0.25), abs=1e-12)
    assert not bert["changed"].any()
    # two 1.0x rows left out; prompt x was dropped by the gate for its 1.0x rewrite alone, y not
    assert "1.0x length rewrites left out (the 1.0 level is the prompt itself): 2." in notes[label][-1]
    assert notes[label][-1].endswith("which have no replies and stay out: 1.")


def test_without_unit_lengths_drops_the_rows_from_both_tables():
    gens, probes = tables()
    probes = probes.iloc[::-1]  # matched by key, not by position
    kept_gens, kept_probes, n = oe.without_unit_lengths(gens, probes)
    assert n == 2
    assert sorted(kept_gens["variant_id"]) == ["a-base", "a-l2", "b-base", "b-l2"]
    assert sorted(kept_probes["variant_id"]) == ["a-base", "a-l2", "b-base", "b-l2"]
    form = gens.assign(kind="form", strength=-1.0)  # the form anchor stays
    assert oe.unit_length_rows(form).sum() == 0


def test_parse_option_reads_yaml_scalars_and_names_an_unknown_key():
    assert oe.parse_option("stability.axes.act_layers=last") == oe.Option("stability.axes.act_layers", "last")
    assert oe.parse_option("stability.axes.judge_cue_guard=true").value is True
    assert oe.parse_option("stability.axes.judge_cue_guard=true").label == "stability.axes.judge_cue_guard=true"
    with pytest.raises(
        ConfigError, match=r"unknown key 'stability\.axes\.act_layer'; did you mean 'stability\.axes\.act_layers'"
    ):
        oe.parse_option("stability.axes.act_layer=last")
    with pytest.raises(ConfigError, match="unknown key 'stability.gate.threshold'"):
        oe.parse_option("stability.gate.threshold=0.2")  # acts before generation, not in score_axes
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        oe.parse_option("stability.axes.act_layers")


def test_an_option_value_is_checked_against_the_schema(root):
    cfg = run_config(root)
    with pytest.raises(
        ConfigError, match=r"(?s)--option stability.axes.act_layers=first: .*config key 'stability\.axes\.act_layers"
    ):
        oe.checked_config(cfg, oe.parse_option("stability.axes.act_layers=first"))
    checked = oe.checked_config(cfg, oe.parse_option("stability.axes.act_layers=last"))
    assert checked["stability"]["axes"]["act_layers"] == "last"
    assert "act_layers" not in cfg["stability"]["axes"]  # the config given is left as it was


def test_the_job_is_built_as_the_rules_build_it(root, tmp_path):
    cfg = oe.checked_config(run_config(root))
    plan = oe.run_plan(cfg, tmp_path / "results" / "default")
    job = plan.job
    assert (job.encoder_name, job.structural_baseline, job.length_anchor, job.seed) == (
        "minilm-l6",
        "rewrite",
        "rewrite",
        0,
    )
    assert job.encoder_spec == cfg["encoders"]["minilm-l6"]
    assert job.axes.length_mirroring == "at_one" and job.axes.bert_baseline == "gate"
    assert job.judge.model_dir is None and job.judge.api is None
    assert plan.gate_baseline == str(tmp_path / "results/default/stability/gate/baseline.parquet")
    assert plan.judge_report is None and plan.cells == ((MODEL, DATASET),)
    assert plan.R == {"Act": 2, "BLEU": 100, "BERT": 1, "Ent": 10, "Prob": 250, "MR": 1}
    assert plan.eps == [0.05, 0.1]
    judged = run_config(root)
    judged["stability"]["axes"]["judge"] = MODEL
    judged = oe.checked_config(judged)
    plan = oe.run_plan(judged, tmp_path / "results" / "default")
    record = prepared_dir(MODEL, judged["models"][MODEL], tmp_path / "results") / INFO_FILE
    assert plan.job.judge.model_dir == str(record.parent)
    assert plan.job.judge.batch_size == 16
    assert plan.judge_report == str(tmp_path / "results/default/stability/judge/report.parquet")


def test_the_command_writes_the_table_and_the_page(finished_run, tmp_path):
    _, configfile, results = finished_run
    out = tmp_path / "effects"
    argv = ["--results", str(results), "--configfile", str(configfile), "--out", str(out)]
    argv += ["--option", "stability.axes.length_mirroring=at_multiple", "--option", "stability.axes.act_layers=last"]
    assert oe.main(argv) == 0
    effects = read_table(out / "effects.parquet")
    assert list(effects["option"].unique()) == [
        "stability.axes.length_mirroring=at_multiple",
        "stability.axes.act_layers=last",
    ]
    page = (out / "effects.md").read_text()
    assert "| results | `results/default/` |" in page  # relative to the working directory
    commit = page.split("| commit | ")[1].split(" |")[0]
    assert f"| the run's commit | {commit} (aggregate_stability) |" in page  # this checkout made the run
    assert (
        "changes a conclusion of this run: yes (verdicts changed per model: 2 of 12 cells; per model and dataset: 2 of 12 cells)"
        in page
    )
    assert "changes a conclusion of this run: no (verdicts changed per model: 0 of 12 cells" in page
    assert f"| per model | {MODEL} | all | MR | 0.05 | 0 -> {cauchy_p(0.95):.4f} | significant -> not |" in page
    assert (
        "The run's own settings, recomputed the same way, reproduce the run's verdicts (verdicts changed per model: 0 of 12"
        in page
    )
    with pytest.raises(SystemExit, match="unknown key 'stability.axes.length'"):
        oe.main([*argv[:6], "--option", "stability.axes.length=at_one"])


def test_dropped_for_unit_length_counts_prompts_dropped_for_the_rewrite_alone():
    scores = pd.DataFrame(
        [("x", "structural", "length", 1.0, 0.05, False), ("x", "noise", "spacing", 4.0, 0.01, False),
         ("y", "structural", "length", 1.0, 0.05, False), ("y", "structural", "length", 2.0, 0.05, False),
         ("z", "structural", "length", 1.0, 0.05, True)],
        columns=["prompt_id", "family", "kind", "strength", "gate_score", "kept"],
    ).assign(threshold=0.11)  # fmt: skip
    # x: its other failing row is noise, which the gate exempts; y also failed at 2x; z was kept
    assert oe.dropped_for_unit_length(scores) == 1
