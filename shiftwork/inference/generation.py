"""Batched greedy generation under ``torch.inference_mode``.

Inputs are tokenized once and grouped into length-sorted batches (larger ones on a GPU, see
:mod:`shiftwork.inference.batching`). The token prefix every input
shares (a chat model's system turn) runs through the model once and its key/value cache is
reused by every batch (:mod:`shiftwork.inference.prefix`). Each batch is left-padded after that
prefix and decoded by a plain greedy loop: one forward pass per new token for the rows still
running, rows that reached an end-of-sequence token leave the batch, and logits are computed
for the last position only. Token ids stay on the device until the batch is done.

Models whose forward does not take position ids and a cache (e.g. a PEFT wrapper) use
``transformers``' ``generate`` instead; both give the greedy continuation of every input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from shiftwork.inference.batching import generation_row_bytes, longest_first, plan_batch_size
from shiftwork.inference.formatting import adds_special_tokens, trim_response
from shiftwork.inference.kvcache import new_cache
from shiftwork.inference.prefix import Prefix, cache_argument, shared_prefix
from shiftwork.models.loading import LoadedModel


@dataclass
class Generation:
    index: int
    response: str
    n_tokens: int
    stopped: bool


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Indices grouped into batches of similar length, longest first (so memory peaks early)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = longest_first(lengths)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def eos_token_ids(lm: LoadedModel) -> set[int]:
    ids = lm.model.generation_config.eos_token_id
    if ids is None:
        ids = lm.tokenizer.eos_token_id
    ids = ids if isinstance(ids, (list, tuple)) else [ids]
    return {int(i) for i in ids if i is not None}


def backbone(model):
    """The model without its output head (``model.model`` for transformers' causal LMs)."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "config") and hasattr(inner, "embed_tokens"):
        return inner
    return model.get_decoder()


#: attention kernels the greedy loop is checked with: both take the padding between a shared
#: prefix and a row's tokens as an ordinary mask (flash-attention's unpadding path is not tested here)
MASKED_ATTENTION = {"eager", "sdpa"}


def fast_path(model) -> bool:
    """Whether ``model`` can run the greedy loop here: a causal LM whose forward takes position
    ids, a key/value cache and ``logits_to_keep``, with an attention kernel of :data:`MASKED_ATTENTION`."""
    params = inspect.signature(model.forward).parameters
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    return (
        attention in MASKED_ATTENTION
        and {"position_ids", "logits_to_keep"} <= set(params)
        and ("cache" in params or "past_key_values" in params)
    )


def left_pad(tails: Sequence[Sequence[int]], prefix_len: int, pad_id: int, device) -> tuple[torch.Tensor, ...]:
    """(input ids, attention mask over prefix and tails, position ids of the tails) for rows
    left-padded between the shared prefix and their own tokens."""
    width = max(len(t) for t in tails)
    ids = torch.full((len(tails), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(tails), prefix_len + width), dtype=torch.long)
    mask[:, :prefix_len] = 1
    for row, t in enumerate(tails):
        ids[row, width - len(t) :] = torch.tensor(t, dtype=torch.long)
        mask[row, prefix_len + width - len(t) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, prefix_len:]
    return ids.to(device), mask.to(device), positions.to(device)


def start_cache(model, prefix: Prefix | None, n: int, room: int):
    """A key/value cache for ``n`` rows, ``prefix``'s or an empty one, with room to grow by ``room`` tokens."""
    if prefix is not None:
        return prefix.cache(n, room)
    return new_cache(model.config, room)


def greedy_decode(
    model,
    cache,
    logits: torch.Tensor,
    mask: torch.Tensor,
    next_pos: torch.Tensor,
    max_new_tokens: int,
    eos: torch.Tensor,
    pad_id: int,
    observe: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Greedy continuation of a batch whose inputs are already in ``cache``: ``logits`` are the
    last input position's, ``mask`` the attention mask so far and ``next_pos`` (rows, 1) the
    position of each row's first new token. A (rows, max_new_tokens) tensor on the CPU,
    ``pad_id`` after a row's end-of-sequence token. ``cache`` is consumed. ``observe(step, rows,
    logits)``, if given, sees the logits each step chooses from, for the rows still running."""
    n = logits.shape[0]
    new = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=logits.device)
    cache_kw = {cache_argument(model): cache}
    live = torch.arange(n, device=logits.device)  # the rows still running, as indices into the batch
    for step in range(max_new_tokens):
        if observe is not None:
            observe(step, live, logits)
        token = logits.argmax(-1)
        new[live, step] = token
        if step == max_new_tokens - 1:
            break
        running = ~torch.isin(token, eos)
        if not bool(running.all()):
            keep = running.nonzero()[:, 0]
            if keep.numel() == 0:
                break
            live, token, mask, next_pos = live[keep], token[keep], mask[keep], next_pos[keep]
            cache.batch_select_indices(keep)
        mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=1)
        logits = model(
            input_ids=token[:, None], attention_mask=mask, position_ids=next_pos, use_cache=True, **cache_kw
        ).logits[:, -1]
        next_pos = next_pos + 1
    return new.cpu()


def greedy_batch(
    model,
    rows: Sequence[Sequence[int]],
    prefix: Prefix | None,
    max_new_tokens: int,
    eos: torch.Tensor,
    pad_id: int,
) -> torch.Tensor:
    """Greedy continuations of ``rows`` (token ids, each starting with ``prefix``'s tokens):
    a (rows, max_new_tokens) tensor on the CPU, ``pad_id`` after a row's end-of-sequence token."""
    device = eos.device
    p = prefix.length if prefix is not None else 0
    if max_new_tokens < 1:
        return torch.full((len(rows), 0), pad_id, dtype=torch.long)
    ids, mask, positions = left_pad([r[p:] for r in rows], p, pad_id, device)
    cache = start_cache(model, prefix, len(rows), ids.shape[1] + max_new_tokens)
    logits = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
        **{cache_argument(model): cache},
    ).logits[:, -1]
    return greedy_decode(model, cache, logits, mask, positions[:, -1:] + 1, max_new_tokens, eos, pad_id)


def _hf_generate(lm: LoadedModel, rows: Sequence[Sequence[int]], max_new_tokens: int, eos: set[int], pad_id: int):
    ids, mask, _ = left_pad(rows, 0, pad_id, lm.device)
    out = lm.model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos),
        temperature=None,
        top_p=None,
        top_k=None,
    )
    new = out[:, ids.shape[1] :].cpu()
    if new.shape[1] < max_new_tokens:  # every row stopped early
        new = torch.cat([new, new.new_full((len(rows), max_new_tokens - new.shape[1]), pad_id)], dim=1)
    return new


