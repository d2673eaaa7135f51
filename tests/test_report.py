"""Snakemake's HTML report: the catalogue of figures and tables, the HTML pages of tables, and
the report of a tiny run of all three studies opened in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import browser, chromium
from test_organisms_workflow import tiny_organisms_config
from test_trajectory_workflow import MODEL as TRAJ_MODEL
from test_trajectory_workflow import tiny_trajectory_config
from test_workflow import ENV, PROMPTS, run_config, snakemake_cmd, tiny_config

from shiftwork.models.prepare import prepared_dir
from shiftwork.reports.catalogue import CatalogueError, Item, load_catalogue, lookup, report_items
from shiftwork.reports.html import markdown_page, table_html, table_page

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = {
    "organisms": {
        "title": "Organisms",
        "items": [
            {"path": "figures/{run}.png", "title": "RL run {run}", "caption": "Run {run}:\n  accuracy."},
            {"path": "figures/dynamics.png", "title": "Dynamics", "caption": "The simulation."},
            {"path": "headline.parquet", "title": "Headline", "caption": "Per run."},
        ],
    }
}


def test_lookup_fills_wildcards_and_prefers_a_files_own_entry():
    item = lookup("organisms", "figures/two-policy-rl-A-s0.png", CATALOGUE)
    assert item == Item(
        "organisms", "figures/two-policy-rl-A-s0.png", "RL run two-policy-rl-A-s0", "Run two-policy-rl-A-s0: accuracy."
    )
    assert item.view == "figures/two-policy-rl-A-s0.png" and item.kind == "Figures"
    # listed after the pattern that also matches it, but its own entry wins
    assert lookup("organisms", "figures/dynamics.png", CATALOGUE).title == "Dynamics"
    table = lookup("organisms", "headline.parquet", CATALOGUE)
    assert (table.view, table.kind) == ("headline.parquet.html", "Tables")


def test_a_file_without_an_entry_is_named():
    with pytest.raises(CatalogueError, match=r"organisms/seeds\.parquet has no entry in report/catalogue\.yaml"):
        lookup("organisms", "seeds.parquet", CATALOGUE)
    with pytest.raises(CatalogueError, match="figures/x/y.png"):
        lookup("organisms", "figures/x/y.png", CATALOGUE)  # a wildcard never spans folders


def test_report_items_keep_the_catalogue_order_and_leave_out_twins():
    paths = ["headline.parquet", "figures/b.png", "figures/a.svg", "figures/dynamics.png", "figures/a.png", "x.tex"]
    items = report_items("organisms", paths, CATALOGUE)
    assert [i.path for i in items] == ["figures/a.png", "figures/b.png", "figures/dynamics.png", "headline.parquet"]


def test_shipped_catalogue_is_well_formed():
    catalogue = load_catalogue()
    assert set(catalogue) == {"stability", "trajectory", "organisms", "crossstudy"}
    for section in catalogue.values():
        paths = [e["path"] for e in section["items"]]
        assert len(paths) == len(set(paths))


def test_table_html_formats_and_aligns_cells():
    df = pd.DataFrame({"model": ["a<b", "c"], "sgs": [0.123456, np.nan], "n": [12, 3], "ok": [True, False]})
    out = table_html(df)
    rows = re.findall(r"<tr>(.*?)</tr>", out)
    assert rows[0] == (
        '<th class="text">model</th><th class="num">sgs</th><th class="num">n</th><th class="text">ok</th>'
    )
    assert rows[1] == (
        '<td class="text">a&lt;b</td><td class="num">0.1235</td><td class="num">12</td><td class="text">True</td>'
    )
    assert '<td class="num"></td>' in rows[2]  # missing value: empty cell
    assert "First" not in out
    long = table_html(pd.DataFrame({"x": range(7)}), max_rows=5)
    assert long.count("<td") == 5 and "First 5 of 7 rows." in long


def test_table_page_carries_size_source_and_provenance():
    page = table_page(pd.DataFrame({"x": [1.5]}), "Scores", "results/default/x.parquet", {"step": "collect"})
    assert "<title>Scores</title>" in page and "1 rows x 1 columns" in page
    assert "results/default/x.parquet" in page and "&quot;step&quot;: &quot;collect&quot;" in page


def test_markdown_page_renders_pipe_tables():
    page = markdown_page("# Report\n\n| run | acc |\n| --- | --- |\n| A | 0.98 |\n", "Organisms report", "r.md")
    assert "<h1>Report</h1>" in page
    assert re.search(r"<th>run</th>\s*<th>acc</th>", page) and re.search(r"<td>A</td>\s*<td>0.98</td>", page)


@pytest.mark.workflow
@pytest.mark.parametrize("config", [None, "config/paper.yaml"])
def test_every_figure_and_table_of_the_studies_is_in_the_report(config):
    """Planning the report of all three studies (default and paper config) finds a catalogue
    entry for every figure and table the studies' final rules write (the Snakefile stops with
    the file's name otherwise), and plans one report job per entry."""
    args = ["-n", "--forceall", "report_files", "--config", "studies=[stability,trajectory,organisms]"]
    if config:
        args += ["--configfile", config]
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    planned = re.findall(r"output: results/[\w.-]+/report/(\w+)/(\S+)", out)
    studies = {s for s, _ in planned}
    assert studies == {"stability", "trajectory", "organisms"}
    figures = [p for _, p in planned if p.endswith(".png")]
    assert any(p.startswith("figures/sgs_heatmap") for p in figures)
    assert len(planned) > 50


