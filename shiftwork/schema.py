"""The config schema (config/schema/config.schema.yaml) and the error every config check raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

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
