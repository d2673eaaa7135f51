"""``trainer_args``: further fields of the training library's argument dataclass (transformers'
``TrainingArguments`` for trajectory fine-tuning, TRL's ``SFTConfig`` and ``GRPOConfig`` for the
organisms), passed as they are beside the fields shiftwork sets from its own keys."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Mapping
from typing import Any

TRAINER_CLASSES = {
    "TrainingArguments": "transformers",
    "SFTConfig": "trl",
    "GRPOConfig": "trl",
}
"""The argument dataclasses ``trainer_args`` may fill, by name, and the module that holds each."""


def trainer_class(name: str) -> type:
    return getattr(importlib.import_module(TRAINER_CLASSES[name]), name)


def field_names(name: str) -> set[str]:
    """The fields of argument dataclass ``name`` that its constructor takes."""
    return {f.name for f in dataclasses.fields(trainer_class(name)) if f.init}


def trainer_args_problems(extra: Any, classes: list[str]) -> list[str]:
    """Why ``extra`` (a ``trainer_args`` map) does not fit every dataclass of ``classes``: not a
    mapping, or keys that are no field of one of them (with the closest field names)."""
    if not isinstance(extra, Mapping):
        return [f"must be a mapping of {' / '.join(classes)} fields, got {extra!r}"]
    problems = []
    for name in classes:
        known = field_names(name)
        for key in sorted(set(extra) - known):
            close = difflib.get_close_matches(str(key), sorted(known), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            problems.append(f"'{key}' is not a field of {TRAINER_CLASSES[name]}.{name}{hint}")
    return problems


def with_trainer_args(
    settings: Mapping[str, Any], fixed: Mapping[str, Any], target: str | None = None
) -> dict[str, Any]:
    """``fixed`` (the fields shiftwork sets) and the ``trainer_args`` entry of ``settings`` (none
    when absent), further fields passed as they are (``{top_entropy_quantile: 0.2}``). A field
    that ``fixed`` already sets, or (given the dataclass name ``target``) one that is not a field
    of it, is an error naming it."""
    extra = settings.get("trainer_args") or {}
    if not isinstance(extra, Mapping):
        raise ValueError(f"trainer_args must be a mapping of trainer config fields, got {extra!r}")
    taken = sorted(set(extra) & set(fixed))
    if taken:
        raise ValueError(f"trainer_args sets {taken}, which shiftwork sets itself; use the training keys instead")
    if target is not None:
        problems = trainer_args_problems(extra, [target])
        if problems:
            raise ValueError("trainer_args: " + "; ".join(problems))
    return {**fixed, **extra}
