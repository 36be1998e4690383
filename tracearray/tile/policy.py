"""The targets' tiling policies: the numbers that shape a launch and never the code.

A policy is frozen: the binding step (``tile/bind.py``) is a function of a kernel, its
argument layouts and one policy, so two bindings under the same policy agree, and a tuner can
try candidate policies (``dataclasses.replace``) on the same compiled code. What a policy
holds may change how a kernel's work is split (chunks, grid and block shapes, whether a row
cache is used), never an instruction of it: the kernel caches are keyed without it (a GPU block's
reduction tree is written for any power of two). On the CPU a result never depends on it (a
full reduction's slots are a function of the sizes alone: ``tile.full_reduction_slots``);
on the GPU a full float reduction's association follows its slot count, and a block_row
float row's follows its threads (``row_elements_per_thread``), as they follow the device's
multiprocessors, within the bound ``tile.sum_rounding_depth`` states (``tile/tune.py``
never tunes those fields).

``TRACEARRAY_TILING`` overrides fields for a process (``"row_grid_per_sm=16,map_block=512"``;
``config.tiling_overrides``): for A/B measurements (``benchmarks/gpu_launch_ab.py``) and
for a user who measured better numbers on their device. An unknown field is an error that
lists the known ones.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

# CPU: work (elements) a pool task should have at least, and tasks per thread to aim for
# (about 4 balance a core that is busy with something else)
MIN_TASK_WORK = 1 << 14
TASKS_PER_THREAD = 4


@dataclass(frozen=True)
class CpuTiling:
    """How a CPU kernel's parallel range is split into the pool's tasks."""
    target: ClassVar[str] = "cpu"
    threads: int                      # the pool's threads (tracearray.cpu.pool)
    min_task_work: int = MIN_TASK_WORK
    tasks_per_thread: int = TASKS_PER_THREAD


@dataclass(frozen=True)
class GpuTiling:
    """Grid and block shapes of the GPU's drivers (tile/gpu.py), for one device."""
    target: ClassVar[str] = "cuda"
    sms: int                          # the device's multiprocessors
    smem_optin: int                   # shared memory a block may opt into, bytes
    # map, scatter_atomic, scatter_last: threads per block; the grid strides past
    # grid_per_sm blocks per multiprocessor
    map_block: int = 256
    grid_per_sm: int = 32
    # thread_row, scan, scatter and the multi-pass scans' and sorts' thread-per-item passes
    thread_block: int = 128
    # block_row: about this many elements of a row per thread sets the block's threads
    # (smaller blocks for shorter rows, so more of them share a multiprocessor and one
    # block's loads overlap another's reductions: on the H200, 2026-12-02, rows of 4096 ran
    # 10 % faster with 128 threads than with 256, rows of 8192 fastest with 256), at most
    # the code's MAX_BLOCK
    row_elements_per_thread: int = 32
    # Blocks per multiprocessor at most (grid-stride rows). A grid of the resident blocks
    # alone (the occupancy calculator's) was slower on the H200, 2026-12-03: softmax 1.18 ->
    # 1.25 ms, pairwise_min 0.456 -> 0.536, l2_normalize 1.22 -> 1.28 (layernorm, rmsnorm 2-4
    # % faster). 21 against 16 (H200, 2026-12-04, three calls;
    # docs/bench-gpu-ab-rows-2026-12-04.jsonl): layernorm 1.29 -> 1.23 ms (16 ran 5.33 waves
    # of its 3 resident blocks per multiprocessor, 21 runs 7), rmsnorm and softmax 1-3 %
    # faster, logsumexp and pairwise_min level.
    row_grid_per_sm: int = 21         # block_row, block_rows
    # threads of a block_rows block of held rows at most (tile/gpu.py BLOCK_ROWS_HELD)
    block_rows_held_block: int = 64
    warp_row_grid_per_sm: int = 64    # warp_row
    # block_row's two row buffers at most (two blocks per multiprocessor still fit an H200's
    # 228 KB; layernorm's rows of 8192 float32 take 64 KB)
    row_pipeline_max_bytes: int = 80 << 10
    # full reductions: elements per thread at least before another block (slot) is added,
    # and slots at most per multiprocessor
    full_work_per_thread: int = 16
    full_slots_per_sm: int = 4


