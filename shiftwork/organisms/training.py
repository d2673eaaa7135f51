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
from dataclasses import dataclass
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
from shiftwork.organisms.convergence import Criterion, criterion
from shiftwork.precision import training_dtype
from shiftwork.progress import report_training

PROGRESS_FILE = "progress.json"
"""In an RL job's resume folder: the records and logs of the stages it has finished."""
STAGES_FILE = "stages.json"
"""Written next to the RL checkpoints: each stage's first and last step, its budget and whether it
stopped by convergence (:mod:`shiftwork.organisms.convergence`) or by spending the budget."""
DEFAULT_LOSS_TYPE = "dapo"
"""GRPO's loss where ``organisms.rl.loss_type`` is absent: TRL 1.16's default, named so that a TRL
upgrade that changes its default does not change a run (and absent from the schema's defaults, so
that naming it changed no existing job's settings)."""


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
    work, resume_from = resume.open_work(
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
    names: Sequence[str] = (),
) -> list[int]:
    """GRPO with ``reward(completion, answer, reward_format, names)`` (``names``: the setting's
    policies, which ``reward_format: template`` needs), stage by stage: ``stages`` lists (prompts with
    columns prompt and answer, number of steps). A checkpoint is written at step 0 (the SFT model),
    every ``checkpoint_every`` steps and at the end of every stage, as ``checkpoint-<step>`` (a LoRA
    adapter, or a full model for ``method: full``). With ``settings["converge"]`` a stage's steps
    are a budget: it ends at the first step where the reward has converged
    (:mod:`shiftwork.organisms.convergence`), and the next stage starts there. Each stage's end
    and how it ended go to :data:`STAGES_FILE`. A killed job resumes (:mod:`shiftwork.models.resume`):
    finished stages from their recorded ends, the stage it was in from its Trainer's last saved
    state (every ``resume_every`` steps, default ``checkpoint_every``). Returns the checkpoint steps."""
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
    work, _ = resume.open_work(out, _rl_identity(sft_dir, stages, reward, settings, seed))
    record, history = _finished_stages(work)
    offset = record[-1]["end"] if record else 0
    checkpoints = _staged_checkpoints(work, sft_dir, record, offset)
    if record:
        model = _restore(sft_dir, checkpoints.folder / f"checkpoint-{offset}", lora, _dtype(settings))
    correctness = _correctness(reward, answer_format, tuple(names))
    job = _Job(sft_dir, settings, seed, tok, work, checkpoints, every, lora, correctness, criterion(settings))
    for number, (prompts, steps) in enumerate(stages):
        steps = int(steps)
        if steps < 1:
            raise ValueError(f"RL stage {number}: steps must be >= 1, got {steps}")
        if number < len(record):
            continue
        model, logged, done = _run_stage(job, number, prompts, steps, model, offset)
        history += _stage_history(logged, number, offset)
        record.append(done)
        LOGGER.info(
            "RL stage %d: %s at step %d (budget %d steps)",
            number,
            "converged" if done["converged"] else "budget spent",
            done["end"],
            steps,
        )
        offset = done["end"]
        resume.write_json(work / PROGRESS_FILE, {"record": record, "history": history})
        shutil.rmtree(_trainer_dir(work, number), ignore_errors=True)
    (checkpoints.folder / "train_log.json").write_text(json.dumps(history, indent=1))
    (checkpoints.folder / STAGES_FILE).write_text(json.dumps(record, indent=1))
    _finish(checkpoints.folder, out)
    resume.finish(work)
    return sorted(set(checkpoints.steps))


def _rl_identity(
    sft_dir: str,
    stages: Sequence[tuple[pd.DataFrame, int]],
    reward: Callable[[str, str], float],
    settings: Mapping[str, Any],
    seed: int,
) -> dict[str, Any]:
    """What a resumed RL job must share with the one that saved its state."""
    return {
        "settings": resume.job_settings(settings),
        "seed": seed,
        "base_model": resume.model_identity(sft_dir),
        "stages": [{"prompts": p[["prompt", "answer"]], "steps": int(n)} for p, n in stages],
        "reward": f"{reward.__module__}.{reward.__qualname__}",
    }


def _finished_stages(work: Path) -> tuple[list[dict], list[dict]]:
    """The records and the logs of the stages a killed job had finished (none on a fresh start)."""
    progress = json.loads((work / PROGRESS_FILE).read_text()) if (work / PROGRESS_FILE).exists() else {}
    return progress.get("record", []), progress.get("history", [])


