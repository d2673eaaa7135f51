"""Tables as Markdown and as booktabs LaTeX, for the reports of every study."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a meaningful index turned into leading columns (a default RangeIndex is dropped)."""
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    return df.reset_index()


def _cell_text(value: object, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        return format(float(value), floatfmt)
    return str(value)


def to_markdown(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """A plain pipe table of ``df``, ending in a newline.

    A header row, a ``| --- |`` separator, then one line per row. Floats are formatted with
    ``floatfmt``, missing values are empty, ``|`` in a cell is escaped as ``\\|``. A
    non-default index is written as leading column(s).
    """
    df = _plain(df)

    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    header = [esc(str(c)) for c in df.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(esc(_cell_text(v, floatfmt)) for v in row) + " |")
    return "\n".join(lines) + "\n"


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIALS))
_NUMBER_CELL = re.compile(r"^\s*(-?\d+(\.\d*)?([eE][-+]?\d+)?\**|n/a)?\s*$")


def latex_escape(text: str) -> str:
    """``text`` with the LaTeX special characters ``\\ & % $ # _ { } ~ ^`` escaped."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIALS[m.group(0)], str(text))


def to_latex(df: pd.DataFrame, caption: str, label: str, floatfmt: str = ".3f") -> str:
    """A booktabs table of ``df`` (needs ``\\usepackage{booktabs}``), ending in a newline.

    ``\\begin{table}`` with ``\\caption`` and ``\\label``, then a tabular with
    ``\\toprule``, the header, ``\\midrule``, the rows and ``\\bottomrule``. Header, cells
    and caption are escaped with :func:`latex_escape`; the label is written as given.
    Columns of numbers (or number-with-marker strings) are right-aligned, others left.
    """
    df = _plain(df)
    if not str(label).strip():
        raise ValueError("to_latex: argument 'label' is empty")
    cells = [[_cell_text(v, floatfmt) for v in row] for row in df.itertuples(index=False)]
    align = []
    for j, column in enumerate(df.columns):
        numeric = pd.api.types.is_numeric_dtype(df[column]) and not pd.api.types.is_bool_dtype(df[column])
        if not numeric:
            numeric = len(cells) > 0 and all(_NUMBER_CELL.match(r[j]) for r in cells)
        align.append("r" if numeric else "l")
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{''.join(align)}}}",
        r"\toprule",
        " & ".join(latex_escape(str(c)) for c in df.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in cells]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
