"""Generate and probe in the same forward passes.

The stability study asks two things of every model input x_v: its greedy response, and the
probe measurements of its prompt's baseline response r_0 teacher-forced after it (see
:mod:`shiftwork.inference.probe`). Both start with the same pass over x_v, so here it runs once:

1. inputs are run in length-sorted chunks of ``batch_size`` rows (after the shared prefix's
   cached keys and values), which gives every layer's state at each input's last token (the
   activation axis) and the final state that predicts the first new token;
2. the chunks' caches are stacked into one decoding group of at least ``MIN_DECODE_ROWS`` rows
   and the greedy loop runs on it: a decoding step costs nearly as much for 16 rows as for 128
   on a CPU, while running inputs of very different lengths in one chunk wastes work on padding;
3. each chunk's own cache still holds just its inputs, so r_0 (each row's reference; for a
   baseline its own response) runs on it in one teacher-forced pass, which with the final state
   from step 1 scores every token of r_0.

Models the greedy loop cannot drive (see :func:`~shiftwork.inference.generation.fast_path`), or
whose cache does not keep every token, generate with ``transformers`` and are probed by
:func:`~shiftwork.inference.probe.probe_batches`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from ..models.loading import LoadedModel
from .batching import generation_row_bytes, plan_batch_size, probe_row_bytes
from .formatting import adds_special_tokens
from .generation import (
    Generation,
    _hf_generate,
    backbone,
    eos_token_ids,
    fast_path,
    greedy_decode,
    left_pad,
    length_sorted_batches,
    responses,
    start_cache,
)
from .kvcache import new_cache, plain_attention, stack_caches
from .prefix import Prefix, cache_argument, shared_prefix
from .probe import ProbeResult, probe_batches, response_ids, response_scores


# Rows decoded together at least, on a CPU (SmolLM2-135M, 2 threads: 7.6 ms per row and step at
# 16 rows, 3.4 at 64, 2.8 at 128).
MIN_DECODE_ROWS = 128


@dataclass
class Answer:
    generation: Generation
    probe: ProbeResult


def _scores(lm: LoadedModel, body, cache, first: torch.Tensor, mask: torch.Tensor, next_pos: torch.Tensor,
            refs: Sequence[Sequence[int]], pad_id: int) -> tuple[list[float], list[float], list[int]]:
    """Log-probability, mean entropy and length of each row's reference tokens ``refs``, given the
    final state ``first`` (rows, hidden) of each row's last input token and the inputs' ``cache``
    (which the teacher-forced pass extends)."""
    device = first.device
    n = len(refs)
    states = [first[[row for row in range(n) if refs[row]]]]
    owners = [row for row in range(n) if refs[row]]
    targets = [r[0] for r in refs if r]
    width = max(len(r) for r in refs) - 1
    if width > 0:  # every reference token after the first, predicted by the state before it
        ids = torch.full((n, width), pad_id, dtype=torch.long)
        tail_mask = torch.zeros((n, width), dtype=torch.long)
        for row, r in enumerate(refs):
            if len(r) > 1:
                ids[row, : len(r) - 1] = torch.tensor(r[:-1], dtype=torch.long)
                tail_mask[row, : len(r) - 1] = 1
        full_mask = torch.cat([mask, tail_mask.to(device)], dim=1)
        positions = next_pos + torch.arange(width, device=device)[None]
        final = body(input_ids=ids.to(device), attention_mask=full_mask, position_ids=positions, use_cache=True,
                     **{cache_argument(body): cache}).last_hidden_state
        rows = [row for row, r in enumerate(refs) for _ in range(len(r) - 1)]
        cols = [j for r in refs for j in range(len(r) - 1)]
        states.append(final[torch.tensor(rows, device=device), torch.tensor(cols, device=device)])
        owners += rows
        targets += [t for r in refs for t in r[1:]]
    logprob = torch.zeros(n, dtype=torch.float64)
    entropy = torch.zeros(n, dtype=torch.float64)
    if targets:
        token_lp, token_h = response_scores(lm, torch.cat(states), torch.tensor(targets, device=device))
        owner = torch.tensor(owners)
        logprob.index_add_(0, owner, token_lp.double().cpu())
        entropy.index_add_(0, owner, token_h.double().cpu())
    counts = [len(r) for r in refs]
    return logprob.tolist(), [float(h) / c if c else 0.0 for h, c in zip(entropy.tolist(), counts)], counts


@dataclass
class _Chunk:
    """One chunk of inputs after their pass: its cache (prefix, left padding, inputs), attention
    mask, next positions, final state at the last input token, and every layer's state there."""

    indices: Sequence[int]
    cache: object
    mask: torch.Tensor
    next_pos: torch.Tensor
    first: torch.Tensor
    last_hidden: object

    @property
    def length(self) -> int:
        return self.mask.shape[1]


def _run_inputs(lm: LoadedModel, body, rows, indices, prefix: Prefix | None, pad_id: int, room: int) -> _Chunk:
    p = prefix.length if prefix is not None else 0
    ids, mask, positions = left_pad([r[p:] for r in rows], p, pad_id, lm.device)
    cache = start_cache(lm.model, prefix, len(rows), ids.shape[1] + room)
    out = body(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, output_hidden_states=True,
               **{cache_argument(body): cache})
    last_hidden = torch.stack([h[:, -1] for h in out.hidden_states[1:]], dim=1).float().cpu().numpy()
    return _Chunk(indices, cache, mask, positions[:, -1:] + 1, out.last_hidden_state[:, -1], last_hidden)


