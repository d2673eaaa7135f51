"""trajectory.grid: runs made by crossing models, ID suites, shot counts and seeds, their
schedules in epochs, and the run groups the scores table carries."""

import copy

import pandas as pd
import pytest

from shiftwork.config import (
    ConfigError,
    check_config,
    expand_runs,
    finetune_schedule,
    grid_runs,
    trajectory_runs,
    with_defaults,
)
from shiftwork.tables import read_table, write_table
from shiftwork.trajectory.steps import collect_scores

FINETUNE = {"method": "lora", "steps": 40, "checkpoint_every": 10, "learning_rate": 0.001, "batch_size": 8}


def grid_config(default_config: dict, **grid: object) -> dict:
    cfg = copy.deepcopy(default_config)
    cfg["trajectory"]["suites"]["other"] = {"kind": "synthetic", "n_train": 16, "n_test": 8}
    cfg["trajectory"]["analysis"]["windows"] = False  # the grid's runs have 5 checkpoints
    cfg["trajectory"]["grid"] = {
        "g": {
            "models": ["smollm2-135m-instruct", "gemma3-270m"],
            "suites": ["nli-synthetic", "other"],
            "shots": [16, 64],
            "seeds": [0, 1, 2],
            "finetune": dict(FINETUNE),
            **grid,
        }
    }
    return cfg


def errors_of(cfg: dict) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    return str(info.value)


def test_a_grid_entry_is_one_run_per_model_suite_shots_and_seed():
    grid = {"models": ["m1", "m2"], "suites": ["s"], "shots": [8, 32], "seeds": [0, 3], "finetune": dict(FINETUNE)}
    runs = grid_runs("g", grid)
    assert list(runs) == [
        "m1-s-k8-s0",
        "m1-s-k8-s3",
        "m1-s-k32-s0",
        "m1-s-k32-s3",
        "m2-s-k8-s0",
        "m2-s-k8-s3",
        "m2-s-k32-s0",
        "m2-s-k32-s3",
    ]
    run = runs["m2-s-k32-s3"]
    assert {k: run[k] for k in ("model", "suite", "shots", "seed", "grid")} == {
        "model": "m2",
        "suite": "s",
        "shots": 32,
        "seed": 3,
        "grid": "g",
    }
    assert run["finetune"] == {**FINETUNE, "n_train": 32}
    # each run has its own settings: changing one leaves the grid and the others alone
    run["finetune"]["lora"] = {"r": 2}
    assert "lora" not in grid["finetune"] and "lora" not in runs["m1-s-k8-s0"]["finetune"]


def test_grid_runs_join_the_explicit_runs(default_config):
    cfg = check_config(grid_config(default_config))
    runs = trajectory_runs(cfg["trajectory"])
    assert len(runs) == 1 + 2 * 2 * 2 * 3
    assert list(runs)[0] == "smollm2-lora-s0"
    assert runs["smollm2-lora-s0"]["shots"] == 256  # an explicit run's shots is its n_train
    assert runs["gemma3-270m-other-k64-s2"]["finetune"]["n_train"] == 64
    # the grid's finetune settings get the schema's defaults like a run's
    assert runs["gemma3-270m-other-k64-s2"]["finetune"]["lora"]["target_modules"] == ["q_proj", "v_proj"]
    assert runs["gemma3-270m-other-k64-s2"]["finetune"]["warmup_ratio"] == 0.0


def test_a_run_name_made_twice_is_an_error_naming_both_keys(default_config):
    cfg = grid_config(default_config)
    cfg["trajectory"]["runs"]["gemma3-270m-other-k16-s1"] = copy.deepcopy(cfg["trajectory"]["runs"]["smollm2-lora-s0"])
    msg = errors_of(cfg)
    assert (
        "config key 'trajectory.grid.g': run 'gemma3-270m-other-k16-s1' is also made by "
        "'trajectory.runs.gemma3-270m-other-k16-s1'" in msg
    )
    cfg = grid_config(default_config)
    cfg["trajectory"]["grid"]["h"] = {**copy.deepcopy(cfg["trajectory"]["grid"]["g"]), "seeds": [2, 5]}
    msg = errors_of(cfg)
    assert "config key 'trajectory.grid.h': run 'smollm2-135m-instruct-nli-synthetic-k16-s2' is also made by" in msg
    assert "'trajectory.grid.g'" in msg and "s5'" not in msg


def test_bad_grid_entries_name_their_key(default_config):
    cfg = grid_config(default_config, models=["smollm2-135m-instruct", "olmo-7b"], suites=["mnli"])
    msg = errors_of(cfg)
    assert "config key 'trajectory.grid.g.models.1': unknown model 'olmo-7b'" in msg
    assert "config key 'trajectory.grid.g.suites.0': unknown suite 'mnli'" in msg
    cfg = grid_config(default_config, shots=[16, 16])
    assert "config key 'trajectory.grid.g.shots'" in errors_of(cfg)
    cfg = grid_config(default_config, shots=[0])
    assert "config key 'trajectory.grid.g.shots.0'" in errors_of(cfg)
    cfg = grid_config(default_config)
    del cfg["trajectory"]["grid"]["g"]["seeds"]
    assert "config key 'trajectory.grid.g': 'seeds' is a required property" in errors_of(cfg)
    cfg = grid_config(default_config)
    cfg["trajectory"]["grid"]["g"]["finetune"]["n_train"] = 8
    assert "config key 'trajectory.grid.g.finetune.n_train': a grid's shots set n_train" in errors_of(cfg)
    cfg = grid_config(default_config)
    cfg["trajectory"]["grid"]["g"]["finetune"]["steps"] = 20  # checkpoints at 0, 10, 20
    msg = errors_of(cfg)
    assert (
        "config key 'trajectory.grid.g (run 'smollm2-135m-instruct-nli-synthetic-k16-s0')': 3 checkpoints; "
        "partial correlations need at least 4" in msg
    )


