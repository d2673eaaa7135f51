"""What one job of the stability study runs with, beyond its input and output paths: the
settings the rules resolve per model (engine, batch size, precision) or per run (encoder, judge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shiftwork.stability.sections import AxesSettings, JudgeControlSettings


@dataclass(frozen=True)
class GenerateJob:
    """One generate job: the decoding and engine of its model, its precision, whether the probes
    keep the last hidden states, its CPU threads, which shard of the prompts it answers, and how
    a base model is asked (``plain_format``, :data:`shiftwork.inference.formatting.PLAIN_FORMATS`)."""

    max_new_tokens: int
    batch_size: int
    dtype: str
    engine: str = "vllm"
    store_hidden: bool = False
    threads: int | None = None
    shard: int = 0
    n_shards: int = 1
    plain_format: str = "qa"


@dataclass(frozen=True)
class ApiJob:
    """One generate job for a model behind an OpenAI-compatible API: its ``source`` (the config's
    ``openai_compatible`` mapping), whether it is a chat model, the reply length, the response
    cache, which shard of the prompts it answers, the seed sent with each request (if any), and
    whether the baseline reply is asked for ``once`` or again for every row (``per_row``), and how a
    base model is asked (``plain_format``)."""

    source: Mapping[str, Any]
    chat: bool
    max_new_tokens: int
    cache_dir: str
    shard: int = 0
    n_shards: int = 1
    seed: int | None = None
    baseline: str = "once"
    plain_format: str = "qa"


@dataclass(frozen=True)
class TextModel:
    """A model a step asks for text (the mirroring judge, the structural rewriter): a prepared
    local model (``model_dir``, loaded in ``dtype``, ``batch_size`` inputs a batch) or an
    ``openai_compatible`` source (``api``, replies cached under ``cache``), named ``name``."""

    name: str | None = None
    model_dir: str | None = None
    api: Mapping[str, Any] | None = None
    cache: str | None = None
    batch_size: int = 16
    dtype: str = "auto"


def judge_model(params: Any, inputs: Any) -> TextModel:
    """The judge a rule names, from its params ``judge_name``, ``judge_api``, ``judge_cache`` and
    ``judge_batch_size`` and, for a local judge, its input ``judge`` (the prepared model's
    record, in the model's folder); no model when the config names no judge."""
    record = inputs.get("judge")
    return TextModel(
        name=params.judge_name,
        model_dir=str(Path(record).parent) if record else None,
        api=params.judge_api,
        cache=params.judge_cache,
        batch_size=params.judge_batch_size,
    )


@dataclass(frozen=True)
class AxesJob:
    """One score_axes job: the axes' settings, the BERT axis's encoder (name and spec), the judge
    if any, the structural baseline and length anchor, and the seed of an ``auto`` BERT rescale
    baseline."""

    axes: AxesSettings
    encoder_name: str
    encoder_spec: Mapping[str, Any] = field(default_factory=dict)
    judge: TextModel | None = None
    structural_baseline: str = "rewrite"
    seed: int = 0
    length_anchor: str = "rewrite"


@dataclass(frozen=True)
class JudgeCheckJob:
    """The check_judge job: the judge, its controls' settings, and the seed of the pairs drawn."""

    judge: TextModel
    controls: JudgeControlSettings
    seed: int = 0
