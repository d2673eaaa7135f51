from pathlib import Path

from shiftwork.logs import log_to
from shiftwork.stability.steps import report_stability

with log_to(snakemake.log[0]):
    report_stability(
        dict(snakemake.input.items()),
        snakemake.params.eps,
        str(Path(snakemake.output.tables[0]).parent),
        {k: snakemake.output[k] for k in ("heatmap_png", "heatmap_svg", "family_png", "family_svg")},
    )