# Launch fields measured better than GpuTiling's defaults on a device, by the device's name
# as its driver reports it. The defaults came from A/Bs on an H200; an H100 SXM prefers
# bigger map grids and more row blocks: the autotuner kept these on it (2026-12-06, fourth
# session), and an A/B of the old defaults against them (benchmarks/gpu_launch_ab.py, two
# rounds, medians in ms; docs/benchmarks.md "2026-12-06, fifth session") gave haversine
# 1.823 -> 1.747, black_scholes 1.881 -> 1.825, softmax 1.554 -> 1.515, gelu_tanh 1.504 ->
# 1.481, layernorm 1.553 -> 1.537, adam_step 1.303 -> 1.290, ew_chain, l2_normalize,
# rmsnorm and logsumexp level. None of these fields changes a result's bits (tile/tune.py).
#
# block_row on the H100: a block per row (ROW_PER_BLOCK blocks per multiprocessor reach
# every row count below 2^23) instead of 32 blocks per multiprocessor striding over rows.
# Sixth session's A/Bs (2026-12-06, docs/benchmarks.md), ms, old -> a block per row with
# the one row buffer binding then gives it (tile/bind.py): softmax 1.538 -> 1.436, rmsnorm
# 1.500 -> 1.429, layernorm 1.553 -> 1.463, logsumexp 0.726 -> 0.691-0.706 (0.682 with two
# buffers); 12 to 192 blocks per multiprocessor fell between (no fixed count of resident
# blocks' waves left a short tail for all four). warp_row: 256 per multiprocessor,
# l2_normalize 1.506 -> 1.494 (a block per 8 rows: 1.582).
#
# block_row on the H200: 128 blocks per multiprocessor. The autotuner (ninth session,
# 2026-12-06, benchmarks/gpu_autotune.py, ms) kept it for softmax (1.149 -> 1.057) and
# layernorm (1.228 -> 1.188), and rmsnorm's 1.046 at 128 is within 1 % of its best (1.038,
# a block per row; 1.131 at the default). Its map fields stay: the H100's map_block=512 and
# grid_per_sm=64 on the H200 were 2 % faster on gelu_tanh and 8 % slower on adam_step.
ROW_PER_BLOCK = 1 << 16
MEASURED_DEVICE_DEFAULTS: dict[str, dict[str, int]] = {
    "NVIDIA H100 80GB HBM3": dict(map_block=512, grid_per_sm=64,
                                  row_grid_per_sm=ROW_PER_BLOCK, warp_row_grid_per_sm=256),
    "NVIDIA H200": dict(row_grid_per_sm=128),
}


def gpu_tiling(device_name: str, sms: int, smem_optin: int) -> GpuTiling:
    """The default policy of a device: GpuTiling's defaults, with the fields measured better
    on a device of this name (``MEASURED_DEVICE_DEFAULTS``)."""
    return GpuTiling(sms, smem_optin, **MEASURED_DEVICE_DEFAULTS.get(device_name, {}))


def policy_for(policy: Any) -> Any:
    """``policy`` as this process runs it: with ``TRACEARRAY_TILING``'s fields."""
    from .. import config
    return with_overrides(policy, config.tiling_overrides())


def with_overrides(policy: Any, overrides: dict[str, str]) -> Any:
    """``policy`` with its fields named in ``overrides`` (``TRACEARRAY_TILING``) replaced by
    their integers; the other target's fields are skipped. A name that is neither policy's
    field, or a value that is not a positive integer, is a ValueError naming the fields."""
    if not overrides:
        return policy
    names = {f.name for f in dataclasses.fields(policy)}
    known = {f.name for cls in (CpuTiling, GpuTiling) for f in dataclasses.fields(cls)}
    values: dict[str, int] = {}
    for name, text in overrides.items():
        if name not in known:
            raise ValueError(f"TRACEARRAY_TILING: no tiling policy has a field {name!r}; "
                             f"the fields: {', '.join(sorted(known))}")
        if name not in names:
            continue
        try:
            value = int(text, 0)
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f"TRACEARRAY_TILING: {name}={text!r} is not a positive integer")
        values[name] = value
    return dataclasses.replace(policy, **values)


__all__ = ["CpuTiling", "GpuTiling", "gpu_tiling", "policy_for", "MEASURED_DEVICE_DEFAULTS",
           "ROW_PER_BLOCK",
           "with_overrides", "MIN_TASK_WORK", "TASKS_PER_THREAD"]
