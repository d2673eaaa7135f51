"""Saving figures: PNG and SVG, each written atomically, SVGs reproducible (no date, fixed ids)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.figure

from shiftwork.tables import atomic_file


def save_figure(
    fig: matplotlib.figure.Figure, out_png: str | os.PathLike, out_svg: str | os.PathLike
) -> tuple[Path, Path]:
    with atomic_file(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")
    with matplotlib.rc_context({"svg.hashsalt": "shiftwork"}), atomic_file(out_svg) as tmp:
        fig.savefig(tmp, format="svg", bbox_inches="tight", metadata={"Date": None})
    return Path(out_png), Path(out_svg)
