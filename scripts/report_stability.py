from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.stability.steps import report_stability

FIGURES = ("heatmap", "family", "radar", "preservation", "strength")

with log_to(snakemake.log[0]):
    report_stability(
        {**dict(snakemake.input.items()), "gate_scores": list(snakemake.input.gate_scores)},
        list(snakemake.params.eps),
        snakemake.params.primary_eps,
        str(Path(snakemake.output.tables[0]).parent),
        {f"{name}_{ext}": snakemake.output[f"{name}_{ext}"] for name in FIGURES for ext in ("png", "svg")},
    )
