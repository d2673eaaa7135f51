"""Whether a named definition option changes a conclusion of a finished stability run.

The options of ``stability.axes`` and ``stability.variants.structural.length_anchor`` act in the
score_axes step only, so their effect on a run needs no new replies. For each option,
:func:`recompute_tests` runs the score_axes step on every (model, dataset)'s generations and
probes of the run, with an :class:`~shiftwork.stability.jobs.AxesJob` built from the config as
the workflow builds it (:func:`run_plan`) and only that option changed, then the
aggregate_stability step with the run's R and eps, into a temporary folder;
:func:`compare_tests` sets the t-tests beside the run's own. A verdict is the report's: a cell is
significant where its marker is set (:func:`shiftwork.stability.stats.significance_marker`,
p < 0.05); an option changes a conclusion where a verdict changes, per model (the main table and
its eps tables) or per model and dataset (the dataset tables).

With ``length_anchor: original`` the 1.0 length level is the prompt itself, so a run's 1.0x
length rewrites are not variants: they are left out of the tables the step reads
(:func:`without_unit_lengths`). A prompt the meaning gate dropped for a 1.0x rewrite alone has no
replies and stays out; the page counts such prompts (:func:`dropped_for_unit_length`).

``python -m shiftwork.stability.option_effects --results results/default --configfile
config/config.yaml --out DIR --option stability.axes.act_layers=last ...`` writes
``DIR/effects.parquet`` (one row per option x tests x model x dataset x axis x eps) and
``DIR/effects.md``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import logging
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import yaml

from shiftwork.codebase import checkout_state
from shiftwork.config import check_config
from shiftwork.logs import LOGGER, short_errors
from shiftwork.models.checkpoint_source import is_checkpoint
from shiftwork.models.prepare import INFO_FILE, prepared_dir
from shiftwork.models.sources import is_api
from shiftwork.precision import cpu_capability
from shiftwork.provenance import make_provenance
from shiftwork.reports.tables import to_markdown
from shiftwork.schema import ConfigError, suggest
from shiftwork.stability import steps
from shiftwork.stability.gate import GATED_FAMILIES
from shiftwork.stability.jobs import AxesJob, TextModel, judge_model
from shiftwork.stability.sections import AxesSettings
from shiftwork.stability.stats import ALL
from shiftwork.stability.variants.structural import is_anchor
from shiftwork.tables import TableError, read_provenance, read_table, write_table, write_text

LENGTH_ANCHOR_KEY = "stability.variants.structural.length_anchor"
#: the t-tests compared: per model (the main table), per model and dataset (the dataset table)
LEVELS: dict[str, list[str]] = {"model": ["model"], "dataset": ["model", "dataset"]}
LEVEL_NAMES = {"model": "per model", "dataset": "per model and dataset"}
STATS_TABLES = ("per_prompt", "dataset_sgs", "total_sgs", "ttests_model", "ttests_dataset", "breakdown", "strength")
ROW_KEYS = ["prompt_id", "variant_id"]


def option_keys() -> tuple[str, ...]:
    """The config keys that act in the score_axes step only: the axes' settings
    (:class:`~shiftwork.stability.sections.AxesSettings`) and the 1.0 length level."""
    axes = [f"stability.axes.{f.name}" for f in dataclasses.fields(AxesSettings)]
    return (*axes, LENGTH_ANCHOR_KEY)


@dataclass(frozen=True)
class Option:
    """One config key set to one value."""

    key: str
    value: Any

    @property
    def label(self) -> str:
        return f"{self.key}={shown_value(self.value)}"


def shown_value(value: Any) -> str:
    """A value as it reads in YAML (``true``, ``0.5``, ``last``)."""
    return value if isinstance(value, str) else json.dumps(value)


def parse_option(text: str) -> Option:
    """``KEY=VALUE`` with the value read as a YAML scalar; a key that is not one of
    :func:`option_keys` is a :class:`~shiftwork.schema.ConfigError` naming it."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--option {text!r}: expected KEY=VALUE, e.g. stability.axes.act_layers=last")
    known = option_keys()
    if key not in known:
        raise ConfigError(
            f"--option {text!r}: unknown key '{key}'{suggest(key, known)}; the keys that act in "
            f"score_axes only are {list(known)}"
        )
    return Option(key, yaml.safe_load(raw))


