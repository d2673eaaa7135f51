"""SFT on a mixture of policy transcripts (TRL's SFTTrainer), then RL on chosen distributions
(TRL's GRPOTrainer) with a correctness reward, saving checkpoints every k steps.

Both take ``method: lora`` (adapters through peft; SFT merges them into the weights) or
``method: full`` (every weight; what a model trained from scratch needs). RL may run in stages, each
on its own prompts (the temporal setting trains on 2025, then on 2026); checkpoint steps count on
across stages."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from shiftwork.device import pick_device
from shiftwork.logs import LOGGER
from shiftwork.models import resume
from shiftwork.models.checkpoints import CHECKPOINT_INFO
from shiftwork.models.loading import load_trainable
from shiftwork.models.prepare import INFO_FILE, weight_digest
from shiftwork.models.trainer_args import with_trainer_args
from shiftwork.organisms.convergence import criterion
from shiftwork.precision import training_dtype
from shiftwork.progress import report_training

PROGRESS_FILE = "progress.json"
"""In an RL job's resume folder: the records and logs of the stages it has finished."""
STAGES_FILE = "stages.json"
"""Written next to the RL checkpoints: each stage's first and last step, its budget and whether it
stopped by convergence (:mod:`shiftwork.organisms.convergence`) or by spending the budget."""


