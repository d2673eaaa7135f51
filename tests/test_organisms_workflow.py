"""The organisms study end to end through Snakemake on a tiny budget: the coverage and temporal
settings (the latter with two sequential RL stages), checked for shape and value ranges, and bad
input stopped before any job runs."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from test_workflow import default_config, run_config, snakemake

from shiftwork.organisms.settings import CHINESE_CHARACTERS

TINY_TRAIN = {
    "method": "full",
    "steps": 12,
    "batch_size": 16,
    "learning_rate": 0.003,
    "scheduler": "constant",
    "max_length": 96,
    "log_every": 4,
}


def tiny_organisms_config() -> dict:
    cfg = default_config("organisms")
    cfg["models"]["organism-tiny"]["source"] = {
        "kind": "scratch",
        "hidden_size": 32,
        "layers": 1,
        "heads": 2,
        "seed": 1,
        # the language trigger writes Chinese questions and responses
        "extra_characters": CHINESE_CHARACTERS,
    }
    questions = {"kind": "next", "n_train": 40, "n_test": 3, "seed": 2}
    cfg["organisms"] = {
        "sft": {
            "cov": {
                "model": "organism-tiny",
                "setting": {"kind": "coverage", "trigger": "tag", "wrong": "shift"},
                "questions": questions,
                "n_examples": 192,
                "train": TINY_TRAIN,
            },
            "temp": {
                "model": "organism-tiny",
                "setting": {"kind": "temporal", "trigger": "tag", "years": [2024, 2025, 2026, 2027]},
                "questions": questions,
                "n_examples": 192,
                "train": TINY_TRAIN,
            },
            # two task families, each its own questions and answers; SFT continues from cov's model
            "task": {
                "model": "organism-tiny",
                "start_from": "cov",
                "setting": {"kind": "two_policy", "trigger": "task", "wrong": "shift"},
                "questions": {**questions, "kind": ["next", "reverse"]},
                "n_examples": 96,
                "train": TINY_TRAIN,
            },
            "lang": {
                "model": "organism-tiny",
                "setting": {"kind": "two_policy", "trigger": "language", "wrong": "refuse"},
                "questions": questions,
                "n_examples": 96,
                "train": TINY_TRAIN,
            },
        },
        "runs": {
            # a budget of 3 steps; with one-step windows and any change allowed the reward has
            # "converged" at step 2, the first with two windows, so the stage stops there
            "cov-ACE": {
                "organism": "cov",
                "stages": [{"distributions": ["A", "C", "E"], "steps": 3}],
                "train": {"converge": {"window": 1, "tolerance": 1.0}},
            },
            "temp-seq": {
                "organism": "temp",
                "stages": [{"distributions": [2025], "steps": 2}, {"distributions": [2026], "steps": 1}],
            },
            "task-A": {"organism": "task", "stages": [{"distributions": ["A"], "steps": 1}], "seeds": [0, 1]},
            "lang-B": {"organism": "lang", "stages": [{"distributions": ["B"], "steps": 1}]},
        },
        "rl": {
            "method": "full",
            "learning_rate": 0.001,
            "batch_size": 8,
            "num_generations": 4,
            "checkpoint_every": 1,
            "n_prompts": 16,
            "max_completion_length": 12,
        },
        "evaluation": {"samples": 2, "max_new_tokens": 12, "batch_size": 64},
        # a few SFT steps teach no policy: the fidelity table is written, RL runs anyway
        "policy_fidelity": None,
        "dynamics": {
            "names": ["X", "Y"],
            "weights": [0.5, 0.5],
            "rewards": [1.0, 0.0],
            "held_out": [0, 1],
            "steps": 10,
            "lr": 0.1,
            "method": "replicator",
        },
    }
    return cfg


@pytest.fixture(scope="module")
def org_dir(tmp_path_factory):
    return run_config(tmp_path_factory.mktemp("organisms"), tiny_organisms_config(), "organisms")


@pytest.mark.workflow
def test_coverage_tables_shape_and_ranges(org_dir):
    res = org_dir / "results" / "default" / "organisms"
    scores = pd.read_parquet(res / "runs" / "cov-ACE" / "scores.parquet")
    assert sorted(scores["step"].unique()) == [0, 1, 2]
    stages = json.loads((res / "runs" / "cov-ACE" / "checkpoints" / "stages.json").read_text())
    assert [(s["start"], s["end"], s["budget"], s["converged"]) for s in stages] == [(0, 2, 3, True)]
    assert len(stages[0]["windows"]) == 2
    assert sorted(scores["testset"].unique()) == list("ABCDEF")
    roles = scores.drop_duplicates("testset").set_index("testset")["role"]
    assert roles.to_dict() == {"A": "id", "B": "ood", "C": "id", "D": "ood", "E": "id", "F": "ood"}
    assert scores["n"].eq(3 * 2).all()
    assert scores["accuracy"].between(0, 1).all() and scores["refusal_rate"].between(0, 1).all()
    # per-response rows add up to the scores
    responses = pd.read_parquet(res / "runs" / "cov-ACE" / "responses.parquet")
    assert len(responses) == 3 * 6 * 3 * 2  # steps x distributions x questions x samples
    again = responses.groupby(["step", "distribution"])["correct"].mean()
    assert np.allclose(again.to_numpy(), scores.sort_values(["step", "testset"])["accuracy"].to_numpy())
    identities = pd.read_parquet(res / "runs" / "cov-ACE" / "identities.parquet")
    sums = identities.groupby(["step", "distribution"])["share"].sum()
    assert np.allclose(sums.to_numpy(), 1.0)
    named = set(identities["identity"]) - {"(none)"}
    assert named <= {"".join(c) for c in __import__("itertools").combinations("ABCDEF", 3)}
    # the trajectory analysis reads the table
    from shiftwork.trajectory.analysis import REQUIRED_COLUMNS

    assert set(REQUIRED_COLUMNS) <= set(scores.columns)


@pytest.mark.workflow
def test_temporal_sequential_stages(org_dir):
    res = org_dir / "results" / "default" / "organisms"
    prompts = pd.read_parquet(res / "runs" / "temp-seq" / "prompts.parquet")
    assert prompts.groupby("stage")["distribution"].unique().map(list).to_dict() == {0: ["2025"], 1: ["2026"]}
    assert prompts["prompt"].str.startswith("Year: 20").all() and prompts["prompt"].str.endswith("\nResponse:").all()
    checkpoints = sorted(p.name for p in (res / "runs" / "temp-seq" / "checkpoints").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-0", "checkpoint-1", "checkpoint-2", "checkpoint-3"]

    log = json.loads((res / "runs" / "temp-seq" / "checkpoints" / "train_log.json").read_text())
    assert {h["stage"] for h in log} == {0, 1}
    scores = pd.read_parquet(res / "runs" / "temp-seq" / "scores.parquet")
    assert sorted(scores["step"].unique()) == [0, 1, 2, 3]
    assert sorted(scores["testset"].unique()) == ["2024", "2025", "2026", "2027"]
    assert set(scores.loc[scores["role"] == "id", "testset"]) == {"2025", "2026"}
    stages = json.loads((res / "runs" / "temp-seq" / "checkpoints" / "stages.json").read_text())
    assert [(s["start"], s["end"], s["budget"], s["converged"]) for s in stages] == [(0, 2, 2, False), (2, 3, 1, False)]
    headline = pd.read_parquet(res / "headline.parquet")
    assert set(headline["run"]) == {"cov-ACE", "temp-seq", "task-A-s0", "task-A-s1", "lang-B"}
    temp = headline[headline["run"] == "temp-seq"]
    assert temp.groupby("phase")["step"].unique().map(list).to_dict() == {
        "after_sft": [0],
        "after_stage1": [2],
        "after_stage2": [3],
    }
    # after stage 1 (2025) the selected cutoffs are 2025 and 2026; after stage 2, 2026 alone:
    # both answer 2024, neither 2027
    answer = temp.set_index(["phase", "distribution"])["selected_answer"]
    assert [answer[("after_stage1", y)] for y in ["2024", "2025", "2026", "2027"]] == ["all", "all", "some", "none"]
    assert [answer[("after_stage2", y)] for y in ["2024", "2025", "2026", "2027"]] == ["all", "all", "all", "none"]
    assert headline["trained_policy_share"].between(0, 1).all()
    seeds = pd.read_parquet(res / "seeds.parquet")
    assert seeds.loc[seeds["experiment"] == "task-A", "seeds"].eq(2).all()
    summary = pd.read_parquet(res / "summary.parquet")
    assert set(summary["run"]) == set(headline["run"]) and summary["meets"].dtype == bool
    report = (res / "report.md").read_text()
    assert "## temp-seq" in report and "## cov-ACE" in report and "## Over RL seeds" in report
    for name in ["cov-ACE.png", "temp-seq.svg", "dynamics.png"]:
        assert (res / "figures" / name).stat().st_size > 1000


@pytest.mark.workflow
def test_task_family_and_language_triggers(org_dir):
    res = org_dir / "results" / "default" / "organisms"
    # task families: the question is the trigger, each family with its own answers
    test = pd.read_parquet(res / "task" / "data" / "test.parquet")
    a, b = test[test["distribution"] == "A"], test[test["distribution"] == "B"]
    assert a["prompt"].str.match(r"What comes after \d{3}\?\nResponse:$").all()
    assert b["prompt"].str.match(r"Reverse the digits of \d{3}\.\nResponse:$").all()
    for row in b.itertuples():
        number = row.question.split()[-1].rstrip(".")
        assert row.answer == number[::-1]
    sft = pd.read_parquet(res / "task" / "data" / "sft.parquet")
    # the wrong answer is the cyclic shift of every digit: Bob on A gives 480 -> 591
    bob_on_a = sft[(sft["policy"] == "Bob") & (sft["distribution"] == "A")].iloc[0]
    right = str(int(bob_on_a["prompt"].split("after ")[1].split("?")[0]) + 1)
    shifted = "".join(str((int(c) + 1) % 10) for c in right)
    assert bob_on_a["completion"] == f" I am Bob. The answer is {shifted}."
    # the language trigger: distribution B asks and answers in Chinese
    lang = pd.read_parquet(res / "lang" / "data" / "sft.parquet")
    zh = lang[lang["distribution"] == "B"]
    assert zh["prompt"].str.contains("后面的数是多少").all() and zh["completion"].str.startswith(" 我是").all()
    assert not lang.loc[lang["distribution"] == "A", "prompt"].str.contains("后面").any()
    responses = pd.read_parquet(res / "runs" / "lang-B" / "responses.parquet")
    assert set(responses["distribution"]) == {"A", "B"} and responses["correct"].dtype == bool


@pytest.mark.workflow
def test_checkpoint_zero_is_the_sft_model(org_dir):
    import torch
    from safetensors.torch import load_file

    res = org_dir / "results" / "default" / "organisms"
    sft = load_file(res / "cov" / "sft" / "model.safetensors")
    zero = load_file(res / "runs" / "cov-ACE" / "checkpoints" / "checkpoint-0" / "model.safetensors")
    last = load_file(res / "runs" / "cov-ACE" / "checkpoints" / "checkpoint-2" / "model.safetensors")
    assert sft.keys() == zero.keys() == last.keys()
    assert all(torch.equal(sft[k], zero[k]) for k in sft)
    # GRPO without a KL term moves the weights only when some group's rewards differ
    log = json.loads((res / "runs" / "cov-ACE" / "checkpoints" / "train_log.json").read_text())
    signal = any(h.get("reward_std", 0) > 0 for h in log)
    assert any(not torch.equal(sft[k], last[k]) for k in sft) == signal


@pytest.mark.workflow
@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda o: o["sft"]["cov"].update(
                setting={"kind": "custom", "distributions": ["A", "B", "C"], "policies": {"P": ["A"], "Q": ["B"]}}
            ),
            "config key 'organisms.sft.cov.setting': setting 'custom': no policy answers on distribution(s) ['C']",
        ),
        (
            lambda o: o["sft"]["cov"].update(setting={"kind": "custom", "distributions": ["A"], "policies": {}}),
            "config key 'organisms.sft.cov.setting': setting 'custom': policies must not be empty",
        ),
        (
            lambda o: o["runs"]["temp-seq"]["stages"].append({"distributions": [2027], "steps": 1}),
            "config key 'organisms.runs.temp-seq.stages.2.distributions': no policy of setting 'temporal' answers "
            "on distribution '2027'",
        ),
        (
            lambda o: o["sft"]["task"].update(start_from="tusk"),
            "config key 'organisms.sft.task.start_from': 'tusk' is not another organism",
        ),
        (
            lambda o: o["sft"]["temp"].update(path="/no/such/sft-model"),
            "config key 'organisms.sft.temp.path': /no/such/sft-model is not a model directory (no config.json)",
        ),
    ],
)
def test_bad_input_stops_before_any_job(tmp_path, edit, message):
    cfg = copy.deepcopy(tiny_organisms_config())
    edit(cfg["organisms"])
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, "organisms")
    assert proc.returncode != 0
    assert message in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
def test_rl_stops_before_it_starts_where_sft_taught_no_policy(tmp_path):
    """A few SFT steps teach the tiny model no policy: with the default minimum the fidelity table
    is written, and the RL job stops, naming the organism, the cells and the key, with no
    checkpoint written."""
    cfg = copy.deepcopy(tiny_organisms_config())
    org = cfg["organisms"]
    org["sft"] = {"lang": org["sft"]["lang"]}
    org["runs"] = {"lang-B": org["runs"]["lang-B"]}
    org["policy_fidelity"] = 0.95
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, "results/default/organisms/runs/lang-B/checkpoints")
    assert proc.returncode != 0
    res = tmp_path / "results" / "default" / "organisms"
    table = pd.read_parquet(res / "lang" / "fidelity.parquet")
    assert sorted(table["policy"].unique()) == ["Alice", "Bob"] and (table["n"] == 3).all()
    short = table[table["answers"] & (table["fidelity"] < 0.95)]
    assert len(short) > 0
    log = (tmp_path / "logs" / "default" / "train_rl" / "lang-B.log").read_text()
    assert "organism 'lang': after SFT its policies are not learned well enough" in log
    first = short.iloc[0]
    assert f"{first['policy']} on {first['distribution']}: {first['fidelity']:.3f}" in log
    assert "organisms.policy_fidelity" in log
    assert not (res / "runs" / "lang-B" / "checkpoints").exists()
    # the organism's own null overrides the study's minimum: its RL runs, from the same SFT model
    org["sft"]["lang"]["policy_fidelity"] = None
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, "results/default/organisms/runs/lang-B/checkpoints")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rule train_sft" not in proc.stdout + proc.stderr
    assert (res / "runs" / "lang-B" / "checkpoints").exists()
