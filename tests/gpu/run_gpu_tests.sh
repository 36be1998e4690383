#!/usr/bin/env bash
# The GPU test tier in one call, for a machine with an NVIDIA GPU (the H200 device tool):
#   bash tests/gpu/run_gpu_tests.sh [extra pytest args]
# Runs from the repository root without installing (PYTHONPATH=.); writes logs under $OUT
# (the device tool's output folder) or ./gpu-logs.
set -u -o pipefail
. "$(dirname "$0")/env.sh"
export TRACEARRAY_TEST_REPORT="$OUT/bandwidth.txt"
{
  echo "== $(date -u +%FT%TZ) $(uname -m)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  $PY - <<'PY'
import sys, numpy, llvmlite
print("python", sys.version.split()[0], "numpy", numpy.__version__, "llvmlite", llvmlite.__version__)
try:
    import cuda.bindings
    print("cuda-bindings", cuda.bindings.__version__)
except Exception as e:
    print("cuda-bindings missing:", e)
from tracearray.gpu import driver
print("GPU available:", driver.is_available())
if driver.is_available():
    d = driver.get_device()
    print(repr(d), d.sm_count, "SMs, driver", d.driver_version, "target", d.target)
from tracearray.gpu import ptx
print("libdevice:", ptx.find_libdevice(), " ptxas:", ptx.ptxas_path())
PY
} 2>&1 | tee "$OUT/environment.txt"
timeout "${GPU_TEST_TIMEOUT:-500}" $PY -m pytest -m gpu -q -p no:cacheprovider -rfE \
    --durations=15 --junitxml="$OUT/junit.xml" "${GPU_TEST_PATHS:-tests}" "$@" 2>&1 | tee "$OUT/pytest-gpu.log"
rc=${PIPESTATUS[0]}
echo "pytest exit code: $rc" | tee -a "$OUT/pytest-gpu.log"
exit "$rc"
