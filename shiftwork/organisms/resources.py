"""Cluster resources of the organisms study's GPU jobs, sized by the base model's parameter count.

One GPU per job at every size. A 27B model in bfloat16 is about 54 GB of weights; LoRA adds
about 34M float32 parameters with their Adam moments (under 1 GB). GRPO with batch 32, a 24-token
completion and short prompts (about 2k tokens a step) then needs roughly 30 GB more for
activations without activation checkpointing, which overflows an 80 GB GPU, and about 2 GB with
it: one H100/A100-80GB is enough with checkpointing, whereas two GPUs would also need the model
sharded across them, which the training code does not do. Host memory covers loading the weights
on the CPU (float32: twice the bf16 size) and, after SFT, saving the merged model; the wall times
allow for reloading the model once per checkpoint in evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

# (largest size in billions of parameters, resources of train_sft / train_rl, of evaluate_organism)
TIERS: tuple[tuple[float, dict[str, int], dict[str, int]], ...] = (
    (4.0, {"gpu": 1, "mem_mb": 64000, "runtime": 720}, {"gpu": 1, "mem_mb": 48000, "runtime": 120}),
    (10.0, {"gpu": 1, "mem_mb": 96000, "runtime": 1440}, {"gpu": 1, "mem_mb": 64000, "runtime": 240}),
    (35.0, {"gpu": 1, "mem_mb": 160000, "runtime": 2880}, {"gpu": 1, "mem_mb": 128000, "runtime": 480}),
)
JOBS: tuple[str, ...] = ("train_sft", "train_rl", "evaluate_organism")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)b(?![a-z0-9])")


def parameter_billions(model_id: str) -> float | None:
    """The size a model's name states (``"google/gemma-3-27b-pt"`` -> 27.0, ``"Qwen/Qwen2.5-1.5B"``
    -> 1.5), or None where it states none."""
    found = _SIZE.findall(model_id.rsplit("/", 1)[-1].lower())
    return float(found[-1]) if found else None


def job_resources(model_id: str, job: str) -> dict[str, int]:
    """``{gpu, mem_mb, runtime}`` (runtime in minutes) of one organisms job (``train_sft``,
    ``train_rl`` or ``evaluate_organism``) on the model ``model_id``; a model whose name states no
    size gets the smallest tier (the scratch and test models)."""
    if job not in JOBS:
        raise ValueError(f"job must be one of {list(JOBS)}, got {job!r}")
    size = parameter_billions(model_id) or 0.0
    for largest, train, evaluate in TIERS:
        if size <= largest:
            return dict(evaluate if job == "evaluate_organism" else train)
    raise ValueError(
        f"model '{model_id}' ({size:g}B parameters) is larger than the largest tier ({TIERS[-1][0]:g}B): "
        "one GPU cannot hold it; add a tier to shiftwork.organisms.resources.TIERS"
    )


def organism_model_id(config: Mapping[str, Any], organism: str) -> str:
    """The hub id (or path, or registry name) of the base model an organism is trained from."""
    spec = config["organisms"]["sft"][organism]
    if "path" in spec:
        return str(spec["path"])
    model = (config.get("models") or {}).get(spec["model"]) or {}
    source = model.get("source") or {}
    return str(source.get("id") or source.get("path") or spec["model"])


def rule_resources(
    config: Mapping[str, Any], job: str, runs: Mapping[str, Mapping[str, Any]]
) -> dict[str, Callable[[Any], int]]:
    """Snakemake resources of rule ``job`` besides its one GPU (``mem_mb`` and ``runtime``), each a
    function of the job's wildcards (``organism`` for the jobs of an SFT organism, ``run`` for
    those of an RL run; ``runs`` are the expanded runs,
    :func:`shiftwork.organisms.config.organism_runs`):
    ``resources: gpu=1, **rule_resources(config, "train_sft", runs)``."""

    def model_of(wildcards: Any) -> str:
        organism = getattr(wildcards, "organism", None) or runs[wildcards.run]["organism"]
        return organism_model_id(config, organism)

    job_resources("", job)  # an unknown job fails when the rule is defined, not per job
    return {
        key: (lambda wildcards, _key=key: job_resources(model_of(wildcards), job)[_key])
        for key in ("mem_mb", "runtime")
    }
