from shiftwork.logs import log_to

with log_to(snakemake.log[0]):
    from shiftwork.stability.steps import judge_sample

    judge_sample(
        list(snakemake.input.judgments),
        snakemake.params.per_cell,
        snakemake.params.seed,
        snakemake.output.table,
        snakemake.output.markdown,
    )
