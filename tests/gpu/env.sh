# The environment of the GPU tier scripts (sourced by run_gpu_tests.sh and run_gpu_tier.sh,
# from the repository root): logs under $OUT (the device tool's output folder) or ./gpu-logs,
# tracearray from the source tree, the PTX cache in ./.ptxcache, JAX without preallocation.
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 CI=1
export TRACEARRAY_CACHE_DIR="${TRACEARRAY_CACHE_DIR:-$PWD/.ptxcache}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false   # JAX must not take 75% of the GPU up front
PY=${PYTHON:-python3}
