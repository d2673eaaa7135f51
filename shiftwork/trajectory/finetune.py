"""Pattern-based fine-tuning: each example becomes a prompt pattern whose next token is the
label's verbaliser; the loss is the language-model loss on that one token. LoRA through peft
by default, full fine-tuning as an option; the Hugging Face Trainer runs the loop and saves
a checkpoint every ``checkpoint_every`` steps (and one before the first step). A killed job
resumes from its last resumable state (:mod:`shiftwork.models.resume`), saved every
``resume_every`` steps (default ``checkpoint_every``)."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from shiftwork.device import pick_device
from shiftwork.models import resume
from shiftwork.models.checkpoints import CHECKPOINT_INFO
from shiftwork.models.loading import load_trainable
from shiftwork.models.trainer_args import with_trainer_args
from shiftwork.precision import training_dtype
from shiftwork.progress import report_training
from shiftwork.trajectory.schedule import checkpoint_steps
from shiftwork.trajectory.tasks import PATTERN, VERBALISERS, next_token_logits, render, verbaliser_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def training_examples(
    tokenizer: PreTrainedTokenizerBase,
    train: pd.DataFrame,
    max_length: int = 256,
    pattern: str = PATTERN,
    verbalisers: Mapping[str, str] = VERBALISERS,
) -> list[dict[str, list[int]]]:
    """Each example in ``pattern`` followed by its label's verbaliser token; only that token is
    a target. A prompt longer than ``max_length - 1`` tokens keeps its end (the question)."""
    ids = verbaliser_ids(tokenizer, verbalisers)
    out = []
    for row in train.itertuples(index=False):
        text = render(row.premise, row.hypothesis, pattern)
        prompt = tokenizer(text, add_special_tokens=True).input_ids[-(max_length - 1) :]
        out.append({"input_ids": prompt + [ids[row.label]]})
    return out


class PadCollator:
    """Left-pad a batch, so that every row's verbaliser token is its last token."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(f["input_ids"]) for f in features)
        batch = {"input_ids": [], "attention_mask": []}
        for f in features:
            pad = width - len(f["input_ids"])
            batch["input_ids"].append([self.pad_id] * pad + f["input_ids"])
            batch["attention_mask"].append([0] * pad + [1] * len(f["input_ids"]))
        return {k: torch.tensor(v) for k, v in batch.items()}


