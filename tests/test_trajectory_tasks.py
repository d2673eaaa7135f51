import copy
import json

import pandas as pd
import pytest

from shiftwork.config import ConfigError, check_config
from shiftwork.data import DatasetError
from shiftwork.models.checkpoints import CheckpointError, load_checkpoint
from shiftwork.trajectory.schedule import checkpoint_steps
from shiftwork.trajectory.tasks import (
    PATTERN,
    build_suite,
    load_set,
    map_labels,
    pattern_problem,
    render,
    verbaliser_ids,
)


def test_render_pattern():
    text = render("The cat slept on the mat.", "The cat slept.")
    assert text == 'The cat slept on the mat.\nQuestion: Does this mean that "The cat slept"? Yes or no?\nAnswer:'
    assert PATTERN.count("{premise}") == 1
    # {hypothesis} keeps the full stop, {hypothesis_no_period} drops it; surrounding spaces go
    assert render(" P. ", " H. ", "{premise}|{hypothesis}|{hypothesis_no_period}") == "P.|H.|H"


def test_pattern_problems_are_named(default_config):
    assert pattern_problem("{premise}Question: {hypothesis} Yes or No?") is None
    assert "unknown placeholder(s) ['text1']" in pattern_problem("{premise} {text1}")
    assert "needs {premise}" in pattern_problem("{hypothesis}?")
    assert "not a format string" in pattern_problem("{premise} {hypothesis")
    cfg = copy.deepcopy(default_config)
    cfg["trajectory"]["suites"]["nli-synthetic"]["pattern"] = "{premise} {text2} ?"
    with pytest.raises(ConfigError, match="config key 'trajectory.suites.nli-synthetic.pattern': unknown placeholder"):
        check_config(cfg)
    cfg["trajectory"]["suites"]["nli-synthetic"]["verbalisers"] = {"entailment": " Yes"}
    with pytest.raises(ConfigError, match="trajectory.suites.nli-synthetic.verbalisers"):
        check_config(cfg)


def test_label_mapping_and_its_errors():
    got = map_labels("rte", pd.Series([0, 1, 0]), {"0": "entailment", "1": "not_entailment"})
    assert got.tolist() == ["entailment", "not_entailment", "entailment"]
    with pytest.raises(DatasetError) as info:
        map_labels("snli", pd.Series([0, 2, -1, 1]), {"0": "entailment", "1": "not_entailment", "2": "not_entailment"})
    assert "test set 'snli'" in str(info.value) and "['-1']" in str(info.value) and "row 3" in str(info.value)
    with pytest.raises(DatasetError, match="targets \\['neutral'\\]"):
        map_labels("x", pd.Series([0]), {"0": "neutral"})


def test_load_set_from_file_drops_and_samples(tmp_path):
    rows = [{"s1": f"P{i}.", "s2": f"H{i}.", "y": y} for i, y in enumerate([1, 0, -1, 1, 0, 1])]
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "source": {"kind": "file", "path": str(path)},
        "fields": {"premise": "s1", "hypothesis": "s2", "label": "y"},
        "labels": {"1": "entailment", "0": "not_entailment", "-1": "drop"},
        "seed": 0,
    }
    df = load_set("wnli", spec, "test", "wnli")
    assert len(df) == 5 and "P2." not in df["premise"].tolist()
    assert df["label"].tolist() == ["entailment", "not_entailment", "entailment", "not_entailment", "entailment"]
    assert df["example_id"].tolist()[0] == "wnli-test-00001"
    assert len(load_set("wnli", {**spec, "n": 3}, "test", "wnli")) == 3


def test_synthetic_suite_from_config():
    suite = build_suite({"kind": "synthetic", "n_train": 8, "n_test": 4, "seed": 1, "ood": ["negation", "noise"]})
    assert sorted(suite["set"].unique()) == ["id", "negation", "noise"]
    assert (suite[suite["split"] == "train"]["set"] == "id").all()


def test_checkpoint_steps():
    assert checkpoint_steps(80, 10) == [0, 10, 20, 30, 40, 50, 60, 70, 80]
    assert checkpoint_steps(25, 10) == [0, 10, 20, 25]
    with pytest.raises(ValueError):
        checkpoint_steps(10, 0)


def test_missing_checkpoint_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(str(tmp_path), {"path": str(tmp_path / "checkpoint-7")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="neither adapter_config.json nor config.json"):
        load_checkpoint(str(tmp_path), {"path": str(tmp_path / "empty")})


def test_config_checks_for_runs(default_config, tmp_path, root):
    cfg = copy.deepcopy(default_config)
    run = cfg["trajectory"]["runs"]["smollm2-lora-s0"]
    run["finetune"]["steps"] = 4  # checkpoints at 0, 2, 4: too few
    with pytest.raises(ConfigError, match="3 checkpoints; partial correlations need at least 4"):
        check_config(cfg)
    cfg = copy.deepcopy(default_config)
    run = cfg["trajectory"]["runs"]["smollm2-lora-s0"]
    del run["finetune"]
    run["checkpoints"] = [{"step": s, "path": str(tmp_path / f"ck{s}")} for s in (1, 2, 3, 4)]
    with pytest.raises(ConfigError, match="4 checkpoints; the early/late window analysis needs at least 8"):
        check_config(cfg)
    cfg["trajectory"]["analysis"]["windows"] = False  # four checkpoints suffice without the windows
    with pytest.raises(ConfigError) as info:
        check_config(cfg, root=root)
    assert "trajectory.runs.smollm2-lora-s0.checkpoints.0.path" in str(info.value)
    assert "does not exist" in str(info.value)
    run["checkpoints"][0] = {"step": 1, "hub": "org/model", "revision": "step1"}
    for s in (2, 3, 4):
        (tmp_path / f"ck{s}").mkdir()
    check_config(cfg, root=root)
    run["suite"] = "mnli"
    with pytest.raises(ConfigError, match="unknown suite 'mnli'"):
        check_config(cfg)


@pytest.mark.model
def test_verbalisers_are_single_tokens(prepared_smollm):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(prepared_smollm)
    ids = verbaliser_ids(tok)
    assert ids == {
        "entailment": tok(" Yes", add_special_tokens=False).input_ids[0],
        "not_entailment": tok(" No", add_special_tokens=False).input_ids[0],
    }
    with pytest.raises(ValueError, match="tokens; choose a single-token word"):
        verbaliser_ids(tok, {"entailment": " Absolutely-indeed", "not_entailment": " No"})
