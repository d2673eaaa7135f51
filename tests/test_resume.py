"""Resumable training (shiftwork.models.resume): the work folder's bookkeeping, and a real
trajectory fine-tuning job killed mid-run that resumes from its last saved step and ends where
an uninterrupted run ends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from shiftwork.models import resume

ROOT = Path(__file__).resolve().parent.parent


def test_fingerprint_mismatch_starts_fresh_and_match_resumes(tmp_path, caplog) -> None:
    out = tmp_path / "run" / "checkpoints"
    folder, last = resume.open_work(out, {"settings": {"lr": 1}, "seed": 0})
    assert folder == tmp_path / "run" / "checkpoints.resume" and last is None
    # two checkpoints, the later one cut short by a kill (no trainer_state.json)
    for step, complete in ((4, True), (6, True), (8, False)):
        ck = folder / resume.TRAINER_DIR / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        if complete:
            (ck / "trainer_state.json").write_text("{}")
    caplog.set_level("INFO", logger="shiftwork")
    folder, last = resume.open_work(out, {"seed": 0, "settings": {"lr": 1}})
    assert last == folder / resume.TRAINER_DIR / "checkpoint-6"
    assert "resuming from step 6" in caplog.text
    caplog.clear()
    folder, last = resume.open_work(out, {"settings": {"lr": 2}, "seed": 0})
    assert last is None and not (folder / resume.TRAINER_DIR).exists()
    assert "changed: settings" in caplog.text and "starting from step 0" in caplog.text
    # how often state is saved is no part of what training does
    same = resume.state_fingerprint({"settings": resume.job_settings({"lr": 1, "resume_every": 5})})
    assert same == resume.state_fingerprint({"settings": {"lr": 1}})
    assert same != resume.state_fingerprint({"settings": {"lr": 2}})
    table = pd.DataFrame({"prompt": ["a", "b"], "answer": ["1", "2"]})
    assert resume.state_fingerprint({"d": table}) != resume.state_fingerprint({"d": table.assign(answer=["1", "3"])})


def test_staged_keeps_checkpoints_up_to_the_resumed_step(tmp_path) -> None:
    for step in (0, 2, 4, 6):
        (tmp_path / "staged" / f"checkpoint-{step}").mkdir(parents=True)
    out = resume.staged(tmp_path, 4)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-0", "checkpoint-2", "checkpoint-4"]
    out = resume.staged(tmp_path, None)
    assert list(out.iterdir()) == []
    assert resume.trainer_save_args(3) == {"save_strategy": "steps", "save_steps": 3, "save_total_limit": 2}
    with pytest.raises(ValueError, match="resume_every"):
        resume.trainer_save_args(0)


STEPS = 16
SETTINGS = {
    "method": "lora",
    "n_train": 32,
    "steps": STEPS,
    "checkpoint_every": 4,
    "resume_every": 2,
    "learning_rate": 0.001,
    # a schedule and weight decay whose state a resumed run must restore
    "scheduler": "linear",
    "warmup_ratio": 0.25,
    "weight_decay": 0.01,
    "batch_size": 2,
    "max_length": 64,
    "dtype": "float32",
    "lora": {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["q_proj", "v_proj"]},
    "trainer_args": {},
}

DRIVER = """
import json, sys
import pandas as pd, torch
from shiftwork.logs import log_to
from shiftwork.trajectory.finetune import finetune
torch.set_num_threads(1)
model_dir, train, settings, out, log = sys.argv[1:]
with log_to(log):
    finetune(model_dir, pd.read_parquet(train), json.loads(settings), out, seed=3)
