"""SFT on a mixture of policy transcripts (TRL's SFTTrainer), then RL on chosen distributions
(TRL's GRPOTrainer) with a correctness reward, saving LoRA checkpoints every k steps."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd
import torch

from ..device import pick_device
from ..models.loading import load_trainable
from ..models.prepare import INFO_FILE, weight_digest
from ..trajectory.finetune import CHECKPOINT_INFO


def _lora(settings: Mapping[str, Any]):
    from peft import LoraConfig

    lora = settings.get("lora", {})
    return LoraConfig(r=int(lora.get("r", 16)), lora_alpha=int(lora.get("alpha", 32)),
                      lora_dropout=float(lora.get("dropout", 0.0)),
                      target_modules=list(lora.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"])),
                      task_type="CAUSAL_LM")


def _common_args(settings: Mapping[str, Any], workdir: Path, seed: int) -> dict[str, Any]:
    cpu = pick_device().type == "cpu"
    return dict(
        output_dir=str(workdir),
        max_steps=int(settings["steps"]),
        per_device_train_batch_size=int(settings.get("batch_size", 8)),
        learning_rate=float(settings["learning_rate"]),
        lr_scheduler_type="constant",
        logging_steps=max(1, int(settings.get("log_every", 5))),
        save_strategy="no",
        report_to=[],
        seed=seed,
        data_seed=seed,
        use_cpu=cpu,
        bf16=not cpu and torch.cuda.is_bf16_supported(),
        disable_tqdm=True,
    )


def _finish(tmp: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def sft(model_dir: str, examples: pd.DataFrame, settings: Mapping[str, Any], out_dir: str, seed: int = 0) -> dict:
    """Supervised fine-tuning on prompt/completion pairs (loss on the completion only); LoRA
    merged into the weights, so the result is a plain prepared model directory."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    out = Path(out_dir)
    model, tok, tmp = load_trainable(model_dir, out)
    data = Dataset.from_pandas(examples[["prompt", "completion"]].reset_index(drop=True))
    args = SFTConfig(**_common_args(settings, tmp / "trainer", seed), completion_only_loss=True,
                     max_length=int(settings.get("max_length", 128)), packing=False)
    peft_config = _lora(settings) if settings.get("method", "lora") == "lora" else None
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok, peft_config=peft_config)
    trainer.train()
    trained = trainer.model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    trained.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(tmp / "trainer", ignore_errors=True)
    history = [h for h in trainer.state.log_history if "loss" in h]
    info = {"name": f"sft:{Path(model_dir).name}", "chat": False, "model_type": trained.config.model_type,
            "weight_digest": weight_digest(tmp), "base": str(model_dir), "train_log": history}
    (tmp / INFO_FILE).write_text(json.dumps(info, indent=1))
    _finish(tmp, out)
    return info


def rl(sft_dir: str, prompts: pd.DataFrame, reward: Callable[[str, str], float], settings: Mapping[str, Any],
       out_dir: str, seed: int = 0) -> list[int]:
    """GRPO on ``prompts`` (columns prompt, answer) with ``reward(completion, answer)``; a LoRA
    adapter checkpoint at step 0 and every ``checkpoint_every`` steps. Returns the steps."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ..trajectory.schedule import checkpoint_steps

    out = Path(out_dir)
    model, tok, tmp = load_trainable(sft_dir, out, padding_side="left")
    data = Dataset.from_pandas(prompts[["prompt", "answer"]].reset_index(drop=True))

    def correctness(completions, answer, **_):
        return [float(reward(c, a)) for c, a in zip(completions, answer)]

    steps, every = int(settings["steps"]), int(settings["checkpoint_every"])
    args = GRPOConfig(**_common_args(settings, tmp / "trainer", seed),
                      num_generations=int(settings.get("num_generations", 4)),
                      max_completion_length=int(settings.get("max_completion_length", 24)),
                      temperature=float(settings.get("temperature", 1.0)), beta=float(settings.get("beta", 0.0)))

    def save(m, step: int) -> None:
        target = tmp / f"checkpoint-{step}"
        m.save_pretrained(target)
        (target / CHECKPOINT_INFO).write_text(json.dumps({"step": step, "base_model": str(sft_dir)}))

    class SaveAt(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % every == 0 or state.global_step == steps:
                save(model, state.global_step)

    trainer = GRPOTrainer(model=model, reward_funcs=correctness, args=args, train_dataset=data,
                          processing_class=tok, peft_config=_lora(settings), callbacks=[SaveAt()])
    save(trainer.model, 0)
    trainer.train()
    history = [h for h in trainer.state.log_history if "reward" in h or "loss" in h]
    (tmp / "train_log.json").write_text(json.dumps(history, indent=1))
    shutil.rmtree(tmp / "trainer", ignore_errors=True)
    _finish(tmp, out)
    return checkpoint_steps(steps, every)
