"""Source kind ``checkpoint``: a checkpoint of a training run prepared as a model of its own, on
tiny scratch models (no download): a LoRA adapter merged into its base as ``load_checkpoint``
merges it, a full model kept in its stored dtype, a missing step named with the steps that exist."""

import pytest
import torch

from shiftwork.models.checkpoint_source import with_origin
from shiftwork.models.prepare import INFO_FILE, preparation, prepare_folder, source_key
from shiftwork.models.sources import ModelSourceError

SCRATCH = {"kind": "scratch", "hidden_size": 32, "layers": 1, "heads": 2, "seed": 3}
TEXT = "What comes after 479?"


def prepared_base(tmp_path, dtype=torch.float32):
    """A tiny scratch Llama prepared like any registered model, stored in ``dtype``."""
    from shiftwork.models.scratch import scratch_model

    model, tok = scratch_model({k: v for k, v in SCRATCH.items() if k != "kind"})
    src = tmp_path / f"src-{dtype}"
    model.to(dtype).save_pretrained(src)
    tok.save_pretrained(src)
    out = tmp_path / f"base-{dtype}"
    prepare_folder("base", {"source": {"kind": "local", "path": str(src)}, "chat": False}, out)
    return out


def write_lora(base_dir, target):
    """A LoRA adapter on ``base_dir`` whose B matrices are not zero (so merging changes the logits)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(7)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="auto")
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(target)


def checkpoint_spec(base_dir, checkpoints, step, config="cfg"):
    """The model entry ``{kind: checkpoint, run: r, step: STEP}`` as the workflow completes it."""
    spec = {"source": {"kind": "checkpoint", "run": "r", "step": step}, "chat": False}
    return with_origin(spec, config, {"checkpoints": str(checkpoints), "base": str(base_dir / INFO_FILE)})


def logits(model, tok):
    ids = tok(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        return model(ids.to(model.device)).logits.float().cpu()


def test_lora_checkpoint_is_prepared_as_load_checkpoint_merges_it(tmp_path):
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.models.loading import load_prepared

    base = prepared_base(tmp_path)
    checkpoints = tmp_path / "checkpoints"
    write_lora(base, checkpoints / "checkpoint-4")
    (checkpoints / "checkpoint-0").mkdir()
    info = prepare_folder("ck", checkpoint_spec(base, checkpoints, 4), tmp_path / "out")

    assert (info["source"]["run"], info["source"]["step"], info["source"]["config"]) == ("r", 4, "cfg")
    assert info["checkpoint"] == str(checkpoints / "checkpoint-4")
    assert info["dtype"] == "float32"
    prepared = load_prepared(tmp_path / "out", dtype="float32", device="cpu")  # checks the weight digests
    merged, tok, _ = load_checkpoint(str(base), {"path": str(checkpoints / "checkpoint-4")}, "float32", "cpu")
    plain = load_prepared(base, dtype="float32", device="cpu")
    got, want = logits(prepared.model, prepared.tokenizer), logits(merged, tok)
    assert got.shape == want.shape == (1, len(TEXT) + 1, len(tok))
    assert torch.allclose(got, want, atol=1e-6, rtol=0)
    # the adapter changes the model: equal logits above are not the base model's
    assert (got - logits(plain.model, plain.tokenizer)).abs().max() > 1e-3


def test_missing_step_names_the_steps_that_exist(tmp_path):
    base = prepared_base(tmp_path)
    checkpoints = tmp_path / "checkpoints"
    for step in (0, 10, 20):
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
    with pytest.raises(ModelSourceError, match=r"model 'ck': run 'r' has no checkpoint at step 15.*\[0, 10, 20\]"):
        prepare_folder("ck", checkpoint_spec(base, checkpoints, 15), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_full_checkpoint_keeps_its_bfloat16_weights(tmp_path):
    from safetensors import safe_open

    base = prepared_base(tmp_path, torch.bfloat16)
    checkpoints = tmp_path / "checkpoints"
    write_lora(base, checkpoints / "checkpoint-2")
    full = checkpoints / "checkpoint-6"
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(base, dtype="auto").save_pretrained(full)
    info = prepare_folder("full", checkpoint_spec(base, checkpoints, 6), tmp_path / "full")
    assert info["dtype"] == "bfloat16"
    with (
        safe_open(tmp_path / "full" / "model.safetensors", "pt") as got,
        safe_open(base / "model.safetensors", "pt") as ref,
    ):
        for key in sorted(ref.keys()):
            assert got.get_tensor(key).dtype == torch.bfloat16
            assert torch.equal(got.get_tensor(key), ref.get_tensor(key))
    # a LoRA adapter on a bfloat16 base is merged into bfloat16 weights: 2 bytes a weight
    lora = prepare_folder("lora", checkpoint_spec(base, checkpoints, 2), tmp_path / "lora")
    assert lora["dtype"] == "bfloat16"
    assert (tmp_path / "lora" / "model.safetensors").stat().st_size < 2 * lora["n_parameters"] + 20_000


def test_folder_depends_on_config_run_and_step(tmp_path):
    base, checkpoints = tmp_path / "base", tmp_path / "checkpoints"
    keys = {
        source_key(checkpoint_spec(base, checkpoints, 4)),
        source_key(checkpoint_spec(base, checkpoints, 4, config="paper")),
        source_key(checkpoint_spec(base, checkpoints, 6)),
    }
    assert len(keys) == 3 and all(k.startswith("checkpoint-") for k in keys)
    with pytest.raises(ModelSourceError, match="lacks"):
        preparation({"source": {"kind": "checkpoint", "run": "r", "step": 4}, "chat": False})


def with_model(config, source, **entry):
    """``config`` with model ``ck`` (``source``, a checkpoint) registered."""
    config["models"]["ck"] = {"source": {"kind": "checkpoint", **source}, **entry}
    return config


def test_config_takes_a_checkpoint_of_a_trajectory_or_organisms_run(default_config):
    from shiftwork.config import check_config

    cfg = check_config(with_model(default_config, {"run": "smollm2-lora-s0", "step": 50}))
    # chat and the other defaults come as for any model: chat from the run's model, smollm2 (chat)
    entry = cfg["models"]["ck"]
    assert (entry["chat"], entry["dtype"], entry["batch_size"]) == (True, "auto", 16)
    # organisms runs may stop early: any step is taken here; chat from organism-tiny (not chat)
    cfg = check_config(with_model(default_config, {"run": "two-policy-rl-A-s1", "step": 7}))
    assert cfg["models"]["ck"]["chat"] is False
    cfg = check_config(with_model(default_config, {"run": "two-policy-rl-A-s1", "step": 7}, chat=True))
    assert cfg["models"]["ck"]["chat"] is True


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"run": "smollm2-lora", "step": 50},
            r"'models\.ck\.source\.run': model 'ck' names run 'smollm2-lora', which is not a run of this config; "
            r"its trajectory and organisms runs are \['coverage-rl-ACE', 'smollm2-lora-s0', .*'two-policy-rl-B-s2'\]; "
            r"did you mean 'smollm2-lora-s0'\?",
        ),
        (
            {"run": "smollm2-lora-s0", "step": 51},
            r"'models\.ck\.source\.step': trajectory run 'smollm2-lora-s0' writes no checkpoint at step 51; "
            r"its checkpoints are at steps \[0, 2, 4, .*, 46, 48, 50\]",
        ),
        ({"run": "smollm2-lora-s0", "step": -2}, r"'models\.ck\.source\.step': -2 is less than the minimum of 0"),
        ({"run": "smollm2-lora-s0", "step": "50"}, r"'models\.ck\.source\.step': expected integer, got '50'"),
    ],
)
def test_config_rejects_a_checkpoint_the_config_does_not_make(default_config, source, message):
    from shiftwork.config import ConfigError, check_config

    with pytest.raises(ConfigError, match=message):
        check_config(with_model(default_config, source))


def test_config_rejects_a_model_trained_from_its_own_checkpoint(default_config):
    from shiftwork.config import ConfigError, check_config

    with_model(default_config, {"run": "smollm2-lora-s0", "step": 50}, chat=True)
    default_config["trajectory"]["runs"]["smollm2-lora-s0"]["model"] = "ck"
    with pytest.raises(ConfigError, match=r"'models\.ck\.source': model 'ck' is trained from itself .*\(ck -> ck\)"):
        check_config(default_config)


def planned_jobs(config_path):
    """(rule, wildcards, inputs, outputs) of every job a forced dry run of ``config_path``'s
    targets plans, in the order the dry run lists them."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "1", "--configfile", str(config_path)]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    jobs = []
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:)", out):
        rule = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", block)
        if rule:
            field = {k: re.search(rf"^\s+{k}: (.+)$", block, re.M) for k in ("wildcards", "input", "output")}
            jobs.append((rule.group(1), *(m.group(1).split(", ") if m else [] for m in field.values())))
    return jobs


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("run", "step", "trainer", "checkpoints"),
    [
        ("smollm2-lora-s0", 50, "finetune_model", "results/default/trajectory/runs/smollm2-lora-s0/checkpoints"),
        ("two-policy-rl-A-s0", 10, "train_rl", "results/default/organisms/runs/two-policy-rl-A-s0/checkpoints"),
    ],
)
def test_stability_plans_the_checkpoint_after_its_training_run(
    default_config, tmp_path, run, step, trainer, checkpoints
):
    """A checkpoint model in stability.models is prepared from the checkpoints its run's training
    job writes (planned before it) and then evaluated like any model."""
    import yaml

    with_model(default_config, {"run": run, "step": step})
    default_config["stability"]["models"] = ["smollm2-135m-instruct", "ck"]
    (tmp_path / "ck.yaml").write_text(yaml.safe_dump(default_config))
    jobs = planned_jobs(tmp_path / "ck.yaml")
    order = {(rule, wc[0] if wc else ""): i for i, (rule, wc, _, _) in enumerate(jobs)}

    trained = [j for j in jobs if j[0] == trainer and j[1] == [f"run={run}"]]
    assert len(trained) == 1 and trained[0][3] == [checkpoints]
    prepare = [j for j in jobs if j[0] == "prepare_model" and j[1][0] == "model=ck"]
    assert len(prepare) == 1
    _, wildcards, inputs, outputs = prepare[0]
    assert wildcards[1].startswith("source=checkpoint-")
    assert checkpoints in inputs  # the training job's output: planned first
    assert order[("prepare_model", "model=ck")] > order[(trainer, f"run={run}")]
    if trainer == "finetune_model":  # the base model's prepared record
        assert any(p.startswith("results/models/smollm2-135m-instruct/") for p in inputs)
    else:  # the SFT organism RL started from
        assert "results/default/organisms/two-policy/sft" in inputs
    generate = [j for j in jobs if j[0] == "generate_model_responses" and j[1] == ["model=ck"]]
    assert len(generate) == 1 and outputs[0] in generate[0][2]
