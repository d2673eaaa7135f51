from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/variants.smk"
include: "rules/stability.smk"


rule all:
    default_target: True
    input:
        all_targets(),
