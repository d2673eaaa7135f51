rule prepare_model:
    output:
        directory("results/models/{model}"),
    log:
        "logs/prepare_model/{model}.log",
    benchmark:
        "benchmarks/prepare_model/{model}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=model_spec,
    script:
        "../scripts/prepare_model.py"
