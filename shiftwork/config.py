"""Configuration checks run before any job: schema errors and unknown names, each naming the key."""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from shiftwork.schema import SCHEMA_PATH as SCHEMA_PATH
from shiftwork.schema import ConfigError as ConfigError
from shiftwork.schema import load_schema as load_schema


def _key(path: Iterable[Any]) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        if allowed:
            unknown = [k for k in error.instance if k not in allowed]
            hints = "".join(_suggest(k, allowed) for k in unknown)
            return f"config key '{key}': unknown key(s) {unknown}; expected only {allowed}{hints}"
    if error.validator == "required":
        return f"config key '{key}': {error.message}"
    if error.validator == "type":
        return f"config key '{key}': expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "enum":
        return f"config key '{key}': expected one of {error.validator_value}, got {error.instance!r}"
    return f"config key '{key}': {error.message}"


def schema_errors(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> list[str]:
    schema = schema if schema is not None else load_schema()
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    # the oneOf/if-then wrappers repeat their inner errors; report the most specific ones
    leaves: list[jsonschema.ValidationError] = []
    for err in errors:
        leaves.extend(_leaves(err))
    seen: dict[str, None] = {}
    for err in leaves:
        seen.setdefault(_describe(err), None)
    return list(seen)


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    if error.validator in ("allOf", "anyOf") and error.context:
        out = []
        for sub in error.context:
            out.extend(_leaves(sub))
        return out
    return [error]


def with_defaults(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict:
    """A copy of a valid ``config`` with every ``default`` of the schema filled in.

    The schema is the only place a config default is stated: the workflow fills them in once,
    when it loads the config, so rules and package functions read every key directly. A
    default is filled wherever validation reaches the object that declares it (inside $ref,
    allOf and a matching if/then); a default object such as ``{}`` is then filled in turn.
    Each default is copied, so no two places in the config share one mutable value."""
    schema = schema if schema is not None else load_schema()
    base = jsonschema.validators.validator_for(schema)
    check_properties = base.VALIDATORS["properties"]

    def fill(validator, properties, instance, subschema):
        if isinstance(instance, dict):
            for key, spec in properties.items():
                if isinstance(spec, Mapping) and "default" in spec and key not in instance:
                    instance[key] = copy.deepcopy(spec["default"])
        yield from check_properties(validator, properties, instance, subschema)

    filled = copy.deepcopy(dict(config))
    for _ in jsonschema.validators.extend(base, {"properties": fill})(schema).iter_errors(filled):
        pass  # check_config reports errors; filling goes on past them
    return filled


def empty_section(study: str, schema: Mapping[str, Any] | None = None) -> dict:
    """The config section of ``study`` with nothing to run and every default filled in: what the
    rules read when the config has no such section."""
    schema = schema if schema is not None else load_schema()
    required = schema["$defs"][study]["required"]
    return with_defaults({study: {key: {} for key in required}}, schema)[study]


def overridden(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict:
    """``base`` with ``overrides`` laid over it key by key, nested mappings merged the same way
    (a run's ``train: {lora: {r: 4}}`` changes the rank and keeps the other LoRA settings)."""
    merged = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = overridden(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def uses_rewriter(structural: Mapping[str, Any]) -> bool:
    """Whether ``stability.variants.structural`` (defaults filled in) asks for any rewrite."""
    return bool(structural["enabled"] and (structural["lengths"] or structural["form"]))


def reference_errors(config: Mapping[str, Any]) -> list[str]:
    """Names used by studies that the registries do not define."""
    errors = []
    models = set(config.get("models") or {})
    encoders = set(config.get("encoders") or {})
    datasets = set(config.get("datasets") or {})
    st = config.get("stability") or {}

    def check(key: str, name: Any, known: set[str], what: str) -> None:
        if name not in known:
            errors.append(
                f"config key '{key}': unknown {what} '{name}'; defined {what}s are {sorted(known)}"
                + _suggest(str(name), known)
            )

    for i, name in enumerate(st.get("models") or []):
        check(f"stability.models.{i}", name, models, "model")
    for i, name in enumerate(st.get("datasets") or []):
        check(f"stability.datasets.{i}", name, datasets, "dataset")
    study_models, study_datasets = set(st.get("models") or []), set(st.get("datasets") or [])
    for name, names in (st.get("model_datasets") or {}).items():
        check("stability.model_datasets", name, study_models, "stability model")
        for i, ds in enumerate(names or []):
            check(f"stability.model_datasets.{name}.{i}", ds, study_datasets, "stability dataset")
    axes = st.get("axes") or {}
    gate_encoder = (st.get("gate") or {}).get("encoder")
    if (
        axes.get("bert_scale") == "rescaled"
        and axes.get("bert_baseline") == "gate"
        and axes.get("encoder", gate_encoder) != gate_encoder
    ):
        errors.append(
            f"config key 'stability.axes.bert_baseline': gate takes the gate's b, estimated for encoder "
            f"'{gate_encoder}', but the BERT axis uses '{axes.get('encoder')}'; give b as a number or auto"
        )
    if "encoder" in axes:
        check("stability.axes.encoder", axes["encoder"], encoders, "encoder")
    if "judge" in axes:
        check("stability.axes.judge", axes["judge"], models, "model")
    if st.get("shard_size") and st.get("generate_jobs", "per_model") == "per_model":
        errors.append(
            "config key 'stability.shard_size': shards split per-dataset jobs; set 'stability.generate_jobs: "
            "per_dataset' with it"
        )
    stats = st.get("statistics") or {}
    if "primary_eps" in stats and "eps" in stats and stats["primary_eps"] not in stats["eps"]:
        errors.append(
            f"config key 'stability.statistics.primary_eps': {stats['primary_eps']} is not one of eps {stats['eps']}"
        )
    gate = st.get("gate") or {}
    if "encoder" in gate:
        check("stability.gate.encoder", gate["encoder"], encoders, "encoder")
    structural = (st.get("variants") or {}).get("structural") or {}
    if uses_rewriter(structural):
        if "rewriter" not in structural:
            errors.append(
                "config key 'stability.variants.structural': 'rewriter' is required when structural rewrites are enabled"
            )
        else:
            check("stability.variants.structural.rewriter", structural["rewriter"], models, "model")
    errors += trajectory_errors(config, models)
    errors += organism_errors(config.get("organisms") or {}, models)
    errors += crossstudy_errors(config)
    errors += trainer_args_errors(config)
    errors += api_model_errors(config)
    errors += checkpoint_source_errors(config)
    for study in config.get("studies") or []:
        if study not in config:
            errors.append(f"config key 'studies': study '{study}' is listed but has no '{study}' section")
    for name, spec in (config.get("datasets") or {}).items():
        src = (spec or {}).get("source") or {}
        need = {"file": "path", "hub": "id"}.get(src.get("kind"))
        if need and need not in src:
            errors.append(f"config key 'datasets.{name}.source': kind '{src['kind']}' needs '{need}'")
    for name, spec in (config.get("encoders") or {}).items():
        src = (spec or {}).get("source") or {}
        need = {"python_package": "module", "local": "path", "hub": "id"}.get(src.get("kind"))
        if need and need not in src:
            errors.append(f"config key 'encoders.{name}.source': kind '{src['kind']}' needs '{need}'")
    return errors


def api_model_errors(config: Mapping[str, Any]) -> list[str]:
    """Models served over an API (``source.kind: openai_compatible``) have replies but no weights:
    they can be evaluated, rewrite and judge in the stability study, but not be fine-tuned, nor
    judge with a base model's plain prompt."""
    registry = config.get("models") or {}
    api = {n for n, spec in registry.items() if ((spec or {}).get("source") or {}).get("kind") == "openai_compatible"}
    errors = []
    runs, keys, _ = expand_runs(config.get("trajectory") or {})
    uses = [
        (f"{keys[run]}.model" if keys[run].startswith("trajectory.runs.") else f"{keys[run]}.models", spec["model"])
        for run, spec in runs.items()
    ]
    uses = list(dict.fromkeys(uses))
    uses += [
        (f"organisms.sft.{name}.model", spec.get("model"))
        for name, spec in ((config.get("organisms") or {}).get("sft") or {}).items()
        if "path" not in spec
    ]
    for key, name in uses:
        if name in api:
            errors.append(
                f"config key '{key}': model '{name}' is served over an API (openai_compatible) and has no weights to train"
            )
    st = config.get("stability") or {}
    structural = (st.get("variants") or {}).get("structural") or {}
    for key, name in (
        ("stability.axes.judge", (st.get("axes") or {}).get("judge")),
        ("stability.variants.structural.rewriter", structural.get("rewriter") if uses_rewriter(structural) else None),
    ):
        if name in api and not registry[name].get("chat", True):
            errors.append(
                f"config key '{key}': model '{name}' is served over an API; it must be a chat model (chat: true)"
            )
    return errors


RUN_NAME = "{model}-{suite}-k{shots}-s{seed}"


def grid_runs(name: str, grid: Mapping[str, Any]) -> dict[str, dict]:
    """The runs that the entry ``trajectory.grid.NAME`` stands for: one per (model, suite, shots,
    seed), named :data:`RUN_NAME`, fine-tuned with the entry's ``finetune`` settings on ``shots``
    ID training examples (``finetune.n_train``). Each run records its model, suite, shots, seed
    and grid, so that results can be grouped by any of them."""
    runs = {}
    for model, suite, shots, seed in itertools.product(grid["models"], grid["suites"], grid["shots"], grid["seeds"]):
        run = RUN_NAME.format(model=model, suite=suite, shots=shots, seed=seed)
        finetune = copy.deepcopy(dict(grid["finetune"]))
        finetune["n_train"] = int(shots)
        runs[run] = {
            "model": model,
            "suite": suite,
            "shots": int(shots),
            "seed": int(seed),
            "grid": name,
            "finetune": finetune,
        }
    return runs


def finetune_schedule(settings: Mapping[str, Any]) -> dict:
    """Fine-tuning ``settings`` with its length (``steps``) and checkpoint cadence
    (``checkpoint_every``) in optimiser steps. Either may be given in epochs (``epochs``,
    ``checkpoint_every_epochs``): an epoch is ceil(n_train / batch_size) steps, as the Trainer
    walks n_train examples in batches of batch_size. Raises ValueError naming what is missing."""
    out = copy.deepcopy(dict(settings))
    for steps_key, epochs_key in (("steps", "epochs"), ("checkpoint_every", "checkpoint_every_epochs")):
        if (steps_key in out) == (epochs_key in out):
            raise ValueError(f"give exactly one of '{steps_key}' or '{epochs_key}'")
    if "epochs" in out or "checkpoint_every_epochs" in out:
        if "n_train" not in out:
            raise ValueError(
                "'epochs' and 'checkpoint_every_epochs' count passes over n_train examples; set 'n_train' "
                "(a grid's shots set it)"
            )
        per_epoch = math.ceil(int(out["n_train"]) / int(out["batch_size"]))
        if "epochs" in out:
            out["steps"] = int(out["epochs"]) * per_epoch
        if "checkpoint_every_epochs" in out:
            out["checkpoint_every"] = int(out["checkpoint_every_epochs"]) * per_epoch
    return out


def expand_runs(traj: Mapping[str, Any]) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    """Every run of a ``trajectory`` section (defaults filled in): the explicit ``runs`` and the
    runs of every ``grid`` entry (:func:`grid_runs`), each with its fine-tuning schedule in steps
    (:func:`finetune_schedule`) and its ``shots`` (``finetune.n_train``, None when it is not
    set). Returns the runs, the config key each one comes from, and the problems found: a run
    name made twice, a grid that sets ``n_train`` itself, a schedule that cannot be resolved."""
    runs: dict[str, dict] = {}
    keys: dict[str, str] = {}
    errors: list[str] = []
    for name, spec in (traj.get("runs") or {}).items():
        run = copy.deepcopy(dict(spec))
        run["shots"] = (spec.get("finetune") or {}).get("n_train")
        runs[name], keys[name] = run, f"trajectory.runs.{name}"
    for grid_name, grid in (traj.get("grid") or {}).items():
        key = f"trajectory.grid.{grid_name}"
        if "n_train" in grid["finetune"]:
            errors.append(f"config key '{key}.finetune.n_train': a grid's shots set n_train; remove it")
        for name, run in grid_runs(grid_name, grid).items():
            if name in runs:
                errors.append(
                    f"config key '{key}': run '{name}' is also made by '{keys[name]}'; run names must be unique"
                )
                continue
            runs[name], keys[name] = run, key
    for name, run in runs.items():
        if "finetune" in run:
            try:
                run["finetune"] = finetune_schedule(run["finetune"])
            except ValueError as err:
                where = keys[name] if keys[name].startswith("trajectory.runs.") else f"{keys[name]} (run '{name}')"
                errors.append(f"config key '{where}.finetune': {err}")
    return runs, keys, errors


def trajectory_runs(traj: Mapping[str, Any]) -> dict[str, dict]:
    """The runs of a ``trajectory`` section (defaults filled in), explicit and from the grid
    (:func:`expand_runs`); raise :class:`ConfigError` if they cannot be made."""
    runs, _, errors = expand_runs(traj)
    if errors:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))
    return runs


def trajectory_errors(config: Mapping[str, Any], models: set[str]) -> list[str]:
    """Problems of the ``trajectory`` section that the schema cannot see: unknown models and
    suites, grid expansions that clash, too few checkpoints, prompt patterns that cannot be filled."""
    from shiftwork.trajectory.tasks import pattern_problem

    if "trajectory" not in config:
        return []
    traj = config["trajectory"] or {}
    suites = set(traj.get("suites") or {})
    # check_config fills the schema's defaults in first (windows: true)
    windows = bool(traj["analysis"]["windows"]) if "analysis" in traj else True
    errors: list[str] = []

    def check(key: str, name: Any, known: set[str], what: str) -> None:
        if name not in known:
            errors.append(
                f"config key '{key}': unknown {what} '{name}'; defined {what}s are {sorted(known)}"
                + _suggest(str(name), known)
            )

    for name, suite in (traj.get("suites") or {}).items():
        problem = pattern_problem(suite["pattern"])
        if problem:
            errors.append(f"config key 'trajectory.suites.{name}.pattern': {problem}")
    for name, grid in (traj.get("grid") or {}).items():
        for i, model in enumerate(grid["models"]):
            check(f"trajectory.grid.{name}.models.{i}", model, models, "model")
        for i, suite in enumerate(grid["suites"]):
            check(f"trajectory.grid.{name}.suites.{i}", suite, suites, "suite")
    runs, keys, expansion = expand_runs(traj)
    errors += expansion
    for run, spec in (traj.get("runs") or {}).items():
        check(f"trajectory.runs.{run}.model", spec.get("model"), models, "model")
        check(f"trajectory.runs.{run}.suite", spec.get("suite"), suites, "suite")
        if ("finetune" in spec) == ("checkpoints" in spec):
            errors.append(f"config key 'trajectory.runs.{run}': give exactly one of 'finetune' or 'checkpoints'")
        for i, ck in enumerate(spec.get("checkpoints") or []):
            if ("path" in ck) == ("hub" in ck):
                errors.append(
                    f"config key 'trajectory.runs.{run}.checkpoints.{i}': give exactly one of 'path' or 'hub'"
                )
    for run, spec in runs.items():
        if ("finetune" in spec) == ("checkpoints" in spec):
            continue
        if "finetune" in spec and not {"steps", "checkpoint_every"} <= set(spec["finetune"]):
            continue  # the schedule could not be resolved: reported above
        n = len(run_steps(spec))
        where = keys[run] if keys[run].startswith("trajectory.runs.") else f"{keys[run]} (run '{run}')"
        if n < 4:
            errors.append(f"config key '{where}': {n} checkpoints; partial correlations need at least 4")
        elif windows and n < 8:
            errors.append(
                f"config key '{where}': {n} checkpoints; the early/late window analysis needs at least 8 "
                "(4 in each half); give the run more checkpoints or set trajectory.analysis.windows: false"
            )
    if not runs:
        errors.append("config key 'trajectory': no runs; list them under 'trajectory.runs' or 'trajectory.grid'")
    return errors


ORGANISM_RUN_NAME = "{run}-s{seed}"
"""The name of one seed of an organisms run that lists ``seeds``."""


def organism_runs(org: Mapping[str, Any]) -> dict[str, dict]:
    """The RL runs of an ``organisms`` section: a run listing ``seeds`` stands for one run per
    seed, named :data:`ORGANISM_RUN_NAME`; every run records its ``seed`` and its ``base`` (the
    configured name, which the report groups seeds by). A name made twice is a ValueError."""
    runs: dict[str, dict] = {}
    for name, spec in (org.get("runs") or {}).items():
        seeds = spec.get("seeds")
        expanded = (
            {ORGANISM_RUN_NAME.format(run=name, seed=seed): int(seed) for seed in seeds}
            if seeds is not None
            else {name: int(spec.get("seed", 0))}
        )
        for run, seed in expanded.items():
            if run in runs:
                raise ValueError(
                    f"config key 'organisms.runs.{name}': run name '{run}' is made twice; rename the run or its seeds"
                )
            one = {k: copy.deepcopy(v) for k, v in spec.items() if k != "seeds"}
            runs[run] = {**one, "seed": seed, "base": name}
    return runs


def training_runs(config: Mapping[str, Any]) -> dict[str, list[tuple[str, dict]]]:
    """Every training run of the config by name (defaults filled in): the trajectory runs
    (:func:`expand_runs`) and the organisms RL runs (:func:`organism_runs`), each as
    (its study, its spec); a name two studies both use has two entries."""
    runs: dict[str, list[tuple[str, dict]]] = {}
    for run, spec in expand_runs(config.get("trajectory") or {})[0].items():
        runs.setdefault(run, []).append(("trajectory", spec))
    try:
        organisms = organism_runs(config.get("organisms") or {})
    except ValueError:
        organisms = {}  # a name made twice: reported by organism_errors
    for run, spec in organisms.items():
        runs.setdefault(run, []).append(("organisms", spec))
    return runs


def run_base_model(config: Mapping[str, Any], study: str, spec: Mapping[str, Any]) -> str | None:
    """The registered model a training run starts from: a trajectory run's model; for an
    organisms RL run, the model its organism was fine-tuned from (None for an organism given as
    a trained directory, ``path``)."""
    if study == "trajectory":
        return spec.get("model")
    organism = ((config.get("organisms") or {}).get("sft") or {}).get(spec.get("organism")) or {}
    return None if "path" in organism else organism.get("model")


def checkpoint_chain(config: Mapping[str, Any], name: str) -> list[str]:
    """Model ``name`` and the models it is trained from, as far as checkpoint sources lead
    (``a`` is a checkpoint of a run that trains ``b``, itself a checkpoint...); a model met twice
    closes the list (a cycle)."""
    registry = config.get("models") or {}
    runs = training_runs(config)
    chain = [name]
    while True:
        source = (registry.get(chain[-1]) or {}).get("source") or {}
        found = runs.get(source.get("run")) if source.get("kind") == "checkpoint" else None
        base = run_base_model(config, *found[0]) if found and len(found) == 1 else None
        if base is None or base not in registry:
            return chain
        chain.append(base)
        if base in chain[:-1]:
            return chain


def checkpoint_source_errors(config: Mapping[str, Any]) -> list[str]:
    """Problems of models whose source is a checkpoint of a training run: the run is not one of
    this config's; a trajectory run writes no checkpoint at that step (an organisms run may stop
    early, so its step is checked when the model is prepared); the model is trained from itself;
    ``chat`` is not set and cannot be taken from the model the run trained from."""
    errors = []
    runs = training_runs(config)
    for name, spec in (config.get("models") or {}).items():
        source = (spec or {}).get("source") or {}
        if source.get("kind") != "checkpoint":
            continue
        key, run, step = f"models.{name}.source", source["run"], int(source["step"])
        found = runs.get(run)
        if not found:
            errors.append(
                f"config key '{key}.run': model '{name}' names run '{run}', which is not a run of this config; "
                f"its trajectory and organisms runs are {sorted(runs)}" + _suggest(str(run), runs)
            )
            continue
        if len(found) > 1:
            errors.append(
                f"config key '{key}.run': run '{run}' is both a trajectory and an organisms run; rename one of them"
            )
            continue
        study, run_spec = found[0]
        if study == "trajectory":
            try:
                steps = run_steps(run_spec)
            except (KeyError, ValueError):
                steps = None  # no schedule: reported by trajectory_errors
            if steps is not None and step not in steps:
                errors.append(
                    f"config key '{key}.step': trajectory run '{run}' writes no checkpoint at step {step}; "
                    f"its checkpoints are at steps {steps}"
                )
        chain = checkpoint_chain(config, name)
        if chain[-1] in chain[:-1]:
            errors.append(
                f"config key '{key}': model '{name}' is trained from itself through checkpoint sources "
                f"({' -> '.join(chain)}); a checkpoint's run must start from another model"
            )
        elif "chat" not in spec and run_base_model(config, study, run_spec) is None:
            errors.append(
                f"config key 'models.{name}': 'chat' is required: run '{run}' starts from an organism given "
                "as a trained directory (path), whose chat is not registered"
            )
    return errors


def with_checkpoint_chat(config: Mapping[str, Any]) -> dict:
    """``config`` (checked) with every checkpoint model's ``chat`` filled in where its entry
    does not set it: the chat of the model its run was trained from, followed through chained
    checkpoint sources."""
    out = copy.deepcopy(dict(config))
    registry = out.get("models") or {}
    for name, spec in registry.items():
        if "chat" not in spec:
            chain = checkpoint_chain(out, name)
            spec["chat"] = next(registry[m]["chat"] for m in chain if "chat" in registry[m])
    return out


def question_errors(key: str, q: Mapping[str, Any]) -> list[str]:
    """Problems of one organism's ``questions``: each kind is a built-in synthetic kind or a key of
    ``families`` (whose format is known), and a synthetic bank has room for n_train + n_test."""
    from shiftwork.organisms.choice_questions import FORMATS
    from shiftwork.organisms.questions import KINDS, capacity

    errors = []
    families = q.get("families") or {}
    for name, fam in families.items():
        if name in KINDS:
            errors.append(f"config key '{key}.families.{name}': '{name}' is a built-in kind; name the family otherwise")
        if fam.get("format") not in FORMATS:
            errors.append(
                f"config key '{key}.families.{name}.format': unknown format {fam.get('format')!r}; expected one of "
                f"{list(FORMATS)}"
            )
        src = fam.get("source") or {}
        need = {"file": "path", "hub": "id"}.get(src.get("kind"))
        if need and need not in src:
            errors.append(f"config key '{key}.families.{name}.source': kind '{src['kind']}' needs '{need}'")
    kinds = q.get("kind", "add")
    many = isinstance(kinds, list)
    for i, kind in enumerate(kinds if many else [kinds]):
        where = f"{key}.kind" + (f".{i}" if many else "")
        if kind in KINDS:
            room = capacity(kind)
            if q["n_train"] + q["n_test"] > room:
                errors.append(
                    f"config key '{key}': n_train + n_test = {q['n_train'] + q['n_test']} exceeds "
                    f"the {room} distinct '{kind}' questions"
                )
        elif kind not in families:
            known = [*KINDS, *families]
            errors.append(
                f"config key '{where}': unknown question kind or family '{kind}'; built-in kinds are {list(KINDS)}"
                + (
                    f", families (questions.families) {sorted(families)}"
                    if families
                    else ", and no families are defined"
                )
                + _suggest(str(kind), known)
            )
    return errors


def organism_errors(org: Mapping[str, Any], models: set[str]) -> list[str]:
    """Problems of the ``organisms`` section that the schema cannot see: unknown models and
    organisms, settings that cannot be built (a custom distribution no policy answers on, no
    policies, cutoffs outside the years, languages that do not fit), question kinds that do not fit
    the trigger, stage distributions outside the setting or answered by no policy, question banks too
    small, missing training settings."""
    from shiftwork.organisms.settings import load_setting
    from shiftwork.organisms.steps import question_specs

    errors = []
    settings = {}
    for name, spec in (org.get("sft") or {}).items():
        key = f"organisms.sft.{name}"
        if "path" not in spec and spec.get("model") not in models:
            errors.append(
                f"config key '{key}.model': unknown model '{spec.get('model')}'; defined models are {sorted(models)}"
                + _suggest(str(spec.get("model")), models)
            )
        try:
            settings[name] = load_setting(spec["setting"])
        except ValueError as err:
            errors.append(f"config key '{key}.setting': {err}")
        errors += question_errors(f"{key}.questions", spec["questions"])
        if name in settings:
            try:
                question_specs(settings[name], spec["questions"])
            except ValueError as err:
                errors.append(f"config key '{key}.questions.kind': {err}")
        start = spec.get("start_from")
        if start is not None:
            other = (org.get("sft") or {}).get(start)
            if other is None or start == name:
                errors.append(
                    f"config key '{key}.start_from': '{start}' is not another organism; defined organisms are "
                    f"{sorted(org.get('sft') or {})}" + _suggest(str(start), org.get("sft") or {})
                )
            elif other.get("model") != spec.get("model"):
                errors.append(
                    f"config key '{key}.start_from': organism '{start}' is trained from model '{other.get('model')}', "
                    f"this one from '{spec.get('model')}'; start from an organism of the same model"
                )
            elif "start_from" in other:
                errors.append(
                    f"config key '{key}.start_from': organism '{start}' itself starts from another; chain one level only"
                )
        if "path" not in spec:
            missing = [k for k in ("steps", "learning_rate") if k not in spec["train"]]
            if missing:
                errors.append(f"config key '{key}.train': missing {missing}")
            if "n_examples" not in spec:
                errors.append(f"config key '{key}': 'n_examples' (SFT transcripts) is required unless 'path' is given")
    shared = org.get("rl") or {}
    for run, spec in (org.get("runs") or {}).items():
        key = f"organisms.runs.{run}"
        if spec["organism"] not in (org.get("sft") or {}):
            errors.append(
                f"config key '{key}.organism': unknown organism '{spec['organism']}'; defined organisms "
                f"are {sorted(org.get('sft') or {})}" + _suggest(str(spec["organism"]), org.get("sft") or {})
            )
            continue
        setting = settings.get(spec["organism"])
        for i, stage in enumerate(spec["stages"]):
            for d in stage["distributions"]:
                if setting is not None and str(d) not in setting.distributions:
                    errors.append(
                        f"config key '{key}.stages.{i}.distributions': distribution '{d}' is not in setting "
                        f"'{setting.name}' ({setting.distributions})"
                    )
                elif setting is not None and str(d) in setting.unanswered:
                    errors.append(
                        f"config key '{key}.stages.{i}.distributions': no policy of setting '{setting.name}' "
                        f"answers on distribution '{d}', so RL there has nothing to select; train on "
                        f"{[x for x in setting.distributions if x not in setting.unanswered]}"
                    )
        if "seeds" in spec and "seed" in spec:
            errors.append(f"config key '{key}': give either 'seed' or 'seeds', not both")
        train = {**shared, **(spec.get("train") or {})}
        missing = [k for k in ("learning_rate", "checkpoint_every") if k not in train]
        if missing:
            errors.append(f"config key '{key}.train': missing {missing} (set them here or in organisms.rl)")
    try:
        organism_runs(org)
    except ValueError as err:
        errors.append(str(err))
    dyn = org.get("dynamics")
    if dyn:
        sizes = {k: len(dyn[k]) for k in ("names", "weights", "rewards", "held_out")}
        if len(set(sizes.values())) != 1:
            errors.append(
                f"config key 'organisms.dynamics': names, weights, rewards and held_out need one entry per policy, got {sizes}"
            )
    return errors


def trainer_args_places(config: Mapping[str, Any]) -> list[tuple[str, Any, list[str]]]:
    """Every ``trainer_args`` map of the config: (its config key, the map, the argument
    dataclasses it is passed to). A run's RL settings are ``organisms.rl`` under its own ``train``,
    so ``organisms.rl.trainer_args`` goes to GRPOConfig."""
    places = []
    traj = config.get("trajectory") or {}
    for section in ("runs", "grid"):
        for name, spec in (traj.get(section) or {}).items():
            if "trainer_args" in ((spec or {}).get("finetune") or {}):
                key = f"trajectory.{section}.{name}.finetune.trainer_args"
                places.append((key, spec["finetune"]["trainer_args"], ["TrainingArguments"]))
    org = config.get("organisms") or {}
    for name, spec in (org.get("sft") or {}).items():
        if "trainer_args" in ((spec or {}).get("train") or {}):
            places.append((f"organisms.sft.{name}.train.trainer_args", spec["train"]["trainer_args"], ["SFTConfig"]))
    if "trainer_args" in (org.get("rl") or {}):
        places.append(("organisms.rl.trainer_args", org["rl"]["trainer_args"], ["GRPOConfig"]))
    for name, spec in (org.get("runs") or {}).items():
        if "trainer_args" in ((spec or {}).get("train") or {}):
            places.append((f"organisms.runs.{name}.train.trainer_args", spec["train"]["trainer_args"], ["GRPOConfig"]))
    return places


def trainer_args_errors(config: Mapping[str, Any]) -> list[str]:
    """``trainer_args`` keys that are no field of the library dataclass they are passed to
    (checked before any job runs; the libraries are imported only when some map is not empty)."""
    from shiftwork.models.trainer_args import trainer_args_problems

    errors = []
    for key, extra, classes in trainer_args_places(config):
        if extra:
            errors += [f"config key '{key}': {problem}" for problem in trainer_args_problems(extra, classes)]
    return errors


def path_errors(config: Mapping[str, Any], root: str | Path = ".") -> list[str]:
    """Local files and directories the config names but that are not there."""
    errors = []
    for name, spec in (config.get("datasets") or {}).items():
        src = spec["source"]
        if src["kind"] == "file":
            path = Path(src["path"])
            path = path if path.is_absolute() else Path(root) / path
            if not path.is_file():
                errors.append(f"config key 'datasets.{name}.source.path': file {path} does not exist")
            elif not src.get("format") and path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
                errors.append(
                    f"config key 'datasets.{name}.source.format': cannot tell the format of {path}; set jsonl, csv or parquet"
                )
    for run, spec in ((config.get("trajectory") or {}).get("runs") or {}).items():
        for i, ck in enumerate(spec.get("checkpoints") or []):
            if "path" in ck and not Path(ck["path"]).is_dir():
                errors.append(
                    f"config key 'trajectory.runs.{run}.checkpoints.{i}.path': directory {ck['path']} does not exist"
                )
    for name, spec in ((config.get("organisms") or {}).get("sft") or {}).items():
        if "path" in spec and not (Path(spec["path"]) / "config.json").is_file():
            errors.append(
                f"config key 'organisms.sft.{name}.path': {spec['path']} is not a model directory (no config.json)"
            )
    for section in ("models", "encoders"):
        for name, spec in (config.get(section) or {}).items():
            src = spec["source"]
            if src["kind"] == "local" and not (Path(src["path"]) / "config.json").is_file():
                errors.append(
                    f"config key '{section}.{name}.source.path': {src['path']} is not a Hugging Face model directory (no config.json)"
                )
    return errors


def crossstudy_errors(config: Mapping[str, Any]) -> list[str]:
    """The cross-study's runs must be runs of this config's trajectory or organisms study (expanded
    names: a seeded organisms run is ``<run>-s<seed>``), and it needs the stability section (its
    variants, gate and axes)."""
    cross = config.get("crossstudy")
    if not cross:
        return []
    errors = (
        []
        if config.get("stability")
        else ["config key 'crossstudy': needs the 'stability' section (variants, gate, axes)"]
    )
    known = {
        "trajectory": set(expand_runs(config.get("trajectory") or {})[0]) if config.get("trajectory") else set(),
        "organisms": set(organism_runs(config.get("organisms") or {})) if config.get("organisms") else set(),
    }
    for study, names in known.items():
        for i, run in enumerate((cross.get(study) or {}).get("runs") or []):
            if run not in names:
                errors.append(
                    f"config key 'crossstudy.{study}.runs.{i}': '{run}' is not a run of the {study} study; "
                    f"its runs are {sorted(names)}" + _suggest(str(run), names)
                )
    return errors


def used_models(config: Mapping[str, Any]) -> list[str]:
    """Registered models that the config's study sections use (evaluated, rewriter, judge,
    fine-tuned): any of them can be a target, whatever ``studies`` lists."""
    names: list[str] = []
    st = config.get("stability") or {}
    if st:
        names += list(st.get("models") or [])
        structural = (st.get("variants") or {}).get("structural") or {}
        if uses_rewriter(structural) and structural.get("rewriter"):
            names.append(structural["rewriter"])
        if (st.get("axes") or {}).get("judge"):
            names.append(st["axes"]["judge"])
    names += [run.get("model") for run in expand_runs(config.get("trajectory") or {})[0].values()]
    names += [
        spec.get("model") for spec in ((config.get("organisms") or {}).get("sft") or {}).values() if "path" not in spec
    ]
    return [n for n in dict.fromkeys(names) if n in (config.get("models") or {})]


def content_errors(config: Mapping[str, Any], root: str | Path = ".", check_keys: bool = True) -> list[str]:
    """What would make a job fail that can be seen before any job runs: a model source that
    cannot work (checked without loading weights) and, for prompt sets read from files, every
    row (read and sampled exactly as ``sample_prompts`` will)."""
    from shiftwork.models.sources import source_problems
    from shiftwork.stability.prompts import DatasetError, load_prompts

    errors = []
    for name in used_models(config):
        errors += [
            f"config key 'models.{name}.source': {p}"
            for p in source_problems(name, config["models"][name]["source"], check_keys)
        ]
    for name in (config.get("stability") or {}).get("datasets") or []:
        spec = (config.get("datasets") or {}).get(name) or {}
        if (spec.get("source") or {}).get("kind") != "file":
            continue
        try:
            load_prompts(name, spec, root)
        except DatasetError as err:
            errors.append(f"config key 'datasets.{name}': {err}")
    return errors


def run_steps(run: Mapping[str, Any]) -> list[int]:
    """Checkpoint steps of a trajectory run: from its fine-tuning schedule or its checkpoint list."""
    if "finetune" in run:
        from shiftwork.trajectory.schedule import checkpoint_steps

        return checkpoint_steps(int(run["finetune"]["steps"]), int(run["finetune"]["checkpoint_every"]))
    return sorted(int(c["step"]) for c in run.get("checkpoints") or [])


def api_key_errors(config: Mapping[str, Any]) -> list[str]:
    """The API models the config's studies use whose key variable is not set."""
    from shiftwork.models.sources import API_KIND, source_problems

    return [
        f"config key 'models.{name}.source': {p}"
        for name in used_models(config)
        if config["models"][name]["source"].get("kind") == API_KIND
        for p in source_problems(name, config["models"][name]["source"])
    ]


def require_api_keys(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming every API model whose key variable is not set."""
    problems = api_key_errors(config)
    if problems:
        raise ConfigError("missing API keys:\n  - " + "\n  - ".join(problems))


#: what a config's ``name`` (its folder under results/, logs/ and benchmarks/) may be
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def results_name(config: Mapping[str, Any], configfiles: Iterable[str | Path] = ()) -> str:
    """The name of a config's own folders: its ``name`` key; without one, the stem of the last
    config file given on the command line (``--configfile config/mine.yaml`` -> ``mine``);
    ``default`` for the embedded config."""
    if config.get("name"):
        name, origin = str(config["name"]), "config key 'name'"
    elif configfiles:
        last = Path(list(configfiles)[-1])
        name, origin = last.stem, f"the name of config file {last} (set config key 'name' to choose another)"
    else:
        return "default"
    if not re.fullmatch(NAME_PATTERN, name):
        raise ConfigError(
            f"{origin}: {name!r} cannot name a results folder; use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def check_config(
    config: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    root: str | Path | None = None,
    check_keys: bool = True,
) -> dict:
    """The config with its defaults filled in (:func:`with_defaults`; a checkpoint model's chat:
    :func:`with_checkpoint_chat`), once it passes every check;
    otherwise raise :class:`ConfigError` listing every problem, each naming its config key.
    With ``root``, also check that local files the config names exist (relative to ``root``),
    that model sources can work and that every row of a file prompt set is usable; with
    ``check_keys``, also that the variable each API model names holds a key (a dry run plans
    without keys)."""
    problems = schema_errors(config, schema)
    if not problems:
        config = with_defaults(config, schema)
        problems = reference_errors(config)
    if not problems and root is not None:
        problems = path_errors(config, root)
    if not problems and root is not None:
        problems = content_errors(config, root, check_keys)
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
    return with_checkpoint_chat(config)
