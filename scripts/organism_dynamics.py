import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from shiftwork.logs import log_to
from shiftwork.organisms.steps import mixture_figure

with log_to(snakemake.log[0]):
    mixture_figure(
        snakemake.params.spec,
        snakemake.output.table,
        snakemake.output.png,
        snakemake.output.svg,
    )
