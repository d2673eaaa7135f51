"""Generate and probe in the same forward passes.

The stability study asks two things of every model input x_v: its greedy response, and the
probe measurements of its prompt's baseline response r_0 teacher-forced after it (see
:mod:`shiftwork.inference.probe`). Both start with the same pass over x_v, so here it runs once.
Rows run in length-sorted groups of ``MIN_DECODE_ROWS`` on a CPU (a decoding step costs nearly
as much for 16 rows as for 128 there), or fewer where a group's longest input would not fit
them into the key/value store (:class:`~shiftwork.inference.kvcache.RowStore`, allocated once
per job, ``CPU_STORE_BYTES`` at most on a CPU, so that a job's memory follows neither its size
nor its longest input). Each group runs in three steps:

1. its inputs run in length-sorted chunks of ``batch_size`` rows, after the shared prefix's
   cached keys and values, straight into the group's rows of the store; each pass gives
   every layer's state at the input's last token (the activation axis) and the final state
   that predicts the first new token;
2. with references, each chunk's r_0 runs next on that chunk's cache in one teacher-forced
   pass, which with the final state from step 1 scores every token of r_0;
3. the whole group decodes greedily from the store. Without references (a baseline probes its
   own response) the log-probability and entropy of each chosen token are kept at every step,
   and they are the probe of the response wherever its text tokenizes back to the same tokens.

Models the greedy loop cannot drive (see :func:`~shiftwork.inference.generation.fast_path`), or
whose cache does not keep every token, generate with ``transformers`` and are probed by
:func:`~shiftwork.inference.probe.probe_batches`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from shiftwork.inference.batching import (
    budget_groups,
    generation_row_bytes,
    kv_token_bytes,
    plan_batch_size,
    probe_row_bytes,
)
from shiftwork.inference.generation import (
    Generation,
    _hf_generate,
    backbone,
    encode_inputs,
    fast_path,
    greedy_decode,
    left_pad,
    length_sorted_batches,
    responses,
    start_cache,
)
from shiftwork.inference.kvcache import RowStore, new_cache, plain_attention
from shiftwork.inference.prefix import Prefix, cache_argument, shared_prefix
from shiftwork.inference.probe import (
    ProbeResult,
    head_logits,
    last_position_states,
    log_softmax_entropy,
    probe_batches,
    response_ids,
    response_scores,
)
from shiftwork.models.loading import LoadedModel

# Rows decoded together at least, on a CPU (SmolLM2-135M, 2 threads: 7.6 ms per row and step at
# 16 rows, 3.4 at 64, 2.8 at 128).
MIN_DECODE_ROWS = 128

# Bytes of the key/value store on a CPU at most (unless one row of the longest input needs more):
# a group of long inputs decodes fewer rows, so that a job's memory follows neither its size nor
# its longest input. 896 MiB hold 128 rows of 159 positions of SmolLM2-135M in float32.
CPU_STORE_BYTES = 896 * 2**20


@dataclass
class Answer:
    generation: Generation
    probe: ProbeResult


def _scores(
    lm: LoadedModel,
    body,
    cache,
    first: torch.Tensor,
    mask: torch.Tensor,
    next_pos: torch.Tensor,
    refs: Sequence[Sequence[int]],
    pad_id: int,
) -> tuple[list[float], list[float], list[int]]:
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
        final = body(
            input_ids=ids.to(device),
            attention_mask=full_mask,
            position_ids=positions,
            use_cache=True,
            **{cache_argument(body): cache},
        ).last_hidden_state
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


class _StepScores:
    """Per row and decoding step: log-probability of the chosen token and entropy of the
    distribution it was chosen from (NaN where a row had stopped)."""

    def __init__(self, rows: int, steps: int):
        self.logprob = torch.full((rows, steps), float("nan"), dtype=torch.float64)
        self.entropy = torch.full((rows, steps), float("nan"), dtype=torch.float64)

    def __call__(self, step: int, live: torch.Tensor, logits: torch.Tensor) -> None:
        logp, entropy = log_softmax_entropy(logits)
        self.logprob[live.cpu(), step] = logp.max(dim=-1).values.double().cpu()
        self.entropy[live.cpu(), step] = entropy.double().cpu()

    def reuse(self, row: int, new: Sequence[int], ref: Sequence[int]) -> tuple[float, float, int] | None:
        """The probe of ``ref`` for ``row`` from its decoding steps, when ``ref`` is the start of
        what the row generated (``new``): each of its tokens was then chosen from the distribution
        teacher forcing would give."""
        n = len(ref)
        if n == 0 or list(new[:n]) != list(ref):
            return None
        return float(self.logprob[row, :n].sum()), float(self.entropy[row, :n].mean()), n


def _answer_group(
    lm: LoadedModel,
    body,
    encoded,
    group,
    chunk_size: int,
    prefix: Prefix | None,
    store: RowStore,
    references: Sequence[str] | None,
    max_new_tokens: int,
    eos: set[int],
    pad_id: int,
) -> list[Answer]:
    """One group of rows: their inputs run in chunks into ``store``; with references, each chunk's
    are scored right away on the chunk's cache; then the group decodes in one batch. Without
    references each row's own response is scored from its decoding steps (or, where its text
    does not give back the same tokens, teacher-forced afterwards)."""
    device = lm.device
    p = prefix.length if prefix is not None else 0
    tails = [encoded[i][p:] for i in group]
    ids, mask, positions = left_pad(tails, p, pad_id, device)
    width = ids.shape[1]
    next_pos = positions[:, -1:] + 1
    known = None if references is None else response_ids(lm, [references[i] for i in group])
    firsts, hidden, scores = [], [], [None] * len(group)
    for start in range(0, len(group), chunk_size):
        stop = min(start + chunk_size, len(group))
        w = max(len(t) for t in tails[start:stop])
        cache = store.cache(start, stop, p + width - w)
        with last_position_states(body) as layer_states:
            out = body(
                input_ids=ids[start:stop, width - w :],
                attention_mask=mask[start:stop],
                position_ids=positions[start:stop, width - w :],
                use_cache=True,
                **{cache_argument(body): cache},
            )
        first = out.last_hidden_state[:, -1]
        firsts.append(first)
        hidden += list(torch.stack(layer_states + [first], dim=1).float().cpu().numpy())
        if known is not None:
            # r_0 after the chunk's inputs, written past them into the store: scratch that decoding overwrites
            scores[start:stop] = zip(
                *_scores(lm, body, cache, first, mask[start:stop], next_pos[start:stop], known[start:stop], pad_id)
            )
    first = torch.cat(firsts)
    steps = None if known is not None else _StepScores(len(group), max_new_tokens)
    eos_dev = torch.tensor(sorted(eos), dtype=torch.long, device=device)
    new = greedy_decode(
        lm.model,
        store.cache(0, len(group), p + width),
        head_logits(lm, first),
        mask,
        next_pos,
        max_new_tokens,
        eos_dev,
        pad_id,
        observe=steps,
    )
    gens = responses(lm, new, group, eos)
    if known is None:
        refs = response_ids(lm, [g.response for g in gens])
        new_rows = new.tolist()
        scores = [steps.reuse(row, new_rows[row], refs[row]) for row in range(len(group))]
        # the rest (a response whose text tokenizes differently, an empty one) teacher-forced
        # after their inputs, run again: decoding has moved rows within the store
        rest = [row for row, s in enumerate(scores) if s is None]
        if rest:
            cache = start_cache(lm.model, prefix, len(rest), width + max(len(refs[row]) for row in rest))
            body(
                input_ids=ids[rest],
                attention_mask=mask[rest],
                position_ids=positions[rest],
                use_cache=True,
                **{cache_argument(body): cache},
            )
            scores_rest = zip(
                *_scores(lm, body, cache, first[rest], mask[rest], next_pos[rest], [refs[row] for row in rest], pad_id)
            )
            for row, s in zip(rest, scores_rest):
                scores[row] = s
    return [Answer(g, ProbeResult(g.index, lp, h, n, hid)) for g, (lp, h, n), hid in zip(gens, scores, hidden)]


def _answer_batch_plain(
    lm: LoadedModel,
    rows,
    indices,
    inputs: Sequence[str],
    references: Sequence[str] | None,
    max_new_tokens: int,
    eos: set[int],
    pad_id: int,
) -> list[Answer]:
    """The same for a model the greedy loop cannot drive: ``generate``, then a probe pass."""
    gens = responses(lm, _hf_generate(lm, rows, max_new_tokens, eos, pad_id), indices, eos)
    refs = list(references) if references is not None else [g.response for g in gens]
    (probes,) = probe_batches(lm, list(inputs), refs, batch_size=len(rows))
    by_index = {p.index: p for p in probes}
    return [
        Answer(
            g,
            ProbeResult(
                g.index, *[getattr(by_index[k], f) for f in ("logprob", "entropy", "n_response_tokens", "last_hidden")]
            ),
        )
        for k, g in enumerate(gens)
    ]


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
    encoded, eos, pad_id = encode_inputs(lm, inputs)
    lengths = [len(e) for e in encoded]
    longest_ref = max((len(r) for r in response_ids(lm, references)), default=0) if references is not None else 0
    extra = max(max_new_tokens, longest_ref)  # positions a row takes after its input
    longest = max(lengths) + extra
    row_bytes = generation_row_bytes(lm.model.config, lm.dtype, longest) + probe_row_bytes(
        lm.model.config, lm.dtype, longest
    )
    batch_size = plan_batch_size(lm.device, batch_size, row_bytes)
    body = backbone(lm.model)
    fast = fast_path(lm.model) and plain_attention(new_cache(lm.model.config), longest)
    prefix = shared_prefix(body, encoded, longest) if fast else None
    group_size = max(batch_size, MIN_DECODE_ROWS) if fast and lm.device.type == "cpu" else batch_size
    if not fast:
        groups = length_sorted_batches(lengths, group_size)
    else:
        budget = group_size * longest  # on a GPU the planned batch already fits the memory set aside
        if lm.device.type == "cpu":
            budget = CPU_STORE_BYTES // kv_token_bytes(lm.model.config, lm.dtype)
        groups = budget_groups(lengths, group_size, budget, extra)
        columns = [lengths[g[0]] + extra for g in groups]  # a group's first row is its longest
        # the largest group's layout: the budget for a large job, less for a small one
        tokens = max(len(g) * c for g, c in zip(groups, columns))
        store = RowStore(lm.model.config, tokens, lm.dtype, lm.device, prefix.states if prefix is not None else None)
    for n, group in enumerate(groups):
        with torch.inference_mode():
            if fast:
                store.layout(len(group), columns[n])
                yield _answer_group(
                    lm, body, encoded, group, batch_size, prefix, store, references, max_new_tokens, eos, pad_id
                )
            else:
                refs = None if references is None else [references[i] for i in group]
                yield _answer_batch_plain(
                    lm,
                    [encoded[i] for i in group],
                    group,
                    [inputs[i] for i in group],
                    refs,
                    max_new_tokens,
                    eos,
                    pad_id,
                )
