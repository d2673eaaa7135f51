"""The config schema (config/schema/config.schema.yaml): loading it, checking a config against it,
filling in its defaults, and the error every config check raises."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "config" / "schema" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration does not match the schema or refers to something undefined."""


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path) as fh:
        return yaml.safe_load(fh)


@cache
def _packaged_schema() -> dict:
    return load_schema()


def _resolved(node: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"schema reference {ref!r} is not inside the schema")
        node = schema
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def section_schema(section: Sequence[str], schema: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """The schema of the config section at ``section`` (e.g. ``("stability", "axes")``), references
    followed."""
    schema = schema if schema is not None else _packaged_schema()
    node = _resolved(schema, schema)
    for depth, part in enumerate(section):
        properties = node.get("properties") or {}
        if part not in properties:
            where = ".".join(section[:depth]) or "(top level)"
            raise KeyError(f"the schema has no key '{part}' under {where}")
        node = _resolved(properties[part], schema)
    return node


def section_defaults(section: Sequence[str], schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The schema's default of each key of the section that declares one."""
    properties = section_schema(section, schema).get("properties") or {}
    return {key: spec["default"] for key, spec in properties.items() if isinstance(spec, Mapping) and "default" in spec}


def _key(path: Iterable[Any]) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def suggest(word: str, choices: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the choice closest to a misspelt ``word``, or ""."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def unknown_name(key: str, name: Any, known: set[str], what: str) -> list[str]:
    """The error of config key ``key`` naming a ``what`` (model, suite...) that is not among
    ``known``, or none."""
    if name in known:
        return []
    return [
        f"config key '{key}': unknown {what} '{name}'; defined {what}s are {sorted(known)}" + suggest(str(name), known)
    ]


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        if allowed:
            unknown = [k for k in error.instance if k not in allowed]
            hints = "".join(suggest(k, allowed) for k in unknown)
            return f"config key '{key}': unknown key(s) {unknown}; expected only {allowed}{hints}"
    if error.validator == "required":
        return f"config key '{key}': {error.message}"
    if error.validator == "type":
        return f"config key '{key}': expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "enum":
        return f"config key '{key}': expected one of {error.validator_value}, got {error.instance!r}"
    return f"config key '{key}': {error.message}"


def schema_errors(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> list[str]:
    """Every way ``config`` breaks the schema, one line each naming its key (unknown keys with the
    closest known one)."""
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
