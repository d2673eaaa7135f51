from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.crossstudy.steps import crossstudy_score

    base = Path(snakemake.input.base)
    crossstudy_score(
        snakemake.params.study,
        snakemake.wildcards.run,
        int(snakemake.wildcards.step),
        str(base.parent if base.is_file() else base),
        f"{snakemake.input.checkpoints}/checkpoint-{snakemake.wildcards.step}",
        snakemake.input.prompts,
        snakemake.input.filtered,
        snakemake.input.baseline,
        snakemake.params.settings,
        snakemake.params.encoder,
        snakemake.params.encoder_spec,
        snakemake.output,
        threads=snakemake.threads,
    )
