"""The generate job against the ways a researcher could otherwise run its inference.

    .venv/bin/python bench/throughput.py [--prompts 14] [--runs 3] [--wait-quiet 600]
    .venv/bin/python bench/throughput.py report [results/bench/throughput.json]   # its table again

On one model, one set of prompts and one set of variants it runs, each in a fresh process:

(a) ``job``: shiftwork's generate job (:func:`shiftwork.stability.steps.generate_responses`,
    Parquet in and out): vLLM generates every distinct input once, then one batched
    transformers pass probes each input with its prompt's baseline response r_0;
(b) ``reference``: the published method's loop, written the plain way: for every variant one
    ``model.generate`` call at batch size 1, one forward pass with ``output_hidden_states`` for the
    activation axis, and one teacher-forced pass each for the log-probability and the entropy;
(c) ``transformers``: the same job with ``engine: transformers``, i.e. transformers' batched
    ``generate`` (left-padded, length-sorted batches) and the same probe pass;
(d) ``vllm``: vLLM generation alone on the distinct inputs (start-up timed apart), followed by
    vLLM's teacher-forced prompt log-probabilities of r_0 after each input, the alternative to
    the probe pass's log-probability axis (vLLM gives no per-layer states on a CPU, and entropy
    only from the full distribution).

It checks responses token for token (the share of identical responses of each against (b) and
of (a) against (c), naming every differing variant) and probe values within ``--tol``, and reports
tokens/s, variant evaluations/s, wall time (each process's start-up and model loads included;
the phases of (a) and (c) apart), peak resident memory, the ratios against (b), (c) and (d), and
the load other processes put on the machine meanwhile (``other_cpu_share``), as the median of
``--runs`` runs. Results go to ``--out`` (JSON, written atomically) and a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import contextlib
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
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import yaml

from shiftwork.precision import cpu_capability

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"
KEYS = ["dataset", "prompt_id", "variant_id"]
# (input, r_0) pairs whose prompt log-probabilities (d) computes with vLLM: they need the whole
# vocabulary's log-softmax at every prompt position and take long on a CPU
LOGPROB_ROWS = 64
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
    eos = eos_token_ids(lm.model.generation_config, tok)
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
    variants_path: str,
    model_dir: str,
    work: str,
    max_new_tokens: int,
    batch_size: int,
    dtype: str,
    threads: int | None,
    engine: str,
) -> dict[str, Any]:
    """The workflow's generate job with ``engine``: responses and probes, from Parquet to Parquet."""
    from shiftwork.stability.jobs import GenerateJob
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
        GenerateJob(max_new_tokens, batch_size, dtype, engine=engine, threads=threads),
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
        "phases": {k: stats[k] for k in ("engine_start_s", "generate_s", "model_load_s", "probe_s") if k in stats},
        "probed_pairs": int(stats["unique_inputs"]),
    }


def pipeline_outputs(work: str) -> pd.DataFrame:
    """The generate job's two tables joined per variant."""
    from shiftwork.tables import read_table

    gens = read_table(Path(work) / "generations.parquet")
    probes = read_table(Path(work) / "probes.parquet")
    return gens[KEYS + ["response", "n_tokens", "stopped"]].merge(
        probes[KEYS + ["logprob", "entropy", "act_cos", "act_cos_layers"]], on=KEYS, how="outer"
    )


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


