from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless a config is given with --configfile (then that file is the
# whole configuration, not an update of the default).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# the HTML report's front page (`make report`; rules/report.smk)
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/stability.smk"
include: "rules/trajectory.smk"
include: "rules/organisms.smk"
include: "rules/crossstudy.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),


# Before any job is planned: jobs a killed run left alive stop the run, locks it left are
# removed, and damaged tables, or tables made by other code or settings, stop the run with the
# command that rebuilds them (rules/common.smk: check_before_run).
if workflow.is_main_process:
    check_before_run()


# A run (not a dry run) stops before its first job when an API model's key variable is unset.
# From here on SIGTERM is noted (Snakemake's scheduler has set its handler by now).
onstart:
    note_sigterm()
    require_api_keys(config)


# A run stopped by SIGTERM says so, and whether a job failed (rules/common.smk: report_stop).
onerror:
    report_stop(log)
