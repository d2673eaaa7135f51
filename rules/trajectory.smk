# The trajectory study (shiftwork.trajectory): fine-tune with checkpoints, score every
# checkpoint on an in-domain and several shifted test sets, OOD-to-OOD partial correlations.


include: "trajectory_inputs.smk"


rule make_suite:
    input:
        data=suite_files,
    output:
        suite=res("trajectory/suites/{suite}.parquet"),
    log:
        logs("make_suite/{suite}.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=suite_spec,
    script:
        "../scripts/make_suite.py"


rule finetune_model:
    input:
        suite=run_suite,
        model=run_model,
    output:
        checkpoints=directory(res("trajectory/runs/{run}/checkpoints")),
    log:
        logs("finetune_model/{run}.log"),
    benchmark:
        bench("finetune_model/{run}.tsv")
    conda:
        gpu_env
    threads: 2
    resources:
        gpu=1,
    params:
        settings=run_finetune_settings,
        seed=run_seed,
        pattern=run_pattern,
        verbalisers=run_verbalisers,
    script:
        "../scripts/finetune_model.py"


rule evaluate_checkpoint:
    input:
        unpack(evaluate_inputs),
    output:
        predictions=res("trajectory/eval/{run}/step-{step}.parquet"),
    log:
        logs("evaluate_checkpoint/{run}/step-{step}.log"),
    benchmark:
        bench("evaluate_checkpoint/{run}/step-{step}.tsv")
    conda:
        gpu_env
    # one thread a job, checkpoints side by side: on 2 busy cores two 1-thread evaluations did
    # 2.2x the work of one 2-thread evaluation (docs/benchmarks.md); profiles raise it
    threads: 1
    resources:
        gpu=1,
    params:
        checkpoint=checkpoint_spec,
        model=run_model_name,
        batch_size=TRAJECTORY["eval_batch_size"],
        dtype=TRAJECTORY["eval_dtype"],
        pattern=run_pattern,
        verbalisers=run_verbalisers,
    script:
        "../scripts/evaluate_checkpoint.py"


rule collect_scores:
    input:
        predictions=all_predictions,
    output:
        scores=res("trajectory/scores.parquet"),
        item_table=res("trajectory/items.parquet"),
    log:
        logs("collect_scores.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        runs=run_groups(),
    script:
        "../scripts/collect_scores.py"


# the pair analysis on null runs fitted to each real run, and on runs with a planted coupling:
# its family-wise false-positive rate and power, which the report sets beside the pairs
rule calibrate_trajectory:
    input:
        scores=res("trajectory/scores.parquet"),
        item_table=res("trajectory/items.parquet"),
    output:
        calibration=res("trajectory/calibration.parquet"),
    log:
        logs("calibrate_trajectory.log"),
    benchmark:
        bench("calibrate_trajectory.tsv")
    conda:
        "../envs/shiftwork.yaml"
    params:
        analysis=ANALYSIS_SETTINGS,
        calibration=CALIBRATION_SETTINGS,
    script:
        "../scripts/calibrate_trajectory.py"


rule analyse_trajectory:
    input:
        scores=res("trajectory/scores.parquet"),
        item_table=res("trajectory/items.parquet"),
        calibration=res("trajectory/calibration.parquet"),
    output:
        pairs=res("trajectory/pairs.parquet"),
        summary=res("trajectory/summary.parquet"),
        label_bias=res("trajectory/label_bias.parquet"),
        seeds=res("trajectory/seeds.parquet"),
        report=res("trajectory/report.md"),
        figures=trajectory_figures(),
    log:
        logs("analyse_trajectory.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        analysis=ANALYSIS_SETTINGS,
    script:
        "../scripts/analyse_trajectory.py"


# the paper's claims tested across runs (seeds as replicates, models against each other), with the
# tests' own calibration on null runs fitted to every run
rule replicate_trajectory:
    input:
        scores=res("trajectory/scores.parquet"),
        item_table=res("trajectory/items.parquet"),
        pairs=res("trajectory/pairs.parquet"),
    output:
        claims=res("trajectory/replication.parquet"),
        calibration=res("trajectory/replication_calibration.parquet"),
        reference=res("trajectory/replication_reference.parquet"),
        report=res("trajectory/replication.md"),
    log:
        logs("replicate_trajectory.log"),
    benchmark:
        bench("replicate_trajectory.tsv")
    conda:
        "../envs/shiftwork.yaml"
    params:
        analysis=ANALYSIS_SETTINGS,
        calibration=CALIBRATION_SETTINGS,
    script:
        "../scripts/replicate_trajectory.py"


rule plot_trajectory:
    input:
        scores=res("trajectory/scores.parquet"),
        pairs=res("trajectory/pairs.parquet"),
    output:
        **window_outputs(),
        raw_vs_partial=res("trajectory/raw_vs_partial.parquet"),
        fingerprint=res("trajectory/fingerprint.parquet"),
        markdown=res("trajectory/figures.md"),
        figures=trajectory_plots(),
    log:
        logs("plot_trajectory.log"),
    conda:
        "../envs/shiftwork.yaml"
    params:
        analysis=TRAJECTORY["analysis"],
    script:
        "../scripts/plot_trajectory.py"


rule trajectory:
    input:
        res("trajectory/report.md"),
        res("trajectory/calibration.parquet"),
        res("trajectory/pairs.parquet"),
        res("trajectory/summary.parquet"),
        res("trajectory/label_bias.parquet"),
        res("trajectory/figures.md"),
        res("trajectory/replication.md"),
