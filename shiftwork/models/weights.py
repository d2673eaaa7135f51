"""A prepared model folder's record (``shiftwork.json``) and the checks of its weights against it:
sizes, safetensors headers and sha256 digests."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shiftwork.models.located import ModelSourceError
from shiftwork.tables import rebuild_commands

INFO_FILE = "shiftwork.json"


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def weight_files(model_dir: Path) -> dict[str, dict[str, Any]]:
    """Size and sha256 of each safetensors file of a model directory, by file name."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise ModelSourceError(f"{model_dir} holds no .safetensors file")
    return {f.name: {"bytes": f.stat().st_size, "sha256": file_digest(f)} for f in files}


def weight_digest(model_dir: Path, files: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """sha256 over the directory's safetensors files, in name order."""
    h = hashlib.sha256()
    for name, entry in sorted((files or weight_files(model_dir)).items()):
        h.update(name.encode())
        h.update(entry["sha256"].encode())
    return h.hexdigest()


def safetensors_problem(path: Path) -> str | None:
    """Why ``path`` is not a complete safetensors file, from its header alone (no weights are
    read): the header must be JSON and its tensors must end exactly where the file ends."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{size} bytes, too short for a safetensors header"
            n = struct.unpack("<Q", head)[0]
            if n > size - 8:
                return f"header of {n} bytes in a file of {size} bytes (truncated)"
            header = json.loads(fh.read(n))
    except (OSError, ValueError) as err:
        return f"unreadable safetensors header ({err})"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
    expected = 8 + n + max(ends, default=0)
    if expected != size:
        return f"its tensors need {expected} bytes but the file has {size} (truncated or damaged)"
    return None


def weights_problem(model_dir: str | os.PathLike, full: bool = False) -> str | None:
    """Why a prepared model's weights are not the ones ``prepare_model`` recorded, or None.
    Always checks each file's presence, size and header; ``full`` also its sha256."""
    model_dir = Path(model_dir)
    try:
        info = read_info(model_dir)
    except (ModelSourceError, ValueError) as err:
        return str(err)
    recorded = info.get("weight_files")
    names = sorted(recorded) if recorded else sorted(p.name for p in model_dir.glob("*.safetensors"))
    if not names:
        return "no .safetensors file"
    for name in names:
        path = model_dir / name
        if not path.is_file():
            return f"{name} is missing"
        if recorded and path.stat().st_size != recorded[name]["bytes"]:
            return f"{name} has {path.stat().st_size} bytes where {recorded[name]['bytes']} were written"
        if problem := safetensors_problem(path):
            return f"{name}: {problem}"
    if full:
        if recorded:
            for name in names:
                if file_digest(model_dir / name) != recorded[name]["sha256"]:
                    return f"{name} does not match the sha256 recorded when it was prepared"
        elif weight_digest(model_dir) != info.get("weight_digest"):
            return "the weights do not match the digest recorded when they were prepared"
    return None


def check_weights(model_dir: str | os.PathLike, full: bool = True) -> None:
    """Raise :class:`ModelSourceError` naming the model directory and how to rebuild it."""
    if problem := weights_problem(model_dir, full):
        raise ModelSourceError(f"prepared model {model_dir} is damaged: {problem}. {rebuild_model_hint(model_dir)}")


def rebuild_model_hint(model_dir: str | os.PathLike) -> str:
    return f"It is written by rule 'prepare_model'. {rebuild_commands([model_dir], [Path(model_dir) / INFO_FILE])}"


def read_info(model_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(model_dir) / INFO_FILE
    if not path.exists():
        raise ModelSourceError(f"{model_dir} is not a prepared model (no {INFO_FILE}); run prepare_model")
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelSourceError(f"{path} is damaged ({err}). {rebuild_model_hint(model_dir)}") from None
