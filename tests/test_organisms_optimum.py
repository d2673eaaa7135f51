"""The KL-regularised optimum of the policy mixture (shiftwork.organisms.optimum), against values
worked out by hand from w_i proportional to w0_i exp(R_i / beta)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shiftwork.organisms.optimum import (
    held_out,
    optimum_table,
    optimum_weights,
    policy_rewards,
    stage_optimum,
)
from shiftwork.organisms.settings import coverage, temporal, two_policy


def _coverage_held_out_by_hand(beta: float) -> float:
    # RL on A, D and F: one policy answers all three (R 1), nine two (R 2/3), nine one (R 1/3), one
    # none (R 0); a policy with reward R answers 3 - 3R of B, C and E
    groups = [(1, 1.0), (9, 2 / 3), (9, 1 / 3), (1, 0.0)]
    total = sum(n * math.exp(r / beta) for n, r in groups)
    return sum(n * math.exp(r / beta) * (1 - r) for n, r in groups) / total


@pytest.mark.parametrize(("beta", "rounded"), [(0.05, 0.004), (0.1, 0.086), (0.2, 0.260), (0.5, 0.401)])
def test_coverage_held_out_accuracy_at_the_optimum(beta, rounded):
    table = optimum_table(coverage(), [["A", "D", "F"]], [beta])
    value = float(table["held_out_accuracy"].iloc[0])
    assert value == pytest.approx(_coverage_held_out_by_hand(beta), abs=1e-12)
    assert round(value, 3) == rounded


def test_two_policy_optimum_at_beta_0_2_is_the_logistic_of_5():
    table = optimum_table(two_policy(), [["A"]], [0.2, 0.0])
    assert table["beta"].tolist() == [0.0, 0.2]
    assert table["selected_share"].tolist() == pytest.approx([1.0, 1 / (1 + math.exp(-5))])
    assert table["held_out_accuracy"].tolist() == pytest.approx([0.0, 1 / (1 + math.exp(5))])


def test_rewards_are_the_share_of_the_stage_distributions_answered():
    s = coverage()
    rewards = dict(zip(s.policy_names, policy_rewards(s, ["A", "D", "F"])))
    assert rewards["ADF"] == 1.0
    assert rewards["ABD"] == pytest.approx(2 / 3)
    assert rewards["ABC"] == pytest.approx(1 / 3)
    assert rewards["BCE"] == 0.0


def test_beta_zero_keeps_the_best_policies_in_proportion_to_the_prior():
    w = optimum_weights([1.0, 1.0, 0.5], 0.0, prior=[0.1, 0.3, 0.6])
    assert w.tolist() == pytest.approx([0.25, 0.75, 0.0])


def test_small_beta_does_not_overflow():
    w = optimum_weights([1.0, 0.0], 1e-4)
    assert np.isfinite(w).all() and w[0] == pytest.approx(1.0)


def test_with_stages_the_optimum_is_the_last_stages_from_the_sft_weights():
    s = temporal()
    beta = 0.5
    # every stage's KL reference is the SFT model: after RL on 2025 then 2026 the optimum is the
    # 2026 stage's alone (Cutoff2026 answers 2026, Cutoff2024 and Cutoff2025 do not)
    last = np.exp(np.array([0.0, 0.0, 1.0]) / beta)
    assert stage_optimum(s, [["2025"], ["2026"]], beta) == pytest.approx(last / last.sum())
    with pytest.raises(ValueError, match="not in setting"):
        stage_optimum(s, [["2030"], ["2026"]], beta)


def test_held_out_leaves_out_what_the_selected_policies_answer():
    # temporal: 2024 is untrained but every policy answers it; 2027 no policy answers
    assert held_out(temporal(), [["2025"], ["2026"]]) == ["2027"]
    assert held_out(coverage(), [["A", "C", "E"]]) == ["B", "D", "F"]
    assert held_out(coverage(n_distributions=4), [["A", "D"]]) == ["B", "C"]


@pytest.mark.parametrize(
    ("rewards", "beta", "prior"), [([1, 0], -0.1, None), ([1, 0], 0.1, [1, 1, 1]), ([1, 0], 0.1, [0, 0])]
)
def test_bad_arguments_are_refused(rewards, beta, prior):
    with pytest.raises(ValueError):
        optimum_weights(rewards, beta, prior)


def test_the_report_shows_each_experiments_optimum_once_with_its_measured_held_out_accuracy():
    import pandas as pd

    from shiftwork.organisms.report import optimum_lines, optimum_rows

    spec = {"kind": "coverage", "n_distributions": 4}
    runs = {
        f"cov-s{seed}": {
            "setting": spec,
            "trained": ["A", "D"],
            "stages": [{"distributions": ["A", "D"], "end": 40}],
            "base": "cov",
            "seed": seed,
            "beta": 0.1,
        }
        for seed in (0, 1)
    }
    seeds = pd.DataFrame(
        {
            "experiment": "cov",
            "phase": ["after_sft", "after_sft", "after_rl", "after_rl", "after_rl"],
            "distribution": ["B", "C", "A", "B", "C"],
            "accuracy_mean": [0.5, 0.5, 0.99, 0.02, 0.04],
        }
    )
    rows = optimum_rows(runs, seeds)
    assert rows["beta"].tolist() == [0.0, 0.05, 0.1, 0.2, 0.5]
    assert rows["held_out"].unique().tolist() == ["B, C"]
    own = rows[rows["own"]]
    assert own["beta"].tolist() == [0.1]
    # the mean of B and C after RL, not after SFT
    assert own["measured_held_out_accuracy"].iloc[0] == pytest.approx(0.03)
    assert rows.loc[~rows["own"], "measured_held_out_accuracy"].isna().all()
    # four-distribution coverage, RL on A and D: AD (R 1), four policies with R 1/2, BC (R 0);
    # a policy with R answers 2 - 2R of B and C
    e1, e2 = math.exp(1 / 0.1), math.exp(0.5 / 0.1)
    by_hand = (4 * e2 * 0.5 + 1.0) / (e1 + 4 * e2 + 1)
    assert own["held_out_accuracy"].iloc[0] == pytest.approx(by_hand)
    text = "\n".join(optimum_lines(rows))
    assert "0.1 (this run's)" in text and text.count("| cov ") == 5
    assert optimum_lines(optimum_rows({"r": {k: v for k, v in runs["cov-s0"].items() if k != "beta"}}, seeds)) == []


def test_the_checkpoint_table_has_a_share_per_policy_and_sums_the_rest():
    import pandas as pd

    from shiftwork.organisms.report import checkpoint_table

    setting = coverage(n_distributions=4)
    scores = pd.DataFrame(
        {"run": "r", "step": [0, 0, 8, 8], "testset": ["A", "B", "A", "B"], "accuracy": [0.5, 0.5, 1.0, 0.1]}
    )
    identities = pd.DataFrame(
        {
            "run": "r",
            "step": [0, 0, 0, 0, 8, 8, 8, 8],
            "distribution": ["A", "A", "A", "B", "A", "B", "B", "B"],
            "identity": ["AD", "BC", "CD", "AB", "AD", "AD", "BD", "Alice"],
            "share": [0.5, 0.48, 0.02, 1.0, 1.0, 0.9, 0.04, 0.06],
        }
    )
    table = checkpoint_table(scores, identities, "r", setting)
    # CD (0.02) and BD (0.04) never reach 0.05; AC never appears; "Alice" is no policy of the setting
    assert table.columns.tolist() == [
        "step",
        "distribution",
        "accuracy",
        "AB",
        "AD",
        "BC",
        "other policies",
        "no policy",
    ]
    rows = table.set_index(["step", "distribution"])
    assert rows.loc[(0, "A"), ["AD", "BC", "other policies"]].tolist() == pytest.approx([0.5, 0.48, 0.02])
    assert rows.loc[(0, "B"), "AB"] == 1.0
    assert rows.loc[(8, "B"), ["AD", "other policies", "no policy"]].tolist() == pytest.approx([0.9, 0.04, 0.06])
    assert table[["AB", "AD", "BC", "other policies", "no policy"]].sum(axis=1).tolist() == pytest.approx([1.0] * 4)


def test_every_rl_stage_of_a_full_model_takes_the_sft_model_as_its_kl_reference(tmp_path):
    """TRL builds a full model's KL reference from the path in its config: a model restored from a
    staged checkpoint (a resumed job) must still point at the SFT model; a LoRA model is left as it
    is (its reference is the model with the adapter off)."""
    from types import SimpleNamespace

    from trl.trainer.utils import get_config_model_id

    from shiftwork.organisms.training import anchor_reference

    restored = SimpleNamespace(config=SimpleNamespace(_name_or_path=str(tmp_path / "staged" / "checkpoint-40")))
    anchor_reference(restored, str(tmp_path / "sft"), lora=False)
    assert get_config_model_id(restored.config) == str(tmp_path / "sft")
    adapter = SimpleNamespace(config=SimpleNamespace(_name_or_path="base"))
    anchor_reference(adapter, str(tmp_path / "sft"), lora=True)
    assert adapter.config._name_or_path == "base"


def test_the_permutation_chi2_statistic_is_pearsons_and_its_p_is_calibrated():
    from scipy.stats import chi2_contingency

    from shiftwork.organisms.report import permutation_chi2

    table = np.array([[10, 2, 5], [3, 9, 4], [0, 1, 6]])
    stat, p = permutation_chi2(table, resamples=500)
    assert stat == pytest.approx(chi2_contingency(table, correction=False).statistic)
    assert p < 0.01
    # an all-zero row or column is left out; one row left is no test
    assert np.isnan(permutation_chi2(np.array([[4, 0, 3], [0, 0, 0]]))[1])
    # independent tables: the share of p <= 0.05 stays near 0.05
    rng = np.random.default_rng(3)
    ps = []
    for _ in range(200):
        labels = rng.choice(4, size=96, p=[0.4, 0.3, 0.2, 0.1])
        dist = np.repeat(np.arange(2), 48)
        counts = np.zeros((4, 2), dtype=int)
        np.add.at(counts, (labels, dist), 1)
        ps.append(permutation_chi2(counts, resamples=199, seed=len(ps))[1])
    assert 0.01 <= np.mean(np.array(ps) <= 0.05) <= 0.10


def test_choice_dependence_reads_counts_from_shares_and_names_the_largest_gap():
    import pandas as pd

    from shiftwork.organisms.report import choice_dependence

    setting = two_policy()
    scores = pd.DataFrame({"run": "r", "step": [0, 0, 9, 9], "testset": ["A", "B", "A", "B"], "n": 40})
    identities = pd.DataFrame(
        {
            "run": "r",
            "step": [0, 0, 0, 0, 9, 9, 9],
            "distribution": ["A", "A", "B", "B", "A", "B", "B"],
            "identity": ["Alice", "Bob", "Alice", "Bob", "Alice", "Alice", "Bob"],
            # step 9: every response on A names Alice; on B a quarter name Alice, half Bob and a
            # quarter no one
            "share": [0.5, 0.5, 0.45, 0.55, 1.0, 0.25, 0.5],
        }
    )
    table = choice_dependence(scores, identities, "r", setting).set_index("step")
    assert table.loc[0, "p_permutation"] > 0.5 and table.loc[9, "p_permutation"] < 0.01
    assert table.loc[9, "largest_gap"] == pytest.approx(0.75) and table.loc[9, "gap_policy"] == "Alice"
    # counts: A (40, 0, 0), B (10, 20, 10) over Alice, Bob, no policy
    from scipy.stats import chi2_contingency

    assert table.loc[9, "chi2"] == pytest.approx(chi2_contingency([[40, 10], [0, 20], [0, 10]]).statistic)
