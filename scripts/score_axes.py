from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.stability.jobs import AxesJob, judge_model
from shiftwork.stability.sections import AxesSettings

params = snakemake.params
job = AxesJob(
    axes=AxesSettings.from_config(params.axes),
    encoder_name=params.encoder,
    encoder_spec=params.encoder_spec,
    judge=judge_model(params, snakemake.input),
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
        judge_report_path=snakemake.input.get("judge_report"),
    )
