"""Time loading a prepared model directory (median of several loads).

    .venv/bin/python bench/model_load.py results/models/smollm2-135m-instruct [repeats]
"""

from __future__ import annotations

import json
import statistics
import sys
import time


def main(model_dir: str, repeats: int = 5) -> dict:
    from shiftwork.models.loading import load_prepared

    load_prepared(model_dir)  # warm the page cache and imports once
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        lm = load_prepared(model_dir)
        times.append(time.perf_counter() - start)
        del lm
    return {"model_dir": model_dir, "repeats": repeats, "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3), "min_s": round(min(times), 3)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)))
