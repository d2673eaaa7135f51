"""Throughput of the stability inference stages against the plain one-variant-at-a-time loop.

    .venv/bin/python bench/throughput.py [--prompts 14] [--runs 3] [--scales 1 2 4] [--wait-quiet 600]

On one model, one set of prompts and one set of variants it runs

(a) shiftwork's own ``generate`` job (:func:`shiftwork.stability.steps.generate_responses`:
    responses and probes from the same forward passes, Parquet in and out, in its own process
    as the workflow runs it), and
(b) the reference loop of the published method, written here the plain way: for every variant one
    ``model.generate`` call at batch size 1, one forward pass with ``output_hidden_states`` for the
    activation axis, and one teacher-forced forward pass each for the log-probability and for the
    entropy of the baseline response r_0,

checks that both give the same responses (token for token, greedy) and the same log-prob, entropy
and per-layer cosine values (within ``--tol``), and reports variant evaluations per second,
generated tokens per second, wall time, peak resident memory and the ratio (b)/(a), as the median
of ``--runs`` alternating runs. It then runs (a) on 1x, 2x and 4x as many variants to check that
time grows at most linearly and that the generate job's peak memory does not grow with the number
of variants.

Every measurement runs in a fresh child process (this file with ``child``), so each one's peak
resident memory (VmHWM) is its own, and the CPU time other processes took meanwhile is recorded
(``other_cpu_share``: a busy machine slows the many small steps of (b) more than (a)). Results go
to ``--out`` (JSON, written atomically) and a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"
KEYS = ["dataset", "prompt_id", "variant_id"]
# Register and surface-noise variants at all three positions: 15 variants and a baseline per prompt.
# The structural family needs the rewriter model, so it is left out.
VARIANT_SETTINGS = {
    "register": {"enabled": True, "strengths": [-10, 10], "positions": ["prefix", "suffix", "global"]},
    "noise": {
        "enabled": True,
        "positions": ["prefix", "suffix", "global"],
        "spacing": [4],
        "punctuation": [3],
        "casing": [0.3],
    },
    "structural": {"enabled": False},
}


# ---------------------------------------------------------------------------- inputs


def bench_prompts(config: dict, n_prompts: int) -> pd.DataFrame:
    """``n_prompts`` prompts taken in turn from each packaged prompt set (all rows, source order)."""
    from shiftwork.stability.prompts import read_prompts

    sets = [read_prompts(name, spec, ROOT) for name, spec in config["datasets"].items()]
    rows = []
    for i in range(max(len(s) for s in sets)):
        rows.extend(s.iloc[i] for s in sets if i < len(s))
    if n_prompts > len(rows):
        raise ValueError(f"{n_prompts} prompts asked for, but the packaged prompt sets hold {len(rows)}")
    return pd.DataFrame(rows[:n_prompts]).reset_index(drop=True)


def bench_variants(config: dict, n_prompts: int, seed: int = 0) -> pd.DataFrame:
    from shiftwork.stability.variants.build import build_variants

    return build_variants(bench_prompts(config, n_prompts), VARIANT_SETTINGS, seed)


# ---------------------------------------------------------------------------- (b) reference loop


def reference_loop(lm, variants: pd.DataFrame, max_new_tokens: int) -> pd.DataFrame:
    """One variant at a time, each measurement by its own forward pass, as the published code does."""
    import torch

    from shiftwork.inference.formatting import adds_special_tokens, model_input, trim_response
    from shiftwork.inference.generation import eos_token_ids

    tok, model = lm.tokenizer, lm.model
    special = adds_special_tokens(lm.chat)
    eos = eos_token_ids(lm)
    records = []
    for _, group in variants.groupby("prompt_id", sort=False):
        group = pd.concat([group[group["family"] == "baseline"], group[group["family"] != "baseline"]])
        r0, h0 = None, None
        for row in group.itertuples(index=False):
            x = model_input(tok, row.text, lm.chat)
            ids = tok(x, return_tensors="pt", add_special_tokens=special).input_ids.to(lm.device)
            with torch.inference_mode():
                # the response to this variant
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    num_beams=1,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=sorted(eos),
                )
                new = out[0, ids.shape[1] :].tolist()
                n = next((k for k, t in enumerate(new) if t in eos), len(new))
                stopped = n < len(new)
                text = tok.decode(new[:n], skip_special_tokens=True)
                response = trim_response(text, lm.chat)
                if response != text.strip():
                    n = len(tok(response, add_special_tokens=False).input_ids)
                # activation axis: the last prompt token's state at every layer
                states = model(ids, output_hidden_states=True).hidden_states
                h = torch.stack([s[0, -1] for s in states[1:]]).double().cpu()
                if row.family == "baseline":
                    r0, h0 = response, h
                # log-probability of the baseline response r_0 after this prompt
                r_ids = tok(r0, return_tensors="pt", add_special_tokens=False).input_ids.to(lm.device)
                full = torch.cat([ids, r_ids], dim=1)
                start, stop = ids.shape[1] - 1, full.shape[1] - 1
                targets = full[0, start + 1 :]
                logp = torch.log_softmax(model(full).logits[0, start:stop].float(), dim=-1)
                logprob = float(logp.gather(1, targets[:, None]).sum())
                # mean entropy of the next-token distribution along r_0
                logp = torch.log_softmax(model(full).logits[0, start:stop].float(), dim=-1)
                entropy = float((-(logp.exp() * logp).sum(-1)).mean()) if stop > start else 0.0
            cos = torch.nn.functional.cosine_similarity(h, h0, dim=-1).numpy()
            records.append(
                {
                    **{k: getattr(row, k) for k in KEYS},
                    "response": response,
                    "n_tokens": n,
                    "stopped": stopped,
                    "logprob": logprob,
                    "entropy": entropy,
                    "act_cos": float(cos.mean()),
                    "act_cos_layers": cos.tolist(),
                }
            )
    return pd.DataFrame(records)


# ---------------------------------------------------------------------------- (a) the workflow's jobs


def run_generate(
    variants_path: str, model_dir: str, work: str, max_new_tokens: int, batch_size: int, dtype: str, threads: int | None
) -> dict[str, Any]:
    """The workflow's generate job: responses and probes, from Parquet to Parquet."""
    from shiftwork.stability.steps import generate_responses
    from shiftwork.tables import read_provenance

    gen_path = Path(work) / "generations.parquet"
    start = time.perf_counter()
    stats = generate_responses(
        variants_path,
        model_dir,
        MODEL,
        str(gen_path),
        str(Path(work) / "probes.parquet"),
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        dtype=dtype,
        threads=threads,
    )
    wall = time.perf_counter() - start
    prov = read_provenance(gen_path)
    return {
        "wall_s": wall,
        "inference_s": stats["seconds"],
        "rows": int(stats["rows"]),
        "tokens": int(stats["tokens"]),
        "device": prov.get("device"),
        "dtype": str((prov.get("settings") or {}).get("dtype", "")).replace("torch.", ""),
    }


