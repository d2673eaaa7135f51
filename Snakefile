from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/variants.smk"


rule all:
    input:
        all_targets(),
    default_target: True
