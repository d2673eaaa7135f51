"""Resumable training: Hugging Face Trainer checkpoints (weights, optimizer, scheduler, RNG and
trainer state) kept in a work folder beside a training job's output, so that a killed job
continues from its last saved step instead of step 0.

Snakemake deletes a failed job's declared outputs, so the folder is a sibling of the output,
never part of it: ``<output>.resume/``. It holds a fingerprint of everything the job's result
depends on; a job whose settings differ from the fingerprint's starts afresh (and logs why). A
job that finishes removes the folder."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from shiftwork.logs import LOGGER
from shiftwork.models.prepare import INFO_FILE

RESUME_SUFFIX = ".resume"
FINGERPRINT_FILE = "fingerprint.json"
TRAINER_DIR = "trainer"
"""Trainer checkpoints (``checkpoint-<step>``) inside the work folder."""
KEEP_CHECKPOINTS = 2
"""Trainer checkpoints kept (``save_total_limit``): the newest may be cut short by the kill."""
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_COMPLETE = "trainer_state.json"
"""The last file Trainer writes into a checkpoint: a checkpoint without it is incomplete."""


def resume_dir(out_dir: str | os.PathLike) -> Path:
    """The work folder of the job writing ``out_dir``: ``<out_dir>.resume`` beside it."""
    out = Path(out_dir)
    return out.with_name(out.name + RESUME_SUFFIX)


def _plain(value: Any) -> Any:
    """A JSON stand-in for values json cannot write: a table's per-row hashes, else its text."""
    if isinstance(value, pd.DataFrame):
        rows = pd.util.hash_pandas_object(value, index=False).to_numpy()
        return {"columns": list(value.columns), "rows": hashlib.sha256(rows.tobytes()).hexdigest()}
    return str(value)


def job_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings part of a fingerprint: all but ``resume_every``, which says how often state is
    saved and not what training does (changing it after a kill keeps the saved state)."""
    return {k: v for k, v in settings.items() if k != "resume_every"}


def state_fingerprint(parts: Mapping[str, Any]) -> dict[str, str]:
    """One sha256 per part (settings, seed, base model, data...), so a mismatch can name what changed."""
    return {
        key: hashlib.sha256(json.dumps(value, sort_keys=True, default=_plain).encode()).hexdigest()
        for key, value in sorted(parts.items())
    }


def last_checkpoint(folder: str | os.PathLike) -> tuple[Path, int] | None:
    """The complete Trainer checkpoint of the highest step under ``folder`` and its step, or None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = []
    for path in folder.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and (path / _COMPLETE).is_file():
            found.append((int(match.group(1)), path))
    if not found:
        return None
    step, path = max(found)
    return path, step


def logged_history(checkpoint: Path) -> list[dict]:
    """The Trainer's log history saved with ``checkpoint``."""
    return json.loads((Path(checkpoint) / _COMPLETE).read_text()).get("log_history", [])


def open_work(out_dir: str | os.PathLike, parts: Mapping[str, Any]) -> tuple[Path, Path | None]:
    """Open the work folder of the job writing ``out_dir``: (folder, checkpoint to resume from or
    None). Saved state whose fingerprint differs from ``parts`` (see :func:`state_fingerprint`) is
    removed, and the log says which parts changed; compatible state is kept and the log says the
    step it resumes from."""
    folder = resume_dir(out_dir)
    wanted = state_fingerprint(parts)
    if folder.exists():
        try:
            saved = json.loads((folder / FINGERPRINT_FILE).read_text())
        except (OSError, ValueError):
            saved = None
        if saved != wanted:
            if saved is None:
                why = f"it has no readable {FINGERPRINT_FILE}"
            else:
                why = "changed: " + ", ".join(
                    sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
                )
            LOGGER.info("not resuming from the saved state in %s (%s); starting from step 0", folder, why)
            shutil.rmtree(folder)
    if folder.exists():
        found = last_checkpoint(folder / TRAINER_DIR)
        if found is not None:
            LOGGER.info("resuming from step %d (%s)", found[1], found[0])
            return folder, found[0]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FINGERPRINT_FILE).write_text(json.dumps(wanted, indent=1))
    return folder, None


def model_identity(model_dir: str | os.PathLike) -> dict[str, Any]:
    """What identifies a training job's starting model: its path and, for a prepared model, the
    weight digest recorded when it was prepared."""
    info = Path(model_dir) / INFO_FILE
    digest = json.loads(info.read_text()).get("weight_digest") if info.is_file() else None
    return {"path": str(Path(model_dir).resolve()), "weight_digest": digest}


def step_of(checkpoint: str | os.PathLike | None) -> int:
    """The step of a ``checkpoint-<step>`` folder; 0 for None (a fresh start)."""
    if checkpoint is None:
        return 0
    match = _CHECKPOINT.match(Path(checkpoint).name)
    if not match:
        raise ValueError(f"{checkpoint} is not a checkpoint-<step> folder")
    return int(match.group(1))


def staged(folder: Path, keep_until: int | None, name: str = "staged") -> Path:
    """The folder inside the work folder where a job stages the checkpoints its output keeps
    (``checkpoint-<step>``): emptied on a fresh start (``keep_until`` None). When resuming from
    step K it keeps those of steps up to K (written before the Trainer saved K: a step's
    callbacks run before its save) and removes later ones, which the resumed run writes again."""
    out = folder / name
    if keep_until is None:
        shutil.rmtree(out, ignore_errors=True)
    else:
        for path in out.glob("checkpoint-*"):
            match = _CHECKPOINT.match(path.name)
            if match and int(match.group(1)) > keep_until:
                shutil.rmtree(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def staged_steps(folder: Path) -> list[int]:
    """The steps of the ``checkpoint-<step>`` folders in ``folder``, ascending."""
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _CHECKPOINT.match(p.name)))


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (a kill leaves the old file or the new one)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(value, indent=1))
    os.replace(part, path)


def trainer_save_args(every: int) -> dict[str, Any]:
    """The Trainer arguments that save resumable state every ``every`` steps into the work
    folder's :data:`TRAINER_DIR` (``output_dir`` is set by the caller)."""
    if int(every) < 1:
        raise ValueError(f"resume_every must be >= 1, got {every}")
    return {"save_strategy": "steps", "save_steps": int(every), "save_total_limit": KEEP_CHECKPOINTS}


def finish(folder: str | os.PathLike) -> None:
    """Remove the work folder once the job's output is complete."""
    shutil.rmtree(folder, ignore_errors=True)
