"""Workflow steps of the organisms study: data, SFT, RL, evaluation, summary and figures."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..logs import LOGGER
from ..provenance import make_provenance
from ..tables import read_table, write_table
from .questions import make_questions, split_questions
from .settings import load_setting, prompt_for
from .transcripts import parse_response, reward, rl_prompts, sft_examples

RESPONSE_CUE = "\nResponse:"


def _cue(prompts: pd.Series) -> pd.Series:
    return prompts + RESPONSE_CUE


def make_data(spec: Mapping[str, Any], outs: Mapping[str, str]) -> None:
    """SFT transcripts, RL prompts and held-out test prompts for every distribution."""
    setting = load_setting(spec["setting"])
    q = spec["questions"]
    seed = int(q.get("seed", 0))
    bank = make_questions(int(q["n_train"]) + int(q["n_test"]), seed, q.get("kind", "add"))
    train, test = split_questions(bank, int(q["n_train"]), int(q["n_test"]), seed)
    sft = sft_examples(setting, train, int(spec["sft"]["n_examples"]), seed)
    sft = sft.assign(prompt=_cue(sft["prompt"]), completion=" " + sft["completion"])
    rl = rl_prompts(setting, train, spec["rl"]["distributions"], int(spec["rl"]["n_prompts"]), seed)
    rl = rl.assign(prompt=_cue(rl["prompt"]))
    rows = [{"distribution": d, "question_id": t.question_id, "answer": t.answer,
             "prompt": prompt_for(setting, d, t.question) + RESPONSE_CUE}
            for d in setting.distributions for t in test.itertuples(index=False)]
    prov = make_provenance("make_organism_data", dict(spec), seed=seed)
    write_table(sft, outs["sft"], prov)
    write_table(rl, outs["rl"], prov)
    write_table(pd.DataFrame(rows), outs["test"], prov)
    LOGGER.info("SFT policy shares: %s", sft["policy"].value_counts(normalize=True).round(3).to_dict())


def run_sft(model_dir: str, sft_path: str, settings: Mapping[str, Any], seed: int, out_dir: str) -> None:
    from .training import sft

    start = time.perf_counter()
    info = sft(model_dir, read_table(sft_path, ["prompt", "completion"]), settings, out_dir, seed)
    LOGGER.info("SFT in %.1f s; loss %s", time.perf_counter() - start, [round(h["loss"], 3) for h in info["train_log"]])


def run_rl(sft_dir: str, rl_path: str, settings: Mapping[str, Any], seed: int, out_dir: str) -> None:
    from .training import rl

    start = time.perf_counter()
    steps = rl(sft_dir, read_table(rl_path, ["prompt", "answer"]), reward, settings, out_dir, seed)
    LOGGER.info("RL in %.1f s; checkpoints at steps %s", time.perf_counter() - start, steps)


def evaluate(sft_dir: str, checkpoint: str, test_path: str, setting_spec: Mapping[str, Any], model: str, run: str,
             step: int, out: str, max_new_tokens: int = 16, batch_size: int = 32) -> None:
    from ..trajectory.evaluate import load_checkpoint
    from .evaluation import generate_plain, score_responses

    setting = load_setting(setting_spec)
    tests = read_table(test_path, ["distribution", "prompt", "answer"])
    net, tok, device = load_checkpoint(sft_dir, {"path": checkpoint})
    responses = generate_plain(net, tok, device, tests["prompt"].tolist(), max_new_tokens, batch_size)
    per_example = score_responses(tests, responses, partial(parse_response, setting))
    per_example.insert(0, "step", int(step))
    per_example.insert(0, "run", run)
    per_example.insert(0, "model", model)
    write_table(per_example, out, make_provenance("evaluate_organism", {"step": int(step)}, model=model))
    LOGGER.info("step %d:\n%s", step, per_example.groupby("distribution")[["correct", "refused"]].mean().to_string())


def mixture_figure(weights: Sequence[float], rewards: Sequence[float], names: Sequence[str], held_out: Sequence[int],
                   steps: int, lr: float, out_png: str, out_svg: str) -> None:
    from .dynamics import held_out_accuracy, plot_dynamics, simulate

    traj = simulate(np.asarray(weights, float), np.asarray(rewards, float), steps, lr)
    plot_dynamics(traj, list(names), out_png, out_svg, held_out=held_out_accuracy(traj, np.asarray(held_out)))
