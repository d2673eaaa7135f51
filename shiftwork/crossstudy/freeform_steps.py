"""The free-form probe along training, one function per rule (rule X -> scripts/X.py -> X here).

A trajectory checkpoint answers its NLI prompts with a label word, so on those prompts only label
consistency, the answer-probability axes and Act measure anything
(:mod:`shiftwork.crossstudy.replies`). The probe asks evenly spaced checkpoints of a trajectory
run (``crossstudy.freeform.checkpoints``, the first and the last always) the stability study's own
prompt set as well: its prompts and the variants its meaning gate kept
(register, surface noise and the structural rewrites), each asked as the stability study asks the
run's model (the chat template for a chat model, the plain format otherwise). The replies are
free-form, so SAGO's six axes are measured along training on the replies they were defined for,
with the stability study's definitions (structural anchoring, BLEU, noise detector; no judge, so
mirroring comes from the rule-based detectors) and the gate's BERT rescale baseline, one scale
for every checkpoint."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from shiftwork.crossstudy.jobs import ScoredCheckpoint
from shiftwork.crossstudy.scoring import LazyBertF1, checked_deltas
from shiftwork.inference.formatting import model_input, plain_template
from shiftwork.logs import LOGGER
from shiftwork.models.prepare import read_info
from shiftwork.provenance import make_provenance
from shiftwork.stability import gate as gate_mod
from shiftwork.tables import read_table, write_table

ROW_COLUMNS = ["dataset", "prompt_id", "variant_id", "family", "kind", "position", "strength", "text"]


def freeform_rows(filtered_paths: Sequence[str]) -> pd.DataFrame:
    """The stability study's gated variants (baselines included) of all its prompt sets, in one
    table. A prompt id that two sets share would merge two prompts' baselines: an error naming it."""
    frames = [read_table(path, ROW_COLUMNS) for path in filtered_paths]
    rows = pd.concat(frames, ignore_index=True)
    owners = rows.drop_duplicates(["dataset", "prompt_id"])["prompt_id"]
    shared = owners[owners.duplicated()]
    if len(shared):
        raise ValueError(
            f"prompt ids {sorted(set(shared))[:5]} occur in more than one prompt set of {list(filtered_paths)}"
        )
    return rows


def axis_rules(settings: Mapping[str, Any], b: float):
    """The stability study's delta definitions (``settings``: its ``axes`` section and the
    structural ``structural_baseline`` and ``length_anchor``), with the BERT axis on the gate's
    rescaled scale (``b``) unless the axes are scored raw."""
    from shiftwork.stability.axes import AxisRules

    axes = settings["axes"]
    return AxisRules(
        structural_baseline=settings["structural_baseline"],
        bleu=axes["bleu"],
        bert_b=b if axes["bert_scale"] == "rescaled" else None,
        noise_detector=axes["noise_detector"],
        length_anchor=settings["length_anchor"],
        length_mirroring=axes["length_mirroring"],
        empty_baseline=axes["empty_baseline"],
        act_layers=axes["act_layers"],
    )


def crossstudy_freeform_score(
    checkpoint: ScoredCheckpoint,
    inputs: Mapping[str, Any],
    settings: Mapping[str, Any],
    encoder_name: str,
    encoder_spec: Mapping[str, Any],
    outs: Mapping[str, str],
    threads: int | None = None,
) -> None:
    """One trajectory checkpoint on the stability study's prompt set: greedy replies and the probe
    pass of each variant with its prompt's reply (:func:`shiftwork.crossstudy.respond.respond`,
    mode ``generate``, one load of the checkpoint), then the six axis deltas. ``inputs``: filtered
    (the stability study's gated tables), baseline (its gate baseline table). ``settings``:
    ``batch_size``, ``dtype``, ``max_new_tokens``, ``plain_format``, ``axes`` (config
    stability.axes), ``structural_baseline``, ``length_anchor``. ``outs``: generations, probes,
    deltas."""
    from shiftwork.crossstudy.respond import respond
    from shiftwork.device import set_threads

    set_threads(threads)
    start = time.perf_counter()
    lm, rows, too_long = _checkpoint_rows(checkpoint, inputs["filtered"], settings)
    loaded = time.perf_counter()
    gens, probes = respond(
        lm, rows, "generate", int(settings["batch_size"]), max_new_tokens=int(settings["max_new_tokens"])
    )
    responded = time.perf_counter()
    baseline = inputs["baseline"]
    b = float(gate_mod.read_baseline(baseline, encoder_name, baseline, "the BERT axis uses")["b"])
    where = f"run {checkpoint.run} step {checkpoint.step}"
    bert_f1 = LazyBertF1(encoder_name, encoder_spec)
    deltas = checked_deltas(gens, probes, axis_rules(settings, b), bert_f1, settings["axes"]["bert_scale"], where)
    gens = gens.assign(dtype=str(lm.dtype).removeprefix("torch."))
    for frame in (gens, probes, deltas):
        frame.insert(1, "step", int(checkpoint.step))
    record = {
        "study": checkpoint.study,
        "run": checkpoint.run,
        "step": int(checkpoint.step),
        "checkpoint": checkpoint.path,
        "prompts": "stability",
        "chat": lm.chat,
        **dict(settings),
        "b": b,
        "left_out_too_long": too_long,
    }
    prov = make_provenance("crossstudy_freeform_score", record, model=checkpoint.run)
    write_table(gens, outs["generations"], prov)
    write_table(probes, outs["probes"], prov)
    write_table(deltas, outs["deltas"], prov)
    LOGGER.info(
        "run %s step %d, free-form probe: %d rows, %d replies differ from their prompt's; load %.1f s, "
        "respond %.1f s, score %.1f s",
        checkpoint.run,
        checkpoint.step,
        len(deltas),
        int(deltas["flipped"].sum()),
        loaded - start,
        responded - loaded,
        time.perf_counter() - responded,
    )


def _checkpoint_rows(
    checkpoint: ScoredCheckpoint, filtered_paths: Sequence[str], settings: Mapping[str, Any]
) -> tuple[Any, pd.DataFrame, int]:
    """(the checkpoint loaded, the stability study's variants with the exact text it reads, how
    many were left out as too long for its context with the new tokens): the chat template for a
    chat model (the prepared model's record says), ``settings["plain_format"]`` otherwise."""
    from shiftwork.crossstudy.run_steps import context_length, fitting_rows
    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.models.loading import LoadedModel

    rows = freeform_rows(list(filtered_paths))
    chat = bool(read_info(checkpoint.base_dir).get("chat"))
    net, tok, device = load_checkpoint(checkpoint.base_dir, {"path": checkpoint.path}, settings["dtype"])
    template = plain_template(settings["plain_format"])
    texts = [model_input(tok, text, chat, template) for text in rows["text"]]
    rows = rows.assign(model=checkpoint.run, model_input=texts)
    rows, too_long = fitting_rows(rows, tok, context_length(net.config), int(settings["max_new_tokens"]))
    lm = LoadedModel(checkpoint.run, net, tok, device, next(net.parameters()).dtype, chat, {"name": checkpoint.run})
    return lm, rows, too_long
