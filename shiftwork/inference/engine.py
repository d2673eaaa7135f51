"""The one way every part of shiftwork turns inputs into text: :func:`generate`.

The backend decides how: a model loaded in transformers (:class:`~shiftwork.models.loading.LoadedModel`;
greedy, or ``samples`` sampled replies per input), a model served by vLLM
(:class:`~shiftwork.inference.generation.VllmEngine`; greedy), or a model behind an
OpenAI-compatible API (:class:`~shiftwork.inference.api.ApiClient`; greedy, cached per request).
:class:`Decoding` says how long, in which batches and how to sample. The stability study's
responses, the structural rewriter, the mirroring judge, the cross-study's responses and the
organisms' sampled evaluation all come through here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from shiftwork.inference.api import ApiClient, ApiResult, ApiSettings, Messages
from shiftwork.inference.generation import Generation, VllmEngine, generate_all
from shiftwork.models.loading import LoadedModel
from shiftwork.progress import Progress


@dataclass(frozen=True)
class Decoding:
    """How to decode. ``samples`` 0 is greedy; ``samples`` n > 0 draws n replies per input at
    ``temperature`` (pure sampling, no top-k or top-p cut), seeded by ``seed`` (0 when None); an
    API is sent ``seed`` only when it is given. ``logprobs`` and
    ``stop`` are for an API backend: whether to ask for the top log-probabilities, and its stop
    strings; so is ``draws``, one tag per input (None for none): equal inputs with different tags
    are separate requests, each cached on its own (a fresh draw of a reply an API may not repeat)."""

    max_new_tokens: int
    batch_size: int = 16
    samples: int = 0
    temperature: float = 1.0
    seed: int | None = None
    logprobs: bool = False
    stop: tuple[str, ...] | None = None
    draws: tuple[str | None, ...] | None = None


Backend = LoadedModel | VllmEngine | ApiClient


def generate(
    backend: Backend, inputs: Sequence[str] | Sequence[Messages], decoding: Decoding, what: str = "generate"
) -> list[Generation] | list[ApiResult] | list[list[str]]:
    """The replies to ``inputs``, in input order, the count done in the log as ``what``.

    Greedy from a local backend: one :class:`~shiftwork.inference.generation.Generation` per input
    (inputs are model inputs, the chat template already applied). From an API: one
    :class:`~shiftwork.inference.api.ApiResult` per input (chat messages for a chat model, a plain
    prompt for a base model). Sampled (transformers only): a list of ``samples`` stripped texts per
    input (inputs are tokenized as they are)."""
    if isinstance(backend, ApiClient):
        _greedy_only(backend, decoding)
        stop = list(decoding.stop) if decoding.stop is not None else None
        return backend.generate(inputs, decoding.max_new_tokens, decoding.logprobs, decoding.seed, stop, decoding.draws)
    if isinstance(backend, VllmEngine):
        _greedy_only(backend, decoding)
        _no_draws(backend, decoding)
        return backend.generate_all(inputs, decoding.max_new_tokens)
    if isinstance(backend, LoadedModel):
        _no_draws(backend, decoding)
        if decoding.samples:
            return sample_all(backend, inputs, decoding, what)
        return generate_all(backend, inputs, decoding.max_new_tokens, decoding.batch_size, what)
    raise TypeError(f"no generation backend {type(backend).__name__}; expected one of {Backend}")


def _greedy_only(backend: Backend, decoding: Decoding) -> None:
    if decoding.samples:
        raise ValueError(f"{type(backend).__name__} decodes greedily; sampling needs a model loaded in transformers")


def _no_draws(backend: Backend, decoding: Decoding) -> None:
    if decoding.draws is not None:
        raise ValueError(f"{type(backend).__name__} decodes deterministically; draw tags are for an API backend")


def sample_all(lm: LoadedModel, prompts: Sequence[str], decoding: Decoding, what: str = "sample") -> list[list[str]]:
    """``decoding.samples`` sampled continuations per prompt, deterministic for a given seed, batch
    size and device: prompts go in batches of ``batch_size // samples`` (at least one), and batch
    ``k`` starting at prompt ``start`` draws with seed ``seed + start``."""
    samples, batch_size = decoding.samples, decoding.batch_size
    if samples < 1 or batch_size < 1:
        raise ValueError(f"samples and batch_size must be >= 1, got {samples} and {batch_size}")
    tok = lm.tokenizer
    out: list[list[str]] = []
    per_batch = max(1, batch_size // samples)
    progress = Progress(what, len(prompts), "prompts")
    for start in range(0, len(prompts), per_batch):
        chunk = list(prompts[start : start + per_batch])
        enc = tok(chunk, return_tensors="pt", padding=True).to(lm.device)
        torch.manual_seed((decoding.seed or 0) + start)
        with torch.inference_mode():
            ids = lm.model.generate(
                **enc,
                do_sample=True,
                temperature=decoding.temperature,
                top_k=0,
                top_p=1.0,
                num_return_sequences=samples,
                max_new_tokens=decoding.max_new_tokens,
                pad_token_id=tok.pad_token_id,
            )
        texts = tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        out += [[t.strip() for t in texts[i * samples : (i + 1) * samples]] for i in range(len(chunk))]
        progress.update(len(chunk))
    return out


def make_complete(
    name: str, source: Mapping[str, Any], cache_dir: str | os.PathLike | None, **overrides: Any
) -> Callable[[Sequence[Messages], int], list[str]]:
    """``complete(messages_list, max_tokens) -> texts``: greedy replies of the chat model ``name``
    served over an API, for the structural rewriter and the mirroring judge. Each call reports
    its cache hits and misses to the log; ``complete.client`` is the underlying client."""
    client = ApiClient(ApiSettings.from_source(name, source, chat=True, **overrides), cache_dir)

    def complete(messages_list: Sequence[Messages], max_tokens: int) -> list[str]:
        texts = [r.text.strip() for r in generate(client, list(messages_list), Decoding(max_tokens))]
        client.report()
        return texts

    complete.client = client  # type: ignore[attr-defined]
    return complete
