"""The generate step for a model served over an OpenAI-compatible API (``source.kind:
openai_compatible``): the same generations table as :func:`shiftwork.stability.steps.generate_responses`,
and a probes table holding only what an API lets one observe.

An API returns a reply and, at best, the log-probabilities of the reply's own tokens; it cannot
teacher-force the baseline response r_0 under a variant, nor show hidden states. So:

- ``act_cos``, ``act_cos_layers`` and ``logprob`` are missing (NaN / null) on every row, never 0:
  the Act and Prob axes cannot be observed.
- ``entropy`` is the mean over the row's own greedy reply of the top-k entropy estimate
  (:func:`shiftwork.inference.api.topk_entropy`, nats) where the server returns
  ``top_logprobs``, else missing. Where the variant's reply equals r_0 token for token it is
  the teacher-forced quantity of the local probe (up to the top-k truncation); where the two
  replies part, positions after the first differing token condition on different prefixes.
  ``tokens_shared_with_r0`` says how many leading tokens a row's reply shares with r_0, i.e. over
  how many positions the estimate is the local one. The reference implementation (SAGO's
  ``utils/closed_model_metrics.py``) also compares each reply's own log-probabilities, with
  ``top_logprobs=1`` and "entropy" -sum p log p over the chosen tokens' probabilities; here the
  top-k candidates give an estimate of the next-token entropy itself, averaged like the local one.
- BLEU, BERT and MR come from the replies, as for every other model.

``stability.generation.api_baseline`` says how often the baseline reply r_0 is asked for: ``once``
per prompt (every variant row is compared with that one reply), or ``per_row``, as the method's
closed-model runner asks for the baseline reply again beside every styled prompt
(``experiments/run_closed_models.py``): each variant row's own draw of r_0 is then a separate,
separately cached request (:func:`baseline_draws`), written in the row's ``baseline_response``
(generations) and ``baseline_entropy`` (probes), and the axes compare the row with it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from shiftwork.inference.api import ApiClient, ApiResult, ApiSettings, mean_topk_entropy
from shiftwork.inference.engine import Decoding, generate
from shiftwork.inference.formatting import PLAIN_STOP, plain_template, trim_response
from shiftwork.logs import LOGGER
from shiftwork.provenance import digest, make_provenance
from shiftwork.stability.jobs import ApiJob
from shiftwork.stability.rows import baseline_rows, shard_rows, throughput
from shiftwork.tables import read_table, write_table

KEYS = ["model", "dataset", "prompt_id", "variant_id"]
VARIANT_META = ["family", "kind", "position", "strength"]
GENERATION_COLUMNS = KEYS + VARIANT_META + ["text", "model_input", "response", "n_tokens", "stopped"]
PROBE_COLUMNS = KEYS + ["logprob", "entropy", "n_response_tokens", "act_cos", "act_cos_layers", "tokens_shared_with_r0"]
API_BASELINES: tuple[str, ...] = ("once", "per_row")


def api_model_input(text: str, chat: bool, plain_format: str = "qa") -> str:
    """What the API receives for a prompt: the JSON of the one-message chat (chat models) or the
    prompt in the model's plain format (base models); equal texts give equal inputs."""
    if chat:
        return json.dumps([{"role": "user", "content": text}], ensure_ascii=False)
    return plain_template(plain_format).format(prompt=text)


def api_weight_digest(settings: ApiSettings) -> str:
    """Stands in for a weight digest: the served model's name and address (its weights are unknown
    and may change behind the name; the response cache pins what was observed)."""
    return "api-" + digest({"base_url": settings.base_url, "model": settings.model})


def shared_prefix(a: Sequence[str] | None, b: Sequence[str] | None) -> int | None:
    if a is None or b is None:
        return None
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def api_responses(
    filtered_paths: str | Sequence[str],
    model_name: str,
    out_generations: str | Sequence[str],
    out_probes: str | Sequence[str],
    job: ApiJob,
) -> dict[str, Any]:
    """Greedy replies of an API model to the baseline and every kept variant, and the probes it
    allows (see the module docstring); one pair of tables per filtered table, in order. Every
    distinct input is requested once, through the response cache in ``job.cache_dir``."""
    filtered_paths, out_generations, out_probes = (
        [p] if isinstance(p, str) else list(p) for p in (filtered_paths, out_generations, out_probes)
    )
    if not len(filtered_paths) == len(out_generations) == len(out_probes):
        raise ValueError("generate_api_responses: one generations and one probes table per filtered table")
    if job.baseline not in API_BASELINES:
        raise ValueError(
            f"stability.generation.api_baseline must be one of {list(API_BASELINES)}, got {job.baseline!r}"
        )
    settings = ApiSettings.from_source(model_name, job.source, chat=job.chat)
    variants = _api_variants(filtered_paths, model_name, job)
    requests = api_requests(variants, job.baseline)
    LOGGER.info(
        "generate: %s over the API, %d rows, %d distinct requests", settings.where, len(variants), len(requests)
    )
    start = time.perf_counter()
    with ApiClient(settings, job.cache_dir) as client:
        prompts = [json.loads(x) if job.chat else x for x, _ in requests]
        decoding = Decoding(
            job.max_new_tokens,
            logprobs=bool(settings.top_logprobs),
            seed=job.seed,
            stop=None if job.chat else (PLAIN_STOP,),
            draws=tuple(tag for _, tag in requests) if job.baseline == "per_row" else None,
        )
        results = generate(client, prompts, decoding)
        counts = client.report()
    seconds = time.perf_counter() - start
    per_row = job.baseline == "per_row"
    gens, probes = _api_tables(variants, dict(zip(requests, results)), job.chat, per_row)
    gen_prov, probe_prov = _api_provenance(settings, model_name, job, counts)
    gen_columns = GENERATION_COLUMNS + (["baseline_response"] if per_row else [])
    probe_columns = PROBE_COLUMNS + (["baseline_entropy"] if per_row else [])
    for part, (g_path, p_path) in enumerate(zip(out_generations, out_probes)):
        write_table(gens.loc[gens["part"] == part, gen_columns], g_path, gen_prov)
        write_table(probes.loc[probes["part"] == part, probe_columns], p_path, probe_prov)
    n_tokens = int(sum(r.n_tokens for r in results))
    stats = throughput("generate over the API", len(variants), len(requests), n_tokens, seconds)
    return stats | counts


