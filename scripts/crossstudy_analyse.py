from shiftwork.crossstudy.steps import analyse
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    analyse(
        snakemake.input.per_prompt,
        snakemake.input.sgs,
        snakemake.input.changes,
        {k: snakemake.input[f] for k, f in (("scores", "scores"), ("items", "item_table")) if f in snakemake.input.keys()},
        snakemake.params.organisms,
        snakemake.params.analysis,
        snakemake.params.collapse,
        snakemake.output,
    )
