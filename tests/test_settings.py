"""The typed settings classes against the schema, and building one from a config section."""

import dataclasses
import importlib
import pkgutil

import pytest

import shiftwork
from shiftwork.schema import ConfigError, section_schema
from shiftwork.settings import SECTIONS, Section


def _import_section_modules() -> None:
    for info in pkgutil.walk_packages(shiftwork.__path__, "shiftwork."):
        if info.name.rsplit(".", 1)[-1] == "sections":
            importlib.import_module(info.name)


_import_section_modules()


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_fields_are_the_section_keys(cls):
    keys = set(section_schema(cls.section).get("properties") or {})
    fields = {f.name for f in dataclasses.fields(cls)}
    assert fields | cls.exclude == keys, f"{cls.__name__} vs schema section {cls.key()}"
    assert not fields & cls.exclude


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_defaults_come_from_the_schema(cls):
    properties = section_schema(cls.section).get("properties") or {}
    required = [f.name for f in dataclasses.fields(cls) if "default" not in properties[f.name]]
    made = cls.defaults(**{name: None for name in required})
    for f in dataclasses.fields(cls):
        if f.name not in required:
            assert getattr(made, f.name) == properties[f.name]["default"], f.name


_AXES_LEFT_OUT = ("encoder", "judge", "R", "judge_sample_size", "judge_controls")
_AXES_LEFT_OUT += ("length_mirroring", "empty_baseline", "act_layers", "judge_cue_guard")


@dataclasses.dataclass(frozen=True)
class _Axes(Section, section=("stability", "axes"), exclude=_AXES_LEFT_OUT):
    bleu: str
    bert_scale: str
    bert_baseline: str
    noise_detector: str


def test_from_config_fills_defaults_and_keeps_given_values():
    made = _Axes.from_config({"bleu": "corpus", "encoder": "ignored"})
    assert made == _Axes(bleu="corpus", bert_scale="rescaled", bert_baseline="gate", noise_detector="method")
    assert made.as_dict() == {
        "bleu": "corpus",
        "bert_scale": "rescaled",
        "bert_baseline": "gate",
        "noise_detector": "method",
    }


def test_read_keys_leaves_out_what_the_class_excludes():
    section = {"bleu": "corpus", "R": {"Act": 1}, "encoder": "e", "judge": None, "judge_sample_size": 5}
    assert _Axes.read_keys(section) == {
        "bleu": "corpus",
        "bert_scale": "rescaled",
        "bert_baseline": "gate",
        "noise_detector": "method",
    }


def test_an_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"stability\.axes.*\['blue'\]"):
        _Axes.from_config({"blue": "sentence"})


def test_a_class_without_a_section_is_refused():
    with pytest.raises(TypeError, match="names no config section"):

        class _Nothing(Section):
            pass