def baseline_draws(variants: pd.DataFrame) -> list[str | None]:
    """The draw tag of each row's own request for its prompt's baseline reply (``per_row``): None
    for a baseline row, whose reply is the baseline reply itself; for a variant row its dataset,
    prompt and variant, so that every variant row gets a reply to the baseline prompt of its own."""
    columns = (variants[c] for c in ("family", "dataset", "prompt_id", "variant_id"))
    return [None if f == "baseline" else f"baseline for {d}/{p}/{v}" for f, d, p, v in zip(*columns)]


def api_requests(variants: pd.DataFrame, baseline: str = "once") -> list[tuple[str, str | None]]:
    """The distinct (input, draw tag) requests the rows need, in order: every row's input once
    (no tag), then with ``per_row`` each variant row's own draw of its baseline input."""
    requests = [(x, None) for x in dict.fromkeys(variants["model_input"])]
    if baseline == "per_row":
        own = zip(variants["base_input"], baseline_draws(variants))
        requests += [key for key in dict.fromkeys(own) if key[1] is not None]
    return requests


def _api_variants(filtered_paths: Sequence[str], model_name: str, job: ApiJob) -> pd.DataFrame:
    """The job's rows of every filtered table (its shard), with the table each came from
    (``part``), its API input and its baseline's."""
    parts = []
    for part, path in enumerate(filtered_paths):
        table = read_table(path, ["dataset", "prompt_id", "variant_id", "text"] + VARIANT_META)
        table = shard_rows(table, job.shard, job.n_shards).reset_index(drop=True)
        # integer positions even for a table with no rows (the gate kept no prompt of the data set,
        # or a shard got none), where the mapped index would be an empty float series
        base = table["prompt_id"].map(baseline_rows(table, path)).astype(int)
        inputs = [api_model_input(t, job.chat, job.plain_format) for t in table["text"]]
        table = table.assign(part=part, model=model_name, model_input=inputs)
        parts.append(table.assign(base_input=table["model_input"].to_numpy()[base.to_numpy()]))
    return pd.concat(parts, ignore_index=True)


def _api_tables(
    variants: pd.DataFrame, answer: Mapping[tuple[str, str | None], ApiResult], chat: bool, per_row: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The generations and the probes of every row from the answers to the distinct requests;
    with ``per_row`` also each row's own draw of the baseline reply and its entropy."""
    mine = [answer[(x, None)] for x in variants["model_input"]]
    tags = baseline_draws(variants) if per_row else [None] * len(variants)
    base = [answer[key] for key in zip(variants["base_input"], tags)]
    gens = variants.assign(
        response=[trim_response(r.text, chat) for r in mine],
        n_tokens=[r.n_tokens for r in mine],
        stopped=[r.stopped for r in mine],
    )
    probes = variants[KEYS + ["part"]].assign(
        logprob=math.nan,
        entropy=[mean_topk_entropy(r) for r in mine],
        n_response_tokens=[r.n_tokens for r in mine],
        act_cos=math.nan,
        act_cos_layers=None,
        tokens_shared_with_r0=[shared_prefix(r.tokens, b.tokens) for r, b in zip(mine, base)],
    )
    probes["tokens_shared_with_r0"] = probes["tokens_shared_with_r0"].astype("Int64")
    if per_row:
        gens["baseline_response"] = [trim_response(b.text, chat) for b in base]
        probes["baseline_entropy"] = [mean_topk_entropy(b) for b in base]
    return gens, probes


def _api_provenance(
    settings: ApiSettings, model_name: str, job: ApiJob, counts: Mapping[str, int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The provenance of the generations table and of the probes table."""
    common = {"model": model_name, "weight_digest": api_weight_digest(settings)}
    shards = {"shard": job.shard, "n_shards": job.n_shards} if job.n_shards > 1 else {}
    extra = {"engine": "api", "api_requests": counts} | shards
    gen_settings = {"max_new_tokens": job.max_new_tokens, "engine": "api", "temperature": 0.0, "seed": job.seed}
    if job.baseline != "once":  # a job at the default records nothing new
        gen_settings["api_baseline"] = job.baseline
    gen_prov = make_provenance("generate", gen_settings | {"api": settings.public()}, **common, extra=extra)
    probe_settings = {"api": settings.public(), "observable": ["entropy"] if settings.top_logprobs else []}
    return gen_prov, make_provenance("probe", probe_settings, **common, extra=extra)