def verbaliser_loss(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of each row's last token (its verbaliser) given the pattern before it.

    The same loss as the language-model loss with every position but the verbaliser's masked,
    but the output head runs at one position per row instead of all of them: on SmolLM2-135M
    that head (49,152 x 576) is a fifth of the forward pass of a 40-token pattern."""
    ids = inputs["input_ids"]
    logits = next_token_logits(model, ids, inputs["attention_mask"], back=1)
    return torch.nn.functional.cross_entropy(logits.float(), ids[:, -1])


def finetune(
    model_dir: str,
    train: pd.DataFrame,
    settings: Mapping[str, Any],
    out_dir: str,
    seed: int = 0,
    pattern: str = PATTERN,
    verbalisers: Mapping[str, str] = VERBALISERS,
) -> list[int]:
    """Fine-tune and write ``out_dir/checkpoint-{step}`` for every step of :func:`checkpoint_steps`.
    ``settings`` is a run's ``finetune`` section with its schedule in steps
    (:func:`shiftwork.trajectory.config.finetune_schedule`); ``seed`` draws the ``n_train`` examples and
    seeds the Trainer. Returns the checkpoint steps. The directory appears complete or not at all."""
    from transformers import TrainingArguments, set_seed

    set_seed(seed)
    out = Path(out_dir)
    device = pick_device()
    method = settings["method"]
    model, tok, _ = load_trainable(model_dir, out, dtype=training_dtype(settings["dtype"], method == "lora", device))
    model = _adapted(model, settings)
    examples = training_examples(tok, _drawn(train, settings, seed), int(settings["max_length"]), pattern, verbalisers)
    steps = int(settings["steps"])
    every = int(settings["checkpoint_every"])
    # the work folder beside the output keeps the Trainer's resumable state and the checkpoints
    # written so far (staged), so a killed job continues where it stopped
    work, resume_from = resume.open_work(
        out,
        {
            "settings": resume.job_settings(settings),
            "seed": seed,
            "base_model": resume.model_identity(model_dir),
            "examples": examples,
            "pattern": pattern,
            "verbalisers": dict(verbalisers),
        },
    )
    tmp = resume.staged(work, resume.step_of(resume_from) if resume_from else None)
    args = TrainingArguments(**trainer_arguments(settings, work / resume.TRAINER_DIR, seed, device.type))
    save = _saver(model, tmp, {"method": method, "base_model": str(model_dir)})
    if resume_from is None:
        save(0)
    trainer = _pattern_trainer(model, args, examples, PadCollator(tok.pad_token_id), _save_at(save, every, steps))
    report_training(trainer, "finetune")
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    history = [h for h in trainer.state.log_history if "loss" in h]
    (tmp / "train_log.json").write_text(json.dumps(history, indent=1))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    resume.finish(work)
    return checkpoint_steps(steps, every)


def _adapted(model: torch.nn.Module, settings: Mapping[str, Any]) -> torch.nn.Module:
    """``model`` with LoRA adapters (``method: lora``, through peft) or as it is (``method: full``)."""
    method = settings["method"]
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = settings["lora"]
        return get_peft_model(
            model,
            LoraConfig(
                r=int(lora["r"]),
                lora_alpha=int(lora["alpha"]),
                lora_dropout=float(lora["dropout"]),
                target_modules=list(lora["target_modules"]),
                task_type="CAUSAL_LM",
            ),
        )
    if method != "full":
        raise ValueError(f"finetune method must be 'lora' or 'full', got {method!r}")
    return model


def _drawn(train: pd.DataFrame, settings: Mapping[str, Any], seed: int) -> pd.DataFrame:
    """The ``n_train`` training examples (all of ``train`` when absent or larger) drawn with ``seed``."""
    n_train = int(settings.get("n_train", len(train)))
    return train.sample(n=min(n_train, len(train)), random_state=seed).reset_index(drop=True)


def _saver(model: torch.nn.Module, folder: Path, info: Mapping[str, str]) -> Callable[[int], None]:
    """Saves ``model`` as ``folder/checkpoint-<step>``, with its step and ``info`` (method, base model)."""

    def save(step: int) -> None:
        target = folder / f"checkpoint-{step}"
        model.save_pretrained(target)
        (target / CHECKPOINT_INFO).write_text(json.dumps({"step": step, **info}))

    return save


def _save_at(save: Callable[[int], None], every: int, steps: int):
    """The Trainer callback that saves a checkpoint every ``every`` steps and at the last, ``steps``."""
    from transformers import TrainerCallback

    class SaveAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % every == 0 or state.global_step == steps:
                save(state.global_step)

    return SaveAt()


def _pattern_trainer(
    model: torch.nn.Module, args, examples: list[dict[str, list[int]]], collator: PadCollator, callback
):
    """A Hugging Face Trainer whose loss is :func:`verbaliser_loss`."""
    from transformers import Trainer

    class PatternTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return verbaliser_loss(model, inputs)

    return PatternTrainer(model=model, args=args, train_dataset=examples, data_collator=collator, callbacks=[callback])


def trainer_arguments(settings: Mapping[str, Any], output_dir: Path, seed: int, device_type: str) -> dict[str, Any]:
    """The ``TrainingArguments`` of a run's ``finetune`` settings (schedule in steps), with its
    ``trainer_args`` (further ``TrainingArguments`` fields) merged in."""
    steps = int(settings["steps"])
    every = int(settings["checkpoint_every"])
    fixed = dict(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=int(settings["batch_size"]),
        learning_rate=float(settings["learning_rate"]),
        lr_scheduler_type=settings["scheduler"],
        warmup_steps=math.ceil(float(settings["warmup_ratio"]) * steps),
        weight_decay=float(settings["weight_decay"]),
        gradient_checkpointing=bool(settings.get("gradient_checkpointing", False)),
        logging_steps=max(1, every),
        **resume.trainer_save_args(int(settings.get("resume_every", every))),
        report_to=[],
        seed=seed,
        data_seed=seed,
        use_cpu=device_type == "cpu",
        # bfloat16 weights: LoRA adapters stay float32 (peft upcasts them) under bf16 autocast
        bf16=device_type == "cuda"
        and training_dtype(settings["dtype"], settings.get("method") == "lora", device_type) == "bfloat16",
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    return with_trainer_args(settings, fixed, "TrainingArguments")
