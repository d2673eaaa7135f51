"""NLI test suites in one labelled format, and the prompt pattern with its verbalisers.

A suite is an ID training set, an ID test set and named OOD test sets, all with columns
``example_id, split, set, premise, hypothesis, label`` where label is ``entailment`` or
``not_entailment``. The embedded default is generated (:mod:`.suite`); real benchmarks are
loaded from the hub or local files with a field mapping and a label mapping."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from shiftwork.data import DatasetError, get_field, read_source
from shiftwork.trajectory.suite import LABELS, SHIFTS, generate_suite

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase


# The prompt pattern and the verbalisers (the word whose next-token logit stands for each label)
# used when a suite does not set its own (trajectory.suites.NAME.pattern / .verbalisers; the
# schema states the same values as their defaults).
PATTERN = '{premise}\nQuestion: Does this mean that "{hypothesis_no_period}"? Yes or no?\nAnswer:'
VERBALISERS = {"entailment": " Yes", "not_entailment": " No"}
PLACEHOLDERS = ("premise", "hypothesis", "hypothesis_no_period")
SUITE_COLUMNS = ["example_id", "split", "set", "premise", "hypothesis", "label"]


def render(premise: str, hypothesis: str, pattern: str = PATTERN) -> str:
    """One example in the pattern. ``{premise}`` and ``{hypothesis}`` are the texts with the
    whitespace around them removed; ``{hypothesis_no_period}`` is the hypothesis without its
    final full stop (for patterns that quote it inside a question)."""
    hypothesis = hypothesis.strip()
    return pattern.format(premise=premise.strip(), hypothesis=hypothesis, hypothesis_no_period=hypothesis.rstrip("."))


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot render an example, or None: it must be a format string whose
    placeholders are among :data:`PLACEHOLDERS`, with the premise and one form of the hypothesis."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(pattern) if f is not None]
    except ValueError as err:
        return f"not a format string ({err}); write literal braces as {{{{ and }}}}"
    unknown = sorted({f for f in fields if f not in PLACEHOLDERS})
    if unknown:
        return f"unknown placeholder(s) {unknown}; a pattern may use {{{'}, {'.join(PLACEHOLDERS)}}}"
    if "premise" not in fields or not {"hypothesis", "hypothesis_no_period"} & set(fields):
        return "the pattern needs {premise} and {hypothesis} (or {hypothesis_no_period})"
    return None


def verbaliser_ids(tokenizer: PreTrainedTokenizerBase, verbalisers: Mapping[str, str] = VERBALISERS) -> dict[str, int]:
    """The single token that stands for each label; an error if a verbaliser is not one token."""
    ids = {}
    for label, word in verbalisers.items():
        toks = tokenizer(word, add_special_tokens=False).input_ids
        if len(toks) != 1:
            raise ValueError(
                f"verbaliser {word!r} for label '{label}' is {len(toks)} tokens; choose a single-token word"
            )
        ids[label] = toks[0]
    if len(set(ids.values())) != len(ids):
        raise ValueError(f"verbalisers {dict(verbalisers)} share a token")
    return ids


def next_token_logits(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, back: int = 0) -> torch.Tensor:
    """Logits ``[batch, vocab]`` of the token after position ``-1 - back`` of each (left-padded) row.

    The decoder runs once and the output head only on those positions, as a 2-D product: the
    causal LM's own ``logits_to_keep`` slices a 3-D view, which after a LoRA merge sent PyTorch's
    CPU kernel to a batched product that copies the 49,152 x 576 head once per row (4.6 s instead
    of 0.014 s for 64 rows, measured). Works through a peft wrapper; applies a final logit
    soft-cap where the architecture has one."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = lm.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    logits = lm.get_output_embeddings()(hidden[:, -1 - back, :])
    cap = getattr(lm.config, "final_logit_softcapping", None)
    return (logits / cap).tanh() * cap if cap else logits


def map_labels(name: str, raw: pd.Series, mapping: Mapping[Any, str]) -> pd.Series:
    """Map a source's labels to entailment / not_entailment; labels mapped to ``drop`` are removed
    by the caller; any label outside the mapping is an error naming the set and the value."""
    norm = {str(k): v for k, v in mapping.items()}
    bad_targets = sorted({v for v in norm.values() if v not in (*LABELS, "drop")})
    if bad_targets:
        raise DatasetError(f"test set '{name}': label mapping targets {bad_targets}; expected {list(LABELS)} or 'drop'")
    keys = raw.map(lambda v: str(v))
    unknown = sorted(set(keys) - set(norm))
    if unknown:
        first = int(keys[~keys.isin(list(norm))].index[0]) + 1
        raise DatasetError(
            f"test set '{name}': labels {unknown[:5]} fall outside the label mapping {sorted(norm)} (first at row {first})"
        )
    return keys.map(norm)


def load_set(name: str, spec: Mapping[str, Any], split: str, set_name: str, root: str = ".") -> pd.DataFrame:
    """One labelled set from a file or hub source, mapped to the suite format and sampled."""
    raw = read_source(name, spec, root)[0].reset_index(drop=True)
    fields = spec["fields"]
    labels = map_labels(name, get_field(raw, name, fields["label"]), spec["labels"])
    df = pd.DataFrame(
        {
            "premise": get_field(raw, name, fields["premise"]).astype(str),
            "hypothesis": get_field(raw, name, fields["hypothesis"]).astype(str),
            "label": labels,
        }
    )
    df = df[df["label"] != "drop"].reset_index(drop=True)
    n = int(spec.get("n", len(df)))
    if n < len(df):
        df = df.sample(n=n, random_state=int(spec["seed"])).reset_index(drop=True)
    df.insert(0, "set", set_name)
    df.insert(0, "split", split)
    df.insert(0, "example_id", [f"{set_name}-{split}-{i:05d}" for i in range(1, len(df) + 1)])
    return df[SUITE_COLUMNS]


def build_suite(spec: Mapping[str, Any], root: str = ".") -> pd.DataFrame:
    """The whole suite of a config entry (``trajectory.suites.NAME``)."""
    if spec["kind"] == "synthetic":
        return generate_suite(int(spec["n_train"]), int(spec["n_test"]), int(spec["seed"]), spec.get("ood") or SHIFTS)
    parts = [
        load_set(f"{spec['id_train']['name']}", spec["id_train"], "train", "id", root),
        load_set(f"{spec['id_test']['name']}", spec["id_test"], "test", "id", root),
    ]
    for ood_name, ood in spec["ood"].items():
        parts.append(load_set(ood_name, ood, "test", ood_name, root))
    return pd.concat(parts, ignore_index=True)
