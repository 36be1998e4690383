"""Which buffers of one call can share memory: lifetimes over the plan's steps.

A call allocates every value the plan stores. A program that steps through time (a Python
loop the trace unrolled: ``for _ in range(200): u = step(u)``) stores each step's value, so
a call held all of them at once: 200 grids of 512 KiB for a heat equation, 100 MiB where
NumPy's loop keeps two or three grids hot in cache. A buffer whose last kernel has run can
hold a later value of the same byte size instead, as NumPy's own allocator would reuse the
memory of a temporary that has died.

Both runtimes run a call's steps in order (the CPU one after another, the GPU in the order
of one stream), so a buffer is alive from the first step that touches it to the last one; a
step never gets memory that one of its own operands still occupies. Only a call's own
intermediates share: the results handed back, argument updates and constants keep their
memory.
"""
from __future__ import annotations

import heapq
from typing import Iterable, Sequence


def lifetimes(steps: Sequence[Iterable[int]],
              buffers: Iterable[int]) -> dict[int, tuple[int, int]]:
    """``buffer -> (first step, last step)`` that touches it (reads or writes), for the
    ``buffers`` asked about; ``steps[i]`` lists the buffers step i touches."""
    wanted = set(buffers)
    span: dict[int, tuple[int, int]] = {}
    for i, touched in enumerate(steps):
        for b in touched:
            if b in wanted:
                first, _last = span.get(b, (i, i))
                span[b] = (first, i)
    return span


def share_memory(sizes: dict[int, int], span: dict[int, tuple[int, int]]) -> dict[int, int]:
    """``buffer -> owner``: the buffer whose memory each one uses (its own: itself). A buffer
    takes the memory of one whose lifetime ended at an earlier step and that has exactly its
    byte size (``sizes``), the most recently freed first (the likeliest to be in cache);
    buffers no step touches keep their own."""
    owner: dict[int, int] = {b: b for b in sizes if b not in span}
    free: dict[int, list[int]] = {}                  # byte size -> owners free now
    alive: list[tuple[int, int]] = []                # (last step, owner), a heap
    for b in sorted(span, key=lambda b: (span[b][0], b)):
        first, last = span[b]
        while alive and alive[0][0] < first:
            _end, o = heapq.heappop(alive)
            free.setdefault(sizes[o], []).append(o)
        same = free.get(sizes[b])
        o = owner[b] = same.pop() if same else b
        heapq.heappush(alive, (last, o))
    return owner
