"""Teacher-force the baseline response after each prompt, in one forward pass per batch.

From that single pass come all three probe measurements for a (prompt variant x_v, baseline
response r_0) pair:

- ``logprob``: sum over r_0's tokens of log p(token | x_v, earlier r_0 tokens);
- ``entropy``: mean over r_0's positions of the entropy (nats) of the next-token distribution;
- the hidden state of the last prompt token at every transformer layer (``hidden_states[1:]``,
  the last of which is the final-norm output), compared by cosine with the baseline prompt's.

Sequences run longest first and right-padded, so every real token keeps the positions it has
when run alone. The tokens every sequence starts with (a chat template's system turn: 24 of
SmolLM2's ~90 tokens per row here) run once, and each batch continues from their key/value
cache. Only the states at r_0's positions go through the output head, in chunks, which keeps
memory small for large vocabularies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from shiftwork.inference.batching import length_sorted_batches, plan_batch_size, probe_row_bytes
from shiftwork.inference.formatting import adds_special_tokens
from shiftwork.models.loading import LoadedModel
from shiftwork.progress import Progress

# logits (float32) per output-head chunk: 16 MiB (85 rows of a 49k vocabulary); on 2 CPU threads as
# fast as 32 MiB chunks, and the transient memory of scoring is half
HEAD_CHUNK_ELEMENTS = 2**22


@dataclass
class ProbeResult:
    index: int
    logprob: float
    entropy: float
    n_response_tokens: int
    last_hidden: np.ndarray  # (layers, hidden) float32
    watched: np.ndarray | None = None  # log-probabilities of the watched tokens as the first response token


def encode_pairs(lm: LoadedModel, inputs: Sequence[str], responses: Sequence[str]) -> list[tuple[list[int], int]]:
    """Token ids of input followed by response, and the number of input tokens."""
    if not inputs:
        return []
    x_ids = lm.tokenizer(list(inputs), add_special_tokens=adds_special_tokens(lm.chat)).input_ids
    return [(list(x) + r, len(x)) for x, r in zip(x_ids, response_ids(lm, responses))]


def response_ids(lm: LoadedModel, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each response text, without special tokens (an empty text has none)."""
    nonempty = [t for t in texts if t]
    ids = dict(zip(nonempty, lm.tokenizer(nonempty, add_special_tokens=False).input_ids)) if nonempty else {}
    return [list(ids.get(t, [])) for t in texts]


