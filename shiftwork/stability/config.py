"""The stability study's config checks (composed by :mod:`shiftwork.config`): the names its
section uses are registered, and the settings that depend on one another agree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shiftwork.schema import unknown_name


def needs_rewrites(structural: Mapping[str, Any]) -> bool:
    """Whether ``stability.variants.structural`` (defaults filled in) asks for any structural
    variant, from the rewriter or the hand-written files."""
    return bool(structural["enabled"] and (structural["lengths"] or structural["form"]))


def uses_rewriter(structural: Mapping[str, Any]) -> bool:
    """Whether a rewriter model writes the structural variants: some are asked for and
    ``rewriter`` names a model (null: the hand-written files,
    :mod:`shiftwork.stability.variants.handwritten`)."""
    return needs_rewrites(structural) and structural.get("rewriter") is not None


def stability_errors(config: Mapping[str, Any]) -> list[str]:
    """Problems of the ``stability`` section that the schema cannot see: models, datasets and
    encoders that the registries do not define, and settings that contradict one another."""
    models = set(config.get("models") or {})
    encoders = set(config.get("encoders") or {})
    datasets = set(config.get("datasets") or {})
    st = config.get("stability") or {}
    return [
        *study_name_errors(st, models, datasets),
        *axes_errors(st, models, encoders),
        *shard_errors(st),
        *statistics_errors(st),
        *gate_errors(st, encoders),
        *rewriter_errors(st, models),
    ]


def study_name_errors(st: Mapping[str, Any], models: set[str], datasets: set[str]) -> list[str]:
    """The study's models and datasets are registered, and ``model_datasets`` pairs only the
    study's own models and datasets."""
    errors = []
    for i, name in enumerate(st.get("models") or []):
        errors += unknown_name(f"stability.models.{i}", name, models, "model")
    for i, name in enumerate(st.get("datasets") or []):
        errors += unknown_name(f"stability.datasets.{i}", name, datasets, "dataset")
    study_models, study_datasets = set(st.get("models") or []), set(st.get("datasets") or [])
    for name, names in (st.get("model_datasets") or {}).items():
        errors += unknown_name("stability.model_datasets", name, study_models, "stability model")
        for i, ds in enumerate(names or []):
            errors += unknown_name(f"stability.model_datasets.{name}.{i}", ds, study_datasets, "stability dataset")
    return errors


def axes_errors(st: Mapping[str, Any], models: set[str], encoders: set[str]) -> list[str]:
    """The axes' encoder and judge are registered; a BERT baseline taken from the gate needs the
    gate's encoder."""
    axes = st.get("axes") or {}
    gate_encoder = (st.get("gate") or {}).get("encoder")
    errors = []
    if (
        axes.get("bert_scale") == "rescaled"
        and axes.get("bert_baseline") == "gate"
        and axes.get("encoder", gate_encoder) != gate_encoder
    ):
        errors.append(
            f"config key 'stability.axes.bert_baseline': gate takes the gate's b, estimated for encoder "
            f"'{gate_encoder}', but the BERT axis uses '{axes.get('encoder')}'; give b as a number or auto"
        )
    if "encoder" in axes:
        errors += unknown_name("stability.axes.encoder", axes["encoder"], encoders, "encoder")
    if "judge" in axes:
        errors += unknown_name("stability.axes.judge", axes["judge"], models, "model")
    return errors


def shard_errors(st: Mapping[str, Any]) -> list[str]:
    """Shards split per-dataset jobs, so ``shard_size`` needs ``generate_jobs: per_dataset``."""
    if st.get("shard_size") and st.get("generate_jobs", "per_model") == "per_model":
        return [
            "config key 'stability.shard_size': shards split per-dataset jobs; set 'stability.generate_jobs: "
            "per_dataset' with it"
        ]
    return []


def statistics_errors(st: Mapping[str, Any]) -> list[str]:
    """The primary tolerance is one of the tolerances the statistics use."""
    stats = st.get("statistics") or {}
    if "primary_eps" in stats and "eps" in stats and stats["primary_eps"] not in stats["eps"]:
        return [
            f"config key 'stability.statistics.primary_eps': {stats['primary_eps']} is not one of eps {stats['eps']}"
        ]
    return []


def gate_errors(st: Mapping[str, Any], encoders: set[str]) -> list[str]:
    """The gate's encoder is registered."""
    gate = st.get("gate") or {}
    if "encoder" in gate:
        return unknown_name("stability.gate.encoder", gate["encoder"], encoders, "encoder")
    return []


def rewriter_errors(st: Mapping[str, Any], models: set[str]) -> list[str]:
    """A rewriter, where one is named, is a registered model (without one the structural variants
    are the hand-written ones, checked with the prompt sets: :mod:`shiftwork.config`)."""
    structural = (st.get("variants") or {}).get("structural") or {}
    if not uses_rewriter(structural):
        return []
    return unknown_name("stability.variants.structural.rewriter", structural["rewriter"], models, "model")
