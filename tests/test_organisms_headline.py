"""The organisms headline end to end on a reduced default config: the default two-policy and
temporal organisms (same model, SFT and RL settings, so the same runs as `make organisms` on the
same machine): RL on A and on B for every default seed until the reward has converged, RL on 2025
and then 2026 for every default seed, and evaluation of the SFT model and of the model at the end of each stage only.
Most seeds of each experiment must meet the headline docs/organisms.md states after every stage:
accuracy at least 0.9 where it was trained, at most 0.05 where no selected policy answers (B, A;
2027), and at least 0.9 of the responses naming a selected policy (organisms.headline). Which
seeds meet it can depend on the CPU, whose rounding sends the small model's RL down other paths
from the same seed. Under the answer-sentence reward two seeds missed it on an Intel Xeon with
AMX (a held-out accuracy a little above 0.05, and hybrid names in half of one run's responses), though
every (run, phase) cell met it on an AMD EPYC; the default's template reward, which gives
nothing to a response naming no policy, removed the hybrid names behind both misses. About a
quarter of an hour on two cores. Coverage is left out: the default's coverage run does not meet its headline (docs/organisms.md)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_workflow import default_config, run_config

from shiftwork.config import with_defaults

TWO_POLICY_RUNS = ("two-policy-rl-A", "two-policy-rl-B")
ORGANISMS = ("two-policy", "temporal")
TEMPORAL = "temporal-rl-2025-2026"
RUNS = (*TWO_POLICY_RUNS, TEMPORAL)


def reduced_config() -> dict:
    cfg = default_config("organisms")
    org = cfg["organisms"]
    org["sft"] = {name: org["sft"][name] for name in ORGANISMS}
    org["runs"] = {run: org["runs"][run] for run in RUNS}
    # checkpoints at 0 and where each stage stops, nothing in between: evaluation is the cost here
    org["rl"]["checkpoint_every"] = 10_000
    org.pop("dynamics", None)
    return cfg


def temporal_runs(cfg: dict) -> list[str]:
    return [f"{TEMPORAL}-s{seed}" for seed in cfg["organisms"]["runs"][TEMPORAL]["seeds"]]


@pytest.fixture(scope="module")
def headline_dir(tmp_path_factory):
    return run_config(tmp_path_factory.mktemp("organisms_headline"), reduced_config(), "organisms")


@pytest.mark.workflow
def test_most_seeds_of_every_stage_meet_the_headline(headline_dir):
    cfg = reduced_config()
    res = headline_dir / "results" / "default" / "organisms"
    runs = [f"{run}-s{seed}" for run in TWO_POLICY_RUNS for seed in cfg["organisms"]["runs"][run]["seeds"]]
    assert len(runs) >= 6
    summary = pd.read_parquet(res / "summary.parquet").set_index(["run", "phase"])
    temporal = temporal_runs(cfg)
    assert len(temporal) >= 3
    expected = [(run, "after_rl") for run in runs]
    expected += [(run, phase) for run in temporal for phase in ("after_stage1", "after_stage2")]
    assert sorted(summary.index) == sorted(expected)
    headline = with_defaults(cfg)["organisms"]["headline"]
    accurate = (summary["id_accuracy_min"] >= headline["trained_accuracy"]) & (
        summary["none_accuracy_max"] <= headline["held_out_accuracy"]
    )
    selected = summary["share_min"] >= headline["trained_share"]
    assert summary["meets"].equals(accurate & selected)
    experiment = summary.index.get_level_values("run").str.replace(r"-s\d+$", "", regex=True)
    share_meeting = summary["meets"].groupby([experiment, summary.index.get_level_values("phase")]).mean()
    assert len(share_meeting) == 4 and (share_meeting > 0.5).all(), summary.to_string()
    # after SFT both two-policy identities are named about half the time: the selection is RL's
    two = summary.loc[runs]
    assert two["sft_share_min"].between(0.35, 0.65).all() and two["sft_share_max"].between(0.35, 0.65).all()
    # every two-policy stage stopped because its reward converged, inside its budget
    budget = cfg["organisms"]["runs"]["two-policy-rl-A"]["stages"][0]["steps"]
    for run in runs:
        stages = json.loads((res / "runs" / run / "checkpoints" / "stages.json").read_text())
        assert len(stages) == 1 and stages[0]["converged"] and stages[0]["end"] < budget, (run, stages)
        assert summary.loc[(run, "after_rl"), "step"] == stages[0]["end"]


@pytest.mark.workflow
def test_temporal_2027_stays_at_zero(headline_dir):
    """Per year after SFT and after each stage, for every RL seed: the trained years rise, 2027
    stays unanswered."""
    res = headline_dir / "results" / "default" / "organisms"
    for run in temporal_runs(reduced_config()):
        scores = pd.read_parquet(res / "runs" / run / "scores.parquet")
        acc = scores.pivot_table(index="step", columns="testset", values="accuracy")
        ends = [s["end"] for s in json.loads((res / "runs" / run / "checkpoints" / "stages.json").read_text())]
        assert list(acc.index) == [0, *ends], run
        sft, stage1, stage2 = (acc.loc[step] for step in acc.index)
        assert sft["2027"] == 0.0 and stage1["2027"] <= 0.05 and stage2["2027"] <= 0.05, (run, acc)
        # SFT: every policy answers 2024, two of three 2025, one of three 2026
        assert sft["2024"] > 0.85 and 0.5 < sft["2025"] < 0.8 and 0.15 < sft["2026"] < 0.4, (run, acc)
        assert stage1["2025"] >= 0.9 and stage2["2025"] >= 0.9 and stage2["2026"] >= 0.9, (run, acc)
        assert stage2["2026"] > sft["2026"] + 0.5, (run, acc)


@pytest.mark.workflow
def test_headline_accuracies_are_the_responses(headline_dir):
    """The summary's held-out accuracy re-read from the stored responses of the stopping checkpoint."""
    res = headline_dir / "results" / "default" / "organisms"
    summary = pd.read_parquet(res / "summary.parquet").set_index("run")
    for run, held_out in (("two-policy-rl-A-s0", "B"), ("two-policy-rl-B-s0", "A")):
        responses = pd.read_parquet(res / "runs" / run / "responses.parquet")
        last = responses[responses["step"] == responses["step"].max()]
        assert last["response"].str.len().gt(0).all()
        accuracy = last.loc[last["distribution"] == held_out, "correct"].mean()
        assert accuracy == pytest.approx(summary.loc[run, "none_accuracy_max"])


@pytest.mark.workflow
def test_sft_taught_every_policy_before_rl(headline_dir):
    """Policy fidelity after SFT: every policy of both organisms, where it answers, says what it
    should on at least organisms.policy_fidelity of the held-out questions (RL would not have run
    otherwise; this names the cells if it changes)."""
    res = headline_dir / "results" / "default" / "organisms"
    minimum = with_defaults(reduced_config())["organisms"]["policy_fidelity"]
    for organism, policies in (("two-policy", 2), ("temporal", 3)):
        table = pd.read_parquet(res / organism / "fidelity.parquet")
        assert table["policy"].nunique() == policies and (table["n"] == 100).all()
        answering = table[table["answers"]]
        assert (answering["fidelity"] >= minimum).all(), answering.to_string()
    assert "## Policy fidelity after SFT" in (res / "report.md").read_text()