def _trainer_dir(work: Path, number: int) -> Path:
    """Where the Trainer of stage ``number`` saves its resumable state."""
    return work / resume.TRAINER_DIR / f"stage-{number}"


class _Checkpoints:
    """The checkpoints an RL job has staged in ``folder`` (its output-to-be), and their steps."""

    def __init__(self, folder: Path, base_model: str, steps: list[int]) -> None:
        self.folder = folder
        self.base_model = base_model
        self.steps = steps

    def save(self, model, step: int) -> None:
        """Write ``model`` (a LoRA adapter or a full model) as ``checkpoint-<step>``."""
        target = self.folder / f"checkpoint-{step}"
        model.save_pretrained(target)
        (target / CHECKPOINT_INFO).write_text(json.dumps({"step": step, "base_model": str(self.base_model)}))
        self.steps.append(step)


def _staged_checkpoints(work: Path, sft_dir: str, record: list[dict], offset: int) -> _Checkpoints:
    """The staged checkpoints to continue from: none on a fresh start; when resuming, those up to
    the step the job resumes from (the end of its last finished stage, or the Trainer state saved
    in the stage it was in)."""
    current = resume.last_checkpoint(_trainer_dir(work, len(record)))
    resuming = bool(record or current)
    resumed = offset + current[1] if current else offset
    folder = resume.staged(work, resumed if resuming else None)
    steps: list[int] = [s for s in resume.staged_steps(folder) if s <= resumed] if resuming else []
    if resuming:
        LOGGER.info(
            "resuming from step %d (stage %d; %s)", resumed, len(record), current[0] if current else "its start"
        )
    return _Checkpoints(folder, sft_dir, steps)


def _correctness(
    reward: Callable[..., float], answer_format: str, names: tuple[str, ...]
) -> Callable[..., list[float]]:
    """GRPO's reward function: ``reward`` of each completion against its answer. TRL names the
    logged reward after the function (``correctness``)."""

    def correctness(completions, answer, **_):
        return [float(reward(c, a, answer_format, names)) for c, a in zip(completions, answer)]

    return correctness


@dataclass(frozen=True)
class _Job:
    """What every stage of one RL job shares."""

    sft_dir: str
    settings: Mapping[str, Any]
    seed: int
    tok: Any
    work: Path
    checkpoints: _Checkpoints
    every: int
    lora: bool
    correctness: Callable[..., list[float]]
    until: Criterion | None
    """When a stage has converged (None: every stage spends its budget)."""

    def restore(self, step: int):
        """The trainable model of the staged checkpoint of ``step``."""
        return _restore(self.sft_dir, self.checkpoints.folder / f"checkpoint-{step}", self.lora, _dtype(self.settings))


def _run_stage(job: _Job, number: int, prompts: pd.DataFrame, steps: int, model, offset: int):
    """Stage ``number`` from step ``offset`` for at most ``steps`` steps, from the Trainer state
    it saved if a killed job had begun it: (the model it ends with, the Trainer's log, its record).
    A resumed stage whose rewards had already converged at the saved state does not train."""
    trainer_dir = _trainer_dir(job.work, number)
    found = resume.last_checkpoint(trainer_dir)
    # the convergence test reads every reward of the stage, those before the resumed step too
    prior = resume.logged_history(found[0]) if found else []
    rewards: list[float] = [float(h["reward"]) for h in prior if "reward" in h]
    stopped: list[int] = []
    until = job.until
    if found and until is not None and until.met(rewards):
        stopped.append(offset + found[1])  # it had converged at the saved step
    trainer = _grpo_trainer(job, number, prompts, steps, model, offset, rewards, stopped)
    report_training(trainer, f"RL stage {number}")
    if number == 0 and not found:
        job.checkpoints.save(trainer.model, 0)
    if stopped:
        model = job.restore(stopped[0])
        logged, global_step = prior, found[1]
    else:
        trainer.train(resume_from_checkpoint=str(found[0]) if found else None)
        model = trainer.model
        logged, global_step = trainer.state.log_history, int(trainer.state.global_step)
    finished = stopped[0] if stopped else offset + global_step
    done = {
        "stage": number,
        "start": offset,
        "end": finished,
        "budget": steps,
        "converged": bool(stopped),
        "windows": list(until.windows(rewards)) if until is not None and until.windows(rewards) else None,
    }
    return model, logged, done


