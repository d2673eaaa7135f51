#!/usr/bin/env bash
# The generate job of commit cc8beec, the hand-written engine that vLLM replaced,
# three times on the variants of the last `make bench` (results/bench/work/variants.parquet),
# in this checkout's environment (that commit's tests pass with the current lock). It prints
# each run's wall time and the median, to set beside (a) of `make bench` (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
variants=$PWD/results/bench/work/variants.parquet
python=$PWD/.venv/bin/python
test -f "$variants" || { echo "previous_engine: run 'make bench' first ($variants)" >&2; exit 1; }
model_dir=$PWD/$(dirname "$("$python" -m shiftwork.models.prepare smollm2-135m-instruct)")
old=$(mktemp -d)
trap 'git worktree remove --force "$old/cc8beec"; rm -rf "$old"' EXIT
git worktree add --detach "$old/cc8beec" cc8beec >/dev/null 2>&1
# from inside the old checkout: `python -` puts the working directory first on sys.path
cd "$old/cc8beec"
"$python" - "$variants" "$model_dir" "$old" <<'PYEOF'
import statistics
import sys
import time

import shiftwork
from shiftwork.stability.steps import generate_responses

variants, model_dir, work = sys.argv[1:4]
print("previous_engine: shiftwork from", shiftwork.__file__, flush=True)
assert "/cc8beec/" in shiftwork.__file__, "not the old checkout's shiftwork"
walls = []
for run in range(3):
    start = time.perf_counter()
    generate_responses(
        variants, model_dir, "smollm2-135m-instruct", f"{work}/g{run}.parquet", f"{work}/p{run}.parquet",
        max_new_tokens=24, batch_size=16, dtype="float32", threads=2,
    )
    walls.append(time.perf_counter() - start)
    print(f"run {run + 1}/3: {walls[-1]:.1f} s", flush=True)
print(f"median {statistics.median(walls):.1f} s (runs {', '.join(f'{w:.1f}' for w in walls)})")
PYEOF
