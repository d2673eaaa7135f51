"""``python -m shiftwork.rehearsal [generate|run|summary] --paper config/paper.yaml [--reduced]``.

``generate`` writes the stand-ins (a Hugging Face home) and the rehearsal config; ``run`` also
starts the API stand-in (where the config has API models) and runs snakemake on the rehearsal
config with the stand-ins' environment, then stops the server; ``summary`` counts the finished
jobs per rule and architecture.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from shiftwork.rehearsal import server
from shiftwork.rehearsal.stand_ins import hf_env, prepare_rehearsal, served_dir
from shiftwork.rehearsal.summary import seconds_by_rule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shiftwork.rehearsal", description=__doc__)
    parser.add_argument("action", choices=["generate", "run", "summary"])
    parser.add_argument("--paper", type=Path, default=Path("config/paper.yaml"))
    parser.add_argument("--name", default="rehearsal", help="results/NAME/, logs/NAME/")
    parser.add_argument("--reduced", action="store_true", help="one architecture per study")
    parser.add_argument(
        "--every-model", action="store_true", help="every model of the config (default: one per architecture)"
    )
    parser.add_argument("--stand-ins", type=Path, default=None, help="Hugging Face home of the stand-ins")
    parser.add_argument("--config", type=Path, default=None, help="where the rehearsal config is written")
    parser.add_argument("--port", type=int, default=0, help="the API stand-in's port (0: one per rehearsal name)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--directory", type=Path, default=Path("."), help="snakemake's working directory")
    parser.add_argument("snakemake_args", nargs="*", help="targets; other options are passed on to snakemake")
    args, extra = parser.parse_known_args(argv)
    passed = [a for a in [*args.snakemake_args, *extra] if a != "--"]
    workdir = args.directory.resolve()
    if args.action == "summary":
        config = yaml.safe_load((args.config or workdir / "results" / args.name / "config.yaml").read_text())
        table = seconds_by_rule(config, workdir / "benchmarks")
        print(table.to_string(index=False))
        print(f"{int(table['jobs'].sum())} jobs, {table['seconds'].sum():.0f} s of job time")
        return 0
    hf_home = (args.stand_ins or workdir / "results" / args.name / "stand-ins").resolve()
    config_path = (args.config or workdir / "results" / args.name / "config.yaml").resolve()
    port = args.port or server.port_for(args.name)
    base_url = f"http://127.0.0.1:{port}/v1"
    scope = "reduced" if args.reduced else "every-model" if args.every_model else "architectures"
    made = prepare_rehearsal(args.paper, config_path, hf_home, base_url, scope, args.name)
    print(f"stand-ins in {hf_home} ({made['seconds']} s); rehearsal config {config_path}", flush=True)
    if args.action == "generate":
        return 0
    env = dict(os.environ) | hf_env(hf_home) | server.key_env(made["config"])
    proc = None
    if server.api_models(made["config"]):
        names = sorted({src["model"] for src in server.api_models(made["config"]).values()})
        log = workdir / "logs" / args.name / "api_server.log"
        start = time.perf_counter()
        proc, _ = server.start(served_dir(hf_home), names, log, port)
        print(f"API stand-in at {base_url} serving {names} ({time.perf_counter() - start:.0f} s)", flush=True)
    snakefile = Path(__file__).resolve().parents[2] / "Snakefile"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir)]
    cmd += ["--cores", str(args.cores), "--configfile", str(config_path), *passed]
    try:
        return subprocess.run(cmd, env=env).returncode
    finally:
        if proc is not None:
            server.stop(proc)


if __name__ == "__main__":
    sys.exit(main())
