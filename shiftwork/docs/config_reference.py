"""The configuration reference (``docs/configuration.md``), generated from the JSON schema.

``python -m shiftwork.docs.config_reference [OUT]`` writes the page (default
docs/configuration.md); with ``--check`` it writes nothing and exits 1 when OUT is not what the
schema gives. ``make docs-config`` regenerates the page.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shiftwork.schema import SCHEMA_PATH, load_schema

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA_NAME = "config/schema/config.schema.yaml"
PAGE = "docs/configuration.md"
REGENERATE = "make docs-config"
#: stands for a key the user names, in the path of a map's entries (``models.NAME.dtype``)
MAP_KEY = "NAME"
HEADER = f"*Generated from `{SCHEMA_NAME}` by `{REGENERATE}`; do not edit this page by hand.*"
INTRO = (
    "Each line gives a key's path, its type and constraints, whether it is required (when its "
    f"parent is given), its default (filled in when the key is absent) and its description. `{MAP_KEY}` "
    "stands for a name of your choosing (an entry of a map such as `models`), `[]` for each item of a list."
)
_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
_MAX_DEPTH = 40
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


@dataclass(frozen=True)
class Entry:
    """One key path of the reference: ``facts`` are its type, constraints, required and default."""

    path: str
    facts: tuple[str, ...]
    description: str

    def line(self) -> str:
        text = f"- `{self.path}` ({'; '.join(self.facts)})"
        return f"{text} — {self.description}" if self.description else text


def reference(schema: Mapping[str, Any]) -> str:
    """The Markdown page: one section per top-level key, in schema order."""
    lines = ["# Configuration reference", "", HEADER, ""]
    if schema.get("description"):
        lines += [_description(schema), ""]
    lines.append(INTRO)
    required = set(schema.get("required") or [])
    for name, sub in (schema.get("properties") or {}).items():
        lines += ["", f"## {name}", ""]
        lines += [e.line() for e in entries(sub, name, schema, "required" if name in required else "")]
    return "\n".join(lines) + "\n"


def entries(node: Any, path: str, root: Mapping[str, Any], required: str = "", only: str = "") -> Iterator[Entry]:
    """The entry of ``node`` at ``path`` and those of every key below it. ``required``: the
    required fact as the parent states it; ``only``: the condition of an if/then branch."""
    if path.count(".") > _MAX_DEPTH:
        raise ValueError(f"{path}: the schema nests deeper than {_MAX_DEPTH} keys (a recursive $ref?)")
    node = _resolve(node, root)
    facts = [_type(node, root), *_constraints(node, root)]
    if required:
        facts.append(required)
    if "default" in node:
        facts.append(f"default {_code(_value(node['default']))}")
    if only:
        facts.append(f"only {only}")
    yield Entry(path, tuple(facts), _description(node))
    yield from _children(node, path, root)


def _children(node: Mapping[str, Any], path: str, root: Mapping[str, Any]) -> Iterator[Entry]:
    """The entries of the keys below ``node``: its properties, its map entries, its list items'
    keys, and the keys that only its if/then branches add."""
    props = node.get("properties") or {}
    required = set(node.get("required") or [])
    branches = [(_condition(cond), _resolve(then, root), _resolve(other, root)) for cond, then, other in _ifs(node)]
    required_if = _required_if(props, required, branches)
    for name, sub in props.items():
        if isinstance(sub, Mapping):
            req = "required" if name in required else "; ".join(required_if.get(name, []))
            yield from entries(sub, f"{path}.{name}", root, req)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from entries(extra, f"{path}.{MAP_KEY}", root)
    items = node.get("items")
    if isinstance(items, Mapping):
        yield from _children(_resolve(items, root), f"{path}[]", root)
    for (cond, names), then, other in branches:
        for branch, word in ((then, "when"), (other, "unless")):
            if branch:
                yield from _branch_entries(node, path, root, branch, f"{word} {cond}", names)


def _required_if(
    props: Mapping[str, Any], required: set[str], branches: list[tuple[tuple[str, set[str]], Any, Any]]
) -> dict[str, list[str]]:
    """For each property that is not always required, the conditions under which a branch
    requires it (``required when ...``, ``required unless ...``)."""
    required_if: dict[str, list[str]] = {}
    for (cond, _), then, other in branches:
        for branch, word in ((then, "when"), (other, "unless")):
            for name in (branch or {}).get("required") or []:
                if name in props and name not in required:
                    required_if.setdefault(name, []).append(f"required {word} {cond}")
    return required_if


def _branch_entries(
    node: Mapping[str, Any], path: str, root: Mapping[str, Any], branch: Mapping[str, Any], only: str, names: set[str]
) -> Iterator[Entry]:
    """The entries one if/then ``branch`` adds under condition ``only``: its description, and the
    keys it states other than those its condition reads (``names``)."""
    if branch.get("description"):
        yield Entry(path, (_type(node, root), f"only {only}"), _description(branch))
    branch_required = set(branch.get("required") or [])
    for name, sub in (branch.get("properties") or {}).items():
        # `true` keeps the key as the object states it; the condition's own keys are shown there
        if isinstance(sub, Mapping) and name not in names:
            req = "required" if name in branch_required else ""
            yield from entries(sub, f"{path}.{name}", root, req, only)


def _resolve(node: Any, root: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with its ``$ref`` replaced by the target (the node's own keywords laid over it) and
    the members of ``allOf`` that are not if/then merged in."""
    if not isinstance(node, Mapping):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise ValueError(f"$ref {ref!r} refers to itself")
        target = _resolve(_pointer(root, ref), root, (*seen, ref))
        node = _merge(target, {k: v for k, v in node.items() if k != "$ref"})
    members = node.get("allOf") or []
    plain = [m for m in members if not (isinstance(m, Mapping) and "if" in m)]
    if plain:
        merged: dict[str, Any] = {}
        for member in plain:
            merged = _merge(merged, _resolve(member, root, seen))
        rest = {k: v for k, v in node.items() if k != "allOf"}
        conditional = [m for m in members if m not in plain]
        if conditional:
            rest["allOf"] = conditional
        node = _merge(merged, rest)
    return node


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        raise ValueError(f"$ref {ref!r}: only references inside the schema (#/...) are resolved")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"$ref {ref!r}: the schema has no {part!r} there")
        node = node[part]
    return node


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``: properties merged key by key, required lists joined."""
    out = dict(base)
    for key, value in over.items():
        if key == "properties" and isinstance(out.get(key), Mapping):
            props = dict(out[key])
            for name, sub in value.items():
                old = props.get(name)
                props[name] = _merge(old, sub) if isinstance(old, Mapping) and isinstance(sub, Mapping) else sub
            out[key] = props
        elif key == "required" and key in out:
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out[key] = value
    return out


def _ifs(node: Mapping[str, Any]) -> list[tuple[Any, Any, Any]]:
    """The (if, then, else) of the node itself and of its allOf members."""
    found = [node] + [m for m in node.get("allOf") or [] if isinstance(m, Mapping)]
    return [(m["if"], m.get("then"), m.get("else")) for m in found if "if" in m]


def _condition(schema: Any) -> tuple[str, set[str]]:
    """The condition of an ``if`` in words (`kind` is `synthetic`) and the keys it reads."""
    parts: list[str] = []

    def walk(sub: Mapping[str, Any], prefix: str) -> None:
        for name, spec in (sub.get("properties") or {}).items():
            if not isinstance(spec, Mapping):
                continue
            if "const" in spec:
                parts.append(f"`{prefix}{name}` is {_code(_value(spec['const']))}")
            elif "enum" in spec:
                parts.append(f"`{prefix}{name}` is one of {', '.join(_code(_value(v)) for v in spec['enum'])}")
            else:
                walk(spec, f"{prefix}{name}.")

    if isinstance(schema, Mapping):
        walk(schema, "")
    if not parts:
        return f"the schema {_code(json.dumps(schema, sort_keys=True))} holds", set()
    return " and ".join(parts), set(schema.get("properties") or {})


def _type(node: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    alternatives = node.get("oneOf") or node.get("anyOf")
    if alternatives:
        return " or ".join(_alternative(_resolve(a, root), root) for a in alternatives)
    types = node.get("type")
    if types is None:
        if "const" in node:
            types = _json_type(node["const"])
        elif "enum" in node:
            found = list(dict.fromkeys(_json_type(v) for v in node["enum"]))
            types = ["number"] if set(found) == {"integer", "number"} else found
        elif "properties" in node or "additionalProperties" in node:
            types = "object"
        elif "items" in node:
            types = "array"
        else:
            return "any"
    words = []
    for t in [types] if isinstance(types, str) else types:
        items = node.get("items")
        if t == "array" and isinstance(items, Mapping):
            words.append(f"array of {_type(_resolve(items, root), root)}")
        else:
            words.append(t)
    return " or ".join(words)


def _alternative(alt: Any, root: Mapping[str, Any]) -> str:
    if not isinstance(alt, Mapping):
        return _code(_value(alt))
    if "const" in alt:
        return _code(_value(alt["const"]))
    if "enum" in alt and "type" not in alt:
        return " or ".join(_code(_value(v)) for v in alt["enum"])
    constraints = _constraints(alt, root)
    kind = _type(alt, root)
    return f"{kind} ({', '.join(constraints)})" if constraints else kind


def _constraints(node: Mapping[str, Any], root: Mapping[str, Any]) -> list[str]:
    out = []
    if "const" in node:
        out.append(f"only {_code(_value(node['const']))}")
    if "enum" in node:
        out.append("one of " + ", ".join(_code(_value(v)) for v in node["enum"]))
    out += [f"{sign} {_value(node[key])}" for key, sign in _BOUNDS if key in node]
    for key, word, unit in (
        ("minLength", "at least", "character"),
        ("maxLength", "at most", "character"),
        ("minItems", "at least", "item"),
        ("maxItems", "at most", "item"),
        ("minProperties", "at least", "entry"),
        ("maxProperties", "at most", "entry"),
    ):
        if key in node:
            n = node[key]
            plural = unit if n == 1 else ("entries" if unit == "entry" else f"{unit}s")
            out.append(f"{word} {n} {plural}")
    if node.get("uniqueItems"):
        out.append("unique items")
    if "pattern" in node:
        out.append(f"matches {_code(node['pattern'])}")
    items = _resolve(node.get("items"), root)
    if isinstance(items, Mapping) and not items.get("properties"):
        inner = _constraints(items, root)
        if inner:
            out.append("each item: " + ", ".join(inner))
    if _type(node, root) == "object" and not node.get("properties") and "additionalProperties" not in node:
        out.append("any keys")
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "string"


def _value(value: Any) -> str:
    """A value as one would write it in the YAML config: plain where YAML reads it back as the
    same string, JSON-quoted otherwise; lists and maps in flow style."""
    if isinstance(value, str):
        plain = value and value.strip() == value and not any(c in value for c in ",[]{}#:`'\"\n")
        return value if plain and yaml.safe_load(value) == value else json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_value(k)}: {_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _description(node: Mapping[str, Any]) -> str:
    """The description on one line, a ``<`` that starts a tag outside code spans escaped so that
    Markdown shows ``<output>`` rather than reading it as HTML."""
    text = " ".join(str(node.get("description") or "").split())
    parts = text.split("`")
    return "`".join(p if i % 2 else _TAG_START.sub("&lt;", p) for i, p in enumerate(parts))


def check(path: Path, text: str) -> str | None:
    """None when ``path`` holds ``text``, else what differs (for --check)."""
    if not path.exists():
        return f"{path} does not exist; write it with `{REGENERATE}`"
    current = path.read_text(encoding="utf-8")
    if current == text:
        return None
    diff = difflib.unified_diff(
        current.splitlines(), text.splitlines(), f"{path} (committed)", f"{path} (from the schema)", lineterm=""
    )
    shown = list(diff)[:40]
    return "\n".join([f"{path} is not what {SCHEMA_NAME} gives; regenerate it with `{REGENERATE}`", *shown])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shiftwork.docs.config_reference", description=__doc__)
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / PAGE, help=f"the page (default {PAGE})")
    parser.add_argument("--check", action="store_true", help="compare OUT with the schema's page, write nothing")
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH, help=f"the schema (default {SCHEMA_NAME})")
    args = parser.parse_args(argv)
    text = reference(load_schema(args.schema))
    if args.check:
        problem = check(args.out, text)
        if problem:
            print(problem, file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
