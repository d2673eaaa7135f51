"""Jobs of the report rules (rules/report.smk): each figure and table of a study as the HTML
report shows it."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pandas as pd

from shiftwork.reports.html import markdown_page, table_page
from shiftwork.tables import read_provenance, read_table, write_text

LOGGER = logging.getLogger("shiftwork")


def report_figure(source: str | os.PathLike, out: str | os.PathLike) -> None:
    """The figure as it is: a hard link where the file system allows one, else a copy."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, out)
    LOGGER.info("figure %s -> %s", source, out)


def report_table(source: str | os.PathLike, out: str | os.PathLike, title: str) -> None:
    """A Parquet or CSV table, or a Markdown report, as an HTML page."""
    source = Path(source)
    if source.suffix == ".parquet":
        text = table_page(read_table(source), title, str(source), read_provenance(source))
    elif source.suffix == ".csv":
        text = table_page(pd.read_csv(source), title, str(source))
    elif source.suffix == ".md":
        text = markdown_page(source.read_text(), title, str(source))
    else:
        raise ValueError(f"{source}: the report renders .parquet, .csv and .md files, not {source.suffix}")
    write_text(text, out)
    LOGGER.info("table %s -> %s", source, out)
