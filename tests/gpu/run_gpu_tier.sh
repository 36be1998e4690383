#!/usr/bin/env bash
# The GPU test tier in three pytest processes beside an optional soak, for the 16-core H200
# machine of the device tool (one call, logs under $OUT or ./gpu-logs):
#   SOAK_N=300 SEED=gpu-YYYY-MM-DD-x bash tests/gpu/run_gpu_tier.sh
# (SOAK_SIZES=3: each soak program at 3 sizes of its size class, benchmarks/soak.py --sizes)
# The processes: tests/test_registry.py, tests/test_gpu_cuda.py, and every other file's
# `-m gpu` tests; each under a timeout of $T seconds (default 540). Use a soak seed once.
set -u -o pipefail
. "$(dirname "$0")/env.sh"
T=${T:-540}
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1; } \
    > "$OUT/environment.txt"
P="$PY -m pytest -m gpu -q -p no:cacheprovider -rfE --durations=10"
timeout "$T" $P tests/test_registry.py > "$OUT/registry.log" 2>&1 &
timeout "$T" $P tests/test_gpu_cuda.py > "$OUT/gpu_cuda.log" 2>&1 &
timeout "$T" $P tests --ignore=tests/test_registry.py --ignore=tests/test_gpu_cuda.py \
    > "$OUT/other.log" 2>&1 &
if [ "${SOAK_N:-0}" -gt 0 ]; then
  timeout "$T" $PY benchmarks/soak.py --programs "$SOAK_N" --seed "${SEED:?a soak needs SEED}" \
      --jobs 3 --device cuda --sizes "${SOAK_SIZES:-1}" --json "$OUT/soak.json" \
      > "$OUT/soak.log" 2>&1 &
fi
rc=0
for job in $(jobs -p); do wait "$job" || rc=1; done
for f in "$OUT"/*.log; do echo "== $f"; tail -3 "$f"; done
exit "$rc"
