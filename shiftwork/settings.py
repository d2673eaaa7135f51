"""Typed settings: one config section reaches its code as one frozen object.

A section's settings class is a frozen dataclass whose fields are the section's keys in the
schema, declared with :class:`Section` in its study's ``sections`` module
(``shiftwork/<study>/sections.py``)::

    @dataclass(frozen=True)
    class AxesSettings(Section, section=("stability", "axes")):
        bleu: str
        ...

:meth:`Section.from_config` builds it from the section as the workflow passes it (the rules' config
has every schema default filled in already), filling any key that is absent with the schema's
default, so a test or a script can build one from a partial mapping. A key the class does not
declare is an error naming the key, and ``tests/test_settings.py`` fails when a class's fields and
its section's keys in the schema differ. A new config key therefore touches the schema, the
settings class and the code that reads it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from shiftwork.schema import ConfigError, section_defaults

SECTIONS: list[type[Section]] = []
"""Every settings class defined so far, in definition order (the schema test walks them)."""


class Section:
    """Base of the settings classes; ``section`` is the key path of the config section."""

    section: ClassVar[tuple[str, ...]] = ()
    exclude: ClassVar[frozenset[str]] = frozenset()
    """Keys of the section that this class leaves to other code (each named with its reason where
    the class is defined)."""

    def __init_subclass__(cls, section: tuple[str, ...] = (), exclude: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not section:
            raise TypeError(f"{cls.__name__} names no config section")
        cls.section = tuple(section)
        cls.exclude = frozenset(exclude)
        SECTIONS.append(cls)

    @classmethod
    def key(cls) -> str:
        return ".".join(cls.section)

    @classmethod
    def from_config(cls, values: Mapping[str, Any] | None = None, **overrides: Any) -> Self:
        """The settings of ``values`` (one config section), then ``overrides``; absent keys take the
        schema's default. Raises :class:`~shiftwork.schema.ConfigError` naming an unknown key or a
        required key that is missing."""
        given = {**dict(values or {}), **overrides}
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(given) - set(names) - cls.exclude)
        if unknown:
            raise ConfigError(f"config key '{cls.key()}': unknown key(s) {unknown}; expected only {sorted(names)}")
        defaults = section_defaults(cls.section)
        missing = [n for n in names if n not in given and n not in defaults]
        if missing:
            raise ConfigError(f"config key '{cls.key()}': missing key(s) {missing}, which have no default")
        return cls(**{n: given[n] if n in given else copy.deepcopy(defaults[n]) for n in names})

    @classmethod
    def defaults(cls, **overrides: Any) -> Self:
        """The settings with every schema default (``overrides`` for keys without one)."""
        return cls.from_config({}, **overrides)

    @classmethod
    def read_keys(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The keys of ``values`` (one config section) that this class reads, with absent ones at
        the schema's default: what a rule passes as its param, so that a change to a key the class
        leaves to other code (:attr:`exclude`) reruns nothing that reads this class."""
        return cls.from_config(values).as_dict()  # from_config drops the excluded keys

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain mapping (nested values copied), e.g. for a table's provenance."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}
