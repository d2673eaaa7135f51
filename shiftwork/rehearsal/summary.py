"""What a rehearsal ran: jobs and seconds per rule and architecture, from its benchmark files
(``benchmarks/NAME/RULE/...tsv``, one per finished job) and its config."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from shiftwork.models.prepare import source_key
from shiftwork.rehearsal.config import architecture


def job_model(config: Mapping[str, Any], rel: str) -> str | None:
    """The model a job's benchmark path names (the longest model name that starts a path part, or
    the model of the organism or RL run it names)."""
    models = sorted(config.get("models") or {}, key=len, reverse=True)
    org = config.get("organisms") or {}
    owners = {n: s["model"] for n, s in (org.get("sft") or {}).items()}
    owners |= {n: owners.get(r["organism"]) for n, r in (org.get("runs") or {}).items()}
    for part in Path(rel).with_suffix("").parts:
        for name in sorted(owners, key=len, reverse=True):
            if part == name or part.startswith(f"{name}-s"):
                return owners[name]
        for m in models:
            if part == m or part.startswith(f"{m}-"):
                return m
    return None


def benchmark_files(config: Mapping[str, Any], root: Path) -> list[tuple[str, Path]]:
    """(rule, file) of every finished job of the config: ``root/NAME/RULE/...`` and the shared
    ``root/prepare_model/MODEL/SOURCE.tsv`` of its own models' sources."""
    files = [(t.relative_to(root / config["name"]).parts[0], t) for t in sorted((root / config["name"]).rglob("*.tsv"))]
    for name, spec in (config.get("models") or {}).items():
        if spec["source"].get("kind") == "hub":
            tsv = root / "prepare_model" / name / f"{source_key(spec)}.tsv"
            if tsv.exists():
                files.append(("prepare_model", tsv))
    return files


def seconds_by_rule(config: Mapping[str, Any], root: Path = Path("benchmarks")) -> pd.DataFrame:
    """One row per rule and architecture: jobs and their summed seconds ("-": not one model's)."""
    rows = []
    for rule, tsv in benchmark_files(config, Path(root)):
        model = job_model(config, str(tsv.relative_to(root)))
        arch = architecture(config, model) if model in (config.get("models") or {}) else "-"
        seconds = float(pd.read_csv(tsv, sep="\t")["s"].iloc[-1])
        rows.append({"rule": rule, "architecture": arch, "seconds": seconds})
    df = pd.DataFrame(rows, columns=["rule", "architecture", "seconds"])
    return (
        df.groupby(["rule", "architecture"], as_index=False)
        .agg(jobs=("seconds", "size"), seconds=("seconds", "sum"))
        .sort_values(["rule", "architecture"], ignore_index=True)
    )