def vllm_alone(
    variants: pd.DataFrame,
    model_dir: str,
    max_new_tokens: int,
    dtype: str,
    threads: int,
    probes_from: str | None,
    logprob_rows: int = LOGPROB_ROWS,
):
    """(d): vLLM's start-up, then its generation of every distinct input, then (with the job's
    probes table ``probes_from``) its prompt log-probabilities of r_0 after the first
    ``logprob_rows`` distinct (input, r_0) pairs. Outputs per variant and timings."""
    import torch
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from shiftwork.device import pick_device, pick_dtype
    from shiftwork.inference.engine import Decoding, generate
    from shiftwork.inference.formatting import model_input
    from shiftwork.inference.generation import EngineSize, VllmEngine, encode_inputs
    from shiftwork.inference.probe import response_ids
    from shiftwork.models.loading import load_tokenizer
    from shiftwork.models.prepare import read_info

    start = time.perf_counter()
    chat = bool(read_info(model_dir).get("chat"))
    tok = load_tokenizer(model_dir, "left")
    device = pick_device()
    inputs = [model_input(tok, t, chat) for t in variants["text"]]
    unique = list(dict.fromkeys(inputs))
    longest = max(len(e) for e in encode_inputs(tok, unique, chat))
    size = EngineSize(longest + 2 * max_new_tokens + 2, len(unique), threads)
    with VllmEngine(model_dir, tok, chat, pick_dtype(dtype, device), device, size) as engine:
        ready = time.perf_counter()
        gens = dict(zip(unique, generate(engine, unique, Decoding(max_new_tokens))))
        generated = time.perf_counter()
        out = variants[KEYS].assign(
            response=[gens[x].response for x in inputs],
            n_tokens=[gens[x].n_tokens for x in inputs],
            stopped=[gens[x].stopped for x in inputs],
        )
        timing = {"engine_start_s": ready - start, "generate_s": generated - ready}
        if probes_from is not None:
            # the pairs the job probed: each distinct input with its prompt's r_0 (the baseline's response)
            base = out.assign(x=inputs)[variants["family"].to_numpy() == "baseline"].set_index("prompt_id")
            pairs = out.assign(x=inputs, r0=variants["prompt_id"].map(base["response"]).to_numpy())
            distinct = pairs.drop_duplicates(["x", "r0"]).head(logprob_rows)
            x_ids = encode_inputs(tok, distinct["x"].tolist(), chat)
            r_ids = response_ids(SimpleNamespace(tokenizer=tok), distinct["r0"].tolist())
            prompts = [TokensPrompt(prompt_token_ids=x + r) for x, r in zip(x_ids, r_ids)]
            t0 = time.perf_counter()
            results = engine.llm.generate(
                prompts, SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False), use_tqdm=False
            )
            timing["prompt_logprobs_s"] = time.perf_counter() - t0
            timing["prompt_logprobs_rows"] = len(distinct)
            lp = []
            for x, r, res in zip(x_ids, r_ids, results):
                entries = res.prompt_logprobs[len(x) : len(x) + len(r)]
                lp.append(float(sum(e[t].logprob for e, t in zip(entries, r))))
            distinct = distinct.assign(vllm_logprob=lp)
            out = out.merge(
                pairs[KEYS + ["x", "r0"]].merge(distinct[["x", "r0", "vllm_logprob"]], on=["x", "r0"], how="left")[
                    KEYS + ["vllm_logprob"]
                ],
                on=KEYS,
            )
    timing["wall_s"] = time.perf_counter() - start
    n_tokens = int(sum(gens[x].n_tokens for x in unique))
    info = {"device": str(device), "dtype": str(pick_dtype(dtype, device)).replace("torch.", ""), "unique": len(unique)}
    return out, {**timing, **info, "rows": len(out), "tokens": n_tokens, "threads": torch.get_num_threads()}


class ModelRun(NamedTuple):
    """How every measurement runs the model (the command line's --model-dir, --max-new-tokens,
    --batch-size, --dtype and --threads). A named tuple, not a dataclass: tests load this file
    as a module that is not in ``sys.modules``, where dataclasses cannot resolve annotations."""

    model_dir: str
    max_new_tokens: int
    batch_size: int
    dtype: str
    threads: int


def reference_run(variants_path: str, run: ModelRun) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(b): the model loaded once, then the published method's loop over the variants, timed."""
    from shiftwork.device import set_threads
    from shiftwork.models.loading import load_prepared
    from shiftwork.tables import read_table

    set_threads(run.threads)
    lm = load_prepared(run.model_dir, run.dtype)
    variants = read_table(variants_path)
    start = time.perf_counter()
    outputs = reference_loop(lm, variants, run.max_new_tokens)
    result = {
        "wall_s": time.perf_counter() - start,
        "rows": len(outputs),
        "tokens": int(outputs["n_tokens"].sum()),
        "device": str(lm.device),
        "dtype": str(lm.dtype).replace("torch.", ""),
    }
    return outputs, result