def pipeline_outputs(work: str) -> pd.DataFrame:
    """The generate job's two tables joined per variant."""
    from shiftwork.tables import read_table

    gens = read_table(Path(work) / "generations.parquet")
    probes = read_table(Path(work) / "probes.parquet")
    return gens[KEYS + ["response", "n_tokens", "stopped"]].merge(
        probes[KEYS + ["logprob", "entropy", "act_cos", "act_cos_layers"]], on=KEYS, how="outer"
    )


def run_pipeline(
    variants_path: str, model_dir: str, work: str, max_new_tokens: int, batch_size: int, dtype: str, threads: int | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(a) in this process: the generate job; its two tables joined, and its measurements."""
    Path(work).mkdir(parents=True, exist_ok=True)
    gen = run_generate(variants_path, model_dir, work, max_new_tokens, batch_size, dtype, threads)
    return pipeline_outputs(work), gen


# ---------------------------------------------------------------------------- child processes


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM) in MiB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (all processes), or None off Linux."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(timeout: float, busy_share: float = 0.1) -> float | None:
    """Wait (at most ``timeout`` s) until other processes use under ``busy_share`` of the CPUs over
    a 2 s window; the last share seen."""
    deadline = time.monotonic() + timeout
    share = None
    while True:
        before = machine_busy_seconds()
        if before is None:
            return None
        time.sleep(2.0)
        share = (machine_busy_seconds() - before) / (2.0 * (os.cpu_count() or 1))
        if share < busy_share or time.monotonic() >= deadline:
            return share
        time.sleep(10.0)


def run_child(
    kind: str,
    variants_path: str,
    work: str,
    model_dir: str,
    max_new_tokens: int,
    batch_size: int,
    dtype: str,
    threads: int,
) -> dict[str, Any]:
    """One measurement in this (fresh) process: ``generate`` (a, the workflow's job) or
    ``reference`` (b). Times cover what the step does: for (a) the job's model load and Parquet
    I/O as well, for (b) the loop after loading the model once."""
    import torch

    from shiftwork.device import set_threads
    from shiftwork.tables import read_table, write_table

    Path(work).mkdir(parents=True, exist_ok=True)
    cpu0 = cpu_seconds()
    if kind == "generate":
        result = run_generate(variants_path, model_dir, work, max_new_tokens, batch_size, dtype, threads)
        write_table(pipeline_outputs(work), Path(work) / "outputs.parquet")
    else:
        from shiftwork.models.loading import load_prepared

        set_threads(threads)
        lm = load_prepared(model_dir, dtype)
        variants = read_table(variants_path)
        start = time.perf_counter()
        outputs = reference_loop(lm, variants, max_new_tokens)
        result = {
            "wall_s": time.perf_counter() - start,
            "rows": len(outputs),
            "tokens": int(outputs["n_tokens"].sum()),
            "device": str(lm.device),
            "dtype": str(lm.dtype).replace("torch.", ""),
            "attn_implementation": getattr(lm.model.config, "_attn_implementation", None),
        }
        write_table(outputs, Path(work) / "outputs.parquet")
    result.update(kind=kind, cpu_s=cpu_seconds() - cpu0, threads=torch.get_num_threads(), peak_rss_mib=peak_rss_mib())
    if torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name(0)
        result["gpu_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def spawn(kind: str, variants_path: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one measurement in a child process; what it reports, plus the load it ran under."""
    quiet = wait_for_quiet(args.wait_quiet) if args.wait_quiet else None
    report = work / f"{kind}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "child",
        kind,
        str(variants_path),
        str(work),
        str(report),
        "--model-dir",
        args.model_dir,
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--batch-size",
        str(args.batch_size),
        "--dtype",
        args.dtype,
        "--threads",
        str(args.threads),
    ]
    report.unlink(missing_ok=True)
    load_before, busy0, start = os.getloadavg()[0], machine_busy_seconds(), time.monotonic()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1 = machine_busy_seconds()
    if proc.returncode != 0:
        raise RuntimeError(f"child {kind} on {variants_path} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(report.read_text())
    result["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    if busy0 is not None and busy1 is not None:
        child_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
        result["other_cpu_share"] = round(max(0.0, busy1 - busy0 - child_cpu) / (elapsed * (os.cpu_count() or 1)), 3)
    result["quiet_share_before"] = None if quiet is None else round(quiet, 3)
    return result


def measure_pipeline(variants_path: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """(a): the generate job in a child process."""
    gen = spawn("generate", variants_path, work, args)
    return {**gen, "generate_peak_rss_mib": gen["peak_rss_mib"], "gpu_peak_mib": gen.get("gpu_peak_mib") or None}


# ---------------------------------------------------------------------------- comparison and report


def compare(a: pd.DataFrame, b: pd.DataFrame, tol: float) -> dict[str, Any]:
    """Where (a) and (b) disagree: responses token for token, probe values beyond ``tol``. Probe
    values are compared only where both probed the same r_0 (a different baseline response is
    already counted as a response mismatch)."""
    both = a.merge(b, on=KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    unmatched = int((both["_merge"] != "both").sum())
    both = both[both["_merge"] == "both"]
    same_response = (both["response_a"] == both["response_b"]) & (both["n_tokens_a"] == both["n_tokens_b"])
    base = both[both["variant_id"].str.contains("|baseline|", regex=False)].set_index("prompt_id")
    same_r0 = both["prompt_id"].map(base["response_a"] == base["response_b"]).fillna(False).astype(bool)
    probed = both[same_r0]
    diffs, outside = {}, 0
    for col in ("logprob", "entropy", "act_cos"):
        d = (probed[f"{col}_a"] - probed[f"{col}_b"]).abs()
        diffs[col] = float(d.max()) if len(d) else 0.0
        outside += int((d > tol).sum()) if col != "act_cos" else 0
    if len(probed):
        layers = np.abs(
            np.stack(probed["act_cos_layers_a"].map(np.asarray).to_list())
            - np.stack(probed["act_cos_layers_b"].map(np.asarray).to_list())
        )
        diffs["act_cos_layers"] = float(layers.max())
        outside += int((layers > tol).any(axis=1).sum())
    mismatched = both.loc[~same_response, "variant_id"].tolist()
    return {
        "rows": len(both),
        "unmatched_rows": unmatched,
        "response_mismatches": len(mismatched),
        "mismatched_variants": mismatched[:10],
        "rows_compared_for_probe": len(probed),
        "probe_values_outside_tol": outside,
        "max_abs_diff": diffs,
        "tol": tol,
        "equal": unmatched == 0 and not mismatched and outside == 0,
    }


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    rows, tokens = runs[0]["rows"], runs[0]["tokens"]
    wall = statistics.median(walls)
    return {
        "wall_s": round(wall, 2),
        "wall_s_runs": [round(w, 2) for w in walls],
        "variant_evals_per_s": round(rows / wall, 3),
        "tokens_per_s": round(tokens / wall, 2),
        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
        "gpu_peak_mib": round(max(r.get("gpu_peak_mib") or 0.0 for r in runs), 1) or None,
        "cpu_per_wall": round(statistics.median(r["cpu_s"] / r["wall_s"] for r in runs), 2),
        "other_cpu_share_max": max(r.get("other_cpu_share", 0.0) for r in runs),
        "rows": rows,
        "generated_tokens": tokens,
    }


def markdown(result: dict[str, Any]) -> str:
    a, b = result["pipeline"], result["reference"]
    lines = [
        f"{result['model']} on {result['device']} ({result['dtype']}, {result['threads']} threads), "
        f"{a['rows']} variant evaluations, max_new_tokens {result['max_new_tokens']}, batch size {result['batch_size']}",
        "",
        "| | evals/s | tokens/s | wall s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|",
        f"| (a) shiftwork | {a['variant_evals_per_s']:.2f} | {a['tokens_per_s']:.1f} | {a['wall_s']:.1f} | {a['peak_rss_mib']:.0f} |",
        f"| (b) reference loop | {b['variant_evals_per_s']:.2f} | {b['tokens_per_s']:.1f} | {b['wall_s']:.1f} | {b['peak_rss_mib']:.0f} |",
        "",
        f"ratio (b)/(a): {result['ratio']:.2f}x (median of runs {result['ratio_runs']}); "
        f"outputs equal: {result['outputs_equal']}",
    ]
    if result.get("scaling"):
        lines += [
            "",
            "| scale | rows | time s | t/t(1x) | limit | generate peak RSS MiB |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for s in result["scaling"]["points"]:
            lines.append(
                f"| {s['scale']}x | {s['rows']} | {s['wall_s']:.1f} | {s['time_ratio']:.2f} | "
                f"{s['time_limit_ratio']:.2f} | {s['generate_peak_rss_mib']:.0f} |"
            )
        lines.append(
            f"time linear within 15%: {result['scaling']['linear']}; "
            f"generate memory flat: {result['scaling']['memory_flat']}"
        )
    load = result["contention"]
    lines.append(
        f"1-min load average {load['load_1min_min']}..{load['load_1min_max']}; other processes' share "
        f"of the CPUs up to {load['other_cpu_share_max']}"
    )
    return "\n".join(lines)


def scaling_points(args: argparse.Namespace, config: dict, work: Path) -> tuple[dict[str, Any], list[dict]]:
    """(a) on ``args.scales`` times as many prompts (and so variants): time and the generate job's
    peak memory at each size."""
    from shiftwork.tables import write_table

    points, runs = [], []
    for scale in args.scales:
        path = work / f"variants_{scale}x.parquet"
        write_table(bench_variants(config, args.prompts * scale), path)
        run = measure_pipeline(path, work / f"pipeline_{scale}x", args)
        runs.append(run)
        points.append(
            {
                "scale": scale,
                "rows": run["rows"],
                "wall_s": round(run["wall_s"], 2),
                "inference_s": round(run["inference_s"], 2),
                "generate_peak_rss_mib": round(run["generate_peak_rss_mib"], 1),
                "other_cpu_share": run.get("other_cpu_share", 0.0),
            }
        )
        print(
            f"scale {scale}x: {run['rows']} rows, {run['wall_s']:.1f} s, generate peak "
            f"{run['generate_peak_rss_mib']:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    base = min(points, key=lambda p: p["scale"])
    for p in points:
        p["time_ratio"] = round(p["wall_s"] / base["wall_s"], 3)
        p["time_limit_ratio"] = round(1.15 * p["scale"] / base["scale"], 3)
    scaling = {
        "points": points,
        # time at k x the variants at most 1.15 k times the time at 1x
        "linear": all(p["time_ratio"] <= p["time_limit_ratio"] for p in points),
        # the generate job's peak resident memory stays within 5% (or 50 MiB) of the smallest run's
        "memory_flat": all(
            p["generate_peak_rss_mib"] <= max(1.05 * base["generate_peak_rss_mib"], base["generate_peak_rss_mib"] + 50)
            for p in points
        ),
    }
    return scaling, runs


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from shiftwork.tables import read_table, write_table, write_text

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    work = Path(args.work)
    compare_path = work / "variants_compare.parquet"
    write_table(bench_variants(config, args.prompts), compare_path)
    pipeline_runs, reference_runs, equality, ratios = [], [], [], []
    for run in range(args.runs):
        pipeline_runs.append(measure_pipeline(compare_path, work / "pipeline", args))
        reference_runs.append(spawn("reference", compare_path, work / "reference", args))
        equality.append(
            compare(
                read_table(work / "pipeline" / "outputs.parquet"),
                read_table(work / "reference" / "outputs.parquet"),
                args.tol,
            )
        )
        ratios.append(reference_runs[-1]["wall_s"] / pipeline_runs[-1]["wall_s"])
        print(
            f"run {run + 1}/{args.runs}: (a) {pipeline_runs[-1]['wall_s']:.1f} s, (b) {reference_runs[-1]['wall_s']:.1f} s,"
            f" ratio {ratios[-1]:.2f}, equal {equality[-1]['equal']}",
            file=sys.stderr,
            flush=True,
        )
    ref = reference_runs[0]
    result: dict[str, Any] = {
        "model": MODEL,
        "device": ref["device"],
        "dtype": ref["dtype"],
        "attn_implementation": ref["attn_implementation"],
        "gpu": ref.get("gpu"),
        "threads": ref["threads"],
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
        "prompts": args.prompts,
        "variant_settings": VARIANT_SETTINGS,
        "pipeline": summarise(pipeline_runs),
        "reference": summarise(reference_runs),
        "ratio": round(statistics.median(ratios), 2),
        "ratio_runs": [round(r, 2) for r in ratios],
        "outputs_equal": all(e["equal"] for e in equality),
        "equality": equality,
        "host": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }
    measured = pipeline_runs + reference_runs
    if args.scales:
        result["scaling"], scale_runs = scaling_points(args, config, work)
        measured += scale_runs
    loads = [x for r in measured for x in r["load_1min"]]
    result["contention"] = {
        "load_1min_min": min(loads),
        "load_1min_max": max(loads),
        "other_cpu_share_max": max(r.get("other_cpu_share", 0.0) for r in measured),
        "note": "other_cpu_share: CPU time of other processes during a measurement, as a share "
        "of all CPUs; near 0 means the machine was otherwise idle",
    }
    write_text(json.dumps(result, indent=2) + "\n", args.out)
    print(markdown(result))
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    spec = config["models"][MODEL]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=14, help="prompts compared, and at scale 1x (16 rows each)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--scales", type=int, nargs="*", default=[1, 2, 4])
    p.add_argument("--tol", type=float, default=1e-3)
    from shiftwork.models.prepare import prepared_dir

    p.add_argument("--model-dir", default=str(prepared_dir(MODEL, spec, ROOT / "results")))
    p.add_argument("--max-new-tokens", type=int, default=config["stability"]["generation"]["max_new_tokens"])
    p.add_argument("--batch-size", type=int, default=spec["batch_size"], help="default: the model's in the config")
    p.add_argument("--dtype", default=spec["dtype"])
    p.add_argument("--threads", type=int, default=int(os.environ.get("CORES", 2)))
    p.add_argument(
        "--expect-equal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="exit with status 1 when (a) and (b) disagree (off for bfloat16, whose rounding differs by batch)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="before each measurement wait up to this many seconds for other processes to go idle",
    )
    p.add_argument("--work", default=str(ROOT / "results" / "bench" / "work"))
    p.add_argument("--out", default=str(ROOT / "results" / "bench" / "throughput.json"))
    return p.parse_args(argv)


def child_main(argv: Sequence[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["generate", "reference"])
    p.add_argument("variants")
    p.add_argument("work")
    p.add_argument("report")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--threads", type=int, required=True)
    a = p.parse_args(argv)
    result = run_child(a.kind, a.variants, a.work, a.model_dir, a.max_new_tokens, a.batch_size, a.dtype, a.threads)
    Path(a.report).write_text(json.dumps(result))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    else:
        args = parse_args(sys.argv[1:])
        outcome = main(sys.argv[1:])
        sys.exit(1 if args.expect_equal and not outcome["outputs_equal"] else 0)
