# Snakemake's HTML report (`make report`): every figure and table of the studies in
# config key `studies`, each with the title and caption of report/catalogue.yaml, grouped by
# study (category) and by kind (figures, tables, reports). Figures are linked into
# results/NAME/report/ as they are; tables and Markdown reports are rendered there as HTML
# pages, which the report shows inline (it offers other files only as downloads).


include: "report_inputs.smk"


rule report_files:
    input:
        report_views,


rule report_figure:
    input:
        res("{study}/{item}"),
    output:
        report(
            res("report/{study}/{item}"),
            caption="../report/item.rst",
            category=report_category,
            subcategory=report_subcategory,
            labels=report_labels,
        ),
    log:
        logs("report_figure/{study}/{item}.log"),
    wildcard_constraints:
        study="stability|trajectory|organisms",
        item=r"[^\s]+\.png",
    conda:
        "../envs/shiftwork.yaml"
    params:
        caption=lambda w: report_item(w).caption,
        config_name=NAME,
    script:
        "../scripts/report_figure.py"


rule report_table:
    input:
        res("{study}/{item}"),
    output:
        report(
            res("report/{study}/{item}.html"),
            caption="../report/item.rst",
            category=report_category,
            subcategory=report_subcategory,
            labels=report_labels,
        ),
    log:
        logs("report_table/{study}/{item}.log"),
    wildcard_constraints:
        study="stability|trajectory|organisms",
        item=r"[^\s]+\.(parquet|csv|md)",
    conda:
        "../envs/shiftwork.yaml"
    params:
        title=lambda w: report_item(w).title,
        caption=lambda w: report_item(w).caption,
        config_name=NAME,
    script:
        "../scripts/report_table.py"
