"""Names that become folders and files: the config's name and the keys of the registries and of
the study sections are checked before any job, each error naming its key."""

import copy

import pytest
import yaml

from shiftwork.config import ConfigError, check_config, name_errors, results_name


def problems(cfg) -> list[str]:
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    return str(info.value).splitlines()[1:]


@pytest.mark.parametrize("name", ["models", "cache", "bench"])
def test_a_shared_results_folder_cannot_name_a_config(default_config, name):
    cfg = {**default_config, "name": name}
    shared = (
        f"is the name of results/{name}/, a folder every config shares (results/models, results/cache, "
        "results/bench: prepared models, caches, benchmark results); choose another name"
    )
    assert problems(cfg) == [f"  - config key 'name': '{name}' {shared}"]
    with pytest.raises(ConfigError) as info:
        results_name({"name": name})
    assert str(info.value) == f"config key 'name': '{name}' {shared}"
    # nor through the config file's name, when the config has no name
    with pytest.raises(ConfigError) as info:
        results_name({}, [f"config/{name}.yaml"])
    assert str(info.value) == (
        f"the name of config file config/{name}.yaml (set config key 'name' to choose another): '{name}' {shared}"
    )


def test_a_config_name_with_two_dots_is_refused_once(default_config):
    rule = "use letters, digits, '.', '_' and '-', starting with a letter or digit, with no '..'"
    # one message, not the schema's as well
    assert problems({**default_config, "name": "a..b"}) == [
        f"  - config key 'name': 'a..b' cannot name a results folder; {rule}"
    ]
    assert problems({**default_config, "name": "../up"}) == [
        f"  - config key 'name': '../up' cannot name a results folder; {rule}"
    ]
    assert results_name({"name": "paper.v2"}) == "paper.v2"


def test_a_dataset_named_with_a_path_is_refused(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["datasets"]["../outside"] = cfg["datasets"].pop("trivia")
    cfg["stability"]["datasets"] = ["../outside" if d == "trivia" else d for d in cfg["stability"]["datasets"]]
    assert problems(cfg) == [
        "  - config key 'datasets.../outside': a dataset name cannot hold '/' (it names folders and files under "
        "results/); use a name such as 'outside' and put the hub id in source.id"
    ]


def test_a_model_named_like_its_hub_id_gets_a_name_to_use(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["HuggingFaceTB/SmolLM2-135M-Instruct"] = cfg["models"].pop("smollm2-135m-instruct")
    assert name_errors(cfg) == [
        "config key 'models.HuggingFaceTB/SmolLM2-135M-Instruct': a model name cannot hold '/' (it names folders "
        "and files under results/); use a name such as 'SmolLM2-135M-Instruct' and put the hub id in source.id"
    ]


def test_run_suite_organism_and_encoder_names_are_checked():
    cfg = {
        "encoders": {"a b": {}},
        "trajectory": {"suites": {".hidden": {}}, "runs": {"r..1": {}}},
        "organisms": {"sft": {"o/1": {}}, "runs": {"ok-run_1.2": {}, 2024: {}}},
    }
    rule = "use letters, digits, '.', '_' and '-', starting with a letter or digit, with no '..'"
    assert name_errors(cfg) == [
        f"config key 'encoders.a b': encoder name 'a b' cannot name a folder or file; {rule}",
        f"config key 'trajectory.suites..hidden': suite name '.hidden' cannot name a folder or file; {rule}",
        f"config key 'trajectory.runs.r..1': run name 'r..1' cannot name a folder or file; {rule}",
        f"config key 'organisms.sft.o/1': organism name 'o/1' cannot name a folder or file; {rule}",
        "config key 'organisms.runs.2024': run name 2024 is read as int, not text; quote it in the config file",
    ]


def test_names_are_checked_on_a_config_the_schema_refuses():
    # a section of the wrong type is the schema's to report; the names beside it are still checked
    assert name_errors({"models": ["x"], "datasets": {"a/b": {}}, "trajectory": 3}) == [
        "config key 'datasets.a/b': a dataset name cannot hold '/' (it names folders and files under results/); "
        "use a name such as 'b' and put the hub id in source.id"
    ]
    assert name_errors(["not", "a", "mapping"]) == []


@pytest.mark.parametrize(
    "shipped", ["config.yaml", "paper.yaml", "smoke.yaml", "organisms-smollm2.yaml", "organisms-coverage.yaml"]
)
def test_shipped_configs_have_safe_names(root, shipped):
    cfg = yaml.safe_load((root / "config" / shipped).read_text())
    assert name_errors(cfg) == []
    check_config(cfg)
