"""A GGUF's own record of the special tokens its tokenizer adds, honoured by the prepared tokenizer.

A GGUF file says whether its tokenizer puts a BOS (or EOS) token around every text
(``tokenizer.ggml.add_bos_token``, ``tokenizer.ggml.add_eos_token``). transformers' GGUF
conversion builds the tokenizer without those settings, so a model trained to see a BOS token
first gets none. Gemma 3 needs it: the packaged Gemma 3 270M without its BOS token has a
perplexity in the hundreds on plain English and answers in loops; with it, in the tens.
"""

from __future__ import annotations

import os
from typing import Any

from gguf import GGUFReader

#: GGUF metadata key -> the tokenizer attribute it sets
FLAGS: dict[str, str] = {
    "tokenizer.ggml.add_bos_token": "add_bos_token",
    "tokenizer.ggml.add_eos_token": "add_eos_token",
}


def special_token_flags(path: str | os.PathLike) -> dict[str, bool]:
    """The tokenizer attributes the GGUF at ``path`` records (only those it records)."""
    reader = GGUFReader(str(path))
    flags: dict[str, bool] = {}
    for key, attr in FLAGS.items():
        field = reader.fields.get(key)
        if field is not None:
            flags[attr] = bool(field.parts[field.data[0]][0])
    return flags


def honour_flags(tokenizer: Any, flags: dict[str, bool], where: str) -> list[str]:
    """Set each of ``flags`` on ``tokenizer`` where it differs; the attributes changed. Raises
    ValueError, naming ``where``, when the tokenizer then still does not add a BOS token that
    the GGUF asks for."""
    changed = []
    for attr, wanted in flags.items():
        if bool(getattr(tokenizer, attr, False)) != wanted:
            setattr(tokenizer, attr, wanted)
            changed.append(attr)
    if flags.get("add_bos_token") and tokenizer.bos_token_id is not None:
        first = tokenizer("a")["input_ids"][:1]
        if first != [tokenizer.bos_token_id]:
            raise ValueError(f"{where} asks for a BOS token before every text, and its tokenizer does not add one")
    return changed
