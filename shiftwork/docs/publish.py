"""Results pages written from a run: ``make publish`` runs the default targets of the four studies
and writes ``docs/results/<study>.md`` from the run's own Markdown reports and figures, headed by
the commit, the config, the date, the time and the CPU the run had (the time: Snakemake's own
elapsed time of the runs that wrote the results, from ``.snakemake/log``, and the jobs' time from
their benchmark files).

The head of each study's page comes from that study's record in ``results/NAME/publish.json``,
written when this command ran jobs for it (or, the first time, for results made by another
command); a second ``make publish`` with nothing to run reuses the records, so its pages are
byte-identical to the first's. ``--studies`` runs and writes some of the studies only (after a
change that moves one study's numbers); the other pages, and their records, stay as they were.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shiftwork.codebase import CHANGED_FILES

STUDIES = ("stability", "trajectory", "organisms", "crossstudy")
TITLES = {"stability": "Stability", "trajectory": "Trajectory", "organisms": "Organisms", "crossstudy": "Cross-study"}
#: the Markdown reports of each study, in the order a page shows them (those a run wrote)
REPORTS = {
    "stability": (
        "gate/report.md",
        "tables/main_table.md",
        "tables/dataset_table.md",
        "tables/degenerate_replies.md",
        "judge/report.md",
        "judge/sample.md",
    ),
    "trajectory": ("report.md", "replication.md", "figures.md"),
    "organisms": ("report.md",),
    "crossstudy": ("findings.md", "precision.md"),
}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"


def job_time(benchmarks: Path) -> tuple[float, int]:
    """Wall seconds summed over the jobs of Snakemake's benchmark files under ``benchmarks``,
    and their number."""
    total, jobs = 0.0, 0
    for tsv in sorted(benchmarks.rglob("*.tsv")):
        lines = tsv.read_text().splitlines()
        if len(lines) >= 2 and lines[0].split("\t")[0] == "s":
            total += sum(float(line.split("\t")[0]) for line in lines[1:] if line.strip())
            jobs += 1
    return total, jobs


def run_time(workdir: Path, name: str) -> tuple[float, int]:
    """Elapsed seconds summed over the Snakemake runs (``.snakemake/log``) that ran jobs writing
    into ``results/NAME/``, reruns included, and their number."""
    total, runs = 0.0, 0
    for log in sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log")):
        text = log.read_text(errors="replace")
        elapsed = re.search(r"^Elapsed time: (?:(\d+) days?, )?(\d+):(\d+):([\d.]+)$", text, re.M)
        if elapsed is None or f"results/{name}/" not in text or not re.search(r"^\d+ of \d+ steps", text, re.M):
            continue
        days, hours, minutes, seconds = elapsed.groups()
        total += int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        runs += 1
    return total, runs


def shift_headings(markdown: str, by: int = 1) -> str:
    """Every ATX heading ``by`` levels deeper (a report's title under the page's)."""
    return re.sub(r"^(#{1,5}) ", lambda m: "#" * (len(m.group(1)) + by) + " ", markdown, flags=re.M)


def figures(study_dir: Path) -> list[Path]:
    """The PNG figures a study wrote, relative to its folder, in name order."""
    if not study_dir.is_dir():
        return []
    return sorted(
        p.relative_to(study_dir)
        for p in study_dir.rglob("*.png")
        if not any(part.startswith(".") for part in p.relative_to(study_dir).parts)
    )


def head(study: str, record: Mapping[str, Any]) -> str:
    runs = "the Snakemake run that wrote" if record["runs"] == 1 else f"the {record['runs']} Snakemake runs that wrote"
    timing = (
        f"{_duration(record['elapsed_s'])} elapsed over {runs}"
        f" into `results/{record['name']}/` (reruns included); {_duration(record['job_s'])} of job time"
        f" summed over the {record['jobs']} jobs with a benchmark file"
    )
    rows = [
        ("commit", f"`{record['commit']}`"),
        (
            "config",
            f"`{record['config']}` (sha256 `{record['config_sha256']}`), results in `results/{record['name']}/`",
        ),
        ("date", record["date"]),
        ("time", timing),
        ("CPU", f"{record['cpu']}, {record['cores']} core{'' if record['cores'] == 1 else 's'}"),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return (
        f"# {TITLES[study]} results\n\n"
        f"*Written by `make publish` from the run's own reports in `results/{record['name']}/{study}/`;"
        " do not edit by hand.*\n\n| run | |\n| --- | --- |\n" + table + "\n"
    )


def study_page(study: str, study_dir: Path, record: Mapping[str, Any]) -> str:
    """The Markdown page of one study: the head, each report it wrote, then its figures."""
    parts = [head(study, record)]
    for rel in REPORTS[study]:
        path = study_dir / rel
        if path.is_file():
            parts.append(f"<!-- {rel} -->\n" + shift_headings(path.read_text().strip()) + "\n")
    pngs = figures(study_dir)
    if pngs:
        lines = ["## Figures\n"]
        lines += [f"![{p.as_posix()}]({study}/{p.as_posix()})\n\n`{p.as_posix()}`\n" for p in pngs]
        parts.append("\n".join(lines))
    if len(parts) == 1:
        parts.append(f"The run wrote no report for this study (is `{study}` in the config's `studies`?).\n")
    return "\n".join(parts)


def write_pages(
    results: Path, out: Path, records: Mapping[str, Mapping[str, Any]], studies: Sequence[str] = STUDIES
) -> list[Path]:
    """Write ``out/<study>.md`` for each of ``studies`` (one the run did not make says so), headed
    by its record in ``records``, and copy each study's figures to ``out/<study>/``. Returns the
    pages written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for study in studies:
        record = records[study]
        study_dir = results / study
        target = out / study
        if target.exists():
            shutil.rmtree(target)
        for rel in figures(study_dir):
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(study_dir / rel, target / rel)
        path = out / f"{study}.md"
        path.write_text(study_page(study, study_dir, record))
        written.append(path)
    return written


