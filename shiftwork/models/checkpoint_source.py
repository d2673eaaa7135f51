"""A registered model whose weights are one checkpoint of a training run of this config (source
kind ``checkpoint``: ``{kind: checkpoint, run: RUN, step: STEP}``).

The config names only the run and the step; the workflow completes the source
(:func:`with_origin`) with the config's name, the run's checkpoints directory (or, for a
trajectory run that lists its checkpoints, the listed one) and the directory of the model the
run trained from. All of it enters the prepared folder's digest
(:func:`shiftwork.models.prepare.source_key`), so two configs that train a run of the same name
never share a prepared checkpoint. Preparing it merges a LoRA adapter into its base model, or
takes a full model as it is, and writes a prepared directory like any other source's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shiftwork.models.located import Located, ModelSourceError
from shiftwork.models.weights import INFO_FILE, check_weights

CHECKPOINT_KIND = "checkpoint"

#: what the workflow adds to a checkpoint source before it is prepared
ORIGIN_KEYS: tuple[str, ...] = ("config", "checkpoints", "checkpoint", "base")


def is_checkpoint(source: Mapping[str, Any]) -> bool:
    """Whether the source names a checkpoint of a training run of this config."""
    return source.get("kind") == CHECKPOINT_KIND


def checkpoint_dirs(checkpoints_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, directory) of every ``checkpoint-<step>`` under ``checkpoints_dir``, by step."""
    root = Path(checkpoints_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"checkpoint directory {root} does not exist")
    found = []
    for path in root.glob("checkpoint-*"):
        suffix = path.name.split("-", 1)[1]
        if path.is_dir() and suffix.isdigit():
            found.append((int(suffix), path))
    if not found:
        raise FileNotFoundError(f"{root} holds no checkpoint-<step> directory")
    return sorted(found)


def with_origin(spec: Mapping[str, Any], config_name: str, origin: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` (a ``checkpoint`` model's entry) with its source completed: ``config_name`` and
    ``origin``, which gives ``base`` (the base model's directory, or its prepared record) and
    either ``checkpoints`` (the run's directory of ``checkpoint-<step>`` folders) or
    ``checkpoint`` (a listed checkpoint, ``{step, path}`` or ``{step, hub, revision}``)."""
    base = Path(origin["base"])
    source = {
        **{k: v for k, v in spec["source"].items() if k not in ORIGIN_KEYS},
        "config": str(config_name),
        "base": str(base.parent if base.name == INFO_FILE else base),
    }
    if "checkpoints" in origin:
        source["checkpoints"] = str(origin["checkpoints"])
    else:
        source["checkpoint"] = dict(origin["checkpoint"])
    return {**spec, "source": source}


def unresolved(source: Mapping[str, Any]) -> str | None:
    """Why a ``checkpoint`` source cannot be prepared yet (the workflow has not completed it
    with :func:`with_origin`), or None."""
    missing = [k for k in ("config", "base") if k not in source]
    if not missing and ("checkpoints" in source) == ("checkpoint" in source):
        missing = ["checkpoints"]
    if not missing:
        return None
    return (
        f"checkpoint source {dict(source)} lacks {missing}; the workflow completes it from run and "
        "step (rules/common.smk, model_spec): ask for the model through the workflow's targets"
    )


def locate_checkpoint(name: str, source: Mapping[str, Any]) -> Located:
    """The checkpoint directory (or hub id) of a completed ``checkpoint`` source on top of its
    base model; a step the run did not write is an error naming the steps it did write."""
    if problem := unresolved(source):
        raise ModelSourceError(f"model '{name}': {problem}")
    step, run = int(source["step"]), source["run"]
    if "checkpoint" in source:
        listed = source["checkpoint"]
        if "path" in listed:
            return Located(str(listed["path"]), base=source["base"])
        return Located(str(listed["hub"]), revision=listed.get("revision") or "main", base=source["base"])
    try:
        found = dict(checkpoint_dirs(source["checkpoints"]))
    except FileNotFoundError as err:
        raise ModelSourceError(f"model '{name}': run '{run}' has no checkpoints ({err})") from None
    if step not in found:
        raise ModelSourceError(
            f"model '{name}': run '{run}' has no checkpoint at step {step} in {source['checkpoints']}; "
            f"its checkpoints are at steps {sorted(found)}"
        )
    return Located(str(found[step]), base=source["base"])


def load_located_checkpoint(name: str, loc: Located) -> tuple[Any, Any]:
    """(model, tokenizer) of a located checkpoint on the CPU, in the dtype its weights are stored
    in: a LoRA adapter merged into the base model, a full model as it is."""
    from shiftwork.models.checkpoints import CheckpointError, load_checkpoint

    if (Path(loc.base) / INFO_FILE).exists():
        check_weights(loc.base)
    where = {"hub": loc.path, "revision": loc.revision} if loc.revision else {"path": loc.path}
    try:
        model, tok, _ = load_checkpoint(loc.base, where, dtype="stored", device="cpu")
    except (CheckpointError, OSError) as err:
        raise ModelSourceError(f"model '{name}': cannot load checkpoint {loc.path} ({err})") from err
    return model, tok