def response_ends(new: torch.Tensor, eos: set[int]) -> tuple[list[int], list[bool]]:
    """Per row: tokens before the first end-of-sequence token, and whether there was one."""
    is_eos = torch.isin(new, torch.tensor(sorted(eos), dtype=new.dtype))
    stopped = is_eos.any(dim=1)
    first = torch.where(stopped, is_eos.int().argmax(dim=1), torch.full_like(stopped, new.shape[1], dtype=torch.long))
    return first.tolist(), stopped.tolist()


def responses(lm: LoadedModel, new: torch.Tensor, indices: Sequence[int], eos: set[int]) -> list[Generation]:
    """The responses in a batch of new tokens (``greedy_batch``'s output): each row's text up to its
    first end-of-sequence token, trimmed of chat markup, with its token count."""
    tok = lm.tokenizer
    ends, stopped = response_ends(new, eos)
    out = []
    for row, idx, n, done in zip(new.tolist(), indices, ends, stopped):
        text = tok.decode(row[:n], skip_special_tokens=True)
        trimmed = trim_response(text, lm.chat)
        if trimmed != text.strip():
            n = len(tok(trimmed, add_special_tokens=False).input_ids)
        out.append(Generation(int(idx), trimmed, n, bool(done)))
    return out


def encode_inputs(lm: LoadedModel, inputs: Sequence[str]) -> tuple[list[list[int]], set[int], int]:
    """(token ids of each input, the model's end-of-sequence ids, the id padding rows)."""
    tok = lm.tokenizer
    encoded = [list(ids) for ids in tok(list(inputs), add_special_tokens=adds_special_tokens(lm.chat)).input_ids]
    eos = eos_token_ids(lm)
    return encoded, eos, tok.pad_token_id if tok.pad_token_id is not None else min(eos)


def generate_batches(
    lm: LoadedModel,
    inputs: Sequence[str],
    max_new_tokens: int,
    batch_size: int,
) -> Iterator[list[Generation]]:
    """Yield the greedy continuations of ``inputs`` batch by batch (indices refer to ``inputs``)."""
    if not inputs:
        return
    encoded, eos, pad_id = encode_inputs(lm, inputs)
    longest = max(len(e) for e in encoded) + max_new_tokens
    batch_size = plan_batch_size(lm.device, batch_size, generation_row_bytes(lm.model.config, lm.dtype, longest))
    fast = fast_path(lm.model)
    prefix = shared_prefix(backbone(lm.model), encoded, longest) if fast else None
    eos_dev = torch.tensor(sorted(eos), dtype=torch.long, device=lm.device)
    for batch in length_sorted_batches([len(e) for e in encoded], batch_size):
        rows = [encoded[i] for i in batch]
        with torch.inference_mode():
            if fast:
                new = greedy_batch(lm.model, rows, prefix, max_new_tokens, eos_dev, pad_id)
            else:
                new = _hf_generate(lm, rows, max_new_tokens, eos, pad_id)
        yield responses(lm, new, batch, eos)


def generate_all(lm: LoadedModel, inputs: Sequence[str], max_new_tokens: int, batch_size: int) -> list[Generation]:
    """All generations, in the order of ``inputs``."""
    out: list[Generation | None] = [None] * len(inputs)
    for batch in generate_batches(lm, inputs, max_new_tokens, batch_size):
        for g in batch:
            out[g.index] = g
    return out  # type: ignore[return-value]