def _git(workdir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, text=True).stdout.strip()


def _configs(configfile: Path | Sequence[Path]) -> list[Path]:
    """One config file or several, each given on top of the one before it."""
    return [configfile] if isinstance(configfile, (str, Path)) else list(configfile)


def make_record(workdir: Path, configfile: Path | Sequence[Path], name: str, cores: int) -> dict[str, Any]:
    """What the pages' head says of a run: read from the checkout, the config (one file or several
    on top of each other), the benchmark files and this CPU."""
    from shiftwork.precision import cpu_capability

    commit = _git(workdir, "rev-parse", "--short=12", "HEAD") or "unknown"
    if _git(workdir, *CHANGED_FILES):
        commit += " (with uncommitted changes)"
    job_s, jobs = job_time(workdir / "benchmarks" / name)
    elapsed, runs = run_time(workdir, name)
    config_bytes = b"".join((workdir / path).read_bytes() for path in _configs(configfile))
    return {
        "commit": commit,
        "config": " + ".join(str(path) for path in _configs(configfile)),
        "config_sha256": hashlib.sha256(config_bytes).hexdigest()[:16],
        "name": name,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "elapsed_s": round(elapsed, 1),
        "runs": runs,
        "job_s": round(job_s, 1),
        "jobs": jobs,
        "cpu": cpu_capability()["label"],
        "cores": cores,
    }


def snakemake(
    workdir: Path, configfile: Path | Sequence[Path], cores: int, *extra: str, studies: Sequence[str] = STUDIES
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile"]
    cmd += [str(path) for path in _configs(configfile)]
    cmd += ["--config", "studies=[" + ",".join(studies) + "]", *extra]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """Each study's record in ``path`` (none when there is no file). A file of one record for
    every study (as written before records were kept per study) applies to all four."""
    if not path.is_file():
        return {}
    found = json.loads(path.read_text())
    return dict.fromkeys(STUDIES, found) if "commit" in found else found


def publish(
    workdir: Path,
    configfile: Path | Sequence[Path],
    name: str,
    out: Path,
    cores: int,
    studies: Sequence[str] = STUDIES,
) -> list[Path]:
    """Run what ``studies`` still need, then write their pages."""
    unknown = sorted(set(studies) - set(STUDIES))
    if unknown or not studies:
        raise ValueError(f"--studies: {unknown or 'none'}; choose among {list(STUDIES)}")
    plan = snakemake(workdir, configfile, cores, "-n", studies=studies)
    if plan.returncode != 0:
        raise RuntimeError("snakemake dry run failed:\n" + plan.stdout[-3000:] + plan.stderr[-3000:])
    record_path = workdir / "results" / name / "publish.json"
    records = read_records(record_path)
    to_do = "Nothing to be done" not in plan.stdout + plan.stderr
    if to_do:
        proc = snakemake(workdir, configfile, cores, studies=studies)
        if proc.returncode != 0:
            raise RuntimeError("snakemake failed:\n" + proc.stderr[-4000:])
    stale = [s for s in studies if to_do or s not in records]
    if stale:
        record = make_record(workdir, configfile, name, cores)
        records.update(dict.fromkeys(stale, record))
        tmp = record_path.with_name(".publish.json.tmp")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
        tmp.replace(record_path)
    return write_pages(workdir / "results" / name, out, records, studies)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shiftwork.docs.publish", description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the checkout that runs (default: here)")
    parser.add_argument(
        "--configfile",
        type=Path,
        nargs="+",
        default=[Path("config/config.yaml")],
        help="config files, each on top of the one before (as snakemake's --configfile)",
    )
    parser.add_argument("--name", default="default", help="the config's name (its results/NAME folder)")
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--studies",
        nargs="+",
        default=list(STUDIES),
        choices=STUDIES,
        help="the studies to run and write (default: all)",
    )
    args = parser.parse_args(argv)
    for path in publish(args.workdir, args.configfile, args.name, args.out, args.cores, args.studies):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
