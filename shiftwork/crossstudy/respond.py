"""A checkpoint's responses to a prompt set's variants, and the probe of each against its prompt's
baseline response, in the tables the stability study's axis scoring reads
(:func:`shiftwork.stability.axes.axis_deltas`).

Two kinds of response:

``verbaliser`` (NLI checkpoints of the trajectory study)
    the label word whose next-token logit is larger after the input, as the trajectory study
    scores a checkpoint. The answer is one token, so one probe pass per input gives everything:
    the log-probabilities of every verbaliser (the prediction, and the log-probability of the
    baseline's answer), the entropy of the next-token distribution and the hidden states of the
    last input token.
``generate`` (organism checkpoints)
    the greedy response, then the probe pass that teacher-forces the baseline's response after
    each input (:func:`shiftwork.inference.probe.probe_batches`), as the stability study does.

Every distinct model input is run once; inputs equal to their baseline's get cosine 1 exactly."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from shiftwork.inference.engine import Decoding, generate
from shiftwork.inference.probe import layer_cosines, probe_batches
from shiftwork.models.loading import LoadedModel
from shiftwork.trajectory.tasks import verbaliser_ids

KEYS = ["model", "dataset", "prompt_id", "variant_id"]
META = ["family", "kind", "position", "strength"]
GENERATION_COLUMNS = [*KEYS, *META, "text", "model_input", "response", "n_tokens", "stopped"]
PROBE_COLUMNS = [*KEYS, "logprob", "entropy", "n_response_tokens", "act_cos", "act_cos_layers"]
MODES = ("verbaliser", "generate")


def _base_inputs(rows: pd.DataFrame) -> pd.Series:
    """Each row's baseline model input (the row of its prompt whose family is ``baseline``)."""
    base = rows[rows["family"] == "baseline"]
    if base["prompt_id"].duplicated().any() or set(rows["prompt_id"]) - set(base["prompt_id"]):
        raise ValueError("every prompt needs exactly one baseline row")
    return rows["prompt_id"].map(base.set_index("prompt_id")["model_input"])


def _probe_all(lm: LoadedModel, inputs: list[str], responses: list[str], batch_size: int, what: str, watch=()):
    """Probe results by input index."""
    out = {}
    for results in probe_batches(lm, inputs, responses, batch_size, what, watch=watch):
        out.update((r.index, r) for r in results)
    return out


def respond(
    lm: LoadedModel,
    rows: pd.DataFrame,
    mode: str,
    batch_size: int,
    verbalisers: Mapping[str, str] | None = None,
    max_new_tokens: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(generations, probes) of ``rows`` (one per variant, baselines included, with ``model_input``
    and the columns of :data:`KEYS` and :data:`META`): the tables of the stability study's generate
    step for one model, here one checkpoint."""
    if mode not in MODES:
        raise ValueError(f"response mode must be one of {MODES}, got {mode!r}")
    rows = rows.reset_index(drop=True)
    base_input = _base_inputs(rows)
    unique = list(dict.fromkeys(rows["model_input"]))
    if mode == "verbaliser":
        if not verbalisers:
            raise ValueError("verbaliser responses need the suite's verbalisers")
        words = list(verbalisers.values())
        ids = list(verbaliser_ids(lm.tokenizer, verbalisers).values())
        probed = _probe_all(lm, unique, [words[0]] * len(unique), batch_size, "probe inputs", watch=ids)
        at = {text: probed[i] for i, text in enumerate(unique)}
        pick = {text: int(np.argmax(r.watched)) for text, r in at.items()}
        response = {text: words[k].strip() for text, k in pick.items()}
        base_pick = [pick[b] for b in base_input]
        logprob = [float(at[t].watched[k]) for t, k in zip(rows["model_input"], base_pick)]
        entropy = [at[t].entropy for t in rows["model_input"]]
        hidden = {t: at[t].last_hidden for t in unique}
        n_tokens = [1] * len(rows)
        stopped = [True] * len(rows)
        n_response = [1] * len(rows)
    else:
        generations = dict(zip(unique, generate(lm, unique, Decoding(max_new_tokens, batch_size), "generate")))
        response = {t: g.response for t, g in generations.items()}
        n_tokens = [generations[t].n_tokens for t in rows["model_input"]]
        stopped = [generations[t].stopped for t in rows["model_input"]]
        pairs = list(dict.fromkeys(zip(rows["model_input"], base_input)))
        probed = _probe_all(lm, [p[0] for p in pairs], [response[p[1]] for p in pairs], batch_size, "probe")
        at = {pair: probed[i] for i, pair in enumerate(pairs)}
        keyed = list(zip(rows["model_input"], base_input))
        logprob = [at[k].logprob for k in keyed]
        entropy = [at[k].entropy for k in keyed]
        n_response = [at[k].n_response_tokens for k in keyed]
        hidden = {p[0]: at[p].last_hidden for p in pairs}
    cosines = [
        np.ones(hidden[t].shape[0]) if t == b else layer_cosines(hidden[t], hidden[b])
        for t, b in zip(rows["model_input"], base_input)
    ]
    gens = rows.assign(response=[response[t] for t in rows["model_input"]], n_tokens=n_tokens, stopped=stopped)[
        GENERATION_COLUMNS
    ]
    probes = rows[KEYS].assign(
        logprob=logprob,
        entropy=entropy,
        n_response_tokens=n_response,
        act_cos=[float(c.mean()) for c in cosines],
        act_cos_layers=[c.tolist() for c in cosines],
    )[PROBE_COLUMNS]
    return gens, probes