def _decode(lm: LoadedModel, chunks: Sequence[_Chunk], prefix_len: int, max_new_tokens: int, eos: set[int],
            pad_id: int) -> torch.Tensor:
    """Greedy continuations of all rows of ``chunks``, stacked into one batch."""
    width = max(c.length for c in chunks)
    masks = [torch.cat([c.mask[:, :prefix_len], c.mask.new_zeros((len(c.indices), width - c.length)),
                        c.mask[:, prefix_len:]], dim=1) for c in chunks]
    cache = stack_caches([c.cache for c in chunks], [c.length for c in chunks], prefix_len, lm.model.config,
                         max_new_tokens)
    logits = lm.model.get_output_embeddings()(torch.cat([c.first for c in chunks]))
    eos_dev = torch.tensor(sorted(eos), dtype=torch.long, device=lm.device)
    return greedy_decode(lm.model, cache, logits, torch.cat(masks), torch.cat([c.next_pos for c in chunks]),
                         max_new_tokens, eos_dev, pad_id)


def _answer_group(lm: LoadedModel, body, encoded, group, chunk_size: int, prefix: Prefix | None,
                  references: Sequence[str] | None, max_new_tokens: int, eos: set[int], pad_id: int) -> list[Answer]:
    known = None if references is None else response_ids(lm, [references[i] for i in group])
    room = max([max_new_tokens] + [len(r) for r in known or []])
    chunks = [_run_inputs(lm, body, [encoded[i] for i in group[k : k + chunk_size]], group[k : k + chunk_size], prefix,
                          pad_id, room) for k in range(0, len(group), chunk_size)]
    p = prefix.length if prefix is not None else 0
    gens = responses(lm, _decode(lm, chunks, p, max_new_tokens, eos, pad_id), group, eos)
    refs = known if known is not None else response_ids(lm, [g.response for g in gens])
    answers, start = [], 0
    for c in chunks:
        part = refs[start : start + len(c.indices)]
        logprob, entropy, counts = _scores(lm, body, c.cache, c.first, c.mask, c.next_pos, part, pad_id)
        answers += [Answer(g, ProbeResult(g.index, lp, h, n, hidden)) for g, lp, h, n, hidden in
                    zip(gens[start : start + len(c.indices)], logprob, entropy, counts, c.last_hidden)]
        start += len(c.indices)
    return answers


def _answer_batch_plain(lm: LoadedModel, rows, indices, inputs: Sequence[str], references: Sequence[str] | None,
                        max_new_tokens: int, eos: set[int], pad_id: int) -> list[Answer]:
    """The same for a model the greedy loop cannot drive: ``generate``, then a probe pass."""
    gens = responses(lm, _hf_generate(lm, rows, max_new_tokens, eos, pad_id), indices, eos)
    refs = list(references) if references is not None else [g.response for g in gens]
    (probes,) = probe_batches(lm, list(inputs), refs, batch_size=len(rows))
    by_index = {p.index: p for p in probes}
    return [Answer(g, ProbeResult(g.index, *[getattr(by_index[k], f) for f in ("logprob", "entropy",
                                  "n_response_tokens", "last_hidden")])) for k, g in enumerate(gens)]


def answer_batches(
    lm: LoadedModel,
    inputs: Sequence[str],
    max_new_tokens: int,
    batch_size: int,
    references: Sequence[str] | None = None,
) -> Iterator[list[Answer]]:
    """Yield, batch by batch, each input's greedy response and its probe with ``references[i]``
    teacher-forced after input ``i`` (its own response where ``references`` is None). Indices in
    the results refer to ``inputs``."""
    if references is not None and len(references) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs but {len(references)} references")
    if not inputs:
        return
    tok = lm.tokenizer
    encoded = [list(ids) for ids in tok(list(inputs), add_special_tokens=adds_special_tokens(lm.chat)).input_ids]
    eos = eos_token_ids(lm)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else min(eos)
    longest_ref = max((len(r) for r in response_ids(lm, references)), default=0) if references is not None else 0
    longest = max(len(e) for e in encoded) + max(max_new_tokens, longest_ref)
    row_bytes = generation_row_bytes(lm.model.config, lm.dtype, longest) + probe_row_bytes(lm.model.config, lm.dtype, longest)
    batch_size = plan_batch_size(lm.device, batch_size, row_bytes)
    body = backbone(lm.model)
    fast = fast_path(lm.model) and plain_attention(new_cache(lm.model.config), longest)
    prefix = shared_prefix(body, encoded, longest) if fast else None
    # on a GPU the planned batch already fills the memory set aside for it
    group_size = max(batch_size, MIN_DECODE_ROWS) if fast and lm.device.type == "cpu" else batch_size
    for group in length_sorted_batches([len(e) for e in encoded], group_size):
        with torch.inference_mode():
            if fast:
                yield _answer_group(lm, body, encoded, group, batch_size, prefix, references, max_new_tokens, eos, pad_id)
            else:
                refs = None if references is None else [references[i] for i in group]
                yield _answer_batch_plain(lm, [encoded[i] for i in group], group, [inputs[i] for i in group], refs,
                                          max_new_tokens, eos, pad_id)
