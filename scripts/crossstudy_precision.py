from shiftwork.crossstudy.precision import DTYPES
from shiftwork.crossstudy.precision_steps import crossstudy_precision
from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    inputs = snakemake.input
    crossstudy_precision(
        {d: {"deltas": inputs[f"deltas_{d}"], "generations": inputs[f"generations_{d}"]} for d in DTYPES},
        snakemake.params.runs,
        snakemake.params.R,
        {"scores": inputs.scores, "items": inputs.item_table} if inputs.get("scores") else None,
        snakemake.params.analysis,
        snakemake.output,
    )
