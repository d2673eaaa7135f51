from pathlib import Path

from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.stability.jobs import AxesJob, TextModel
from shiftwork.stability.sections import AxesSettings

params = snakemake.params
job = AxesJob(
    axes=AxesSettings.from_config(params.axes),
    encoder_name=params.encoder,
    encoder_spec=params.encoder_spec,
    judge=TextModel(
        name=params.judge_name,
        model_dir=snakemake.input.get("judge") and str(Path(snakemake.input.judge).parent),
        api=params.judge_api,
        cache=params.judge_cache,
        batch_size=params.judge_batch_size,
    ),
    structural_baseline=params.structural_baseline,
    seed=params.seed,
    length_anchor=params.length_anchor,
)

# the claim sets CUDA_VISIBLE_DEVICES, which CUDA reads once: import the step after it
with log_to(snakemake.log[0]), claim_gpu():
    from shiftwork.stability.steps import score_axes

    score_axes(
        snakemake.input.generations,
        snakemake.input.probes,
        snakemake.output.deltas,
        snakemake.output.judgments,
        job,
        gate_baseline_path=snakemake.input.get("gate_baseline"),
    )
