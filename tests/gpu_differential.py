"""Re-running the CPU differential tests (``test_cpu_ops.py`` and friends) for the GPU.

The CPU test modules build every compiled function through their module-level
``compiled(key, make, **options)``. ``collect(namespace, wrap)`` copies each module's ``test_*``
functions into the calling test module and returns a fixture-friendly patcher that replaces
``compiled`` in the original module by ``wrap(original_compiled)`` while a test runs: the
same programs, inputs and comparisons, executed or compiled another way.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

# The CPU differential test modules (missing ones are skipped: they may not exist yet).
CPU_DIFFERENTIAL_MODULES = ("test_cpu_ops", "test_cpu_fusion")
META_TESTS = ("test_every_op_has_a_cpu_differential_test",)


def cpu_modules() -> list[Any]:
    mods = []
    for name in CPU_DIFFERENTIAL_MODULES:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError:
            continue
    return [m for m in mods if hasattr(m, "compiled")]


def collect(namespace: dict, prefix: str = "") -> list[Any]:
    """Copy the CPU modules' tests into ``namespace``; returns the modules."""
    mods = cpu_modules()
    for mod in mods:
        for name, obj in vars(mod).items():
            if name.startswith("test_") and callable(obj) and name not in META_TESTS:
                namespace[f"test_{prefix}{mod.__name__[5:]}__{name[5:]}"] = obj
    return mods


def patch_compiled(monkeypatch: Any, mods: list[Any],
                   make_compiled: Callable[..., Callable]) -> None:
    """Replace each module's ``compiled`` (and its cache) for one test. Two signatures are
    known: ``compiled(key, make, **options)`` (test_cpu_ops) and ``compiled(fn)``
    (test_cpu_fusion)."""
    for mod in mods:
        cache: dict = {}

        def compiled(*args: Any, _cache: dict = cache, **options: Any) -> Any:
            if len(args) == 2:
                key, make = args
                ck = (key, tuple(sorted(options.items())))
                f = _cache.get(ck)
                if f is None:
                    fn = make()
                    fn.__name__ = fn.__qualname__ = "ops"
                    f = _cache[ck] = make_compiled(fn, **options)
                return f
            (fn,) = args
            if fn not in _cache:
                _cache[fn] = make_compiled(fn, **options)
            return _cache[fn]

        monkeypatch.setattr(mod, "compiled", compiled)


def assemble_kernels(lowered) -> None:
    """ptxas for sm_90 on every distinct kernel of a lowered GPU function."""
    import hashlib
    from tracearray.gpu import ptx as P
    seen = set()
    for kern in lowered.executable.kernels:
        key = hashlib.sha256(kern.ptx.encode()).hexdigest()
        if key not in seen:
            P.ptxas(kern.ptx, "sm_90")
            seen.add(key)