def _grpo_trainer(
    job: _Job,
    number: int,
    prompts: pd.DataFrame,
    steps: int,
    model,
    offset: int,
    rewards: list[float],
    stopped: list[int],
):
    """TRL's GRPOTrainer for stage ``number`` (its seed the job's plus ``number``; LoRA adapters
    added in the first stage only), with the callbacks that save checkpoints and stop at
    convergence."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    data = Dataset.from_pandas(prompts[["prompt", "answer"]].reset_index(drop=True))
    args = GRPOConfig(**_grpo_args(job, number, steps))
    anchor_reference(model, job.sft_dir, job.lora)
    return GRPOTrainer(
        model=model,
        reward_funcs=job.correctness,
        args=args,
        train_dataset=data,
        processing_class=job.tok,
        peft_config=_lora(job.settings) if job.lora and number == 0 else None,
        callbacks=_stage_callbacks(job, offset, offset + steps, rewards, stopped),
    )


def _grpo_args(job: _Job, number: int, steps: int) -> dict[str, Any]:
    """The GRPOConfig fields of stage ``number`` (``steps`` steps, a log line every step)."""
    settings = job.settings
    return with_trainer_args(
        settings,
        {
            **_common_args(
                {**settings, "steps": steps},
                _trainer_dir(job.work, number),
                job.seed + number,
                int(settings.get("resume_every") or job.every),
            ),
            "logging_steps": 1,
            "num_generations": int(settings["num_generations"]),
            "max_completion_length": int(settings["max_completion_length"]),
            "temperature": float(settings["temperature"]),
            "beta": float(settings["beta"]),
            "loss_type": str(settings.get("loss_type") or DEFAULT_LOSS_TYPE),
        },
        "GRPOConfig",
    )


def _stage_callbacks(job: _Job, offset: int, end: int, rewards: list[float], stopped: list[int]) -> list:
    """The callbacks of a stage that runs from step ``offset`` to at most ``end``: one saves a
    checkpoint every ``checkpoint_every`` steps and at ``end``; the other appends each logged mean
    reward to ``rewards`` and, once the job's convergence criterion holds on them, records the step
    in ``stopped``, saves it and stops the stage."""
    from transformers import TrainerCallback

    checkpoints, until = job.checkpoints, job.until

    class SaveAt(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            step = offset + state.global_step
            if step % job.every == 0 or step == end:
                checkpoints.save(model, step)

    class StopAtConvergence(TrainerCallback):
        def on_log(self, args, state, control, logs=None, model=None, **kwargs):
            if until is None or "reward" not in (logs or {}) or stopped:
                return
            rewards.append(float(logs["reward"]))
            if until.met(rewards):
                step = offset + state.global_step
                stopped.append(step)
                if not checkpoints.steps or checkpoints.steps[-1] != step:
                    checkpoints.save(model, step)
                control.should_training_stop = True

    return [SaveAt(), StopAtConvergence()]


def _stage_history(logged: list[dict], number: int, offset: int) -> list[dict]:
    """The stage's reward and loss log lines, each with its stage and its job-wide step."""
    return [
        {**h, "stage": number, "step": offset + int(h.get("step", 0))} for h in logged if "reward" in h or "loss" in h
    ]


def anchor_reference(model, sft_dir: str, lora: bool) -> None:
    """Make the SFT model the KL reference of every RL stage, resumed or not. TRL's GRPO builds the
    reference of a full model from the path in its config (``_name_or_path``), which is the SFT
    model's for a model trained on from it, but a staged checkpoint's for one restored from there
    (a resumed job, or the stage after one that stopped at convergence); with LoRA the reference
    is the model with its adapter switched off, the SFT model already."""
    if not lora:
        model.config._name_or_path = str(sft_dir)


def _restore(base_dir: str, checkpoint: Path, lora: bool, dtype: str):
    """The trainable model a resumed RL job continues from: ``base_dir`` with the LoRA adapter of
    ``checkpoint``, or the full model there."""
    from transformers import AutoModelForCausalLM

    if not lora:
        return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=getattr(torch, dtype))
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=getattr(torch, dtype))
    return PeftModel.from_pretrained(base, str(checkpoint), is_trainable=True)
