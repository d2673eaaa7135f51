from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.device import set_threads
    from shiftwork.organisms.sections import EvaluationSettings
    from shiftwork.organisms.steps import sft_fidelity

    set_threads(snakemake.threads)
    sft_fidelity(
        snakemake.input.sft,
        snakemake.input.test,
        snakemake.params.setting,
        EvaluationSettings.from_config(snakemake.params.evaluation),
        snakemake.output.table,
    )
