"""Standalone HTML pages of tables and Markdown reports, which Snakemake's report shows inline
(it displays images, HTML and PDF, and offers everything else only as a download)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd
from markdown_it import MarkdownIt

#: rows shown of a longer table (the page names the full table's file and size)
MAX_ROWS = 500

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 1em 1.5em; color: #222; }
h1 { font-size: 1.3em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
td, th { white-space: nowrap; }
p.note, details { color: #555; font-size: 0.9em; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
"""


def page(title: str, body: str) -> str:
    """A complete HTML document with ``body`` (already HTML) under a ``title`` heading."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return format(value, ".4g")
    if isinstance(value, (list, tuple, dict)) or hasattr(value, "tolist"):
        return html.escape(json.dumps(value.tolist() if hasattr(value, "tolist") else value, default=str))
    return html.escape(str(value))


def table_html(df: pd.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """``df`` as an HTML table: numbers right-aligned to 4 significant digits, text left-aligned;
    at most ``max_rows`` rows, followed by a note of how many were left out."""
    text_cols = [not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    head = "".join(
        f'<th class="{"text" if t else "num"}">{html.escape(str(c))}</th>' for c, t in zip(df.columns, text_cols)
    )
    rows = []
    for values in df.head(max_rows).itertuples(index=False):
        cells = "".join(f'<td class="{"text" if t else "num"}">{_cell(v)}</td>' for v, t in zip(values, text_cols))
        rows.append(f"<tr>{cells}</tr>")
    out = f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>"
    if len(df) > max_rows:
        out += f'\n<p class="note">First {max_rows} of {len(df)} rows.</p>'
    return out


def provenance_html(provenance: Mapping[str, Any]) -> str:
    """The table's provenance record, folded."""
    if not provenance:
        return ""
    text = html.escape(json.dumps(provenance, indent=2, sort_keys=True, default=str))
    return f"<details><summary>Provenance</summary><pre>{text}</pre></details>"


def table_page(df: pd.DataFrame, title: str, source: str, provenance: Mapping[str, Any] | None = None) -> str:
    """A page showing ``df`` (read from ``source``), its size and its provenance."""
    note = f'<p class="note">{len(df)} rows x {df.shape[1]} columns, from <code>{html.escape(source)}</code>.</p>'
    return page(title, note + "\n" + table_html(df) + "\n" + provenance_html(provenance or {}))


def markdown_page(text: str, title: str, source: str) -> str:
    """A Markdown report (pipe tables included) rendered as a page."""
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    note = f'<p class="note">Rendered from <code>{html.escape(source)}</code>.</p>'
    return page(title, note + "\n" + body)
