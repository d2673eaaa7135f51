"""The workflow step shared by every study: prepare a registered model (rule prepare_model)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shiftwork.logs import LOGGER
from shiftwork.models.prepare import prepare_folder, source_key
from shiftwork.models.sources import ModelSourceError


def prepare_model(name: str, spec: Mapping[str, Any], out_dir: str) -> None:
    if Path(out_dir).name != source_key(spec):
        raise ModelSourceError(
            f"model '{name}': {out_dir} is not the folder of its configured source, "
            f"{source_key(spec)}; ask for models through the workflow's targets"
        )
    info = prepare_folder(name, spec, out_dir)
    LOGGER.info(
        "prepared %s: %s parameters, digest %s, %.1f s",
        name,
        info["n_parameters"],
        info["weight_digest"][:12],
        info["prepare_seconds"],
    )
