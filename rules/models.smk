rule prepare_model:
    output:
        directory("results/models/{model}"),
    params:
        spec=model_spec,
    log:
        "logs/prepare_model/{model}.log",
    benchmark:
        "benchmarks/prepare_model/{model}.tsv"
    conda:
        "../envs/shiftwork.yaml"
    script:
        "../scripts/prepare_model.py"
