"""The lint of the documentation: tracker numbers, work notes and paths outside the repository have
no place in README.md, docs/**/*.md or mkdocs.yml (a commit hash is fine).

``python -m shiftwork.docs.lint [ROOT]`` checks those files under ROOT (default the repository),
prints ``FILE:LINE: rule: "text"`` for each finding and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

#: (rule, pattern): a line breaks the rule where the pattern matches
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("tracker number", re.compile(r"\b(?:issues?|tickets?)[\s-]*#?\d+\b", re.IGNORECASE)),
    # `#12` as an issue reference; not a heading (`# Title`), an anchor (`page#12`, `](#12-x)`,
    # `href="#12"`, `{#12}`), an HTML entity (`&#124;`) or a colour (`#123456`)
    ("tracker number", re.compile(r"(?<![\w/#&{\"'=])(?<!\]\()#\d{1,5}\b")),
    (
        "work note",
        re.compile(r"\b(?:the note of|my notes?|work notes?|issue notes?|sessions?)\b", re.IGNORECASE),
    ),
    ("path outside the repository", re.compile(r"(?<![\w.-])/(?:work|root|home)\b[^\s`'\")]*")),
    # the project's own locations under /tmp (`/tmp/shiftwork-slurm`) are documented on purpose
    ("path outside the repository", re.compile(r"(?<![\w.-])/tmp\b(?!/shiftwork)[^\s`'\")]*")),
    ("path outside the repository", re.compile(r"\.\./shared\b")),
)


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f'{self.file}:{self.line}: {self.rule}: "{self.text}"'


def line_findings(line: str) -> list[tuple[str, str]]:
    """The (rule, matched text) of every rule ``line`` breaks, in the order of RULES; a match
    inside another of the same rule (the `#16` of `issue #16`) is left out."""
    kept: list[tuple[str, re.Match[str]]] = []
    for rule, pattern in RULES:
        for m in pattern.finditer(line):
            if not any(r == rule and k.start() <= m.start() and m.end() <= k.end() for r, k in kept):
                kept.append((rule, m))
    return [(rule, m.group(0)) for rule, m in kept]


def lint_text(text: str, name: str) -> list[Finding]:
    """The findings of one file's text; ``name`` is the file as the findings name it."""
    return [
        Finding(name, number, rule, match)
        for number, line in enumerate(text.splitlines(), start=1)
        for rule, match in line_findings(line)
    ]


def doc_files(root: Path) -> list[Path]:
    """README.md, mkdocs.yml and docs/**/*.md under ``root``, those that exist."""
    found = [root / "README.md", root / "mkdocs.yml", *sorted((root / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def lint(root: Path, files: Iterable[Path] | None = None) -> list[Finding]:
    out = []
    for path in doc_files(root) if files is None else files:
        out += lint_text(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shiftwork.docs.lint", description=__doc__)
    parser.add_argument("root", nargs="?", type=Path, default=ROOT, help="the repository (default this one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    findings = lint(root)
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"{len(findings)} finding(s) in the docs: tracker numbers, work notes and paths outside the "
            "repository do not belong in them (say what was found, not where it was tracked)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
