"""Time loading a prepared model directory (median of several loads), and within it the check
of every weight file against the sha256 recorded when the model was prepared.

    .venv/bin/python bench/model_load.py results/models/smollm2-135m-instruct/SOURCE [repeats]
"""

from __future__ import annotations

import json
import statistics
import sys
import time


def main(model_dir: str, repeats: int = 5) -> dict:
    from shiftwork.models.loading import load_prepared
    from shiftwork.models.prepare import check_weights, read_info
    from shiftwork.precision import cpu_capability

    load_prepared(model_dir)  # warm the page cache and imports once
    times, checks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        lm = load_prepared(model_dir)
        times.append(time.perf_counter() - start)
        del lm
        start = time.perf_counter()
        check_weights(model_dir)
        checks.append(time.perf_counter() - start)
    weight_bytes = sum(f["bytes"] for f in read_info(model_dir)["weight_files"].values())
    return {
        "model_dir": model_dir,
        "repeats": repeats,
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "min_s": round(min(times), 3),
        "weight_mib": round(weight_bytes / 2**20, 1),
        "digest_check_median_s": round(statistics.median(checks), 3),
        "cpu_capability": cpu_capability()["label"],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)))
