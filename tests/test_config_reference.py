"""docs/configuration.md is what the schema gives, and the generator renders a small hand-written
schema line by line as worked out by hand."""

from pathlib import Path

import pytest
import yaml

from shiftwork.config import load_schema
from shiftwork.docs.config_reference import HEADER, PAGE, REGENERATE, check, main, reference
from shiftwork.docs.lint import lint_text

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = {
    "description": "A tiny config.\n",
    "type": "object",
    "required": ["models", "run"],
    "$defs": {
        "size": {"type": "integer", "minimum": 1, "description": "how many"},
        "sized": {"allOf": [{"$ref": "#/$defs/size"}], "default": 2},
        "model": {
            "type": "object",
            "required": ["dtype"],
            "properties": {
                "dtype": {"enum": ["float32", "bfloat16"], "default": "float32", "description": "the weights'\n type"},
                "source": {
                    "type": "object",
                    "required": ["kind"],
                    "properties": {"kind": {"enum": ["hub", "local"]}},
                    "allOf": [
                        {
                            "if": {"properties": {"kind": {"const": "hub"}}},
                            "then": {
                                "required": ["kind", "id"],
                                "properties": {"kind": {"const": "hub"}, "id": {"type": "string"}},
                            },
                        }
                    ],
                },
                "chat": {"type": "boolean", "description": "kept in <output>, `<b>` as it is"},
            },
            "if": {"properties": {"source": {"properties": {"kind": {"const": "local"}}}}},
            "else": {"required": ["chat"]},
        },
    },
    "properties": {
        "models": {"type": "object", "minProperties": 1, "additionalProperties": {"$ref": "#/$defs/model"}},
        "run": {
            "type": "object",
            "properties": {
                "n": {"$ref": "#/$defs/size", "default": 4},
                "k": {"$ref": "#/$defs/sized"},
                "generation": {
                    "type": "object",
                    "default": {},
                    "properties": {"max_new_tokens": {"type": "integer", "minimum": 1, "maximum": 512, "default": 100}},
                },
                "baseline": {
                    "oneOf": [{"const": "auto"}, {"type": "number", "minimum": 0, "exclusiveMaximum": 1}],
                    "default": "auto",
                },
                "steps": {
                    "type": "array",
                    "items": {"type": "object", "required": ["at"], "properties": {"at": {"type": "integer"}}},
                },
                "tags": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": ["a", "b"]}},
                "words": {"type": "object", "default": {"yes": " Yes", "label": "no"}},
            },
        },
    },
}

# worked out by hand from SCHEMA
MODELS = [
    "- `models` (object; at least 1 entry; required)",
    "- `models.NAME` (object)",
    "- `models.NAME.dtype` (string; one of `float32`, `bfloat16`; required; default `float32`) — the weights' type",
    "- `models.NAME.source` (object)",
    "- `models.NAME.source.kind` (string; one of `hub`, `local`; required)",
    "- `models.NAME.source.id` (string; required; only when `kind` is `hub`)",
    "- `models.NAME.chat` (boolean; required unless `source.kind` is `local`) — kept in &lt;output>, `<b>` as it is",
]
RUN = [
    "- `run` (object; required)",
    "- `run.n` (integer; ≥ 1; default `4`) — how many",
    "- `run.k` (integer; ≥ 1; default `2`) — how many",
    "- `run.generation` (object; default `{}`)",
    "- `run.generation.max_new_tokens` (integer; ≥ 1; ≤ 512; default `100`)",
    "- `run.baseline` (`auto` or number (≥ 0, < 1); default `auto`)",
    "- `run.steps` (array of object)",
    "- `run.steps[].at` (integer; required)",
    "- `run.tags` (array of string; at least 1 item; unique items; each item: one of `a`, `b`)",
    '- `run.words` (object; any keys; default `{"yes": " Yes", label: "no"}`)',
]


def section(text: str, name: str) -> list[str]:
    """The lines of a ``## name`` section, up to the next section."""
    lines = text.splitlines()
    start = lines.index(f"## {name}") + 2
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


def test_committed_page_is_what_the_schema_gives():
    problem = check(ROOT / PAGE, reference(load_schema()))
    assert problem is None, problem


def test_check_names_the_command_that_regenerates_the_page(tmp_path):
    text = reference(SCHEMA)
    page = tmp_path / "configuration.md"
    page.write_text(text.replace("≤ 512", "≤ 1024"), encoding="utf-8")
    problem = check(page, text)
    assert problem.splitlines()[0] == (
        f"{page} is not what config/schema/config.schema.yaml gives; regenerate it with `make docs-config`"
    )
    assert "-- `run.generation.max_new_tokens` (integer; ≥ 1; ≤ 1024; default `100`)" in problem.splitlines()
    page.write_text(text, encoding="utf-8")
    assert check(page, text) is None
    assert "does not exist" in check(tmp_path / "missing.md", text)


def test_sections_in_schema_order_with_header():
    text = reference(SCHEMA)
    lines = text.splitlines()
    assert lines[:5] == ["# Configuration reference", "", HEADER, "", "A tiny config."]
    assert "`make docs-config`" in HEADER and REGENERATE == "make docs-config"
    assert [line for line in lines if line.startswith("## ")] == ["## models", "## run"]
    assert text.endswith(")\n") and not text.endswith("\n\n")


def test_map_ref_enum_required_and_branches():
    assert section(reference(SCHEMA), "models") == MODELS


def test_nested_paths_defaults_bounds_alternatives_and_arrays():
    assert section(reference(SCHEMA), "run") == RUN


def test_output_is_deterministic_and_has_no_absolute_paths():
    text = reference(load_schema())
    assert text == reference(load_schema())
    assert str(ROOT) not in text
    assert lint_text(text, PAGE) == []


def test_ref_outside_the_schema_is_refused():
    schema = {"properties": {"x": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(ValueError, match="'#/\\$defs/missing': the schema has no '\\$defs' there"):
        reference(schema)


def test_cli_writes_then_checks(tmp_path, capsys):
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA, sort_keys=False), encoding="utf-8")
    page = tmp_path / "docs" / "configuration.md"
    assert main(["--check", "--schema", str(schema), str(page)]) == 1
    assert main(["--schema", str(schema), str(page)]) == 0
    assert page.read_text(encoding="utf-8") == reference(SCHEMA)
    assert main(["--check", "--schema", str(schema), str(page)]) == 0
    page.write_text("# edited by hand\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["--check", "--schema", str(schema), str(page)]) == 1
    assert "regenerate it with `make docs-config`" in capsys.readouterr().err
