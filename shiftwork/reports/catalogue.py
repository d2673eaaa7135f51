"""The report catalogue (``report/catalogue.yaml``): for each study, the figures and tables that
Snakemake's HTML report shows, each with a title and a caption."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CATALOGUE_PATH = Path(__file__).resolve().parent.parent.parent / "report" / "catalogue.yaml"

#: files the report shows as they are; every other kind is rendered as an HTML page
FIGURE_SUFFIXES = (".png",)
TABLE_SUFFIXES = (".parquet", ".csv", ".md")


class CatalogueError(ValueError):
    """A file has no entry in the catalogue, or the catalogue itself is malformed."""


@dataclass(frozen=True)
class Item:
    """One file of a study in the report: ``path`` relative to the study's folder."""

    study: str
    path: str
    title: str
    caption: str

    @property
    def is_figure(self) -> bool:
        return self.path.endswith(FIGURE_SUFFIXES)

    @property
    def view(self) -> str:
        """The report's copy of the file, relative to the study folder: figures as they are,
        tables and Markdown as an HTML page beside their name (``x.parquet`` -> ``x.parquet.html``)."""
        return self.path if self.is_figure else f"{self.path}.html"

    @property
    def kind(self) -> str:
        if self.is_figure:
            return "Figures"
        return "Reports" if self.path.endswith(".md") else "Tables"


def load_catalogue(path: str | Path = CATALOGUE_PATH) -> dict[str, Any]:
    catalogue = yaml.safe_load(Path(path).read_text())
    for study, section in catalogue.items():
        for k, entry in enumerate(section.get("items", [])):
            missing = {"path", "title", "caption"} - set(entry)
            if missing:
                raise CatalogueError(f"{path}: {study}.items[{k}] lacks {sorted(missing)}")
    return catalogue


def _pattern(path: str) -> re.Pattern:
    """``figures/{run}.png`` -> a regex with a named group per ``{wildcard}``."""
    parts = re.split(r"\{(\w+)\}", path)
    regex = "".join(re.escape(p) if k % 2 == 0 else f"(?P<{p}>[^/]+)" for k, p in enumerate(parts))
    return re.compile(regex + r"\Z")


def lookup(study: str, path: str, catalogue: Mapping[str, Any]) -> Item:
    """The catalogue entry of ``path`` (relative to the study's folder), its ``{wildcards}`` filled
    in from the path."""
    entries = catalogue.get(study, {}).get("items", [])
    # a file's own entry before a pattern that would also match it (figures/dynamics.png
    # before figures/{run}.png)
    for entry in sorted(entries, key=lambda e: e["path"].count("{")):
        if m := _pattern(entry["path"]).match(path):
            fields = m.groupdict()
            return Item(
                study, path, entry["title"].format(**fields), " ".join(entry["caption"].split()).format(**fields)
            )
    raise CatalogueError(
        f"{study}/{path} has no entry in report/catalogue.yaml: add its title and caption there, "
        "so that the report shows it"
    )


def report_items(study: str, paths: Iterable[str], catalogue: Mapping[str, Any]) -> list[Item]:
    """The catalogue entries of a study's files (paths relative to its folder; other kinds of
    file, such as LaTeX or SVG twins, are left out), in the catalogue's order."""
    shown = [p for p in dict.fromkeys(paths) if p.endswith(FIGURE_SUFFIXES + TABLE_SUFFIXES)]
    items = [lookup(study, p, catalogue) for p in shown]
    order = [e["path"] for e in catalogue[study]["items"]]

    def rank(item: Item) -> tuple[int, str]:
        return next(k for k, p in enumerate(order) if _pattern(p).match(item.path)), item.path

    return sorted(items, key=rank)