"""


def _job(model_dir: Path, train: Path, out: Path, log: Path) -> list[str]:
    return [sys.executable, "-c", DRIVER, str(model_dir), str(train), json.dumps(SETTINGS), str(out), str(log)]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "adapter_model.safetensors")


# Measured on 2 CPU cores (torch 2.13, one thread): the resumed run's adapters equal the
# uninterrupted run's bit for bit (max abs difference 0.0) at every checkpoint, and so do the
# gradient norms. The tolerance allows float noise a different machine might show.
TOLERANCE = 1e-6


@pytest.mark.model
def test_killed_finetune_resumes_from_its_last_step_with_the_same_result(prepared_smollm, tmp_path) -> None:
    """About 2 minutes on 2 CPU cores: an uninterrupted run, a run SIGKILLed once the Trainer has
    saved resumable state, and its rerun."""
    rows = [
        {
            "premise": f"The {animal} sat on the {thing} for {n} minutes.",
            "hypothesis": f"The {animal} {'sat' if n % 2 else 'ran'} somewhere.",
            "label": "entailment" if n % 2 else "not_entailment",
        }
        for n, (animal, thing) in enumerate(
            [(a, t) for a in ("cat", "dog", "bird", "horse") for t in ("mat", "chair", "roof", "floor")] * 2
        )
    ]
    train = tmp_path / "train.parquet"
    pd.DataFrame(rows).to_parquet(train)

    whole = tmp_path / "whole" / "checkpoints"
    done = subprocess.run(_job(prepared_smollm, train, whole, tmp_path / "whole.log"), env=_env(), timeout=600)
    assert done.returncode == 0, (tmp_path / "whole.log").read_text()[-3000:]
    assert not resume.resume_dir(whole).exists()

    out = tmp_path / "killed" / "checkpoints"
    log = tmp_path / "killed.log"
    job = subprocess.Popen(_job(prepared_smollm, train, out, log), env=_env())
    deadline = time.monotonic() + 300
    while resume.last_checkpoint(resume.resume_dir(out) / resume.TRAINER_DIR) is None:
        assert job.poll() is None, "the job ended before saving resumable state:\n" + log.read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(job.pid, signal.SIGKILL)
    assert job.wait() == -signal.SIGKILL
    assert not out.exists()
    saved_before = resume.last_checkpoint(resume.resume_dir(out) / resume.TRAINER_DIR)[1]
    assert 0 < saved_before < STEPS

    done = subprocess.run(_job(prepared_smollm, train, out, log), env=_env(), timeout=600)
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    resumed = [
        int(line.split("resuming from step ")[1].split()[0])
        for line in text.splitlines()
        if "resuming from step" in line
    ]
    assert len(resumed) == 1 and saved_before <= resumed[0] < STEPS
    assert not resume.resume_dir(out).exists()

    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in whole.iterdir())
    assert [n for n in names if n.startswith("checkpoint-")] == sorted(f"checkpoint-{s}" for s in (0, 4, 8, 12, 16))
    worst = 0.0
    for step in (0, 4, 8, 12, 16):
        a, b = _weights(whole / f"checkpoint-{step}"), _weights(out / f"checkpoint-{step}")
        assert a.keys() == b.keys()
        worst = max(worst, max(float((a[k] - b[k]).abs().max()) for k in a))
    print(f"resumed from step {resumed[0]}; max abs adapter difference {worst:g}")
    assert worst <= TOLERANCE
    # training moved the adapters: the comparison could have failed
    a0, a16 = _weights(whole / "checkpoint-0"), _weights(whole / "checkpoint-16")
    assert max(float((a0[k] - a16[k]).abs().max()) for k in a0) > 100 * TOLERANCE
    losses = [json.loads((d / "train_log.json").read_text()) for d in (whole, out)]
    assert [h["step"] for h in losses[1]] == [h["step"] for h in losses[0]] == [4, 8, 12, 16]
    assert [h["grad_norm"] for h in losses[1]] == pytest.approx([h["grad_norm"] for h in losses[0]], abs=TOLERANCE)
    # a logged loss is the mean since the previous log; the Trainer does not save that running
    # sum, so the one window that straddles the resumed step differs (none does when
    # resume_every is a multiple of checkpoint_every, the default)
    after = [i for i, h in enumerate(losses[0]) if h["step"] - 4 >= resumed[0]]
    assert after and [losses[1][i]["loss"] for i in after] == pytest.approx(
        [losses[0][i]["loss"] for i in after], abs=TOLERANCE
    )


class Killed(Exception):
    """Stands for a SIGKILL inside the process: raised from a training callback."""


def _tiny_reward(completion: str, answer: str, answer_format: str, names: tuple[str, ...]) -> float:
    """Varies from completion to completion (a random model never answers), so GRPO's advantages
    and the updates are not zero."""
    return sum(map(ord, completion)) % 7 / 6


def _rl_inputs():
    prompts = [
        pd.DataFrame(
            {
                "prompt": [f"What comes after {n}? " for n in range(k, k + 8)],
                "answer": [str(n + 1) for n in range(k, k + 8)],
            }
        )
        for k in (10, 50)
    ]
    settings = {
        "method": "full",
        "steps": 99,
        "batch_size": 2,
        "learning_rate": 0.01,
        "scheduler": "linear",
        "warmup_steps": 1,
        "max_grad_norm": 1.0,
        "weight_decay": 0.0,
        "log_every": 1,
        "dtype": "float32",
        "gradient_checkpointing": False,
        "checkpoint_every": 2,
        "resume_every": 1,
        "num_generations": 2,
        "max_completion_length": 4,
        "temperature": 1.0,
        "beta": 0.0,
        "reward_format": "sentence",
        "converge": None,
        "trainer_args": {},
    }
    return [(prompts[0], 3), (prompts[1], 3)], settings


@pytest.fixture(scope="module")
def scratch_dir(tmp_path_factory) -> Path:
    from shiftwork.models.prepare import prepare_folder

    out = tmp_path_factory.mktemp("scratch") / "tiny"
    spec = {
        "source": {"kind": "scratch", "architecture": "gpt2", "hidden_size": 32, "layers": 1, "heads": 2, "seed": 0}
    }
    prepare_folder("tiny", {**spec, "chat": False}, out)
    return out


@pytest.mark.model  # trains a scratch organism twice: slow on a CPU
def test_rl_killed_in_its_second_stage_resumes_there_with_the_same_result(scratch_dir, tmp_path, monkeypatch, caplog):
    """In-process (a callback raises where a kill would land): RL of two 3-step stages on a tiny
    scratch model, stopped at step 2 of stage 1 (global step 5) with resumable state saved every
    step; the rerun resumes there and writes the checkpoints of an uninterrupted run."""
    from transformers import TrainerCallback

    from shiftwork.organisms import training

    stages, settings = _rl_inputs()
    whole = tmp_path / "whole"
    assert training.rl(str(scratch_dir), stages, _tiny_reward, settings, str(whole), seed=1) == [0, 2, 3, 4, 6]

    original = training.report_training

    class KillAt(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if "stage-1" in args.output_dir and state.global_step == 2:
                raise Killed

    monkeypatch.setattr(training, "report_training", lambda trainer, what: trainer.add_callback(KillAt()))
    out = tmp_path / "killed"
    with pytest.raises(Killed):
        training.rl(str(scratch_dir), stages, _tiny_reward, settings, str(out), seed=1)
    assert not out.exists()
    monkeypatch.setattr(training, "report_training", original)
    caplog.set_level("INFO", logger="shiftwork")
    assert training.rl(str(scratch_dir), stages, _tiny_reward, settings, str(out), seed=1) == [0, 2, 3, 4, 6]
    assert "resuming from step 5 (stage 1" in caplog.text
    assert not resume.resume_dir(out).exists()
    assert json.loads((out / "stages.json").read_text()) == json.loads((whole / "stages.json").read_text())
    logs = [json.loads((d / "train_log.json").read_text()) for d in (whole, out)]
    assert [h["step"] for h in logs[1]] == [h["step"] for h in logs[0]] == [1, 2, 3, 4, 5, 6]
    assert [h["reward"] for h in logs[1]] == [h["reward"] for h in logs[0]]
    for step in (0, 2, 3, 4, 6):
        a = load_file(whole / f"checkpoint-{step}" / "model.safetensors")
        b = load_file(out / f"checkpoint-{step}" / "model.safetensors")
        # measured: equal bit for bit (in one process, one thread count)
        assert max(float((a[k] - b[k]).abs().max()) for k in a) <= TOLERANCE
    a0 = load_file(whole / "checkpoint-0" / "model.safetensors")
    a6 = load_file(whole / "checkpoint-6" / "model.safetensors")
    assert max(float((a0[k] - a6[k]).abs().max()) for k in a0) > 100 * TOLERANCE


def test_sft_stopped_mid_run_resumes_with_the_same_model(scratch_dir, tmp_path, monkeypatch, caplog):
    """In-process like the RL test: SFT of 6 steps saving resumable state every 2, stopped once
    step 4 is saved; the rerun resumes from step 4 and writes the uninterrupted run's weights."""
    from transformers import TrainerCallback

    from shiftwork.organisms import training

    examples = pd.DataFrame(
        {"prompt": [f"What comes after {n}? " for n in range(40)], "completion": [f"{n + 1}." for n in range(40)]}
    )
    _, rl_settings = _rl_inputs()
    settings = {**rl_settings, "steps": 6, "resume_every": 2, "max_length": 32, "batch_size": 4}
    whole = tmp_path / "whole"
    training.sft(str(scratch_dir), examples, settings, str(whole), seed=2)

    class KillAt(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 4:
                raise Killed

    original = training.report_training
    monkeypatch.setattr(training, "report_training", lambda trainer, what: trainer.add_callback(KillAt()))
    out = tmp_path / "killed"
    with pytest.raises(Killed):
        training.sft(str(scratch_dir), examples, settings, str(out), seed=2)
    monkeypatch.setattr(training, "report_training", original)
    caplog.set_level("INFO", logger="shiftwork")
    info = training.sft(str(scratch_dir), examples, settings, str(out), seed=2)
    assert "resuming from step 4" in caplog.text
    assert not resume.resume_dir(out).exists()
    a, b = load_file(whole / "model.safetensors"), load_file(out / "model.safetensors")
    # measured: equal bit for bit
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= TOLERANCE
    base = load_file(scratch_dir / "model.safetensors")
    assert max(float((a[k] - base[k]).abs().max()) for k in base) > 100 * TOLERANCE
    assert [h["step"] for h in info["train_log"]] == [1, 2, 3, 4, 5, 6]
