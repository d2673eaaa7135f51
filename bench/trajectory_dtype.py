"""Evaluate trajectory checkpoints in float32 and in bfloat16 and compare: time per checkpoint,
the share of identical predictions, and the largest per-set accuracy difference.

    .venv/bin/python bench/trajectory_dtype.py RESULTS RUN STEP [STEP ...]

RESULTS is a results folder after `make trajectory` (its suite, prepared model and checkpoints
are read); prints one JSON object per step and a summary.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def compare(results: Path, run: str, step: int) -> dict:
    import pandas as pd

    from shiftwork.models.checkpoints import load_checkpoint
    from shiftwork.tables import read_table
    from shiftwork.trajectory.evaluate import predict

    suites = sorted((results / "trajectory" / "suites").glob("*.parquet"))
    suite = read_table(suites[0])
    tests = suite[suite["split"] == "test"]
    base = next((results / "models").glob("smollm2-135m-instruct/*/config.json")).parent
    checkpoint = {"path": str(results / "trajectory" / "runs" / run / "checkpoints" / f"checkpoint-{step}")}
    out: dict = {"step": step, "items": len(tests)}
    preds = {}
    for dtype in ("float32", "bfloat16"):
        start = time.perf_counter()
        net, tok, device = load_checkpoint(str(base), checkpoint, dtype)
        preds[dtype] = predict(net, tok, device, tests, 32)
        out[f"seconds_{dtype}"] = round(time.perf_counter() - start, 1)
    a, b = preds["float32"], preds["bfloat16"]
    out["same_prediction"] = round(float((a["pred"] == b["pred"]).mean()), 4)
    acc = pd.DataFrame({k: v.groupby("set")["correct"].mean() for k, v in preds.items()})
    out["max_accuracy_difference"] = round(float((acc["float32"] - acc["bfloat16"]).abs().max()), 4)
    out["margin_correlation"] = round(float(a["margin"].corr(b["margin"])), 4)
    return out


if __name__ == "__main__":
    import torch

    from shiftwork.precision import cpu_capability

    torch.set_num_threads(2)
    rows = [compare(Path(sys.argv[1]), sys.argv[2], int(s)) for s in sys.argv[3:]]
    for row in rows:
        print(json.dumps(row))
    speed = sum(r["seconds_float32"] for r in rows) / sum(r["seconds_bfloat16"] for r in rows)
    print(
        json.dumps(
            {
                "float32_over_bfloat16_time": round(speed, 2),
                "min_same_prediction": min(r["same_prediction"] for r in rows),
                "cpu_capability": cpu_capability()["label"],
            }
        )
    )
