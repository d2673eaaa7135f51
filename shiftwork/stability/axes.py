"""The six signed SAGO deltas of a variant against its prompt's baseline.

For prompt ``i`` with baseline reply ``r_0`` and a variant ``v`` with reply ``r_v``:

* ``Act``  = act_cos(v) - 1 (hidden-state cosine to the baseline, averaged over layers, or the
  last layer's with ``act_layers: last``)
* ``BLEU`` = BLEU(r_v, r_0) - BLEU(r_0, r_0): ``sentence`` BLEU (effective order, the default)
  scores any non-empty reply 100 against itself, so this is BLEU(r_v, r_0) - 100; the method's
  one-pair ``corpus`` BLEU scores a reply of under four tokens 0 against itself
* ``BERT`` = BERTScore F1(r_v, r_0) - 1 (``raw``), or ``rescaled``: clip((F1 - b) / (1 - b), 0, 1) - 1
* ``Prob`` = logprob(r_0 | v) - logprob(r_0 | baseline)
* ``Ent``  = entropy(v) - entropy(baseline) (mean next-token entropy over r_0's positions)
* ``MR``   = mirroring(r_v, r_0) - mirroring(r_0, r_0) for the variant's family/kind/strength
  (a length variant: see ``length_mirroring``), or the judge's verdict on the pair (register and
  form, with a judge)

How each is defined where the method and shiftwork differ is a named option (:class:`AxisRules`).

Every delta is 0 when nothing changed: baseline rows are set to exactly 0, identical replies give
BLEU = BERT = 0 exactly, and identical model inputs give Act = Prob = Ent = 0 exactly.

A source that cannot observe an axis (an API model has no hidden states, and log-probabilities
only if the API returns them) leaves its probe column (``act_cos``, ``logprob``, ``entropy``)
missing on every row: that axis is then NaN on every row, baselines included (*unobservable*).
A probe column missing on some rows only is an error naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sacrebleu

from shiftwork.stability.gate import estimate_baseline
from shiftwork.stability.judge import is_judged
from shiftwork.stability.mirroring import LENGTH_MIRRORING, length_mirroring_delta, mirroring
from shiftwork.stability.variants.structural import BASELINES, LENGTH_ANCHORS, anchor_strengths

AXES: tuple[str, ...] = ("Act", "BLEU", "BERT", "Prob", "Ent", "MR")
KEY: list[str] = ["model", "dataset", "prompt_id", "variant_id"]
PROMPT_KEY: list[str] = ["model", "dataset", "prompt_id"]
GENERATION_COLUMNS: list[str] = [
    *KEY,
    "family",
    "kind",
    "position",
    "strength",
    "model_input",
    "response",
]
PROBE_COLUMNS: list[str] = [*KEY, "logprob", "entropy", "act_cos"]
META_COLUMNS: list[str] = [*KEY, "family", "kind", "position", "strength"]
OUTPUT_COLUMNS: list[str] = [*META_COLUMNS, *AXES, "flipped", "mr_source"]
# where a row's MR comes from: the judge's verdict, or the rule-based detectors
MR_SOURCES: tuple[str, ...] = ("judge", "rules")

BertF1 = Callable[[list[str], list[str]], np.ndarray]
BLEU_DEFINITIONS: tuple[str, ...] = ("sentence", "corpus")
BERT_SCALES: tuple[str, ...] = ("raw", "rescaled")
ACT_LAYERS: tuple[str, ...] = ("mean", "last")
EMPTY_BASELINES: tuple[str, ...] = ("floor", "zero")
# the probe column each model-side axis is computed from
PROBE_AXES: dict[str, str] = {"Act": "act_cos", "Prob": "logprob", "Ent": "entropy"}


def _require(df: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}")


def _ids(values: pd.Series | Sequence[object], limit: int = 20) -> str:
    ids = sorted({str(v) for v in values})
    more = f" (+{len(ids) - limit} more)" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def bleu_score(candidate: str, reference: str, definition: str = "sentence") -> float:
    """BLEU (0-100) of ``candidate`` against the one ``reference``, clipped to [0, 100].

    ``sentence``: ``sacrebleu.sentence_bleu(candidate, [reference])`` (13a tokens, exp smoothing,
    effective order: a reply of 1-3 tokens is scored on the n-gram orders it has). ``corpus``: the
    method's ``sacrebleu.corpus_bleu([candidate], [[reference]])`` (13a tokens, exp smoothing, no
    effective order: a candidate of under 4 tokens scores 0, even against itself). The arguments
    are the libraries' defaults, spelt out so that a change of default cannot change the axis.
    """
    if definition == "sentence":
        score = sacrebleu.sentence_bleu(
            candidate, [reference], smooth_method="exp", lowercase=False, tokenize="13a", use_effective_order=True
        ).score
    elif definition == "corpus":
        score = sacrebleu.corpus_bleu(
            [candidate],
            [[reference]],
            smooth_method="exp",
            lowercase=False,
            tokenize="13a",
            use_effective_order=False,
        ).score
    else:
        raise ValueError(f"stability.axes.bleu must be one of {list(BLEU_DEFINITIONS)}, got {definition!r}")
    return min(max(float(score), 0.0), 100.0)


def _bleu_delta(response: str, reference: str, definition: str = "sentence") -> float:
    """BLEU(response, reference) - BLEU(reference, reference), as the method anchors the delta at
    its baseline row (whose reply is the reference).

    ``sentence``: an empty side scores 0 (delta -100); a non-empty reference scores 100 against
    itself, so the delta is BLEU - 100, in [-100, 0]. ``corpus``: exactly the library's scores, so
    against a reference of under 4 tokens (which scores 0 against itself) the delta is
    BLEU(response, reference) >= 0; the delta lies in [-100, 100].
    """
    if definition == "sentence":
        if not response.strip() or not reference.strip():
            return -100.0
        return bleu_score(response, reference, "sentence") - 100.0
    return bleu_score(response, reference, definition) - bleu_score(reference, reference, definition)


def rescaled_bert_delta(f1: np.ndarray, b: float) -> np.ndarray:
    """``clip((f1 - b) / (1 - b), 0, 1) - 1``: the BERT axis on the rescaled scale, in [-1, 0].

    A rescaled score under 0 (a reply further from r_0 than the average unrelated reply is) is
    set to 0: below the unrelated level the encoder says nothing more about the reply, and
    unclipped values fall without bound as b nears 1 (b = 0.9, F1 = 0 gives -9), which would
    let one empty reply dominate a prompt's RMS. Raises ValueError unless 0 <= b < 1.
    """
    if not 0.0 <= b < 1.0:
        raise ValueError(f"stability.axes.bert_baseline must lie in [0, 1), got {b}")
    return np.clip((np.asarray(f1, dtype=np.float64) - b) / (1.0 - b), 0.0, 1.0) - 1.0


def bert_baseline(
    generations: pd.DataFrame,
    bert_f1: BertF1,
    baseline: float | str = "auto",
    seed: int = 0,
    max_pairs: int = 2000,
) -> dict[str, object]:
    """The rescale baseline b of the BERT axis: ``{"b", "method", "n_pairs"}``.

    A number is taken as given. ``auto`` is the mean F1 of mismatched pairs (as the gate's
    estimate: ordered pairs i != j, at most ``max_pairs`` drawn by ``seed``) of the non-empty
    baseline replies r_0 of ``generations``, one per prompt: replies to unrelated prompts.
    Raises ValueError with fewer than two such replies, or when b falls outside [0, 1).
    """
    if baseline != "auto":
        b, method, n_pairs = float(baseline), "config", 0
    else:
        base = generations[generations["family"] == "baseline"]
        texts = [r for r in base["response"].tolist() if isinstance(r, str) and r.strip()]
        if len(texts) < 2:
            raise ValueError(
                f"stability.axes.bert_baseline auto needs the replies to at least 2 prompts, got {len(texts)} "
                "non-empty baseline replies; give bert_baseline as a number"
            )
        b, n_pairs = estimate_baseline(bert_f1, texts, max_pairs=max_pairs, seed=seed)
        method = "mismatched baseline reply pairs"
    if not 0.0 <= b < 1.0:
        raise ValueError(f"BERT axis rescale baseline b = {b} ({method}) lies outside [0, 1)")
    return {"b": b, "method": method, "n_pairs": n_pairs}


def _observable(df: pd.DataFrame) -> dict[str, bool]:
    """Per model-side axis: True if its probe column is complete, False if it is missing on every
    row (unobservable); ValueError naming the rows when it is missing on some rows only."""
    out = {}
    for axis, column in PROBE_AXES.items():
        miss = df[column].isna().to_numpy()
        if miss.any() and not miss.all():
            raise ValueError(
                f"probes column '{column}' (axis {axis}) is missing on some rows only, for variant_id(s): "
                f"{_ids(df.loc[miss, 'variant_id'])}; an axis must be observed on every row or on none"
            )
        out[axis] = not miss.any()
    return out


@dataclass(frozen=True)
class AxisRules:
    """How each delta is defined, one named option each (the keys of ``stability.axes`` and
    ``stability.variants.structural`` they come from are in the schema):

    * ``structural_baseline``: ``rewrite`` or ``original`` (see :func:`anchor_structural`);
      ``length_anchor``: ``rewrite`` (the 1.0x rewrite) or ``original`` (the prompt itself);
    * ``bleu``: :func:`bleu_score`'s definition; ``bert_b``: the rescale baseline of the BERT
      axis, None for the raw F1 - 1;
    * ``noise_detector``: the surface-noise mirroring rule; ``length_mirroring``: see
      :func:`shiftwork.stability.mirroring.length_mirroring_delta`;
    * ``empty_baseline``: ``floor`` (an empty baseline reply scores the floor against any
      reply: BLEU -100 with ``sentence``, BERT -1) or ``zero`` (see :func:`zero_against_empty`);
    * ``act_layers``: ``mean`` (the cosine averaged over layers) or ``last`` (the last layer's,
      :func:`last_layer_cosine`).
    """

    structural_baseline: str = "original"
    bleu: str = "sentence"
    bert_b: float | None = None
    noise_detector: str = "margin"
    length_anchor: str = "rewrite"
    length_mirroring: str = "at_multiple"
    empty_baseline: str = "floor"
    act_layers: str = "mean"


def check_rules(rules: AxisRules) -> None:
    """ValueError naming the option of ``rules`` that holds a value it does not know."""
    known = {
        "structural_baseline": ("stability.variants.structural.baseline", BASELINES),
        "length_anchor": ("stability.variants.structural.length_anchor", LENGTH_ANCHORS),
        "bleu": ("stability.axes.bleu", BLEU_DEFINITIONS),
        "length_mirroring": ("stability.axes.length_mirroring", LENGTH_MIRRORING),
        "empty_baseline": ("stability.axes.empty_baseline", EMPTY_BASELINES),
        "act_layers": ("stability.axes.act_layers", ACT_LAYERS),
    }
    for field, (key, values) in known.items():
        value = getattr(rules, field)
        if value not in values:
            raise ValueError(f"{key} must be one of {list(values)}, got {value!r}")


def axis_deltas(
    generations: pd.DataFrame,
    probes: pd.DataFrame,
    bert_f1: BertF1,
    judge: Callable[[pd.DataFrame], Sequence[int]] | None = None,
    structural_baseline: str = "original",
    bleu: str = "sentence",
    bert_b: float | None = None,
    noise_detector: str = "margin",
) -> pd.DataFrame:
    """:func:`variant_deltas` with these four rules and the others at their defaults."""
    rules = AxisRules(structural_baseline, bleu, bert_b, noise_detector)
    return variant_deltas(generations, probes, bert_f1, judge, rules)


def variant_deltas(
    generations: pd.DataFrame,
    probes: pd.DataFrame,
    bert_f1: BertF1,
    judge: Callable[[pd.DataFrame], Sequence[int]] | None = None,
    rules: AxisRules | None = None,
) -> pd.DataFrame:
    """One row per variant (baselines included) with the six signed deltas and a ``flipped`` flag,
    each delta as ``rules`` define it (:class:`AxisRules`; its defaults when None). An axis whose
    probe column is missing on every row comes out NaN on every row (see the module docstring).

    ``bert_f1(candidates, references)`` returns BERTScore F1 per pair; it is called once, with
    every (r_v, r_0) pair whose stripped texts differ, and not at all if there is none.
    ``flipped`` is True when ``r_v.strip() != r_0.strip()``. With ``judge`` (a table of
    (original, variant) pairs -> one 0/1 verdict per pair, see :mod:`shiftwork.stability.judge`),
    register and sentence-form mirroring are the judge's verdicts instead of the rule-based
    detectors; generations then need their ``text`` column (the prompt each reply answered).
    ``mr_source`` says where each row's MR comes from: ``judge`` on the rows the judge decided,
    ``rules`` on every other row (every row without a judge).
    Where the generations hold a ``baseline_response`` column (an API model whose baseline reply
    is asked for again for every row), that reply is the row's r_0 (:func:`own_baselines`).

    With ``structural_baseline="rewrite"`` (the method's anchoring, see
    :mod:`shiftwork.stability.variants.structural`) a structural variant's six deltas are its
    deltas against the original minus those of its anchor rewrite of the same prompt (the 1.0x
    length rewrite, unless ``length_anchor`` is ``original``; the interrogative form rewrite),
    ``flipped`` compares its reply with the anchor's, and the anchor rows themselves are left out
    (they are not variants).

    Raises ValueError if a rule has an unknown value, a column is missing, a (model, dataset,
    prompt_id, variant_id) key is duplicated, a generation has no probe row, a prompt has no or
    several baseline rows, or a probe column is missing on some rows only.
    """
    rules = rules or AxisRules()
    check_rules(rules)
    pairs = paired_rows(generations, with_act_layers(probes, rules.act_layers))
    deltas = {
        "Act": probe_delta(pairs, "Act"),
        "BLEU": bleu_deltas(pairs, rules.bleu, rules.empty_baseline),
        "BERT": bert_deltas(pairs, bert_f1, rules.bert_b, rules.empty_baseline),
        "Prob": probe_delta(pairs, "Prob"),
        "Ent": probe_delta(pairs, "Ent"),
        "MR": mirroring_deltas(pairs, judge, rules.noise_detector, rules.length_mirroring),
    }
    judged = judged_rows(pairs) if judge is not None else np.zeros(len(pairs.df), dtype=bool)
    flipped = pairs.changed.copy()
    keep = np.ones(len(pairs.df), dtype=bool)
    if rules.structural_baseline == "rewrite":
        keep = anchor_structural(pairs, deltas, flipped, rules.length_anchor)
    out = pairs.df[META_COLUMNS].copy()
    for axis in AXES:
        out[axis] = deltas[axis]
    out["flipped"] = flipped
    out["mr_source"] = np.where(judged, "judge", "rules")
    return out.loc[keep, OUTPUT_COLUMNS].reset_index(drop=True)


def last_layer_cosine(layers: object) -> float:
    """The last-prompt-token cosine at the last layer (``hidden_states[-1]``, as the method's
    ``get_layer_activations_batch(layer_idx=-1)`` reads it) from a row's per-layer cosines; NaN
    where none are recorded (an API model)."""
    if layers is None or (isinstance(layers, float) and np.isnan(layers)):
        return float("nan")
    values = np.asarray(layers, dtype=np.float64).ravel()
    return float(values[-1]) if values.size else float("nan")


def with_act_layers(probes: pd.DataFrame, act_layers: str) -> pd.DataFrame:
    """``probes`` with ``act_cos`` as the Act axis reads it: as stored (the mean over layers), or
    with ``last`` the last layer's cosine (:func:`last_layer_cosine`; needs ``act_cos_layers``)."""
    if act_layers == "mean":
        return probes
    _require(probes, ["act_cos_layers"], "probes (for stability.axes.act_layers: last)")
    return probes.assign(act_cos=[last_layer_cosine(x) for x in probes["act_cos_layers"]])