def combined_config(data: Path) -> dict:
    """One tiny config of all three studies: the stability, trajectory and organisms workflow
    tests' configs side by side (organisms cut to one SFT organism and one RL run)."""
    cfg = tiny_config(data)
    traj = tiny_trajectory_config()
    org = tiny_organisms_config()
    cfg["models"].update({"organism-tiny": org["models"]["organism-tiny"]})
    cfg["trajectory"] = traj["trajectory"]
    organisms = org["organisms"]
    organisms["sft"] = {"cov": organisms["sft"]["cov"]}
    organisms["runs"] = {"cov-ACE": organisms["runs"]["cov-ACE"]}
    cfg["organisms"] = organisms
    cfg["studies"] = ["stability", "trajectory", "organisms"]
    return cfg


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory, prepared_smollm):
    work = tmp_path_factory.mktemp("report")
    data = work / "tiny.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    cfg = combined_config(data)
    target = prepared_dir(TRAJ_MODEL, cfg["models"][TRAJ_MODEL], work / "results")
    shutil.copytree(prepared_smollm, target, copy_function=os.link)
    run_config(work, cfg, "report_files")
    html = work / "results" / "default" / "report.html"
    proc = subprocess.run(
        snakemake_cmd(work, "report_files", "--report", str(html)), capture_output=True, text=True, env=ENV, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


@pytest.mark.workflow
def test_report_pages_hold_the_tables(report_dir):
    res = report_dir / "results" / "default"
    headline = pd.read_parquet(res / "organisms" / "headline.parquet")
    page = (res / "report" / "organisms" / "headline.parquet.html").read_text()
    assert f"{len(headline)} rows x {headline.shape[1]} columns" in page
    first = format(float(headline["accuracy"].iloc[0]), ".4g")
    assert f'<td class="num">{first}</td>' in page
    # a figure is the same file
    fig = "stability/figures/sgs_heatmap.png"
    assert (res / "report" / fig).read_bytes() == (res / fig).read_bytes()


@pytest.mark.workflow
@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (.ci/browser/install.sh installs it)")
def test_report_in_a_browser(report_dir):
    """Open the report in headless Chromium and go through its results as a user would: each
    study's entry, each kind, every item's name on screen; open a figure and a table and save
    screenshots (to $SHIFTWORK_SCREENSHOTS, else beside the report)."""
    html = report_dir / "results" / "default" / "report.html"
    shots = Path(os.environ.get("SHIFTWORK_SCREENSHOTS", report_dir / "screenshots"))
    catalogue = load_catalogue()
    planned = sorted((report_dir / "results" / "default" / "report").rglob("*.*"))
    expected: dict[tuple[str, str], set[str]] = {}
    for path in planned:
        study = path.relative_to(report_dir / "results" / "default" / "report").parts[0]
        rel = str(path.relative_to(report_dir / "results" / "default" / "report" / study))
        item = lookup(study, rel[: -len(".html")] if rel.endswith(".html") else rel, catalogue)
        expected.setdefault((catalogue[study]["title"], item.kind), set()).add(item.title)
    assert {study for study, _ in expected} == {"Stability", "Trajectory", "Organisms"}

    with browser() as page:
        page.open(html.as_uri())
        page.wait_for("document.body.innerText.includes('Results')")
        text = page.text()
        for study in ("Stability", "Trajectory", "Organisms"):
            assert study in text
        page.screenshot(shots / "report-home.png")
        for (study, kind), titles in sorted(expected.items()):
            page.click_text(study)
            page.click_text(kind)
            listed = page.text()
            missing = [t for t in titles if t not in listed]
            assert not missing, (study, kind, missing)
            page.click_text("Results")
        page.click_text("Stability")
        page.click_text("Figures")
        page.view_result("SGS heatmap")
        page.wait_for("document.querySelector('img') && document.querySelector('img').naturalWidth > 0")
        page.screenshot(shots / "report-stability-heatmap.png")
        page.click_text("Results")
        page.click_text("Organisms")
        page.click_text("Tables")
        page.view_result("Headline")
        frame_text = page.frame_text()
        assert "after_rl" in frame_text and "cov-ACE" in frame_text
        page.screenshot(shots / "report-organisms-headline.png")
