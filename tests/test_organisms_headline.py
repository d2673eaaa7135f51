"""The organisms study's findings end to end on a reduced config: SFT on a mixture of policies,
then RL stages that stop when their reward has converged, and the report's checks.

* two policies, RL on A and the mirror on B, two RL seeds each: every run meets the headline
  (trained accuracy high, accuracy where the selected policy refuses near 0, its identity
  stated by nearly every response);
* the temporal setting (cutoff policies 2024-2026, no policy answers 2027), RL on 2025 then on
  2026: 2027 stays at 0 after SFT and after both stages while the trained years are answered;
* coverage (6 choose 3), RL on A, C and E: B, D and F fall to 0.

The reduced config asks `Reverse the digits of 479.`, which the small scratch model learns in
fewer steps than the default's successor questions; temporal and coverage start from the
two-policy SFT model (`start_from`)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from test_workflow import ROOT, snakemake

SFT = {
    "method": "full",
    "batch_size": 32,
    "scheduler": "cosine",
    "warmup_steps": 50,
    "max_length": 96,
    "log_every": 100,
}
QUESTIONS = {"kind": "reverse", "n_train": 600, "n_test": 60, "seed": 0}


def headline_config(steps: dict[str, int]) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["studies"] = ["organisms"]
    for spec in cfg["datasets"].values():
        spec["source"]["path"] = str(ROOT / spec["source"]["path"])
    org = cfg["organisms"]
    two = org["sft"]["two-policy"]
    two.update(questions=QUESTIONS, n_examples=32 * steps["two-policy"])
    two["train"] = {**SFT, "steps": steps["two-policy"], "learning_rate": 0.003}
    for name in ("temporal", "coverage"):
        spec = org["sft"][name]
        spec.update(questions=QUESTIONS, n_examples=32 * steps[name])
        spec["train"] = {**SFT, "steps": steps[name], "learning_rate": 0.002}
    for run in ("two-policy-rl-A", "two-policy-rl-B"):
        org["runs"][run]["seeds"] = [0, 1]
    org["evaluation"] = {**org["evaluation"], "samples": 4}
    org.pop("dynamics", None)
    return cfg


@pytest.fixture(scope="module")
def headline_dir(tmp_path_factory):
    work = tmp_path_factory.mktemp("organisms-headline")
    (work / "config").mkdir()
    cfg = headline_config({"two-policy": 1500, "temporal": 800, "coverage": 1500})
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(work, "organisms")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work / "results" / "organisms"


@pytest.mark.workflow
def test_both_mirror_runs_meet_the_headline_for_every_seed(headline_dir):
    summary = pd.read_parquet(headline_dir / "summary.parquet").set_index("run")
    two = summary.loc[[f"two-policy-rl-{d}-s{s}" for d in "AB" for s in (0, 1)]]
    assert two["meets"].all(), two.to_string()
    assert (two["sft_share_min"] >= 0.3).all() and (two["sft_share_max"] <= 0.7).all()
    headline = pd.read_parquet(headline_dir / "headline.parquet")
    rl = headline[headline["run"].str.startswith("two-policy") & (headline["phase"] == "after_rl")]
    assert rl.loc[rl["role"] == "id", "accuracy"].min() >= 0.9
    assert rl.loc[rl["role"] == "ood", "accuracy"].max() <= 0.05


@pytest.mark.workflow
def test_temporal_2027_stays_at_zero_while_trained_years_are_answered(headline_dir):
    headline = pd.read_parquet(headline_dir / "headline.parquet")
    temp = headline[headline["run"] == "temporal-rl-2025-2026"].set_index(["phase", "distribution"])["accuracy"]
    for phase in ("after_sft", "after_stage1", "after_stage2"):
        assert temp[(phase, "2027")] <= 0.05, phase
    assert temp[("after_stage1", "2025")] >= 0.9
    assert temp[("after_stage2", "2025")] >= 0.9 and temp[("after_stage2", "2026")] >= 0.9
    summary = pd.read_parquet(headline_dir / "summary.parquet").set_index(["run", "phase"])
    assert summary.loc[("temporal-rl-2025-2026", "after_stage2"), "meets"]


@pytest.mark.workflow
def test_coverage_held_out_distributions_fall_to_zero(headline_dir):
    headline = pd.read_parquet(headline_dir / "headline.parquet")
    cov = headline[(headline["run"] == "coverage-rl-ACE") & (headline["phase"] == "after_rl")]
    acc = cov.set_index("distribution")["accuracy"]
    assert all(acc[d] >= 0.9 for d in "ACE") and all(acc[d] <= 0.05 for d in "BDF"), acc.to_dict()