@dataclass(frozen=True)
class Pairs:
    """Every variant row joined with its prompt's baseline row (``base_*`` columns), and what the
    axes share: which rows are baselines, the replies r_v and r_0, which replies and model inputs
    equal the baseline's, and which model-side axes the probes observe."""

    df: pd.DataFrame
    is_base: np.ndarray
    r_v: list[str]
    r_0: list[str]
    same_text: np.ndarray
    same_input: np.ndarray
    observable: dict[str, bool]

    @property
    def changed(self) -> np.ndarray:
        """Variant rows whose reply differs from r_0 (stripped)."""
        return ~self.same_text & ~self.is_base


def _validated(generations: pd.DataFrame, probes: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The columns the axes read, after checking columns, duplicate keys and reply types."""
    _require(generations, GENERATION_COLUMNS, "generations")
    _require(probes, PROBE_COLUMNS, "probes")
    extra = [c for c in ("text", "baseline_response") if c in generations.columns]
    gen = generations[GENERATION_COLUMNS + extra].reset_index(drop=True)
    prb = probes[PROBE_COLUMNS + [c for c in ("baseline_entropy",) if c in probes.columns]]
    for frame, name in ((gen, "generations"), (prb, "probes")):
        dup = frame.duplicated(KEY, keep=False)
        if dup.any():
            raise ValueError(f"{name} has duplicate rows for variant_id(s): {_ids(frame.loc[dup, 'variant_id'])}")
    bad_resp = ~gen["response"].map(lambda r: isinstance(r, str))
    if bad_resp.any():
        raise ValueError(
            f"generations column 'response' must hold str; not for variant_id(s): "
            f"{_ids(gen.loc[bad_resp, 'variant_id'])}"
        )
    return gen, prb


def _check_one_baseline(df: pd.DataFrame, is_base: np.ndarray) -> None:
    """ValueError naming the prompts with no baseline row or more than one."""
    n_base = pd.Series(is_base, index=df.index).groupby([df[c] for c in PROMPT_KEY], sort=False).transform("sum")
    wrong = (n_base != 1).to_numpy()
    if not wrong.any():
        return
    bad = df.loc[wrong]
    none = bad.loc[n_base[wrong] == 0]
    many = bad.loc[n_base[wrong] > 1]
    parts = []
    if len(none):
        parts.append(
            f"no baseline row for prompt_id(s) {_ids(none['prompt_id'])} (variant_id(s): {_ids(none['variant_id'])})"
        )
    if len(many):
        parts.append(
            f"more than one baseline row for prompt_id(s) {_ids(many['prompt_id'])} "
            f"(variant_id(s): {_ids(many['variant_id'])})"
        )
    raise ValueError("; ".join(parts))


def paired_rows(generations: pd.DataFrame, probes: pd.DataFrame) -> Pairs:
    """The validated generations with their probes, each row beside its prompt's baseline."""
    gen, prb = _validated(generations, probes)
    df = gen.merge(prb, on=KEY, how="left", indicator=True, validate="one_to_one")
    no_probe = df["_merge"] != "both"
    if no_probe.any():
        raise ValueError(f"probes has no row for variant_id(s): {_ids(df.loc[no_probe, 'variant_id'])}")
    df = df.drop(columns="_merge")
    observable = _observable(df)
    is_base = (df["family"] == "baseline").to_numpy()
    _check_one_baseline(df, is_base)
    base = df.loc[is_base, [*PROMPT_KEY, "response", "model_input", "logprob", "entropy"]]
    base = base.rename(
        columns={
            "response": "base_response",
            "model_input": "base_input",
            "logprob": "base_logprob",
            "entropy": "base_entropy",
        }
    )
    df = own_baselines(df.merge(base, on=PROMPT_KEY, how="left", validate="many_to_one"))
    r_v = df["response"].tolist()
    r_0 = df["base_response"].tolist()
    same_text = np.array([a.strip() == b.strip() for a, b in zip(r_v, r_0)], dtype=bool)
    same_input = (df["model_input"] == df["base_input"]).to_numpy() | is_base
    return Pairs(df, is_base, r_v, r_0, same_text, same_input, observable)


def own_baselines(df: pd.DataFrame) -> pd.DataFrame:
    """Rows joined with their baseline row (``base_*`` columns), where a row holds its own draw of
    the baseline reply (``baseline_response``; ``baseline_entropy`` in its probes), as the method
    asks a closed model for the baseline reply again on every row (``run_closed_models.py``):
    that draw stands in for the baseline row's reply and entropy."""
    out = df
    for own, base in (("baseline_response", "base_response"), ("baseline_entropy", "base_entropy")):
        if own in out.columns:
            given = out[own].notna()
            out = out.assign(**{base: out[base].where(~given, out[own])})
    return out


def probe_delta(pairs: Pairs, axis: str) -> np.ndarray:
    """Act, Prob or Ent: the probe value against the baseline's (Act: the cosine minus 1); exactly 0
    where the model input is the baseline's, NaN there too when the axis is unobservable."""
    df = pairs.df
    if axis == "Act":
        delta = df["act_cos"].to_numpy(dtype=np.float64) - 1.0
    else:
        column = PROBE_AXES[axis]
        delta = df[column].to_numpy(dtype=np.float64) - df[f"base_{column}"].to_numpy(dtype=np.float64)
    delta[pairs.same_input] = 0.0 if pairs.observable[axis] else np.nan
    return delta


def zero_against_empty(delta: np.ndarray, r_0: Sequence[str]) -> np.ndarray:
    """``delta`` with 0 where the baseline reply is empty (whitespace only): the method's scores of
    such a row. Its corpus BLEU and bert-score give an empty reference 0 against any reply and
    against itself, so its delta, the variant's score minus the baseline row's, is 0 - 0."""
    out = np.array(delta, dtype=np.float64)
    out[np.array([not r.strip() for r in r_0], dtype=bool)] = 0.0
    return out


def bleu_deltas(pairs: Pairs, bleu: str, empty_baseline: str = "floor") -> np.ndarray:
    """The BLEU axis (:func:`_bleu_delta`) of each changed reply; 0 elsewhere, and with
    ``empty_baseline`` ``zero`` where r_0 is empty (:func:`zero_against_empty`)."""
    delta = np.zeros(len(pairs.df), dtype=np.float64)
    for i in np.flatnonzero(pairs.changed):
        delta[i] = _bleu_delta(pairs.r_v[i], pairs.r_0[i], bleu)
    return zero_against_empty(delta, pairs.r_0) if empty_baseline == "zero" else delta


def bert_deltas(pairs: Pairs, bert_f1: BertF1, bert_b: float | None, empty_baseline: str = "floor") -> np.ndarray:
    """The BERT axis of each changed reply (one call of ``bert_f1`` for all); 0 elsewhere, and with
    ``empty_baseline`` ``zero`` where r_0 is empty (:func:`zero_against_empty`)."""
    delta = np.zeros(len(pairs.df), dtype=np.float64)
    idx = np.flatnonzero(pairs.changed)
    if len(idx):
        f1 = np.asarray(bert_f1([pairs.r_v[i] for i in idx], [pairs.r_0[i] for i in idx]), dtype=np.float64)
        if f1.shape != (len(idx),):
            raise ValueError(f"bert_f1 returned shape {f1.shape} for {len(idx)} pairs; expected ({len(idx)},)")
        delta[idx] = f1 - 1.0 if bert_b is None else rescaled_bert_delta(f1, bert_b)
    return zero_against_empty(delta, pairs.r_0) if empty_baseline == "zero" else delta


def mirroring_deltas(
    pairs: Pairs,
    judge: Callable[[pd.DataFrame], Sequence[int]] | None,
    noise_detector: str,
    length_mirroring: str = "at_multiple",
) -> np.ndarray:
    """The MR axis: the rule-based mirroring delta of each variant (a length variant's by
    :func:`~shiftwork.stability.mirroring.length_mirroring_delta` with ``length_mirroring``), or
    the judge's verdict on the pairs it judges (register and form, with a judge); 0 on baselines."""
    df, is_base, r_v, r_0 = pairs.df, pairs.is_base, pairs.r_v, pairs.r_0
    mr = np.zeros(len(df), dtype=np.float64)
    fam, kind, strength = df["family"].tolist(), df["kind"].tolist(), df["strength"].tolist()
    judged = judged_rows(pairs) if judge is not None else np.zeros(len(df), dtype=bool)
    for i in np.flatnonzero(~is_base & ~judged):
        if (fam[i], kind[i]) == ("structural", "length"):
            mr[i] = length_mirroring_delta(r_v[i], r_0[i], strength[i], length_mirroring)
            continue
        mr[i] = mirroring(r_v[i], r_0[i], fam[i], kind[i], strength[i], noise_detector) - mirroring(
            r_0[i], r_0[i], fam[i], kind[i], strength[i], noise_detector
        )
    if judged.any():
        rows = np.flatnonzero(judged)
        verdicts = np.asarray(judge(_judge_pairs(pairs, rows)), dtype=np.float64)
        if verdicts.shape != (len(rows),):
            raise ValueError(f"judge returned shape {verdicts.shape} for {len(rows)} pairs")
        mr[rows] = verdicts
    return mr


def judged_rows(pairs: Pairs) -> np.ndarray:
    """The rows a judge decides the MR of: the variants (not baselines) of a judged family and kind
    (:func:`~shiftwork.stability.judge.is_judged`: register tone, structural form)."""
    df = pairs.df
    return np.array([not b and is_judged(f, k) for b, f, k in zip(pairs.is_base, df["family"], df["kind"])], dtype=bool)


def _judge_pairs(pairs: Pairs, rows: np.ndarray) -> pd.DataFrame:
    """The (original, variant) prompt and reply pairs of ``rows``, as the judge reads them."""
    df = pairs.df
    _require(df, ["text"], "generations (for the judge)")
    base_text = df["text"].where(pairs.is_base).groupby([df[c] for c in PROMPT_KEY], sort=False).transform("first")
    return pd.DataFrame(
        {
            "variant_id": df["variant_id"].to_numpy()[rows],
            "family": df["family"].to_numpy()[rows],
            "kind": df["kind"].to_numpy()[rows],
            "strength": df["strength"].to_numpy(dtype=np.float64)[rows],
            "original_prompt": base_text.to_numpy()[rows],
            "original_reply": [pairs.r_0[i] for i in rows],
            "variant_prompt": df["text"].to_numpy()[rows],
            "variant_reply": [pairs.r_v[i] for i in rows],
        }
    )


def anchor_structural(
    pairs: Pairs, deltas: dict[str, np.ndarray], flipped: np.ndarray, length_anchor: str = "rewrite"
) -> np.ndarray:
    """The method's anchoring of structural variants, in place: each delta minus its anchor
    rewrite's (exactly 0 where the reply, or for the model-side axes the input, is the anchor's),
    ``flipped`` against the anchor's reply; with ``length_anchor`` ``original`` length variants keep
    their deltas against the original prompt. Returns the mask of rows to keep (not the anchors)."""
    rows, anchors, is_anchor = _anchor_rows(pairs.df, length_anchor)
    for arr in deltas.values():
        arr[rows] = arr[rows] - arr[anchors]
    r_v = pairs.r_v
    same_reply = np.array([r_v[i].strip() == r_v[j].strip() for i, j in zip(rows, anchors)], dtype=bool)
    inputs = pairs.df["model_input"].to_numpy()
    same_in = inputs[rows] == inputs[anchors]
    for axis in ("BLEU", "BERT"):
        deltas[axis][rows[same_reply]] = 0.0
    for axis in PROBE_AXES:
        if pairs.observable[axis]:
            deltas[axis][rows[same_in]] = 0.0
    flipped[rows] = ~same_reply
    return ~is_anchor


def _anchor_rows(df: pd.DataFrame, length_anchor: str = "rewrite") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the structural variants measured against an anchor, of their anchors, and
    the mask of anchor rows (the kinds :func:`~shiftwork.stability.variants.structural.anchor_strengths`
    anchors).

    Raises ValueError naming the prompts whose structural variants lack their anchor rewrite."""
    strength_of = anchor_strengths(length_anchor)
    kinds = df["kind"].to_numpy()
    structural = (df["family"] == "structural").to_numpy() & np.isin(kinds, list(strength_of))
    strengths = df["strength"].to_numpy(dtype=np.float64)
    anchor_strength = np.array([strength_of.get(k, np.nan) for k in kinds], dtype=np.float64)
    is_anchor = structural & (strengths == anchor_strength)
    keys = [*PROMPT_KEY, "kind"]
    where = {tuple(k): i for k, i in zip(df.loc[is_anchor, keys].itertuples(index=False), np.flatnonzero(is_anchor))}
    rows = np.flatnonzero(structural & ~is_anchor)
    found = [where.get(tuple(k)) for k in df.loc[structural & ~is_anchor, keys].itertuples(index=False)]
    missing = [i for i, a in zip(rows, found) if a is None]
    if missing:
        raise ValueError(
            "structural variants without their anchor rewrite (1.0x length / interrogative form) for "
            f"variant_id(s): {_ids(df['variant_id'].iloc[missing])}; was the rewriter run with "
            "structural.baseline: original?"
        )
    return rows, np.asarray(found, dtype=np.int64), is_anchor


def unobservable_axes(deltas: pd.DataFrame) -> list[str]:
    """The axes of ``deltas`` that are NaN on every row (none for an empty table)."""
    if deltas.empty:
        return []
    return [a for a in AXES if deltas[a].isna().all()]


def check_ranges(
    deltas: pd.DataFrame,
    tol: float = 1e-6,
    bleu: str = "sentence",
    bert_scale: str = "raw",
    structural_baseline: str = "original",
) -> list[str]:
    """Sanity violations in an :func:`axis_deltas` table, one message per (variant, axis).

    Flags: Act outside [-2, 0]; BLEU outside [-100, 0] (``sentence``) or [-100, 100]
    (``corpus``, whose delta is positive against a reference of under 4 tokens); BERT above 0,
    or outside [-1, 0] when ``rescaled``; any axis NaN, unless it is NaN on every row (an
    unobservable axis, see :func:`unobservable_axes`); any axis non-zero on a baseline row.
    With ``structural_baseline="rewrite"`` a structural row is a difference of two such deltas
    (variant minus anchor), so its bounds are [lo - hi, hi - lo].
    Range bounds allow ``tol`` of floating point slack; baseline rows must be exactly 0.
    Returns an empty list when everything is in range.
    """
    _require(deltas, ["variant_id", "family", *AXES], "deltas")
    bounds = {
        "Act": (-2.0, 0.0),
        "BLEU": (-100.0, 100.0 if bleu == "corpus" else 0.0),
        "BERT": (-1.0 if bert_scale == "rescaled" else -np.inf, 0.0),
    }
    ids = deltas["variant_id"].astype(str).to_numpy()
    is_base = (deltas["family"] == "baseline").to_numpy()
    anchored = (deltas["family"] == "structural").to_numpy() & (structural_baseline == "rewrite")
    missing = set(unobservable_axes(deltas))
    problems: list[str] = []
    for axis in AXES:
        if axis in missing:
            continue
        v = deltas[axis].to_numpy(dtype=np.float64)
        for i in np.flatnonzero(np.isnan(v)):
            problems.append(f"variant_id={ids[i]} axis={axis}: value is NaN")
        if axis in bounds:
            lo, hi = bounds[axis]
            lo_row = np.where(anchored, lo - hi, lo)
            hi_row = np.where(anchored, hi - lo, hi)
            for i in np.flatnonzero((v < lo_row - tol) | (v > hi_row + tol)):
                problems.append(f"variant_id={ids[i]} axis={axis}: {v[i]!r} outside [{lo_row[i]}, {hi_row[i]}]")
        for i in np.flatnonzero(is_base & ~np.isnan(v) & (v != 0.0)):
            problems.append(f"variant_id={ids[i]} axis={axis}: baseline row is {v[i]!r}, not 0")
    return problems