def _lora(settings: Mapping[str, Any]):
    from peft import LoraConfig

    lora = settings["lora"]
    return LoraConfig(
        r=int(lora["r"]),
        lora_alpha=int(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=list(lora["target_modules"]),
        task_type="CAUSAL_LM",
    )


def _common_args(settings: Mapping[str, Any], workdir: Path, seed: int, resume_every: int) -> dict[str, Any]:
    """The arguments SFT and RL share; the Trainer saves resumable state into ``workdir`` every
    ``resume_every`` steps (:mod:`shiftwork.models.resume`)."""
    cpu = pick_device().type == "cpu"
    return dict(
        output_dir=str(workdir),
        max_steps=int(settings["steps"]),
        per_device_train_batch_size=int(settings["batch_size"]),
        learning_rate=float(settings["learning_rate"]),
        lr_scheduler_type=str(settings["scheduler"]),
        warmup_steps=int(settings["warmup_steps"]),
        max_grad_norm=float(settings["max_grad_norm"]),
        weight_decay=float(settings["weight_decay"]),
        logging_steps=int(settings["log_every"]),
        **resume.trainer_save_args(resume_every),
        report_to=[],
        seed=seed,
        data_seed=seed,
        use_cpu=cpu,
        # TRL turns activation checkpointing on by default; it trades compute for memory, which a
        # small model does not need (it made SFT steps of the scratch model about 3x slower); a
        # 27B model on one 80 GB GPU does (organisms.resources)
        gradient_checkpointing=bool(settings["gradient_checkpointing"]),
        bf16=not cpu and torch.cuda.is_bf16_supported(),
        disable_tqdm=True,
    )


def _quiet_datasets() -> None:
    """No per-example progress bars from ``datasets`` in the job logs."""
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()


def _finish(tmp: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def sft(model_dir: str, examples: pd.DataFrame, settings: Mapping[str, Any], out_dir: str, seed: int = 0) -> dict:
    """Supervised fine-tuning on prompt/completion pairs (loss on the completion only); LoRA
    merged into the weights, so the result is a plain prepared model directory."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    _quiet_datasets()
    out = Path(out_dir)
    model, tok, tmp = load_trainable(model_dir, out, dtype=_dtype(settings))
    table = examples[["prompt", "completion"]].reset_index(drop=True)
    data = Dataset.from_pandas(table)
    work, resume_from = resume.start(
        out,
        {
            "settings": resume.job_settings(settings),
            "seed": seed,
            "base_model": resume.model_identity(model_dir),
            "data": table,
        },
    )
    every = int(settings.get("resume_every") or max(1, int(settings["steps"]) // 10))
    args = SFTConfig(
        **with_trainer_args(
            settings,
            {
                **_common_args(settings, work / resume.TRAINER_DIR, seed, every),
                "completion_only_loss": True,
                "max_length": int(settings["max_length"]),
                "packing": False,
            },
            "SFTConfig",
        )
    )
    peft_config = _lora(settings) if _method(settings) == "lora" else None
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tok,
        peft_config=peft_config,
    )
    report_training(trainer, "SFT")
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    trained = trainer.model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    trained.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    history = [h for h in trainer.state.log_history if "loss" in h]
    info = {
        "name": f"sft:{Path(model_dir).name}",
        "chat": False,
        "model_type": trained.config.model_type,
        "weight_digest": weight_digest(tmp),
        "base": str(model_dir),
        "train_log": history,
    }
    (tmp / INFO_FILE).write_text(json.dumps(info, indent=1))
    _finish(tmp, out)
    resume.finish(work)
    return info


def _dtype(settings: Mapping[str, Any]) -> str:
    """The weights' type while training (``auto``: :func:`shiftwork.precision.training_dtype`)."""
    return training_dtype(str(settings["dtype"]), _method(settings) == "lora", pick_device())


def _method(settings: Mapping[str, Any]) -> str:
    method = settings["method"]
    if method not in ("lora", "full"):
        raise ValueError(f"training method must be 'lora' or 'full', got {method!r}")
    return method


def rl(
    sft_dir: str,
    stages: Sequence[tuple[pd.DataFrame, int]],
    reward: Callable[[str, str], float],
    settings: Mapping[str, Any],
    out_dir: str,
    seed: int = 0,
) -> list[int]:
    """GRPO with ``reward(completion, answer)``, stage by stage: ``stages`` lists (prompts with
    columns prompt and answer, number of steps). A checkpoint is written at step 0 (the SFT model),
    every ``checkpoint_every`` steps and at the end of every stage, as ``checkpoint-<step>`` (a LoRA
    adapter, or a full model for ``method: full``). With ``settings["converge"]`` a stage's steps
    are a budget: it ends at the first step where the reward has converged
    (:mod:`shiftwork.organisms.convergence`), and the next stage starts there. Each stage's end
    and how it ended go to :data:`STAGES_FILE`. A killed job resumes (:mod:`shiftwork.models.resume`):
    finished stages from their recorded ends, the stage it was in from its Trainer's last saved
    state (every ``resume_every`` steps, default ``checkpoint_every``). Returns the checkpoint steps."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    if not stages:
        raise ValueError("rl needs at least one stage")
    _quiet_datasets()
    out = Path(out_dir)
    model, tok, _ = load_trainable(sft_dir, out, padding_side="left", dtype=_dtype(settings))
    every = int(settings["checkpoint_every"])
    if every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {every}")
    lora = _method(settings) == "lora"
    answer_format = str(settings["reward_format"])
    work, _ = resume.start(
        out,
        {
            "settings": resume.job_settings(settings),
            "seed": seed,
            "base_model": resume.model_identity(sft_dir),
            "stages": [{"prompts": p[["prompt", "answer"]], "steps": int(n)} for p, n in stages],
            "reward": f"{reward.__module__}.{reward.__qualname__}",
        },
    )
    # finished stages (their records and logs), then the stage a killed job was in
    progress = json.loads((work / PROGRESS_FILE).read_text()) if (work / PROGRESS_FILE).exists() else {}
    record: list[dict] = progress.get("record", [])
    history: list[dict] = progress.get("history", [])
    offset = record[-1]["end"] if record else 0
    current = resume.last_checkpoint(work / resume.TRAINER_DIR / f"stage-{len(record)}")
    resumed = offset + current[1] if current else offset
    tmp = resume.staged(work, resumed if record or current else None)
    saved: list[int] = [s for s in resume.staged_steps(tmp) if s <= resumed] if record or current else []
    if record or current:
        LOGGER.info(
            "resuming from step %d (stage %d; %s)", resumed, len(record), current[0] if current else "its start"
        )
    if record:
        model = _restore(sft_dir, tmp / f"checkpoint-{offset}", lora, _dtype(settings))

    def correctness(completions, answer, **_):
        return [float(reward(c, a, answer_format)) for c, a in zip(completions, answer)]

    def save(m, step: int) -> None:
        target = tmp / f"checkpoint-{step}"
        m.save_pretrained(target)
        (target / CHECKPOINT_INFO).write_text(json.dumps({"step": step, "base_model": str(sft_dir)}))
        saved.append(step)

    until = criterion(settings)
    for number, (prompts, steps) in enumerate(stages):
        steps = int(steps)
        if steps < 1:
            raise ValueError(f"RL stage {number}: steps must be >= 1, got {steps}")
        if number < len(record):
            continue
        end = offset + steps
        trainer_dir = work / resume.TRAINER_DIR / f"stage-{number}"
        found = resume.last_checkpoint(trainer_dir)
        # the convergence test reads every reward of the stage, those before the resumed step too
        prior = resume.logged_history(found[0]) if found else []
        rewards: list[float] = [float(h["reward"]) for h in prior if "reward" in h]
        stopped: list[int] = []
        if found and until is not None and until.met(rewards):
            stopped.append(offset + found[1])  # it had converged at the saved step

        class SaveAt(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, _offset=offset, _end=end, **kwargs):
                step = _offset + state.global_step
                if step % every == 0 or step == _end:
                    save(model, step)

        class StopAtConvergence(TrainerCallback):
            """Stops the stage once ``until`` holds on its per-step mean rewards, saving that step."""

            def on_log(
                self,
                args,
                state,
                control,
                logs=None,
                model=None,
                _offset=offset,
                _rewards=rewards,
                _stopped=stopped,
                **kwargs,
            ):
                if until is None or "reward" not in (logs or {}) or _stopped:
                    return
                _rewards.append(float(logs["reward"]))
                if until.met(_rewards):
                    step = _offset + state.global_step
                    _stopped.append(step)
                    if not saved or saved[-1] != step:
                        save(model, step)
                    control.should_training_stop = True

        data = Dataset.from_pandas(prompts[["prompt", "answer"]].reset_index(drop=True))
        args = GRPOConfig(
            **with_trainer_args(
                settings,
                {
                    **_common_args(
                        {**settings, "steps": steps},
                        trainer_dir,
                        seed + number,
                        int(settings.get("resume_every") or every),
                    ),
                    "logging_steps": 1,
                    "num_generations": int(settings["num_generations"]),
                    "max_completion_length": int(settings["max_completion_length"]),
                    "temperature": float(settings["temperature"]),
                    "beta": float(settings["beta"]),
                },
                "GRPOConfig",
            )
        )
        first_lora = lora and number == 0
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=correctness,
            args=args,
            train_dataset=data,
            processing_class=tok,
            peft_config=_lora(settings) if first_lora else None,
            callbacks=[SaveAt(), StopAtConvergence()],
        )
        report_training(trainer, f"RL stage {number}")
        if number == 0 and not found:
            save(trainer.model, 0)
        if stopped:
            model = _restore(sft_dir, tmp / f"checkpoint-{stopped[0]}", lora, _dtype(settings))
            logged, global_step = prior, found[1]
        else:
            trainer.train(resume_from_checkpoint=str(found[0]) if found else None)
            model = trainer.model
            logged, global_step = trainer.state.log_history, int(trainer.state.global_step)
        history += [
            {**h, "stage": number, "step": offset + int(h.get("step", 0))}
            for h in logged
            if "reward" in h or "loss" in h
        ]
        finished = stopped[0] if stopped else offset + global_step
        record.append(
            {
                "stage": number,
                "start": offset,
                "end": finished,
                "budget": steps,
                "converged": bool(stopped),
                "windows": list(until.windows(rewards)) if until is not None and until.windows(rewards) else None,
            }
        )
        LOGGER.info(
            "RL stage %d: %s at step %d (budget %d steps)",
            number,
            "converged" if stopped else "budget spent",
            finished,
            steps,
        )
        offset = finished
        resume.write_json(work / PROGRESS_FILE, {"record": record, "history": history})
        shutil.rmtree(trainer_dir, ignore_errors=True)
    (tmp / "train_log.json").write_text(json.dumps(history, indent=1))
    (tmp / STAGES_FILE).write_text(json.dumps(record, indent=1))
    _finish(tmp, out)
    resume.finish(work)
    return sorted(set(saved))


def _restore(base_dir: str, checkpoint: Path, lora: bool, dtype: str):
    """The trainable model a resumed RL job continues from: ``base_dir`` with the LoRA adapter of
    ``checkpoint``, or the full model there."""
    from transformers import AutoModelForCausalLM

    if not lora:
        return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=getattr(torch, dtype))
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=getattr(torch, dtype))
    return PeftModel.from_pretrained(base, str(checkpoint), is_trainable=True)
