# One folder per model source (shiftwork.models.prepare.source_key): a changed or mistyped
# source is prepared beside the working model, never over it, and going back to the old source
# finds the old folder and everything built from it. The output is the folder's record; the
# weights beside it are written to a temporary folder and swapped in whole. A checkpoint
# source reads its run's checkpoints and the model the run trained from.
rule prepare_model:
    input:
        unpack(model_inputs),
    output:
        "results/models/{model}/{source}/shiftwork.json",
    log:
        "logs/prepare_model/{model}/{source}.log",
    benchmark:
        "benchmarks/prepare_model/{model}/{source}.tsv"
    wildcard_constraints:
        source=r"[a-z_]+-[0-9a-f]{12}",
    conda:
        "../envs/shiftwork.yaml"
    params:
        spec=model_preparation,
    script:
        "../scripts/prepare_model.py"
