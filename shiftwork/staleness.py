"""Tables made by other code or settings than the run's own, found before any job is planned.

Snakemake reruns a job when its rule, script or params changed, but only by its records in
``.snakemake/metadata``, and never for library code. Every table records the code that made it
(:func:`shiftwork.provenance.code_and_job`: a digest per ``shiftwork`` file its job imported)
and its job's rule and params digest. A run compares them with the checkout and the config:
- a recorded file whose code differs now makes the table stale, whatever Snakemake's records say;
- a params digest that differs from the one the rule gives now makes it stale where Snakemake
  has no record of the job (a fresh clone with copied results, a synced ``results/``, a deleted
  ``.snakemake``); where it has one, Snakemake reruns the job itself.

Rerunning everything after a code change can cost days on a cluster, and a change may not touch
a table's numbers, so the run stops and says which tables, why, and the command that rebuilds
them; ``SHIFTWORK_ACCEPT_CODE=1`` keeps tables made by older code (with a warning).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shiftwork.codebase import changed_files
from shiftwork.provenance import params_digest
from shiftwork.tables import read_provenance

#: the environment variable that keeps tables made by older code instead of stopping the run
ACCEPT_CODE_ENV = "SHIFTWORK_ACCEPT_CODE"
SHOWN = 10  # tables named in a message; the rest are counted


class StaleOutputError(RuntimeError):
    """Tables were made by other code or settings than this run's; the message says how to rebuild."""


@dataclass(frozen=True)
class Stale:
    path: Path
    rule: str
    why: str
    code: bool  # stale by its code (else by its settings)


def code_difference(provenance: dict[str, Any]) -> str | None:
    """Which files the table's code record names that differ now, or None (also for a table that
    records no code: written by an older shiftwork)."""
    files = (provenance.get("code") or {}).get("files")
    changed = changed_files(files) if isinstance(files, dict) else []
    if not changed:
        return None
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"the code that made it changed since ({', '.join(changed[:3])}{more})"


def settings_difference(provenance: dict[str, Any], params_now: str | None) -> str | None:
    """Why the table's recorded params digest is not the rule's current one, or None."""
    was = (provenance.get("job") or {}).get("params")
    if was is None or params_now is None or was == params_now:
        return None
    return "its rule's settings (params) in this config differ from those it was made with"


def rule_params_digest(workflow: Any, path: Path, rule_name: str) -> str | None:
    """The digest of the params that rule ``rule_name`` of the Snakemake ``workflow`` gives the
    job writing ``path`` in this config (as that job would see them); None when the rule does
    not write ``path`` any more or its params cannot be worked out without the job graph."""
    try:
        rule = workflow.get_rule(rule_name)
        if not rule.is_producer(str(path)):
            return None
        wildcards = rule.get_wildcards(str(path))
        inputs = rule.expand_input(wildcards)[0]
        outputs = rule.expand_output(wildcards)[0]
        params = rule.expand_params(wildcards, inputs, outputs, None)  # Snakemake 9: (params, non-derived)
        return params_digest(params[0] if isinstance(params, tuple) else params)
    except Exception:
        return None


def stale_tables(
    tables: Iterable[Path],
    params_now: Callable[[Path, str], str | None],
    snakemake_knows: Callable[[Path], bool],
) -> list[Stale]:
    """Each table of ``tables`` made by other code, or (where Snakemake has no record of its job,
    ``snakemake_knows``) with other params than its rule gives now (``params_now(path, rule)``)."""
    found = []
    for path in tables:
        prov = read_provenance(path)
        rule = str((prov.get("job") or {}).get("rule") or prov.get("step") or "?")
        if why := code_difference(prov):
            found.append(Stale(path, rule, why, code=True))
        elif not snakemake_knows(path) and (why := settings_difference(prov, params_now(path, rule))):
            found.append(Stale(path, rule, why, code=False))
    return found


def forced_by_command_line(argv: list[str]) -> tuple[list[str], bool]:
    """The rules and files Snakemake's command line ``argv`` forces to rerun (``--forcerun``/
    ``-R``), and whether it forces all (``--forceall``/``-F``): the workflow is read before
    Snakemake hands it these settings."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--forcerun", "-R", nargs="*", default=[])
    parser.add_argument("--forceall", "-F", action="store_true")
    args, _ = parser.parse_known_args(argv)
    return list(args.forcerun or []), bool(args.forceall)


def not_forced(found: list[Stale], forcerun: Iterable[str] = (), forceall: bool = False) -> list[Stale]:
    """The stale tables this run does not rebuild anyway: ``--forceall`` rebuilds every one,
    ``--forcerun`` the tables and rules it names."""
    forced = {str(f) for f in forcerun}
    return [] if forceall else [s for s in found if s.rule not in forced and str(s.path) not in forced]


def stale_report(found: list[Stale], configfiles: Iterable[str | os.PathLike] = ()) -> str:
    """The message that stops a run over ``found``, with the command that rebuilds them."""
    lines = [f"{len(found)} table(s) were made by other code or settings than this run's, so nothing was run:"]
    lines += [f"  - {s.path} (rule '{s.rule}'): {s.why}" for s in found[:SHOWN]]
    if len(found) > SHOWN:
        lines.append(f"  ... and {len(found) - SHOWN} more")
    rules = " ".join(sorted({s.rule for s in found}))
    files = list(configfiles)
    config = " --configfile " + " ".join(f"'{f}'" for f in files) if files else ""
    lines.append(
        "Rebuild them, and what is built from them, by rerunning their rules with your targets:\n"
        f"  snakemake --cores N [TARGETS] --forcerun {rules}{config}\n"
        "A table this config no longer makes can simply be deleted."
    )
    if any(s.code for s in found):
        lines.append(
            f"To keep tables made by older code instead (they still name the code that made them), "
            f"run with {ACCEPT_CODE_ENV}=1."
        )
    return "\n".join(lines)


def check_staleness(
    found: list[Stale], configfiles: Iterable[str | os.PathLike] = (), accept_code: bool | None = None
) -> list[str]:
    """Raise :class:`StaleOutputError` over ``found``; with ``accept_code`` (default: the
    environment's :data:`ACCEPT_CODE_ENV`), tables stale only by their code give warnings instead."""
    if accept_code is None:
        accept_code = os.environ.get(ACCEPT_CODE_ENV, "") not in ("", "0")
    stopping = [s for s in found if not (accept_code and s.code)]
    if stopping:
        raise StaleOutputError(stale_report(stopping, configfiles))
    if not found:
        return []
    shown = "; ".join(f"{s.path} (rule '{s.rule}'): {s.why}" for s in found[:3])
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return [f"kept {len(found)} table(s) made by older code, as {ACCEPT_CODE_ENV} is set: {shown}{more}"]
