"""What a model source resolves to, and the error raised when it cannot be resolved: the two
names every source kind shares, in a module that imports no other part of shiftwork."""

from __future__ import annotations

from dataclasses import dataclass


class ModelSourceError(RuntimeError):
    """A model's weights cannot be found; the message says how to provide them."""


@dataclass(frozen=True)
class Located:
    """What ``from_pretrained`` needs: a directory or hub id, and optionally a GGUF file in it."""

    path: str
    gguf_file: str | None = None
    revision: str | None = None
    scratch: bool = False
    # set for a checkpoint of a training run: the directory of the model it was trained from
    base: str | None = None
