# What the report shows (rules/report.smk): the catalogued figures and tables of each study.
from shiftwork.reports.catalogue import load_catalogue, report_items

CATALOGUE = load_catalogue()

# The final rules of each study (their outputs are the study's figures and tables) and, for
# rules with a {run} wildcard, the runs to expand it with.
STUDY_RULES = {
    "stability": [
        "report_gate",
        "aggregate_stability",
        "count_degenerate_replies",
        "report_stability",
    ]
    + (["judge_sample", "check_judge"] if JUDGE else []),
    "trajectory": ["collect_scores", "analyse_trajectory", "plot_trajectory"],
    "organisms": ["report_organisms", "plot_organism_run"]
    + (["simulate_dynamics"] if "dynamics" in ORGANISMS else []),
    "crossstudy": ["crossstudy_collect", "crossstudy_analyse", "crossstudy_report"]
    + (["crossstudy_freeform_collect"] if FREEFORM_RUNS else []),
}
STUDY_RUNS = {"trajectory": list(RUNS), "organisms": list(ORGANISM_RUNS)}


def study_outputs(study):
    """The figures and tables the study's final rules write, relative to its folder. A Markdown
    table with a LaTeX twin is the same table as its Parquet or CSV file, so only that is kept.
    """
    paths = []
    for name in STUDY_RULES[study]:
        for pattern in getattr(rules, name).output:
            paths += expand(pattern, run=STUDY_RUNS.get(study, []), allow_missing=True)
    prefix = f"{OUT}/{study}/"
    rel = [p[len(prefix) :] for p in paths if p.startswith(prefix)]
    tex = {p[: -len(".tex")] for p in rel if p.endswith(".tex")}
    return [p for p in rel if not (p.endswith(".md") and p[: -len(".md")] in tex)]


def study_items(study):
    return report_items(study, study_outputs(study), CATALOGUE)


ITEMS = {
    study: {item.path: item for item in study_items(study)}
    for study in ("stability", "trajectory", "organisms", "crossstudy")
    if study in config["studies"]
}


def report_views(wildcards=None):
    """What the report shows: every catalogued file of the listed studies."""
    return [
        res(f"report/{study}/{item.view}")
        for study, items in ITEMS.items()
        for item in items.values()
    ]


def report_item(wildcards):
    return ITEMS[wildcards.study][wildcards.item]


def report_category(wildcards):
    return CATALOGUE[wildcards.study]["title"]


def report_subcategory(wildcards):
    return report_item(wildcards).kind


def report_labels(wildcards):
    return {"name": report_item(wildcards).title}
