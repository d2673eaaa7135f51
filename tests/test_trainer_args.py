"""trainer_args checked against the library dataclasses before any job runs, and the training
options of the schema and of the code that reads them agree."""

import re
from pathlib import Path

import pytest

from shiftwork.config import ConfigError, check_config, load_schema
from shiftwork.models.trainer_args import trainer_args_problems, with_trainer_args

ROOT = Path(__file__).resolve().parent.parent


def _problems(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    return str(err.value)


def test_unknown_trainer_args_keys_are_named_with_their_config_path(default_config) -> None:
    cfg = default_config
    cfg["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["trainer_args"] = {"gradient_accumulation_step": 2}
    # top_entropy_quantile is a GRPOConfig field, not one of SFTConfig
    cfg["organisms"]["sft"]["two-policy"]["train"]["trainer_args"] = {"top_entropy_quantile": 0.2}
    cfg["organisms"]["rl"]["trainer_args"] = {"top_entropy_quantile": 0.2, "no_such_field": 1}
    text = _problems(cfg)
    assert (
        "config key 'trajectory.runs.smollm2-lora-s0.finetune.trainer_args': 'gradient_accumulation_step' is not a "
        "field of transformers.TrainingArguments; did you mean 'gradient_accumulation_steps'" in text
    )
    assert (
        "config key 'organisms.sft.two-policy.train.trainer_args': 'top_entropy_quantile' is not a field of "
        "trl.SFTConfig" in text
    )
    assert "config key 'organisms.rl.trainer_args': 'no_such_field' is not a field of trl.GRPOConfig" in text
    assert "'organisms.rl.trainer_args': 'top_entropy_quantile'" not in text
    assert text.count("is not a field") == 3


def test_known_trainer_args_pass_the_check(default_config) -> None:
    cfg = default_config
    cfg["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["trainer_args"] = {"gradient_accumulation_steps": 2}
    cfg["organisms"]["sft"]["two-policy"]["train"]["trainer_args"] = {"adam_beta2": 0.95}
    cfg["organisms"]["runs"]["two-policy-rl-A"]["train"] = {"trainer_args": {"top_entropy_quantile": 0.2}}
    checked = check_config(cfg)
    assert checked["trajectory"]["runs"]["smollm2-lora-s0"]["finetune"]["trainer_args"] == {
        "gradient_accumulation_steps": 2
    }


def test_trainer_args_problems_and_merge() -> None:
    assert trainer_args_problems({"adam_beta2": 0.9}, ["TrainingArguments", "SFTConfig", "GRPOConfig"]) == []
    assert trainer_args_problems([1], ["SFTConfig"]) == ["must be a mapping of SFTConfig fields, got [1]"]
    fixed = {"max_steps": 3}
    assert with_trainer_args({}, fixed, "TrainingArguments") == fixed
    assert with_trainer_args({"trainer_args": {"adam_beta2": 0.9}}, fixed, "TrainingArguments") == {
        "max_steps": 3,
        "adam_beta2": 0.9,
    }
    with pytest.raises(ValueError, match="'beta' is not a field of transformers.TrainingArguments"):
        with_trainer_args({"trainer_args": {"beta": 0.1}}, fixed, "TrainingArguments")
    with pytest.raises(ValueError, match=r"trainer_args sets \['max_steps'\]"):
        with_trainer_args({"trainer_args": {"max_steps": 9}}, fixed, "TrainingArguments")


def test_trajectory_trainer_arguments_take_gradient_checkpointing_and_trainer_args(tmp_path) -> None:
    from transformers import TrainingArguments

    from shiftwork.trajectory.finetune import trainer_arguments

    settings = {
        "steps": 10,
        "checkpoint_every": 5,
        "batch_size": 4,
        "learning_rate": 0.001,
        "scheduler": "linear",
        "warmup_ratio": 0.25,
        "weight_decay": 0.0,
        "dtype": "float32",
        "gradient_checkpointing": True,
        "trainer_args": {"gradient_accumulation_steps": 3},
    }
    args = TrainingArguments(**trainer_arguments(settings, tmp_path, 0, "cpu"))
    assert args.gradient_checkpointing is True
    assert args.gradient_accumulation_steps == 3
    assert args.warmup_steps == 3  # ceil(0.25 * 10)
    assert (args.save_strategy, args.save_steps, args.save_total_limit) == ("steps", 5, 2)
    plain = trainer_arguments({**settings, "trainer_args": {}, "resume_every": 2}, tmp_path, 0, "cpu")
    assert plain["gradient_checkpointing"] is True and plain["save_steps"] == 2
    del settings["gradient_checkpointing"], settings["trainer_args"]
    assert trainer_arguments(settings, tmp_path, 0, "cpu")["gradient_checkpointing"] is False


READ = re.compile(r'\bsettings(?:\.get\(|\[)"(\w+)"')


def _reads(*paths: str) -> set[str]:
    return {m for p in paths for m in READ.findall((ROOT / p).read_text())}


def _schema_keys(definition: str) -> set[str]:
    props = load_schema()["$defs"][definition]["properties"]
    return set(props) | {f"lora.{k}" for k in props["lora"]["properties"]}


def _lora_reads(*paths: str) -> set[str]:
    text = "".join((ROOT / p).read_text() for p in paths)
    return {f"lora.{k}" for k in re.findall(r'\blora\["(\w+)"\]', text)}


def test_trajectory_schema_and_finetune_code_read_the_same_options() -> None:
    """Every option the fine-tuning code reads is one the schema accepts, and the other way round."""
    code = _reads("shiftwork/trajectory/finetune.py") | _lora_reads("shiftwork/trajectory/finetune.py")
    assert '"trainer_args"' in (ROOT / "shiftwork/models/trainer_args.py").read_text()
    code.add("trainer_args")  # read by shiftwork.models.trainer_args.with_trainer_args
    # the schedule in epochs, turned into steps by shiftwork.trajectory.config.finetune_schedule
    assert (
        _reads("shiftwork/trajectory/config.py") >= set()
        and '"checkpoint_every_epochs"' in (ROOT / "shiftwork/trajectory/config.py").read_text()
    )
    code |= {"epochs", "checkpoint_every_epochs"}
    assert {"gradient_checkpointing", "resume_every", "trainer_args"} <= code
    assert code == _schema_keys("trajectory_finetune")


def test_organisms_schema_and_training_code_read_the_same_options() -> None:
    files = ("shiftwork/organisms/training.py", "shiftwork/organisms/convergence.py")
    code = _reads(*files) | _lora_reads(*files)
    code.add("trainer_args")  # read by shiftwork.models.trainer_args.with_trainer_args
    # RL prompts per stage, passed to make_rl_prompts by the rule's params
    assert '["n_prompts"]' in (ROOT / "rules/organisms_inputs.smk").read_text()
    code.add("n_prompts")
    assert {"gradient_checkpointing", "resume_every"} <= code
    assert code == _schema_keys("training_fields")
