# A prompt set read from a file is an input, so editing the file reruns its jobs (Snakemake
# compares checksums of files up to 1 MB, so a touch without an edit reruns nothing).
rule sample_prompts:
    input:
        data=dataset_file,
    output:
        prompts=update("results/stability/prompts/{dataset}.parquet"),
    log:
        "logs/sample_prompts/{dataset}.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=dataset_spec,
    script:
        "../scripts/sample_prompts.py"


rule rewrite_prompts:
    input:
        prompts="results/stability/prompts/{dataset}.parquet",
        model=rewriter_model,
    output:
        rewrites="results/stability/rewrites/{dataset}.parquet",
    log:
        "logs/rewrite_prompts/{dataset}.log",
    benchmark:
        "benchmarks/rewrite_prompts/{dataset}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    resources:
        gpu=1,
    params:
        settings=STRUCTURAL,
        cache=rewrite_cache,
        batch_size=rewriter_batch_size,
        dtype=rewriter_dtype,
    script:
        "../scripts/rewrite_prompts.py"


rule make_variants:
    input:
        unpack(variant_inputs),
    output:
        variants="results/stability/variants/{dataset}.parquet",
    log:
        "logs/make_variants/{dataset}.log",
    conda:
        "../envs/shiftwork.yaml"
    params:
        settings=VARIANTS,
        seed=STUDY["seed"],
    script:
        "../scripts/make_variants.py"


rule estimate_gate_baseline:
    input:
        prompts=study_prompts,
    output:
        baseline="results/stability/gate/baseline.parquet",
    log:
        "logs/estimate_gate_baseline.log",
    conda:
        "../envs/shiftwork.yaml"
    resources:
        gpu=1,
    params:
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
        baseline=GATE.get("baseline", "auto"),
        seed=STUDY["seed"],
    script:
        "../scripts/estimate_gate_baseline.py"


rule filter_variants:
    input:
        variants="results/stability/variants/{dataset}.parquet",
        baseline="results/stability/gate/baseline.parquet",
    output:
        kept="results/stability/filtered/{dataset}.parquet",
        summary="results/stability/gate/{dataset}.summary.parquet",
        dropped="results/stability/gate/{dataset}.dropped.parquet",
    log:
        "logs/filter_variants/{dataset}.log",
    benchmark:
        "benchmarks/filter_variants/{dataset}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    resources:
        gpu=1,
    params:
        encoder=GATE["encoder"],
        encoder_spec=encoder_spec,
        gate=GATE,
    script:
        "../scripts/filter_variants.py"


rule report_gate:
    input:
        summaries=gate_outputs("summary"),
        dropped=gate_outputs("dropped"),
        variants=study_variants,
    output:
        table="results/stability/gate/report.parquet",
        markdown="results/stability/gate/report.md",
    log:
        "logs/report_gate.log",
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/report_gate.py"