def config_value(config: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` of ``config`` (None where a part is absent)."""
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def checked_config(raw: Mapping[str, Any], option: Option | None = None) -> dict:
    """``raw`` (a config file's content) with ``option`` set, checked and with its defaults filled
    in as the workflow loads it (:func:`shiftwork.config.check_config`)."""
    config = copy.deepcopy(dict(raw))
    if option is not None:
        *parents, leaf = option.key.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = option.value
    try:
        return check_config(config)
    except ConfigError as err:
        where = f"--option {option.label}: " if option is not None else ""
        raise ConfigError(f"{where}{err}") from None


@dataclass(frozen=True)
class RunPlan:
    """What the score_axes and aggregate_stability jobs of a run read, resolved from its config as
    the rules resolve it (rules/stability_inputs.smk): the job, the (model, dataset) cells, the
    gate's baseline and the judge's report where the job takes them, R and eps."""

    job: AxesJob
    cells: tuple[tuple[str, str], ...]
    gate_baseline: str | None
    judge_report: str | None
    R: dict[str, float]
    eps: list[float]


def run_plan(config: Mapping[str, Any], results: Path) -> RunPlan:
    """The :class:`RunPlan` of the run of ``config`` whose results folder is ``results``."""
    st = config["stability"]
    axes = st["axes"]
    cells = tuple((m, d) for m in st["models"] for d in st["model_datasets"].get(m, st["datasets"]))
    rescaled_by_gate = axes["bert_scale"] == "rescaled" and axes["bert_baseline"] == "gate"
    return RunPlan(
        job=axes_job(config, results.parent),
        cells=cells,
        gate_baseline=str(results / "stability/gate/baseline.parquet") if rescaled_by_gate else None,
        judge_report=str(results / "stability/judge/report.parquet") if axes.get("judge") else None,
        R=dict(axes["R"]),
        eps=list(st["statistics"]["eps"]),
    )


def axes_job(config: Mapping[str, Any], shared: Path) -> AxesJob:
    """The score_axes job as scripts/score_axes.py builds it from the rule's params; ``shared`` is
    the folder of prepared models and caches (``results``)."""
    st = config["stability"]
    structural = st["variants"]["structural"]
    encoder = st["axes"].get("encoder", st["gate"]["encoder"])
    return AxesJob(
        axes=AxesSettings.from_config(AxesSettings.read_keys(st["axes"])),
        encoder_name=encoder,
        encoder_spec=config["encoders"][encoder],
        judge=judge_source(config, shared),
        structural_baseline=structural["baseline"],
        seed=st["seed"],
        length_anchor=structural["length_anchor"],
    )


def judge_source(config: Mapping[str, Any], shared: Path) -> TextModel:
    """The judge as the score_axes rule passes it (:func:`~shiftwork.stability.jobs.judge_model`):
    a prepared local model under ``shared/models``, or an API model whose replies are cached under
    ``shared/cache/api``; no model without a judge."""
    name = config["stability"]["axes"].get("judge")
    spec = config["models"][name] if name else None
    if spec is not None and is_checkpoint(spec["source"]):
        raise ConfigError(
            f"stability.axes.judge: the judge {name!r} is a training checkpoint, which is not supported here"
        )
    api = spec is not None and is_api(spec["source"])
    params = SimpleNamespace(
        judge_name=name,
        judge_api=dict(spec["source"]) if api else None,
        judge_cache=str(shared / "cache" / "api" / name) if name else None,
        judge_batch_size=spec["batch_size"] if spec else 1,
    )
    inputs = {"judge": str(prepared_dir(name, spec, shared) / INFO_FILE)} if spec and not api else {}
    return judge_model(params, inputs)


def unit_length_rows(table: pd.DataFrame) -> np.ndarray:
    """The structural length rows at the 1.0 level (a run's 1.0x rewrites)."""
    length = (table["family"] == "structural") & (table["kind"] == "length")
    unit = np.array([is_anchor("length", s) for s in table["strength"]], dtype=bool)
    return length.to_numpy(dtype=bool) & unit


def without_unit_lengths(generations: pd.DataFrame, probes: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The generations and probes without the 1.0x length rewrites, and how many were left out."""
    unit = unit_length_rows(generations)
    left_out = set(map(tuple, generations.loc[unit, ROW_KEYS].to_numpy().tolist()))
    in_probes = np.array([tuple(k) in left_out for k in probes[ROW_KEYS].to_numpy().tolist()], dtype=bool)
    gens = generations.loc[~unit].reset_index(drop=True)
    return gens, probes.loc[~in_probes].reset_index(drop=True), int(unit.sum())


def dropped_for_unit_length(scores: pd.DataFrame) -> int:
    """How many prompts of a gate scores table (filter_variants' ``scores``) the meaning gate
    dropped for their 1.0x length rewrite alone: every gated variant of theirs under the
    threshold is that rewrite."""
    failing = scores[
        ~scores["kept"] & scores["family"].isin(GATED_FAMILIES) & (scores["gate_score"] < scores["threshold"])
    ]
    alone = pd.Series(unit_length_rows(failing), index=failing.index).groupby(failing["prompt_id"]).all()
    return int(alone.sum())


def _input_tables(results: Path, model: str, dataset: str, job: AxesJob, work: Path) -> tuple[Path, Path, int]:
    """The generations and probes score_axes reads for one cell: the run's own, or copies without
    the 1.0x length rewrites where the job's 1.0 length level is the prompt itself."""
    gens, probes = (results / "stability" / kind / model / f"{dataset}.parquet" for kind in ("generations", "probes"))
    if not (job.structural_baseline == "rewrite" and job.length_anchor == "original"):
        return gens, probes, 0
    kept_gens, kept_probes, n = without_unit_lengths(read_table(gens), read_table(probes))
    prov = make_provenance("option_effects", {"left_out": "1.0x length rewrites", "from": str(gens)})
    folder = work / "inputs" / model
    write_table(kept_gens, folder / f"{dataset}.generations.parquet", prov)
    write_table(kept_probes, folder / f"{dataset}.probes.parquet", prov)
    return folder / f"{dataset}.generations.parquet", folder / f"{dataset}.probes.parquet", n


def recompute_tests(plan: RunPlan, results: Path, work: Path) -> tuple[dict[str, pd.DataFrame], int]:
    """The run's t-tests per model and per model and dataset recomputed under ``plan`` in ``work``:
    the score_axes step on every cell, then the aggregate_stability step; and how many 1.0x length
    rows were left out."""
    delta_paths, left_out = [], 0
    for model, dataset in plan.cells:
        gens, probes, n = _input_tables(results, model, dataset, plan.job, work)
        left_out += n
        out = work / "deltas" / model / f"{dataset}.parquet"
        judged = work / "judgments" / model / f"{dataset}.parquet"
        steps.score_axes(
            str(gens),
            str(probes),
            str(out),
            str(judged),
            plan.job,
            gate_baseline_path=plan.gate_baseline,
            judge_report_path=plan.judge_report,
        )
        delta_paths.append(str(out))
    outs = {name: str(work / "stats" / f"{name}.parquet") for name in STATS_TABLES}
    steps.aggregate_stability(delta_paths, plan.R, plan.eps, outs)
    return {level: read_table(outs[f"ttests_{level}"]) for level in LEVELS}, left_out


def compare_tests(run: pd.DataFrame, other: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The cells of two t-test tables (:func:`shiftwork.stability.stats.ttests`, by ``by``) side by
    side: p, marker and n of the run (``_default``) and of the recomputation (``_option``), each
    side's verdict (significant: its marker is set) and whether it ``changed``. Cells no side
    observed (n = 0 on both: an axis a source cannot observe) are no cells and are left out."""
    keys = [*by, "axis", "eps"]
    columns = [*keys, "p", "marker", "n"]
    both = run[columns].merge(
        other[columns], on=keys, how="outer", suffixes=("_default", "_option"), validate="one_to_one"
    )
    for side in ("default", "option"):
        both[f"marker_{side}"] = both[f"marker_{side}"].fillna("").astype(str)
        both[f"n_{side}"] = pd.to_numeric(both[f"n_{side}"]).fillna(0).astype(int)
        both[f"significant_{side}"] = both[f"marker_{side}"] != ""
    both["changed"] = both["significant_default"] != both["significant_option"]
    observed = (both["n_default"] > 0) | (both["n_option"] > 0)
    return both.loc[observed].sort_values(keys, kind="stable").reset_index(drop=True)


def compare_levels(run: Mapping[str, pd.DataFrame], other: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`compare_tests` per model and per model and dataset, in one table with ``tests``
    naming the level and ``dataset`` :data:`~shiftwork.stability.stats.ALL` for the tests per model."""
    parts = []
    for level, by in LEVELS.items():
        part = compare_tests(run[level], other[level], by)
        if "dataset" not in part.columns:
            part.insert(1, "dataset", ALL)
        part.insert(0, "tests", level)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def read_run_tests(results: Path) -> dict[str, pd.DataFrame]:
    """The run's own t-tests (aggregate_stability's), per model and per model and dataset."""
    return {level: read_table(results / "stability" / "stats" / f"ttests_{level}.parquet") for level in LEVELS}


def _recomputed(plan: RunPlan, results: Path, what: str) -> tuple[dict[str, pd.DataFrame], int]:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="option-effects-") as work:
        tests, left_out = recompute_tests(plan, results, Path(work))
    LOGGER.info("%s: %d cells recomputed in %.1f s", what, len(plan.cells), time.perf_counter() - start)
    return tests, left_out


def option_notes(option: Option, config: Mapping[str, Any], left_out: int, gate_dropped: int) -> list[str]:
    """What the page says of an option beside its verdicts: the run's value, and where the option
    has nothing to act on or left rows out."""
    run_value = config_value(config, option.key)
    notes = [
        f"The run's value: `{shown_value(run_value)}`"
        + (" (this option's value)." if run_value == option.value else ".")
    ]
    st = config["stability"]
    if option.key == "stability.axes.judge_cue_guard" and not st["axes"].get("judge"):
        notes.append("The run has no judge (`stability.axes.judge`): the guard has no verdict to act on.")
    if option.key == LENGTH_ANCHOR_KEY and st["variants"]["structural"]["baseline"] != "rewrite":
        notes.append(
            "The run's structural variants are not anchored (`structural.baseline`): the option acts on nothing."
        )
    if left_out:
        notes.append(
            f"1.0x length rewrites left out (the 1.0 level is the prompt itself): {left_out}. Prompts the "
            f"meaning gate dropped for their 1.0x rewrite alone, which have no replies and stay out: {gate_dropped}."
        )
    return notes


def gate_drops(config: Mapping[str, Any], results: Path) -> int:
    """:func:`dropped_for_unit_length` summed over the run's datasets."""
    paths = [results / "stability" / "gate" / f"{d}.scores.parquet" for d in config["stability"]["datasets"]]
    return sum(dropped_for_unit_length(read_table(p)) for p in paths)


def measure(
    raw: Mapping[str, Any], results: Path, options: Sequence[Option]
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The effects of ``options`` on the run in ``results`` made with the config ``raw``: one row
    per option and compared cell (:func:`compare_levels` with ``option``, ``key`` and ``value``),
    the same comparison for the run's own settings recomputed (a check that the recomputation
    reproduces the run), and each option's notes (:func:`option_notes`)."""
    config = checked_config(raw)
    run_tests = read_run_tests(results)
    reproduced = compare_levels(run_tests, _recomputed(run_plan(config, results), results, "the run's settings")[0])
    parts, notes = [], {}
    for option in options:
        plan = run_plan(checked_config(raw, option), results)
        tests, left_out = _recomputed(plan, results, option.label)
        part = compare_levels(run_tests, tests)
        part.insert(0, "value", shown_value(option.value))
        part.insert(0, "key", option.key)
        part.insert(0, "option", option.label)
        parts.append(part)
        notes[option.label] = option_notes(option, config, left_out, gate_drops(config, results) if left_out else 0)
    effects = pd.concat(parts, ignore_index=True) if parts else reproduced.iloc[:0]
    return effects, reproduced, notes


def _p(p: float) -> str:
    if not np.isfinite(p):
        return "-"
    if p == 0:
        return "0"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def verdict_counts(cells: pd.DataFrame) -> str:
    """ "verdicts changed per model: 2 of 36 cells; per model and dataset: 0 of 216 cells" for a
    compared table."""
    counts = []
    for level, name in LEVEL_NAMES.items():
        part = cells[cells["tests"] == level]
        counts.append(f"{name}: {int(part['changed'].sum())} of {len(part)} cells")
    return "verdicts changed " + "; ".join(counts)


def changed_table(cells: pd.DataFrame) -> str:
    """The cells whose verdict changed, as a Markdown table."""
    changed = cells[cells["changed"]].reset_index(drop=True)
    shown = pd.DataFrame(
        {
            "tests": [LEVEL_NAMES[t] for t in changed["tests"]],
            "model": changed["model"],
            "dataset": changed["dataset"],
            "axis": changed["axis"],
            "eps": [f"{e:g}" for e in changed["eps"]],
            "p before -> after": [f"{_p(a)} -> {_p(b)}" for a, b in zip(changed["p_default"], changed["p_option"])],
            "verdict": [
                "significant -> not" if was else "not -> significant" for was in changed["significant_default"]
            ],
        }
    )
    return to_markdown(shown)


def option_section(label: str, cells: pd.DataFrame, notes: Sequence[str]) -> str:
    """One option's part of the page: the verdict line, the notes and the changed cells."""
    changed = bool(cells["changed"].any())
    lines = [
        f"## `{label}`",
        "",
        f"changes a conclusion of this run: {'yes' if changed else 'no'} ({verdict_counts(cells)})",
        "",
        *(line for note in notes for line in (note, "")),
    ]
    if changed:
        lines += ["Cells whose verdict changed:", "", changed_table(cells)]
    return "\n".join(lines).rstrip() + "\n"


def reproduction_line(reproduced: pd.DataFrame) -> str:
    """Whether the run's own settings, recomputed, give the run's tests."""
    diff = (reproduced["p_default"] - reproduced["p_option"]).abs()
    both_nan = reproduced["p_default"].isna() & reproduced["p_option"].isna()
    largest = float(diff[~both_nan].fillna(np.inf).max()) if (~both_nan).any() else 0.0
    outcome = "do not reproduce" if reproduced["changed"].any() else "reproduce"
    return (
        f"The run's own settings, recomputed the same way, {outcome} the run's verdicts "
        f"({verdict_counts(reproduced)}; largest difference of a p value {_p(largest)})."
    )


def page_head(results: Path, configfile: Path) -> dict[str, str]:
    """The head of the page: this checkout's commit (marked when it has uncommitted changes), the
    commit the run's statistics were made at (from their provenance), the config and its sha256,
    the results folder and the CPU."""
    run_code = read_provenance(results / "stability" / "stats" / "ttests_model.parquet").get("code", {})
    sha = hashlib.sha256(configfile.read_bytes()).hexdigest()[:16]
    return {
        "commit": f"`{commit_label(checkout_state())}`",
        "the run's commit": f"`{commit_label(run_code)}` (aggregate_stability)",
        "config": f"`{shown_path(configfile)}` (sha256 `{sha}`)",
        "results": f"`{shown_path(results)}/`",
        "CPU": cpu_capability()["label"],
    }


def commit_label(code: Mapping[str, Any]) -> str:
    """A commit's first 12 characters, marked when its checkout had uncommitted changes."""
    commit = str(code.get("commit") or "unknown")[:12]
    return commit + (" (with uncommitted changes)" if code.get("dirty") else "")


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory where it lies under it, else as given."""
    resolved = path.resolve()
    return str(resolved.relative_to(Path.cwd())) if resolved.is_relative_to(Path.cwd()) else str(path)


def effects_page(
    head: Mapping[str, str], effects: pd.DataFrame, reproduced: pd.DataFrame, notes: Mapping[str, Sequence[str]]
) -> str:
    """The Markdown page: the head, how the options were measured, then one part per option."""
    rows = "\n".join(f"| {k} | {v} |" for k, v in head.items())
    parts = [
        "# Definition options and the run's conclusions\n\n"
        "*Written by `python -m shiftwork.stability.option_effects` from the run's own generations and "
        "probes; do not edit by hand.*\n\n| run | |\n| --- | --- |\n" + rows + "\n",
        "Each option's deltas are recomputed by the score_axes step from the run's generations and probes, "
        "with that option alone changed, and aggregated with the run's R and eps. A cell (a model's axis at "
        "one eps, per model or per model and dataset) is significant where the report marks it: the "
        "one-sided t-test of mean per-prompt instability > eps has p < 0.05. An option changes a conclusion "
        "where a cell's verdict changes. " + reproduction_line(reproduced) + "\n",
    ]
    for label, cells in effects.groupby("option", sort=False):
        parts.append(option_section(str(label), cells, notes[str(label)]))
    return "\n".join(parts)


def write_effects(args: argparse.Namespace, options: Sequence[Option]) -> Path:
    """Measure ``options`` on the run named by ``args`` and write the table and the page."""
    raw = yaml.safe_load(args.configfile.read_text())
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{args.configfile}: not a YAML mapping")
    effects, reproduced, notes = measure(raw, args.results, options)
    head = page_head(args.results, args.configfile)
    settings = {"results": head["results"], "config": head["config"], "options": [o.label for o in options]}
    changed = int(reproduced["changed"].sum())
    prov = make_provenance("option_effects", settings, extra={"reproduced": {"changed_verdicts": changed}})
    write_table(effects, args.out / "effects.parquet", prov)
    return write_text(effects_page(head, effects, reproduced, notes), args.out / "effects.md")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shiftwork.stability.option_effects", description=__doc__)
    parser.add_argument("--results", type=Path, required=True, help="the run's results folder (results/NAME)")
    parser.add_argument("--configfile", type=Path, required=True, help="the config the run was made with")
    parser.add_argument("--out", type=Path, required=True, help="where effects.parquet and effects.md go")
    parser.add_argument(
        "--option",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help=f"a key set to a value (YAML), once per option; keys: {', '.join(option_keys())}",
    )
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    try:
        with short_errors(ConfigError, TableError):
            options = [parse_option(text) for text in args.option]
            page = write_effects(args, options)
    finally:
        LOGGER.removeHandler(handler)
    print(f"wrote {page} and {args.out / 'effects.parquet'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
