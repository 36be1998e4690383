"""Strided copies on the device, in both directions.

- gather: a strided view of a buffer into a fresh C-contiguous one (a reshape that cannot be
  a view, before a kernel reads it: ``GpuExecutable``);
- scatter: a C-contiguous value into a strided view (an argument update written back into a
  reversed, sliced or transposed device array: ``array.write_into``).

One kernel per item size and direction, moving raw bits (the item size's unsigned integer),
so one kernel serves every dtype of that size; its PTX comes from the shared PTX cache and
its module is loaded once per device.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from . import ptx as ptxmod

COPY_MAX_RANK = 8   # dims of a view the copy kernel takes (its arguments: extents, strides)

COPY_BLOCK = 256
_lock = threading.Lock()
_ptx: dict[tuple, tuple[str, str, str]] = {}   # (itemsize, scatter, target) -> (name, ir, ptx)


def _kernel(dev: Any, itemsize: int, scatter: bool, counts: Any) -> Any:
    key = (itemsize, scatter, dev.target)
    with _lock:
        entry = _ptx.get(key)
        if entry is None:
            from .codegen import copy_kernel_ir   # (only when a copy runs)
            name = f"tracearray_{'scatter' if scatter else 'gather'}{itemsize}"
            ir_text = copy_kernel_ir(itemsize, name, scatter)
            entry = _ptx[key] = (name, ir_text, ptxmod.compile_ptx(ir_text, dev.target, counts))
    name, ir_text, ptx = entry
    return dev.load(ptx, [name], ir_text)[name]


def strided_copy(dev: Any, dst: int, src: int, shape: Sequence[int],
                 strides: Sequence[int], offset: int, itemsize: int, *, scatter: bool = False,
                 counts: Any = None) -> Any:
    """Queue on the stream a copy between the contiguous buffer and the strided view
    (``shape``, element ``strides`` and ``offset`` from the view's base pointer): gather
    ``dst[i] = view[i]`` with the view at ``src``, or scatter ``view[i] = src[i]`` with the
    view at ``dst``. Returns the launch's argument buffers, which the caller keeps until the
    launch has been queued (``counts``: an executable's compile counters, or None).

    :raises UnsupportedOperationError: for a view of more than ``COPY_MAX_RANK`` dims."""
    from ..errors import UnsupportedOperationError
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return None
    rank = len(shape)
    if rank > COPY_MAX_RANK:   # a documented limit of the GPU copy kernel
        raise UnsupportedOperationError(
            f"device='cuda': copying a non-contiguous {rank}-d view needs a copy kernel of at "
            f"most {COPY_MAX_RANK} dims; make the array contiguous first "
            f"(np.ascontiguousarray) or use device='cpu'")
    fn = _kernel(dev, itemsize, scatter, counts)
    pad = COPY_MAX_RANK - rank
    params = np.asarray([n, offset] + [1] * pad + list(shape) + [0] * pad + list(strides),
                        np.int64)
    vals = np.empty(2 + len(params), np.uint64)
    vals[:2] = (dst, src)
    vals[2:] = params.view(np.uint64)
    addrs = vals.ctypes.data + np.arange(len(vals), dtype=np.uint64) * np.uint64(8)
    from .driver import sm_count
    grid = max(1, min(-(-n // COPY_BLOCK), 32 * sm_count()))
    dev.launch(fn, grid, COPY_BLOCK, addrs.ctypes.data)
    return vals, addrs
