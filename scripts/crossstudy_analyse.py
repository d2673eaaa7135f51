from shiftwork.crossstudy.steps import crossstudy_analyse
from shiftwork.logs import log_to

# the trajectory study's tables, where the cross-study scores trajectory runs
named = set(snakemake.input.keys())
trajectory = {k: snakemake.input[f] for k, f in (("scores", "scores"), ("items", "item_table")) if f in named}

with log_to(snakemake.log[0]):
    crossstudy_analyse(
        snakemake.input,
        trajectory,
        snakemake.params.organisms,
        snakemake.params.analysis,
        snakemake.params.collapse,
        snakemake.output,
    )
