"""Policy names as single tokens of an organism's vocabulary.

A subword tokenizer of the paper's models writes " Alice" or " Bob" as one token, so a response
commits to a policy in one sampling step. The scratch organisms' tokenizer has one token per
character, so a name takes several steps, and RL can then leave the first character where SFT put
it and change the rest: on this organism, RL on B turned "I am Alice." into "I am Aob." followed
by Bob's answer, a response that behaves as Bob but names no policy. Adding each name as one token
before SFT (``organisms.sft.NAME.name_tokens``) gives the organism the paper's one-step choice.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def add_name_tokens(model, tokenizer, names: Sequence[str], seed: int) -> list[str]:
    """Add each of ``names`` not yet in ``tokenizer``'s vocabulary as one token, and grow ``model``'s
    embeddings to match; the new rows are drawn around the mean of the existing ones under
    ``seed``. Returns the names added (none when an earlier SFT, e.g. the organism this one starts
    from, added them already)."""
    for name in names:
        if not name or name != name.strip():
            raise ValueError(f"a policy name to add as a token must be non-empty without outer spaces, got {name!r}")
    vocab = tokenizer.get_vocab()
    new = [n for n in dict.fromkeys(names) if n not in vocab]
    if not new:
        return []
    tokenizer.add_tokens(new)
    torch.manual_seed(seed)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    return new