def test_epochs_count_passes_over_the_shots():
    base = {"n_train": 20, "batch_size": 8, "epochs": 40, "checkpoint_every_epochs": 2}
    out = finetune_schedule(base)
    assert (out["steps"], out["checkpoint_every"]) == (120, 6)  # an epoch is ceil(20 / 8) = 3 steps
    assert "steps" not in base  # the input is left alone
    out = finetune_schedule({"n_train": 16, "batch_size": 32, "epochs": 40, "checkpoint_every_epochs": 1})
    assert (out["steps"], out["checkpoint_every"]) == (40, 1)  # fewer examples than a batch: one step
    out = finetune_schedule({"batch_size": 8, "steps": 30, "checkpoint_every": 5})
    assert (out["steps"], out["checkpoint_every"]) == (30, 5)
    with pytest.raises(ValueError, match="exactly one of 'steps' or 'epochs'"):
        finetune_schedule({"batch_size": 8, "steps": 30, "epochs": 2, "checkpoint_every": 5})
    with pytest.raises(ValueError, match="exactly one of 'checkpoint_every' or 'checkpoint_every_epochs'"):
        finetune_schedule({"batch_size": 8, "steps": 30})
    with pytest.raises(ValueError, match="set 'n_train'"):
        finetune_schedule({"batch_size": 8, "epochs": 3, "checkpoint_every": 1})


def test_grid_schedules_in_epochs_follow_each_shot_count(default_config):
    ft = {"learning_rate": 0.001, "batch_size": 32, "epochs": 10, "checkpoint_every_epochs": 1}
    cfg = check_config(grid_config(default_config, shots=[16, 100], finetune=ft))
    runs = trajectory_runs(cfg["trajectory"])
    assert runs["gemma3-270m-other-k16-s0"]["finetune"]["steps"] == 10
    assert runs["gemma3-270m-other-k100-s0"]["finetune"]["steps"] == 40
    assert runs["gemma3-270m-other-k100-s0"]["finetune"]["checkpoint_every"] == 4
    cfg = copy.deepcopy(default_config)
    del cfg["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["n_train"]
    cfg["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["epochs"] = 3
    del cfg["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["steps"]
    assert "config key 'trajectory.runs.smollm2-lora-s0.finetune': 'epochs' and" in errors_of(cfg)


def test_a_trajectory_section_needs_runs(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["trajectory"]["runs"] = {}
    assert "config key 'trajectory': no runs; list them under 'trajectory.runs' or 'trajectory.grid'" in errors_of(cfg)
    del cfg["trajectory"]["runs"]
    del cfg["crossstudy"]  # it names the run the grid replaces
    cfg = grid_config(cfg)
    assert len(trajectory_runs(check_config(cfg)["trajectory"])) == 24


def test_expansion_reports_instead_of_raising(default_config):
    cfg = grid_config(default_config)
    cfg["trajectory"]["grid"]["g"]["finetune"]["n_train"] = 8
    runs, keys, errors = expand_runs(with_defaults(cfg)["trajectory"])
    assert len(runs) == 25 and keys["gemma3-270m-other-k16-s1"] == "trajectory.grid.g" and len(errors) == 1
    with pytest.raises(ConfigError, match="a grid's shots set n_train"):
        trajectory_runs(with_defaults(cfg)["trajectory"])


def test_scores_carry_suite_shots_and_seed(tmp_path):
    paths = []
    for run, step, correct in (("a-k16-s0", 0, [True, False]), ("a-k16-s1", 0, [True, True]), ("b", 5, [False, True])):
        preds = pd.DataFrame(
            {
                "model": "m",
                "run": run,
                "step": step,
                "example_id": ["x1", "x2"],
                "set": ["id", "hans"],
                "label": "entailment",
                "pred": ["entailment" if c else "not_entailment" for c in correct],
                "correct": correct,
            }
        )
        paths.append(tmp_path / f"{run}.parquet")
        write_table(preds, paths[-1], {"step": "evaluate"})
    runs = {
        "a-k16-s0": {"suite": "mnli", "shots": 16, "seed": 0},
        "a-k16-s1": {"suite": "mnli", "shots": 16, "seed": 1},
        "b": {"suite": "snli", "shots": None, "seed": 7},
    }
    collect_scores([str(p) for p in paths], "id", str(tmp_path / "scores.parquet"), str(tmp_path / "i.parquet"), runs)
    scores = read_table(tmp_path / "scores.parquet")
    got = scores[["run", "testset", "accuracy", "role", "suite", "shots", "seed"]]
    assert got.astype(object).where(got.notna(), None).values.tolist() == [
        ["a-k16-s0", "hans", 0.0, "ood", "mnli", 16, 0],
        ["a-k16-s0", "id", 1.0, "id", "mnli", 16, 0],
        ["a-k16-s1", "hans", 1.0, "ood", "mnli", 16, 1],
        ["a-k16-s1", "id", 1.0, "id", "mnli", 16, 1],
        ["b", "hans", 1.0, "ood", "snli", None, 7],
        ["b", "id", 0.0, "id", "snli", None, 7],
    ]
    with pytest.raises(ValueError, match=r"predictions of runs \['b'\]"):
        collect_scores(
            [str(p) for p in paths],
            "id",
            str(tmp_path / "s2.parquet"),
            str(tmp_path / "i2.parquet"),
            {k: runs[k] for k in list(runs)[:2]},
        )
