"""The organisms study's run naming and config checks (composed by :mod:`shiftwork.config`): the RL
runs an ``organisms`` section stands for (one per seed), and the problems the schema cannot see in
its organisms, question banks, runs and dynamics."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from shiftwork.organisms.choice_questions import FORMATS
from shiftwork.organisms.questions import KINDS, capacity
from shiftwork.organisms.settings import Setting, load_setting, question_specs
from shiftwork.schema import suggest, unknown_name

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


def question_errors(key: str, q: Mapping[str, Any]) -> list[str]:
    """Problems of one organism's ``questions``: each kind is a built-in synthetic kind or a key of
    ``families`` (whose format is known), and a synthetic bank has room for n_train + n_test."""
    families = q.get("families") or {}
    errors = []
    for name, fam in families.items():
        errors += family_errors(f"{key}.families.{name}", name, fam)
    kinds = q.get("kind", "add")
    many = isinstance(kinds, list)
    for i, kind in enumerate(kinds if many else [kinds]):
        where = f"{key}.kind" + (f".{i}" if many else "")
        errors += kind_errors(key, where, kind, q, families)
    return errors


def family_errors(key: str, name: str, fam: Mapping[str, Any]) -> list[str]:
    """A question family is not named like a built-in kind, has a known format, and its source
    gives what its kind needs."""
    errors = []
    if name in KINDS:
        errors.append(f"config key '{key}': '{name}' is a built-in kind; name the family otherwise")
    if fam.get("format") not in FORMATS:
        errors.append(
            f"config key '{key}.format': unknown format {fam.get('format')!r}; expected one of {list(FORMATS)}"
        )
    src = fam.get("source") or {}
    need = {"file": "path", "hub": "id"}.get(src.get("kind"))
    if need and need not in src:
        errors.append(f"config key '{key}.source': kind '{src['kind']}' needs '{need}'")
    return errors


def kind_errors(key: str, where: str, kind: Any, q: Mapping[str, Any], families: Mapping[str, Any]) -> list[str]:
    """A question kind (at config key ``where``) is a built-in kind with room for n_train + n_test
    distinct questions, or a family of ``questions.families``."""
    if kind in KINDS:
        room = capacity(kind)
        if q["n_train"] + q["n_test"] > room:
            return [
                f"config key '{key}': n_train + n_test = {q['n_train'] + q['n_test']} exceeds "
                f"the {room} distinct '{kind}' questions"
            ]
        return []
    if kind in families:
        return []
    defined = f", families (questions.families) {sorted(families)}" if families else ", and no families are defined"
    return [
        f"config key '{where}': unknown question kind or family '{kind}'; built-in kinds are {list(KINDS)}"
        + defined
        + suggest(str(kind), [*KINDS, *families])
    ]


def organism_errors(org: Mapping[str, Any], models: set[str]) -> list[str]:
    """Problems of the ``organisms`` section that the schema cannot see: unknown models and
    organisms, settings that cannot be built (a custom distribution no policy answers on, no
    policies, cutoffs outside the years, languages that do not fit), question kinds that do not fit
    the trigger, stage distributions outside the setting or answered by no policy, question banks too
    small, missing training settings."""
    sft = org.get("sft") or {}
    errors = []
    settings: dict[str, Setting] = {}
    for name, spec in sft.items():
        setting, problems = sft_errors(name, spec, sft, models)
        errors += problems
        if setting is not None:
            settings[name] = setting
    shared = org.get("rl") or {}
    for run, spec in (org.get("runs") or {}).items():
        errors += run_errors(run, spec, sft, settings, shared)
    try:
        organism_runs(org)
    except ValueError as err:
        errors.append(str(err))
    errors += dynamics_errors(org.get("dynamics"))
    return errors


def sft_errors(
    name: str, spec: Mapping[str, Any], sft: Mapping[str, Any], models: set[str]
) -> tuple[Setting | None, list[str]]:
    """The setting of organism ``name`` (None when it cannot be built) and the problems of its
    entry: its model, setting, questions, start and training settings."""
    key = f"organisms.sft.{name}"
    errors = [] if "path" in spec else unknown_name(f"{key}.model", spec.get("model"), models, "model")
    try:
        setting = load_setting(spec["setting"])
    except ValueError as err:
        setting = None
        errors.append(f"config key '{key}.setting': {err}")
    errors += question_errors(f"{key}.questions", spec["questions"])
    if setting is not None:
        try:
            question_specs(setting, spec["questions"])
        except ValueError as err:
            errors.append(f"config key '{key}.questions.kind': {err}")
    errors += start_errors(key, name, spec, sft)
    if "path" not in spec:
        errors += sft_training_errors(key, spec)
    return setting, errors


def start_errors(key: str, name: str, spec: Mapping[str, Any], sft: Mapping[str, Any]) -> list[str]:
    """An organism that starts from another names a different organism of the same model, one that
    does not itself start from another."""
    start = spec.get("start_from")
    if start is None:
        return []
    other = sft.get(start)
    if other is None or start == name:
        return [
            f"config key '{key}.start_from': '{start}' is not another organism; defined organisms are "
            f"{sorted(sft)}" + suggest(str(start), sft)
        ]
    if other.get("model") != spec.get("model"):
        return [
            f"config key '{key}.start_from': organism '{start}' is trained from model '{other.get('model')}', "
            f"this one from '{spec.get('model')}'; start from an organism of the same model"
        ]
    if "start_from" in other:
        return [f"config key '{key}.start_from': organism '{start}' itself starts from another; chain one level only"]
    return []


def sft_training_errors(key: str, spec: Mapping[str, Any]) -> list[str]:
    """An organism trained here (no ``path``) has its steps, learning rate and number of transcripts."""
    errors = []
    missing = [k for k in ("steps", "learning_rate") if k not in spec["train"]]
    if missing:
        errors.append(f"config key '{key}.train': missing {missing}")
    if "n_examples" not in spec:
        errors.append(f"config key '{key}': 'n_examples' (SFT transcripts) is required unless 'path' is given")
    return errors


def run_errors(
    run: str,
    spec: Mapping[str, Any],
    sft: Mapping[str, Any],
    settings: Mapping[str, Setting],
    shared: Mapping[str, Any],
) -> list[str]:
    """The problems of RL run ``run``: its organism, its stages' distributions, its seeds, and
    its training settings (its own ``train`` over ``organisms.rl``, ``shared``)."""
    key = f"organisms.runs.{run}"
    if spec["organism"] not in sft:
        return [
            f"config key '{key}.organism': unknown organism '{spec['organism']}'; defined organisms "
            f"are {sorted(sft)}" + suggest(str(spec["organism"]), sft)
        ]
    setting = settings.get(spec["organism"])
    errors = stage_errors(key, spec["stages"], setting)
    if "seeds" in spec and "seed" in spec:
        errors.append(f"config key '{key}': give either 'seed' or 'seeds', not both")
    train = {**shared, **(spec.get("train") or {})}
    missing = [k for k in ("learning_rate", "checkpoint_every") if k not in train]
    if missing:
        errors.append(f"config key '{key}.train': missing {missing} (set them here or in organisms.rl)")
    return errors


def stage_errors(key: str, stages: list[Mapping[str, Any]], setting: Setting | None) -> list[str]:
    """Every stage trains on distributions of ``setting`` that some policy answers on (nothing to
    check when the setting could not be built: that is reported with its organism)."""
    errors = []
    for i, stage in enumerate(stages):
        for d in stage["distributions"]:
            if setting is None:
                continue
            if str(d) not in setting.distributions:
                errors.append(
                    f"config key '{key}.stages.{i}.distributions': distribution '{d}' is not in setting "
                    f"'{setting.name}' ({setting.distributions})"
                )
            elif str(d) in setting.unanswered:
                errors.append(
                    f"config key '{key}.stages.{i}.distributions': no policy of setting '{setting.name}' "
                    f"answers on distribution '{d}', so RL there has nothing to select; train on "
                    f"{[x for x in setting.distributions if x not in setting.unanswered]}"
                )
    return errors


def dynamics_errors(dyn: Mapping[str, Any] | None) -> list[str]:
    """The dynamics simulation gives one name, weight, reward and held-out flag per policy."""
    if not dyn:
        return []
    sizes = {k: len(dyn[k]) for k in ("names", "weights", "rewards", "held_out")}
    if len(set(sizes.values())) != 1:
        return [
            f"config key 'organisms.dynamics': names, weights, rewards and held_out need one entry per policy, got {sizes}"
        ]
    return []