def run_child(
    kind: str, variants_path: str, work: str, run: ModelRun, probes_from: str | None = None
) -> dict[str, Any]:
    """One measurement in this (fresh) process: ``job`` (a), ``reference`` (b), ``transformers``
    (c) or ``vllm`` (d). Times cover what each does: for (a), (c) and (d) start-up, model loads
    and Parquet I/O as well, for (b) the loop after loading the model once."""
    import torch

    from shiftwork.tables import read_table, write_table

    Path(work).mkdir(parents=True, exist_ok=True)
    cpu0 = cpu_seconds()
    if kind in ("job", "transformers"):
        engine = "vllm" if kind == "job" else "transformers"
        result = run_generate(
            variants_path, run.model_dir, work, run.max_new_tokens, run.batch_size, run.dtype, run.threads, engine
        )
        write_table(pipeline_outputs(work), Path(work) / "outputs.parquet")
    elif kind == "vllm":
        outputs, result = vllm_alone(
            read_table(variants_path), run.model_dir, run.max_new_tokens, run.dtype, run.threads, probes_from
        )
        write_table(outputs, Path(work) / "outputs.parquet")
    else:
        outputs, result = reference_run(variants_path, run)
        write_table(outputs, Path(work) / "outputs.parquet")
    result.update(kind=kind, cpu_s=cpu_seconds() - cpu0, threads=torch.get_num_threads(), peak_rss_mib=peak_rss_mib())
    if torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name(0)
        result["gpu_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return result


class TreeMemory:
    """The peak, over a process and all its descendants (vLLM runs its engine in child
    processes), of their summed proportional set size (PSS: shared pages split between the
    processes sharing them), sampled every ``interval`` seconds in a thread."""

    def __init__(self, pid: int, interval: float = 0.25):
        import threading

        import psutil

        self.root, self.peak, self.interval = psutil.Process(pid), 0.0, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_full_info().pss
            self.peak = max(self.peak, total / 2**20)
            self._stop.wait(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def spawn(kind: str, variants_path: Path, work: Path, args: argparse.Namespace, probes_from: Path | None = None):
    """Run one measurement in a child process; what it reports, plus the load it ran under and
    the peak memory of its process tree."""
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
    ] + (["--probes-from", str(probes_from)] if probes_from else [])
    report.unlink(missing_ok=True)
    load_before, busy0, start = os.getloadavg()[0], machine_busy_seconds(), time.monotonic()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = work.parent / f"{kind}.log"
    work.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, text=True)
        memory = TreeMemory(proc.pid)
        proc.wait()
        tree_peak = memory.stop()
    elapsed = time.monotonic() - start
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1 = machine_busy_seconds()
    if proc.returncode != 0:
        raise RuntimeError(f"child {kind} on {variants_path} failed (log {log}):\n{log.read_text()[-4000:]}")
    result = json.loads(report.read_text())
    result["peak_tree_pss_mib"] = round(tree_peak, 1)
    result["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    if busy0 is not None and busy1 is not None:
        child_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
        result["other_cpu_share"] = round(max(0.0, busy1 - busy0 - child_cpu) / (elapsed * (os.cpu_count() or 1)), 3)
    result["quiet_share_before"] = None if quiet is None else round(quiet, 3)
    return result


# ---------------------------------------------------------------------------- comparison and report


def same_responses(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    """How many variants got the same response (text, token count and stop) in ``a`` and ``b``,
    and which did not."""
    both = a[KEYS + ["response", "n_tokens", "stopped"]].merge(
        b[KEYS + ["response", "n_tokens", "stopped"]], on=KEYS, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    unmatched = int((both["_merge"] != "both").sum())
    both = both[both["_merge"] == "both"]
    same = (
        (both["response_a"] == both["response_b"])
        & (both["n_tokens_a"] == both["n_tokens_b"])
        & (both["stopped_a"] == both["stopped_b"])
    )
    differing = both[~same]
    return {
        "rows": len(both),
        "unmatched_rows": unmatched,
        "identical": int(same.sum()),
        "identical_share": round(float(same.mean()), 4) if len(both) else 1.0,
        "differing": [
            {"variant_id": r.variant_id, "a": r.response_a, "b": r.response_b} for r in differing.itertuples()
        ],
    }


def probe_diffs(a: pd.DataFrame, b: pd.DataFrame, tol: float, columns=("logprob", "entropy", "act_cos")):
    """The largest absolute difference of each probe value between ``a`` and ``b`` where both
    probed the same r_0 (a different baseline response is a response difference, counted apart),
    and how many values lie beyond ``tol``."""
    both = a.merge(b, on=KEYS, suffixes=("_a", "_b"))
    base = both[both["variant_id"].str.contains("|baseline|", regex=False)].set_index("prompt_id")
    same_r0 = both["prompt_id"].map(base["response_a"] == base["response_b"]).fillna(False).astype(bool)
    probed = both[same_r0]
    diffs, outside = {}, 0
    for col in columns:
        d = (probed[f"{col}_a"] - probed[f"{col}_b"]).abs()
        diffs[col] = float(d.max()) if len(d) else 0.0
        outside += int((d > tol).sum())
    if "act_cos" in columns and len(probed):
        layers = np.abs(
            np.stack(probed["act_cos_layers_a"].map(np.asarray).to_list())
            - np.stack(probed["act_cos_layers_b"].map(np.asarray).to_list())
        )
        diffs["act_cos_layers"] = float(layers.max())
        outside += int((layers > tol).any(axis=1).sum())
    return {"rows_compared": len(probed), "max_abs_diff": diffs, "outside_tol": outside, "tol": tol}


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    rows, tokens = runs[0]["rows"], runs[0]["tokens"]
    wall = statistics.median(walls)
    phases = {}
    for key in ("engine_start_s", "generate_s", "model_load_s", "probe_s", "prompt_logprobs_s"):
        values = [r.get("phases", r).get(key) for r in runs]
        if all(v is not None for v in values):
            phases[key] = round(statistics.median(values), 2)
    return {
        "wall_s": round(wall, 2),
        "wall_s_runs": [round(w, 2) for w in walls],
        "phases_s": phases,
        "variant_evals_per_s": round(rows / wall, 3),
        "tokens_per_s": round(tokens / wall, 2),
        "peak_tree_pss_mib": round(max(r["peak_tree_pss_mib"] for r in runs), 1),
        "gpu_peak_mib": round(max(r.get("gpu_peak_mib") or 0.0 for r in runs), 1) or None,
        "cpu_per_wall": round(statistics.median(r["cpu_s"] / r["wall_s"] for r in runs), 2),
        "other_cpu_share_max": max(r.get("other_cpu_share", 0.0) for r in runs),
        "rows": rows,
        "generated_tokens": tokens,
    }


LABELS = {
    "job": "(a) generate job (vLLM + probe pass)",
    "reference": "(b) one-variant-at-a-time loop",
    "transformers": "(c) batched transformers generate + probe pass",
    "vllm": "(d) vLLM generation alone",
}


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    a = s["job"]
    lines = [
        f"{result['model']} on {result['device']} ({result['dtype']}, {result['threads']} threads; CPU: "
        f"{result.get('host', {}).get('cpu_capability', {}).get('label', 'capability not recorded')}), "
        f"{a['rows']} variant evaluations ({result['unique_inputs']} distinct inputs), max_new_tokens "
        f"{result['max_new_tokens']}, batch size {result['batch_size']}; median of {result['runs']} runs",
        "",
        "| | wall s | phases s | evals/s | tokens/s | peak PSS MiB (all processes) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for kind, label in LABELS.items():
        r = s[kind]
        phases = ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f}" for k, v in r["phases_s"].items())
        lines.append(
            f"| {label} | {r['wall_s']:.1f} | {phases} | {r['variant_evals_per_s']:.2f} | {r['tokens_per_s']:.1f} | "
            f"{r['peak_tree_pss_mib']:.0f} |"
        )
    ratios = result["ratios"]
    lines += [
        "",
        f"(b)/(a) {ratios['reference_over_job']:.2f}x; (c)/(a) {ratios['transformers_over_job']:.2f}x "
        f"(target >= 2.5: {ratios['transformers_over_job'] >= 2.5}); (a)/((d) + probe pass) "
        f"{ratios['job_over_vllm_plus_probe']:.2f} (target <= 1.25: {ratios['job_over_vllm_plus_probe'] <= 1.25}; (d) "
        "counted as its start-up and generation); "
        f"generation alone, (c)/(d): {ratios['transformers_generate_over_vllm_generate']:.2f}x",
        "",
        "| responses compared | identical | share |",
        "|---|---:|---:|",
    ]
    for name, eq in result["responses"].items():
        lines.append(f"| {name} | {eq['identical']}/{eq['rows']} | {eq['identical_share']:.3f} |")
    lp = s["vllm"]["phases_s"].get("prompt_logprobs_s")
    if lp is not None:
        lines += [
            "",
            f"vLLM prompt log-probabilities (log-prob axis only): {1000 * lp / result['logprob_rows']:.0f} ms per "
            f"(input, r_0) pair over {result['logprob_rows']} pairs; the probe pass (log-prob, entropy and layer "
            f"states): {1000 * a['phases_s']['probe_s'] / result['probed_pairs']:.0f} ms per pair over "
            f"{result['probed_pairs']}",
        ]
    lines.append("")
    for name, d in result["probes"].items():
        diffs = ", ".join(f"{k} {v:.2g}" for k, v in d["max_abs_diff"].items())
        lines.append(
            f"probes {name}: {d['rows_compared']} rows, max |diff| {diffs}; beyond {d['tol']}: {d['outside_tol']}"
        )
    load = result["contention"]
    lines.append(
        f"1-min load average {load['load_1min_min']}..{load['load_1min_max']}; other processes' share "
        f"of the CPUs up to {load['other_cpu_share_max']}"
    )
    return "\n".join(lines)


def ratios(summary: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The job's wall time against (b) and (c), and against vLLM's start-up and generation in (d)
    plus the job's own probe pass; transformers' generation against vLLM's."""
    job, ref, hf, vl = (summary[k] for k in ("job", "reference", "transformers", "vllm"))
    vllm_alone = vl["phases_s"]["engine_start_s"] + vl["phases_s"]["generate_s"]
    return {
        "reference_over_job": round(ref["wall_s"] / job["wall_s"], 2),
        "transformers_over_job": round(hf["wall_s"] / job["wall_s"], 2),
        "job_over_vllm_plus_probe": round(job["wall_s"] / (vllm_alone + job["phases_s"]["probe_s"]), 2),
        "transformers_generate_over_vllm_generate": round(
            hf["phases_s"]["generate_s"] / vl["phases_s"]["generate_s"], 2
        ),
    }


def compare_outputs(
    outputs: dict[str, pd.DataFrame], tol: float
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(responses, probes): the pairs of measurements whose responses are compared token for
    token, and those whose probe values are compared within ``tol`` ((d): its prompt
    log-probabilities against the job's)."""
    responses = {
        "(a) vs (b)": same_responses(outputs["job"], outputs["reference"]),
        "(c) vs (b)": same_responses(outputs["transformers"], outputs["reference"]),
        "(a) vs (c)": same_responses(outputs["job"], outputs["transformers"]),
        "(d) vs (a)": same_responses(outputs["vllm"], outputs["job"]),
    }
    probes = {
        "(a) vs (b)": probe_diffs(outputs["job"], outputs["reference"], tol),
        "(c) vs (b)": probe_diffs(outputs["transformers"], outputs["reference"], tol),
        "(d) prompt logprobs vs (a)": probe_diffs(
            outputs["vllm"].dropna(subset=["vllm_logprob"]).rename(columns={"vllm_logprob": "logprob"}),
            outputs["job"],
            tol,
            ("logprob",),
        ),
    }
    return responses, probes


def contention(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The load other processes put on the machine during the ``measured`` runs."""
    loads = [x for r in measured for x in r["load_1min"]]
    return {
        "load_1min_min": min(loads),
        "load_1min_max": max(loads),
        "other_cpu_share_max": max(r.get("other_cpu_share", 0.0) for r in measured),
        "note": "other_cpu_share: CPU time of other processes during a measurement, as a share "
        "of all CPUs; near 0 means the machine was otherwise idle",
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from shiftwork.tables import read_table, write_table, write_text

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    work = Path(args.work)
    variants_path = work / "variants.parquet"
    write_table(bench_variants(config, args.prompts), variants_path)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in LABELS}
    outputs: dict[str, pd.DataFrame] = {}
    for run in range(args.runs):
        for kind in LABELS:
            if kind == "reference" and run >= args.reference_runs:
                continue
            probes_from = work / "job" / "probes.parquet" if kind == "vllm" else None
            runs[kind].append(spawn(kind, variants_path, work / kind, args, probes_from))
            outputs[kind] = read_table(work / kind / "outputs.parquet")
        print(
            f"run {run + 1}/{args.runs}: " + ", ".join(f"{k} {r[-1]['wall_s']:.1f} s" for k, r in runs.items()),
            file=sys.stderr,
            flush=True,
        )
    summary = {kind: summarise(r) for kind, r in runs.items()}
    responses, probes = compare_outputs(outputs, args.tol)
    first = runs["job"][0]
    result: dict[str, Any] = {
        "model": MODEL,
        "device": first["device"],
        "dtype": first["dtype"],
        "gpu": first.get("gpu"),
        "threads": first["threads"],
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
        "prompts": args.prompts,
        "runs": args.runs,
        "unique_inputs": runs["vllm"][0]["unique"],
        "logprob_rows": runs["vllm"][0].get("prompt_logprobs_rows"),
        "probed_pairs": runs["job"][0]["probed_pairs"],
        "variant_settings": VARIANT_SETTINGS,
        "summary": summary,
        "ratios": ratios(summary),
        "responses": responses,
        "probes": probes,
        "host": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "cpu_capability": cpu_capability(),
        },
    }
    result["contention"] = contention([r for rs in runs.values() for r in rs])
    result["equal"] = (
        responses["(a) vs (c)"]["identical_share"] == 1.0
        and responses["(c) vs (b)"]["identical_share"] == 1.0
        and probes["(a) vs (b)"]["outside_tol"] == 0
        and probes["(c) vs (b)"]["outside_tol"] == 0
    )
    write_text(json.dumps(result, indent=2) + "\n", args.out)
    print(markdown(result))
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    spec = config["models"][MODEL]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=14, help="prompts (16 variant evaluations each)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--reference-runs", type=int, default=3, help="runs of (b), the slowest (at most --runs; its median is used)"
    )
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
        help="exit with status 1 when (a) and (c) or (c) and (b) give different responses or probe values "
        "beyond --tol (off for bfloat16, whose rounding differs by batch)",
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
    p.add_argument("kind", choices=list(LABELS))
    p.add_argument("variants")
    p.add_argument("work")
    p.add_argument("report")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--probes-from")
    a = p.parse_args(argv)
    run = ModelRun(a.model_dir, a.max_new_tokens, a.batch_size, a.dtype, a.threads)
    result = run_child(a.kind, a.variants, a.work, run, a.probes_from)
    Path(a.report).write_text(json.dumps(result))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "report":  # the table again, from a saved result
        saved = json.loads(Path(sys.argv[2] if len(sys.argv) > 2 else parse_args([]).out).read_text())
        saved["ratios"] = ratios(saved["summary"])
        print(markdown(saved))
    else:
        args = parse_args(sys.argv[1:])
        outcome = main(sys.argv[1:])
        sys.exit(1 if args.expect_equal and not outcome["equal"] else 0)
