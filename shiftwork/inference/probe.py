"""Teacher-force the baseline response after each prompt, in one forward pass per batch.

From that single pass come all three probe measurements for a (prompt variant x_v, baseline
response r_0) pair:

- ``logprob``: sum over r_0's tokens of log p(token | x_v, earlier r_0 tokens);
- ``entropy``: mean over r_0's positions of the entropy (nats) of the next-token distribution;
- the hidden state of the last prompt token at every transformer layer (``hidden_states[1:]``,
  the last of which is the final-norm output), compared by cosine with the baseline prompt's.

Sequences are right-padded, so every real token keeps the positions it has when run alone.
Only the rows at r_0's positions go through the output head, which keeps memory small for
large vocabularies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from ..models.loading import LoadedModel
from .formatting import adds_special_tokens
from .generation import length_sorted_batches


@dataclass
class ProbeResult:
    index: int
    logprob: float
    entropy: float
    n_response_tokens: int
    last_hidden: np.ndarray  # (layers, hidden) float32


def encode_pairs(lm: LoadedModel, inputs: Sequence[str], responses: Sequence[str]) -> list[tuple[list[int], int]]:
    """Token ids of input followed by response, and the number of input tokens."""
    tok = lm.tokenizer
    special = adds_special_tokens(lm.chat)
    out = []
    for x, r in zip(inputs, responses):
        x_ids = tok(x, add_special_tokens=special).input_ids
        r_ids = tok(r, add_special_tokens=False).input_ids if r else []
        out.append((list(x_ids) + list(r_ids), len(x_ids)))
    return out


def _head(lm: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    logits = lm.model.get_output_embeddings()(hidden).float()
    cap = getattr(lm.model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def probe_batches(
    lm: LoadedModel,
    inputs: Sequence[str],
    responses: Sequence[str],
    batch_size: int,
) -> Iterator[list[ProbeResult]]:
    """Yield probe results batch by batch; ``index`` refers to the position in ``inputs``."""
    if len(inputs) != len(responses):
        raise ValueError(f"{len(inputs)} inputs but {len(responses)} responses")
    encoded = encode_pairs(lm, inputs, responses)
    pad_id = lm.tokenizer.pad_token_id
    for batch in length_sorted_batches([len(ids) for ids, _ in encoded], batch_size):
        seqs = [encoded[i] for i in batch]
        width = max(len(ids) for ids, _ in seqs)
        input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, (ids, _) in enumerate(seqs):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            mask[row, : len(ids)] = 1
        input_ids, mask = input_ids.to(lm.device), mask.to(lm.device)
        with torch.inference_mode():
            out = lm.model.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
            final = out.hidden_states[-1]
            rows, pos, targets, owner = [], [], [], []
            for row, (ids, n_in) in enumerate(seqs):
                # the state at position t predicts token t + 1: r_0's tokens sit at n_in .. len-1
                for t in range(n_in - 1, len(ids) - 1):
                    rows.append(row)
                    pos.append(t)
                    targets.append(ids[t + 1])
                    owner.append(row)
            results = []
            logprob = torch.zeros(len(seqs), dtype=torch.float64)
            entropy = torch.zeros(len(seqs), dtype=torch.float64)
            counts = torch.zeros(len(seqs), dtype=torch.float64)
            if rows:
                logits = _head(lm, final[torch.tensor(rows), torch.tensor(pos)])
                logp = torch.log_softmax(logits, dim=-1)
                token_lp = logp.gather(1, torch.tensor(targets, device=logp.device)[:, None])[:, 0]
                token_h = -(logp.exp() * logp).sum(-1)
                idx = torch.tensor(owner)
                logprob.index_add_(0, idx, token_lp.double().cpu())
                entropy.index_add_(0, idx, token_h.double().cpu())
                counts.index_add_(0, idx, torch.ones(len(owner), dtype=torch.float64))
            last = torch.tensor([n_in - 1 for _, n_in in seqs], device=final.device)
            rows_idx = torch.arange(len(seqs), device=final.device)
            hidden = torch.stack([h[rows_idx, last] for h in out.hidden_states[1:]], dim=1)
            hidden = hidden.float().cpu().numpy()  # (batch, layers, hidden)
        for row, i in enumerate(batch):
            n = int(counts[row])
            results.append(
                ProbeResult(
                    index=int(i),
                    logprob=float(logprob[row]),
                    entropy=float(entropy[row] / n) if n else 0.0,
                    n_response_tokens=n,
                    last_hidden=hidden[row],
                )
            )
        yield results


def layer_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity per layer of two (layers, hidden) arrays, in float64."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
