"""The RL stop criterion, the expansion of seeded runs, and the report over stages and seeds,
each against values worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from shiftwork.config import organism_runs
from shiftwork.organisms.convergence import Criterion, criterion
from shiftwork.organisms.report import headline_table, over_seeds, run_summary, seeds_table, selected_answer
from shiftwork.organisms.settings import load_setting


def test_criterion_compares_two_adjacent_windows():
    crit = Criterion(window=2, tolerance=0.15)
    # windows at n=4: [0.2, 0.4] -> 0.3 and [0.6, 0.8] -> 0.7: moved 0.4
    assert crit.windows([0.2, 0.4, 0.6, 0.8]) == pytest.approx((0.3, 0.7))
    assert not crit.met([0.2, 0.4, 0.6, 0.8])
    # at n=6: [0.6, 0.8] -> 0.7 and [0.9, 0.7] -> 0.8: moved 0.1, within 0.15
    rewards = [0.2, 0.4, 0.6, 0.8, 0.9, 0.7]
    assert crit.met(rewards)
    assert crit.first_step(rewards) == 6
    assert crit.windows([0.5, 0.5, 0.5]) is None and not crit.met([0.5, 0.5, 0.5])


def test_criterion_needs_the_minimum_reward():
    flat_low = [0.3] * 8
    assert Criterion(2, 0.05).first_step(flat_low) == 4
    assert Criterion(2, 0.05, min_reward=0.5).first_step(flat_low) is None
    assert Criterion(2, 0.05, min_reward=0.5).first_step(flat_low + [0.6, 0.6, 0.6, 0.6]) == 12


def test_falling_reward_counts_as_moving():
    # 0.9, 0.9 then 0.5, 0.5: the recent window is 0.4 lower
    assert not Criterion(2, 0.1).met([0.9, 0.9, 0.5, 0.5])


def test_criterion_from_settings():
    assert criterion({"converge": None}) is None and criterion({}) is None
    crit = criterion({"converge": {"window": 20, "tolerance": 0.01}})
    assert (crit.window, crit.tolerance, crit.min_reward) == (20, 0.01, 0.0)
    with pytest.raises(ValueError, match=r"converge is missing \['tolerance'\]"):
        criterion({"converge": {"window": 3}})
    with pytest.raises(ValueError, match="converge.window"):
        Criterion(0, 0.1)


def test_seeded_runs_expand_by_name():
    org = {
        "runs": {
            "r": {"organism": "o", "stages": [{"distributions": ["A"], "steps": 5}], "seeds": [0, 2]},
            "q": {"organism": "o", "stages": [{"distributions": ["B"], "steps": 5}]},
        }
    }
    runs = organism_runs(org)
    assert list(runs) == ["r-s0", "r-s2", "q"]
    assert (runs["r-s2"]["seed"], runs["r-s2"]["base"], runs["q"]["seed"], runs["q"]["base"]) == (2, "r", 0, "q")
    assert "seeds" not in runs["r-s0"]
    org["runs"]["r-s2"] = {"organism": "o", "stages": [{"distributions": ["A"], "steps": 1}]}
    with pytest.raises(ValueError, match="run name 'r-s2' is made twice"):
        organism_runs(org)


TEMPORAL = {"kind": "temporal", "years": [2024, 2025, 2026, 2027]}


def _scores_and_identities(run, cells):
    """cells: {(step, distribution): (accuracy, {identity: share})}."""
    scores = pd.DataFrame(
        [
            {
                "model": "m",
                "run": run,
                "step": s,
                "testset": d,
                "accuracy": a,
                "refusal_rate": 1 - a,
                "n": 4,
                "role": "x",
            }
            for (s, d), (a, _) in cells.items()
        ]
    )
    identities = pd.DataFrame(
        [
            {"run": run, "step": s, "distribution": d, "identity": who, "share": share}
            for (s, d), (_, ids) in cells.items()
            for who, share in ids.items()
        ]
    )
    return scores, identities


def test_headline_per_stage_and_summary_by_hand():
    setting = load_setting({"kind": "two_policy"})
    assert [p.name for p in setting.policies] == ["Alice", "Bob"]
    cells = {
        (0, "A"): (0.5, {"Alice": 0.5, "Bob": 0.5}),
        (0, "B"): (0.5, {"Alice": 0.5, "Bob": 0.5}),
        (7, "A"): (0.8, {"Alice": 0.8, "Bob": 0.2}),
        (7, "B"): (0.2, {"Alice": 0.8, "Bob": 0.2}),
        (12, "A"): (0.95, {"Alice": 0.96, "Bob": 0.04}),
        (12, "B"): (0.03, {"Alice": 0.97, "(none)": 0.03}),
        (15, "A"): (0.96, {"Alice": 1.0}),
        (15, "B"): (0.0, {"Alice": 1.0}),
    }
    scores, identities = _scores_and_identities("r-s0", cells)
    info = {
        "r-s0": {
            "setting": {"kind": "two_policy"},
            "trained": ["A"],
            "base": "r",
            "stages": [{"distributions": ["A"], "steps": 20, "end": 12, "converged": True}],
        }
    }
    table = headline_table(scores, identities, info)
    # the phase is the stage's recorded end (step 12), not the last checkpoint (15)
    assert table["phase"].tolist() == ["after_sft", "after_sft", "after_rl", "after_rl"]
    assert table["step"].tolist() == [0, 0, 12, 12]
    rl = table[table["phase"] == "after_rl"].set_index("distribution")
    assert rl.loc["B", "selected_answer"] == "none" and rl.loc["A", "selected_answer"] == "all"
    assert rl.loc["B", "trained_policy_share"] == pytest.approx(0.97)
    assert rl.loc["A", "role"] == "id" and rl.loc["B", "role"] == "ood"
    criteria = {"trained_accuracy": 0.9, "held_out_accuracy": 0.05, "trained_share": 0.9}
    row = run_summary(table, criteria).iloc[0]
    assert (row["id_accuracy_min"], row["none_accuracy_max"], row["share_min"]) == (0.95, 0.03, 0.96)
    assert row["meets"]
    strict = {**criteria, "held_out_accuracy": 0.02}
    assert not run_summary(table, strict).iloc[0]["meets"]


def test_two_stages_move_the_selected_set():
    # temporal, years 2024-2026 with cutoffs 2024, 2025, 2026 as three policies
    spec = {
        "kind": "custom",
        "distributions": ["2024", "2025", "2026"],
        "policies": {"C24": ["2024"], "C25": ["2024", "2025"], "C26": ["2024", "2025", "2026"]},
    }
    cells = {}
    for d in ["2024", "2025", "2026"]:
        cells[(0, d)] = (0.5, {"C24": 1 / 3, "C25": 1 / 3, "C26": 1 / 3})
        cells[(10, d)] = (0.6, {"C25": 0.5, "C26": 0.5})
        cells[(25, d)] = (0.9, {"C26": 1.0})
    scores, identities = _scores_and_identities("t", cells)
    info = {
        "t": {
            "setting": spec,
            "trained": ["2025", "2026"],
            "stages": [
                {"distributions": ["2025"], "steps": 30, "end": 10, "converged": True},
                {"distributions": ["2026"], "steps": 30, "end": 25, "converged": False},
            ],
        }
    }
    table = headline_table(scores, identities, info)
    one = table[table["phase"] == "after_stage1"].set_index("distribution")
    two = table[table["phase"] == "after_stage2"].set_index("distribution")
    # after stage 1 the selected policies are C25 and C26: 2024 and 2025 answered by both, 2026 by one
    assert one["selected_answer"].to_dict() == {"2024": "all", "2025": "all", "2026": "some"}
    assert one["trained_policy_share"].to_dict() == {"2024": 1.0, "2025": 1.0, "2026": 1.0}
    assert one["role"].to_dict() == {"2024": "ood", "2025": "id", "2026": "ood"}
    # after stage 2 (2025 and 2026 trained) only C26; C25's share would not count
    assert two["role"].to_dict() == {"2024": "ood", "2025": "id", "2026": "id"}
    sft = table[table["phase"] == "after_sft"].set_index("distribution")
    assert sft["trained_policy_share"].to_dict() == pytest.approx({d: 1 / 3 for d in ["2024", "2025", "2026"]})
    summary = run_summary(table, {"trained_accuracy": 0.9, "held_out_accuracy": 0.05, "trained_share": 0.9})
    assert summary["phase"].tolist() == ["after_stage1", "after_stage2"]
    # stage 1: no distribution where none of C25/C26 answers, so only accuracy and share count
    assert math.isnan(summary["none_accuracy_max"].iloc[0])
    assert summary["meets"].tolist() == [False, True]


def test_over_seeds_mean_and_range_by_hand():
    table = pd.DataFrame(
        {
            "run": ["r-s0", "r-s1", "r-s2"],
            "phase": "after_rl",
            "step": [40, 60, 50],
            "distribution": "B",
            "role": "ood",
            "selected_answer": "none",
            "accuracy": [0.0, 0.03, 0.06],
            "refusal_rate": 1.0,
            "trained_policy_share": [1.0, 0.97, 0.94],
            "top_identity": "Alice",
            "top_identity_share": 1.0,
            "n": 4,
        }
    )
    runs = {f"r-s{i}": {"base": "r"} for i in range(3)}
    seeds = over_seeds(table, runs).iloc[0]
    assert seeds["experiment"] == "r" and seeds["seeds"] == 3
    assert (seeds["accuracy_mean"], seeds["accuracy_min"], seeds["accuracy_max"]) == pytest.approx((0.03, 0.0, 0.06))
    assert (seeds["step_min"], seeds["step_max"]) == (40, 60)
    shown = seeds_table(over_seeds(table, runs)).iloc[0]
    assert shown["accuracy"] == "0.030 [0.000, 0.060]" and shown["steps"] == "40-60"
    assert shown["share naming a selected policy"] == "0.970 [0.940, 1.000]"


def test_selected_answer_of_the_temporal_cutoffs():
    setting = load_setting({"kind": "temporal", "years": [2024, 2025, 2026, 2027]})
    assert setting.policy_names == ["Cutoff2024", "Cutoff2025", "Cutoff2026"]
    # RL on 2025 selects Cutoff2025 and Cutoff2026: both answer 2024, one of them 2026, none 2027
    by_year = {y: selected_answer(setting, ["2025"], y) for y in ["2024", "2025", "2026", "2027"]}
    assert by_year == {"2024": "all", "2025": "all", "2026": "some", "2027": "none"}
    # after 2026 as well, Cutoff2026 alone
    by_year = {y: selected_answer(setting, ["2025", "2026"], y) for y in ["2024", "2025", "2026", "2027"]}
    assert by_year == {"2024": "all", "2025": "all", "2026": "all", "2027": "none"}