def backbone(model):
    """The model without its output head (``model.model`` for transformers' causal LMs)."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "config") and hasattr(inner, "embed_tokens"):
        return inner
    return model.get_decoder()


def head_logits(lm: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    logits = lm.model.get_output_embeddings()(hidden).float()
    cap = getattr(lm.model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def log_softmax_entropy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (float32) of each row of ``logits`` (rows, vocab) and the entropy (nats)
    of each row's distribution, with one vocabulary-sized temporary besides the result."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = logp.exp().mul_(logp).sum(-1).neg_()
    return logp, entropy


def response_scores(lm: LoadedModel, states: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each target token and entropy (nats) of each next-token distribution,
    from the final states that predict them; the output head runs on chunks of rows."""
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    step = max(1, HEAD_CHUNK_ELEMENTS // vocab)
    lps, hs = [], []
    for start in range(0, len(states), step):
        logp, entropy = log_softmax_entropy(head_logits(lm, states[start : start + step]))
        lps.append(logp.gather(1, targets[start : start + step, None])[:, 0])
        hs.append(entropy)
    return torch.cat(lps), torch.cat(hs)


def right_pad(rows: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of ``rows`` padded on the right to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[k, : len(r)] = 1
    return ids.to(device), mask.to(device)


def shared_prefix_length(rows: Sequence[Sequence[int]], input_lengths: Sequence[int]) -> int:
    """How many leading tokens all ``rows`` share, ending before each row's last input token
    (whose state is measured, so it must run with its row)."""
    if not rows:
        return 0
    limit, first = min(input_lengths) - 1, rows[0]
    n = 0
    while n < limit and all(r[n] == first[n] for r in rows):
        n += 1
    return n


def prefix_cache(body, ids: Sequence[int], device):
    """The key/value cache of ``ids`` run through ``body``, or None for no tokens, or for a cache
    that cannot be copied once per row of a batch (the linear-attention layers of Qwen3.5's
    hybrid cache have no ``batch_repeat_interleave``): the batch then runs from the first token."""
    if not ids:
        return None
    with torch.inference_mode():
        cache = body(input_ids=torch.tensor([list(ids)], device=device), use_cache=True).past_key_values
    layers = getattr(cache, "layers", None)
    if not hasattr(cache, "batch_repeat_interleave") or (
        layers is not None and not all(hasattr(layer, "batch_repeat_interleave") for layer in layers)
    ):
        return None
    return cache


def _batch_inputs(seqs: Sequence[tuple[list[int], int]], p: int, prefix, pad_id: int, device) -> dict:
    """The backbone's arguments for one batch: each sequence without its first ``p`` tokens,
    right-padded, continuing from a copy of ``prefix``'s cache per row when there is one."""
    input_ids, mask = right_pad([ids[p:] for ids, _ in seqs], pad_id, device)
    kwargs = {"use_cache": False}
    if prefix is not None:  # the batch continues from the prefix's cache, one copy per row
        cache = copy.deepcopy(prefix)
        cache.batch_repeat_interleave(len(seqs))
        mask = torch.cat([mask.new_ones((len(seqs), p)), mask], dim=1)
        positions = torch.arange(p, p + input_ids.shape[1], device=device).expand(len(seqs), -1)
        kwargs = {"past_key_values": cache, "position_ids": positions, "use_cache": True}
    return {"input_ids": input_ids, "attention_mask": mask, **kwargs}


def _response_sums(
    lm: LoadedModel, final: torch.Tensor, seqs: Sequence[tuple[list[int], int]], p: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per sequence of the batch (float64): the sum of its response tokens' log-probabilities,
    the sum of the entropies of their next-token distributions, and how many tokens it has."""
    # the state at position t predicts token t + 1: r_0's tokens sit at n_in .. len-1
    rows = [row for row, (ids, n_in) in enumerate(seqs) for _ in range(n_in - 1, len(ids) - 1)]
    pos = [t - p for ids, n_in in seqs for t in range(n_in - 1, len(ids) - 1)]
    targets = [ids[t + 1] for ids, n_in in seqs for t in range(n_in - 1, len(ids) - 1)]
    logprob = torch.zeros(len(seqs), dtype=torch.float64)
    entropy = torch.zeros(len(seqs), dtype=torch.float64)
    counts = torch.zeros(len(seqs), dtype=torch.float64)
    if rows:
        states = final[torch.tensor(rows, device=final.device), torch.tensor(pos, device=final.device)]
        token_lp, token_h = response_scores(lm, states, torch.tensor(targets, device=final.device))
        owner = torch.tensor(rows)
        logprob.index_add_(0, owner, token_lp.double().cpu())
        entropy.index_add_(0, owner, token_h.double().cpu())
        counts.index_add_(0, owner, torch.ones(len(rows), dtype=torch.float64))
    return logprob, entropy, counts


def _watched_logprobs(lm: LoadedModel, last_states: torch.Tensor, watch: Sequence[int]) -> np.ndarray:
    """Log-probabilities (float64) of the ``watch`` tokens as the next token after each input,
    from the final states of the inputs' last tokens."""
    first = head_logits(lm, last_states)
    watched = torch.log_softmax(first, dim=-1)[:, torch.tensor(list(watch), device=last_states.device)]
    return watched.double().cpu().numpy()


def _batch_results(
    batch: Sequence[int],
    sums: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    hidden: np.ndarray,
    watched: np.ndarray | None,
) -> list[ProbeResult]:
    """The results of one batch (``batch``: the inputs' positions), the entropy averaged over each
    response's tokens (0 for an empty response)."""
    logprob, entropy, counts = sums
    results = []
    for row, i in enumerate(batch):
        n = int(counts[row])
        results.append(
            ProbeResult(
                index=int(i),
                logprob=float(logprob[row]),
                entropy=float(entropy[row] / n) if n else 0.0,
                n_response_tokens=n,
                last_hidden=hidden[row],
                watched=None if watched is None else watched[row],
            )
        )
    return results


def probe_batches(
    lm: LoadedModel,
    inputs: Sequence[str],
    responses: Sequence[str],
    batch_size: int,
    what: str = "probe",
    watch: Sequence[int] = (),
) -> Iterator[list[ProbeResult]]:
    """Yield probe results batch by batch; ``index`` refers to the position in ``inputs``. The
    count of rows done goes to the log as ``what`` (:class:`~shiftwork.progress.Progress`). With
    ``watch`` (token ids), each result's ``watched`` holds their log-probabilities as the token
    after the input, from the same pass (a one-token answer read off the probe, e.g. a verbaliser)."""
    if len(inputs) != len(responses):
        raise ValueError(f"{len(inputs)} inputs but {len(responses)} responses")
    encoded = encode_pairs(lm, inputs, responses)
    if not encoded:
        return
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    body = backbone(lm.model)
    p = shared_prefix_length([ids for ids, _ in encoded], [n_in for _, n_in in encoded])
    prefix = prefix_cache(body, encoded[0][0][:p], lm.device)
    if prefix is None:
        p = 0
    longest = max(len(ids) for ids, _ in encoded)
    batch_size = plan_batch_size(lm.device, batch_size, probe_row_bytes(lm.model.config, lm.dtype, longest))
    progress = Progress(what, len(encoded), "rows")
    for batch in length_sorted_batches([len(ids) for ids, _ in encoded], batch_size):
        seqs = [encoded[i] for i in batch]
        batch_inputs = _batch_inputs(seqs, p, prefix, pad_id, lm.device)
        with torch.inference_mode():
            out = body(**batch_inputs, output_hidden_states=True)
            final = out.hidden_states[-1]
            sums = _response_sums(lm, final, seqs, p)
            last = torch.tensor([n_in - 1 - p for _, n_in in seqs], device=final.device)
            rows_idx = torch.arange(len(seqs), device=final.device)
            hidden = torch.stack([h[rows_idx, last] for h in out.hidden_states[1:]], dim=1)
            hidden = hidden.float().cpu().numpy()  # (batch, layers, hidden)
            watched = _watched_logprobs(lm, final[rows_idx, last], watch) if len(watch) else None
        yield _batch_results(batch, sums, hidden, watched)
        progress.update(len(batch))


def layer_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity per layer of two (layers, hidden) arrays, in float64."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
