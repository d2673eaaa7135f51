"""Configuration checks run before any job: schema errors and unknown names, each naming the key.

Each study's own checks and run naming live in its ``config`` module
(:mod:`shiftwork.stability.config`, :mod:`shiftwork.trajectory.config`,
:mod:`shiftwork.organisms.config`, :mod:`shiftwork.crossstudy.config`) and the schema's own
checks in :mod:`shiftwork.schema`; this module composes them with the checks that span studies
(registries, trainer arguments, checkpoint sources, local paths, model sources, API keys) and
re-exports their names."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from shiftwork.crossstudy.config import crossstudy_errors as crossstudy_errors
from shiftwork.models.sources import API_KIND, source_problems
from shiftwork.models.trainer_args import trainer_args_problems
from shiftwork.organisms.config import ORGANISM_RUN_NAME as ORGANISM_RUN_NAME
from shiftwork.organisms.config import organism_errors as organism_errors
from shiftwork.organisms.config import organism_runs as organism_runs
from shiftwork.organisms.config import question_errors as question_errors
from shiftwork.schema import SCHEMA_PATH as SCHEMA_PATH
from shiftwork.schema import ConfigError as ConfigError
from shiftwork.schema import empty_section as empty_section
from shiftwork.schema import load_schema as load_schema
from shiftwork.schema import overridden as overridden
from shiftwork.schema import schema_errors as schema_errors
from shiftwork.schema import suggest
from shiftwork.schema import with_defaults as with_defaults
from shiftwork.stability.config import stability_errors
from shiftwork.stability.config import uses_rewriter as uses_rewriter
from shiftwork.stability.prompts import DatasetError, load_prompts
from shiftwork.stability.variants.handwritten import handwritten_config_errors
from shiftwork.trajectory.config import RUN_NAME as RUN_NAME
from shiftwork.trajectory.config import expand_runs as expand_runs
from shiftwork.trajectory.config import finetune_schedule as finetune_schedule
from shiftwork.trajectory.config import grid_runs as grid_runs
from shiftwork.trajectory.config import run_steps as run_steps
from shiftwork.trajectory.config import trajectory_errors as trajectory_errors
from shiftwork.trajectory.config import trajectory_runs as trajectory_runs


def reference_errors(config: Mapping[str, Any]) -> list[str]:
    """Names used by studies that the registries do not define, and what else each study and the
    registries need that the schema cannot see, study by study."""
    models = set(config.get("models") or {})
    return [
        *stability_errors(config),
        *trajectory_errors(config, models),
        *organism_errors(config.get("organisms") or {}, models),
        *crossstudy_errors(config),
        *trainer_args_errors(config),
        *warmup_errors(config),
        *api_model_errors(config),
        *checkpoint_source_errors(config),
        *studies_errors(config),
        *source_field_errors(config),
    ]


def studies_errors(config: Mapping[str, Any]) -> list[str]:
    """Every study that ``studies`` lists has its section."""
    return [
        f"config key 'studies': study '{study}' is listed but has no '{study}' section"
        for study in config.get("studies") or []
        if study not in config
    ]


#: the key each source kind of a registry needs, by registry
SOURCE_NEEDS = {
    "datasets": {"file": "path", "hub": "id"},
    "encoders": {"python_package": "module", "local": "path", "hub": "id"},
}


def source_field_errors(config: Mapping[str, Any]) -> list[str]:
    """Dataset and encoder sources that lack the key their kind needs."""
    errors = []
    for section, needs in SOURCE_NEEDS.items():
        for name, spec in (config.get(section) or {}).items():
            src = (spec or {}).get("source") or {}
            need = needs.get(src.get("kind"))
            if need and need not in src:
                errors.append(f"config key '{section}.{name}.source': kind '{src['kind']}' needs '{need}'")
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
                f"its trajectory and organisms runs are {sorted(runs)}" + suggest(str(run), runs)
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


def warmup_errors(config: Mapping[str, Any]) -> list[str]:
    """A warm-up under scheduler ``constant``, which has none: transformers' ``constant`` schedule
    ignores ``warmup_steps``, so the run would start at the full learning rate while its config
    says otherwise. Checked for every trajectory run (``warmup_ratio``), every organism's SFT and
    the RL settings of every organisms run (``organisms.rl`` under the run's own ``train``)."""

    def problem(key: str, settings: Mapping[str, Any], field: str) -> list[str]:
        if (settings.get(field) or 0) > 0 and settings.get("scheduler") == "constant":
            return [
                f"config key '{key}.{field}': {settings[field]} asks for a warm-up, but scheduler 'constant' has "
                "none (transformers ignores it there); set scheduler to constant_with_warmup, linear or cosine, "
                f"or {field} to 0"
            ]
        return []

    errors = []
    traj = config.get("trajectory") or {}
    for section in ("runs", "grid"):
        for name, spec in (traj.get(section) or {}).items():
            errors += problem(
                f"trajectory.{section}.{name}.finetune", (spec or {}).get("finetune") or {}, "warmup_ratio"
            )
    org = config.get("organisms") or {}
    for name, spec in (org.get("sft") or {}).items():
        errors += problem(f"organisms.sft.{name}.train", (spec or {}).get("train") or {}, "warmup_steps")
    rl = org.get("rl") or {}
    errors += problem("organisms.rl", rl, "warmup_steps")
    for name, spec in (org.get("runs") or {}).items():
        own = (spec or {}).get("train") or {}
        if own.keys() & {"scheduler", "warmup_steps"}:
            errors += problem(f"organisms.runs.{name}.train", {**rl, **own}, "warmup_steps")
    return errors


def trainer_args_errors(config: Mapping[str, Any]) -> list[str]:
    """``trainer_args`` keys that are no field of the library dataclass they are passed to
    (checked before any job runs; the libraries are imported only when some map is not empty)."""
    errors = []
    for key, extra, classes in trainer_args_places(config):
        if extra:
            errors += [f"config key '{key}': {problem}" for problem in trainer_args_problems(extra, classes)]
    return errors


def path_errors(config: Mapping[str, Any], root: str | Path = ".") -> list[str]:
    """Local files and directories the config names but that are not there."""
    return [
        *dataset_file_errors(config, root),
        *checkpoint_dir_errors(config),
        *organism_dir_errors(config),
        *model_dir_errors(config),
    ]


def dataset_file_errors(config: Mapping[str, Any], root: str | Path) -> list[str]:
    """Dataset files (relative to ``root``) that are missing or whose format cannot be told."""
    errors = []
    for name, spec in (config.get("datasets") or {}).items():
        src = spec["source"]
        if src["kind"] != "file":
            continue
        path = Path(src["path"])
        path = path if path.is_absolute() else Path(root) / path
        if not path.is_file():
            errors.append(f"config key 'datasets.{name}.source.path': file {path} does not exist")
        elif not src.get("format") and path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
            errors.append(
                f"config key 'datasets.{name}.source.format': cannot tell the format of {path}; set jsonl, csv or parquet"
            )
    return errors


def checkpoint_dir_errors(config: Mapping[str, Any]) -> list[str]:
    """Checkpoint directories of trajectory runs that are not there."""
    return [
        f"config key 'trajectory.runs.{run}.checkpoints.{i}.path': directory {ck['path']} does not exist"
        for run, spec in ((config.get("trajectory") or {}).get("runs") or {}).items()
        for i, ck in enumerate(spec.get("checkpoints") or [])
        if "path" in ck and not Path(ck["path"]).is_dir()
    ]


def organism_dir_errors(config: Mapping[str, Any]) -> list[str]:
    """Trained organisms (``path``) whose directory holds no model."""
    return [
        f"config key 'organisms.sft.{name}.path': {spec['path']} is not a model directory (no config.json)"
        for name, spec in ((config.get("organisms") or {}).get("sft") or {}).items()
        if "path" in spec and not (Path(spec["path"]) / "config.json").is_file()
    ]


def model_dir_errors(config: Mapping[str, Any]) -> list[str]:
    """Local models and encoders whose directory is no Hugging Face model."""
    return [
        f"config key '{section}.{name}.source.path': {spec['source']['path']} is not a Hugging Face model "
        "directory (no config.json)"
        for section in ("models", "encoders")
        for name, spec in (config.get(section) or {}).items()
        if spec["source"]["kind"] == "local" and not (Path(spec["source"]["path"]) / "config.json").is_file()
    ]


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
    cannot work (checked without loading weights), for prompt sets read from files, every
    row (read and sampled exactly as ``sample_prompts`` will), and, without a rewriter, the
    hand-written structural variants of every dataset of the stability study."""
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
    return errors + handwritten_config_errors(config, root)


def api_key_errors(config: Mapping[str, Any]) -> list[str]:
    """The API models the config's studies use whose key variable is not set or holds a key that
    cannot be sent (whitespace, a control character, not printable ASCII), each by its variable."""
    return [
        f"config key 'models.{name}.source': {p}"
        for name in used_models(config)
        if config["models"][name]["source"].get("kind") == API_KIND
        for p in source_problems(name, config["models"][name]["source"])
    ]


def require_api_keys(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming every API model whose key variable is not set or holds
    a key that cannot be sent."""
    problems = api_key_errors(config)
    if problems:
        raise ConfigError("API keys missing or unusable:\n  - " + "\n  - ".join(problems))


#: what a name that becomes part of a path may be: a config's ``name`` (its folder under
#: results/, logs/ and benchmarks/), and the names of models, datasets, encoders, suites,
#: organisms and runs (folders and files under it); two dots in a row are refused as well
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
NAME_RULE = "use letters, digits, '.', '_' and '-', starting with a letter or digit, with no '..'"

#: folders under results/ that every config shares, which no config may take as its name:
#: prepared models, caches (left out of the damage check) and the benchmark scripts' results
SHARED_FOLDERS = ("models", "cache", "bench")

#: config sections whose keys name folders or files, and what one of their keys is
NAMED_SECTIONS = (
    (("models",), "model"),
    (("datasets",), "dataset"),
    (("encoders",), "encoder"),
    (("trajectory", "suites"), "suite"),
    (("trajectory", "runs"), "run"),
    (("organisms", "sft"), "organism"),
    (("organisms", "runs"), "run"),
)

#: registries whose entries may come from the hub, whose ids hold a '/'
HUB_REGISTRIES = ("models", "datasets", "encoders")


def safe_name(name: Any) -> bool:
    """Whether ``name`` can be a folder or file name (:data:`NAME_PATTERN`, no '..')."""
    return isinstance(name, str) and re.fullmatch(NAME_PATTERN, name) is not None and ".." not in name


def config_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a config's folders (``results/NAME``), or None."""
    if not safe_name(name):
        return f"cannot name a results folder; {NAME_RULE}"
    if name in SHARED_FOLDERS:
        shared = ", ".join(f"results/{f}" for f in SHARED_FOLDERS)
        return (
            f"is the name of results/{name}/, a folder every config shares ({shared}: prepared models, "
            "caches, benchmark results); choose another name"
        )
    return None


def entry_name_problem(section: str, name: Any, what: str) -> str | None:
    """Why ``name``, a key of config section ``section`` naming a ``what``, cannot name its
    folders and files, or None; a hub id gets a name to use instead."""
    if safe_name(name):
        return None
    if not isinstance(name, str):
        return f"{what} name {name!r} is read as {type(name).__name__}, not text; quote it in the config file"
    if section in HUB_REGISTRIES and "/" in name:
        tail = name.rstrip("/").rsplit("/", 1)[-1]
        example = tail if safe_name(tail) else f"my-{what}"
        return (
            f"a {what} name cannot hold '/' (it names folders and files under results/); "
            f"use a name such as '{example}' and put the hub id in source.id"
        )
    return f"{what} name {name!r} cannot name a folder or file; {NAME_RULE}"


def name_errors(config: Mapping[str, Any]) -> list[str]:
    """Names that cannot become part of a path: the config's ``name`` (not one of the shared
    folders either) and the keys of :data:`NAMED_SECTIONS`. Checked with the schema, before
    anything reads a name, on a config that may not match the schema yet."""
    if not isinstance(config, Mapping):
        return []
    errors = []
    if "name" in config and isinstance(config["name"], str) and (problem := config_name_problem(config["name"])):
        errors.append(f"config key 'name': {config['name']!r} {problem}")
    for path, what in NAMED_SECTIONS:
        section: Any = config
        for part in path:
            section = section.get(part) if isinstance(section, Mapping) else None
        for name in section if isinstance(section, Mapping) else ():
            if problem := entry_name_problem(".".join(path), name, what):
                errors.append(f"config key '{'.'.join(path)}.{name}': {problem}")
    return errors


def results_name(config: Mapping[str, Any], configfiles: Iterable[str | Path] = ()) -> str:
    """The name of a config's own folders: its ``name`` key; without one, the stem of the last
    config file given on the command line (``--configfile config/mine.yaml`` -> ``mine``);
    ``default`` for the embedded config. A name that cannot be a folder, or that is one of the
    :data:`SHARED_FOLDERS`, is a :class:`ConfigError`."""
    if config.get("name"):
        name, origin = str(config["name"]), "config key 'name'"
    elif configfiles:
        last = Path(list(configfiles)[-1])
        name, origin = last.stem, f"the name of config file {last} (set config key 'name' to choose another)"
    else:
        return "default"
    if problem := config_name_problem(name):
        raise ConfigError(f"{origin}: {name!r} {problem}")
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
    problems = [*name_errors(config), *schema_errors(config, schema)]
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
