"""The docs lint flags tracker numbers, work notes and paths outside the repository, naming file and
line, and leaves headings, anchors, commit hashes and the project's own /tmp locations alone."""

import pytest

from shiftwork.docs.lint import Finding, line_findings, lint, lint_text, main

FLAGGED = [
    (
        "as often as to changed replies (the figures are in the note of issue 17).",
        [
            ("tracker number", "issue 17"),
            ("work note", "the note of"),
        ],
    ),
    ("reported 53 errors in 16 files before issues 16 and 17", [("tracker number", "issues 16")]),
    ("| the same before Issue #16 (fresh clone) |", [("tracker number", "Issue #16")]),
    ("Fixed in #12.", [("tracker number", "#12")]),
    ("the cache key changed (#7)", [("tracker number", "#7")]),
    ("#12 broke the cache", [("tracker number", "#12")]),
    ("timed in one session on the GPU box", [("work note", "session")]),
    ("as in my note, the prefill dominates", [("work note", "my note")]),
    (
        'DamagedOutputError in file "/work/main/rules/common.smk", line 280:',
        [("path outside the repository", "/work/main/rules/common.smk")],
    ),
    (
        "row 2 (/tmp/pytest-of-root/pytest-13/faults0/tiny.jsonl line 3)",
        [("path outside the repository", "/tmp/pytest-of-root/pytest-13/faults0/tiny.jsonl")],
    ),
    ("see `../shared/DESIGN.md`", [("path outside the repository", "../shared")]),
    ("models cached in /root/.cache/huggingface", [("path outside the repository", "/root/.cache/huggingface")]),
    ("or /home/alice/models", [("path outside the repository", "/home/alice/models")]),
    ("files go to /tmp by default", [("path outside the repository", "/tmp")]),
]

CLEAN = [
    "# Configuration reference",
    "## 3. Results",
    "### Stage 2",
    "see [the gate](#12-the-gate) and [stability](stability.md#gate)",
    "https://example.org/page#12 and https://github.com/org/repo/issues",
    '<a href="#12">twelve</a> and a pipe &#124; in a table',
    "### The gate {#12}",
    "a fresh clone of 0aa9289 (before the hand-written engine went, 251b96b)",
    "the slurm daemons run under `/tmp/shiftwork-slurm` on ports 16817-16820",
    "results/work/tmp/x.parquet and logs/home/ stay in the repository",
    "when the issue was filed, the colour was `#123456`",
    "  - nav: index.md  # 12 pages",
    "python -m shiftwork.docs.lint exits 1 on a finding",
]


@pytest.mark.parametrize(("line", "expected"), FLAGGED)
def test_flagged_lines(line, expected):
    assert line_findings(line) == expected


@pytest.mark.parametrize("line", CLEAN)
def test_clean_lines(line):
    assert line_findings(line) == []


def test_findings_name_file_and_line():
    text = "# Title\n\nFixed in #12.\nok\nsee /work/main/x.py\n"
    assert [str(f) for f in lint_text(text, "docs/a.md")] == [
        'docs/a.md:3: tracker number: "#12"',
        'docs/a.md:5: path outside the repository: "/work/main/x.py"',
    ]


def test_lint_reads_readme_docs_and_mkdocs_only(tmp_path, capsys):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# shiftwork\nclean\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: shiftwork\n# from issue 3\n")
    (tmp_path / "docs" / "index.md").write_text("in my notes\n")
    (tmp_path / "docs" / "sub" / "page.md").write_text("ok\n\nsee ../shared/x\n")
    (tmp_path / "docs" / "notes.txt").write_text("issue 9\n")  # not a page
    (tmp_path / "CHANGES.md").write_text("issue 9\n")  # not scanned
    assert lint(tmp_path) == [
        Finding("mkdocs.yml", 2, "tracker number", "issue 3"),
        Finding("docs/index.md", 1, "work note", "my notes"),
        Finding("docs/sub/page.md", 3, "path outside the repository", "../shared"),
    ]
    assert main([str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == 'mkdocs.yml:2: tracker number: "issue 3"'
    assert "3 finding(s)" in err
    for page in ("mkdocs.yml", "docs/index.md", "docs/sub/page.md"):
        (tmp_path / page).write_text("clean\n")
    assert lint(tmp_path) == []
    assert main([str(tmp_path)]) == 0
