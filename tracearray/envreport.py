"""The environment report of ``python -m tracearray info`` and ``tracearray.show_config()``.

What a bug report needs: versions, the CPU and its vector features (as LLVM sees them: what
the CPU kernels are compiled for), threads, every ``TRACEARRAY_*`` variable set, the disk
cache, whether a GPU is usable and if not exactly why (the backend's own message), and where
libdevice and ptxas were found. Building it initialises CUDA when cuda-python is there (that
is the only way to know whether a GPU is usable), and never compiles anything.
"""
from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Any

from . import cachefiles, config

# Vector extensions worth naming, by LLVM feature prefix (x86, Arm, POWER, RISC-V).
VECTOR_FEATURE_PREFIXES = ("sse", "ssse3", "avx", "fma", "f16c", "neon", "sve", "asimd",
                           "altivec", "vsx")


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def vector_features(features: dict[str, bool] | Any) -> list[str]:
    """The enabled features of ``features`` (LLVM's name -> enabled) that are vector
    extensions, sorted."""
    return sorted(name for name, on in features.items() if on and
                  (name.startswith(VECTOR_FEATURE_PREFIXES) or name == "v"))   # v: RISC-V


def cpu_description() -> tuple[str, list[str]]:
    from llvmlite import binding as llvm
    return llvm.get_host_cpu_name(), vector_features(llvm.get_host_cpu_features())


def threads_description() -> str:
    from .cpu import pool
    return f"{pool.num_threads()} ({pool.num_threads_source()})"


def gpu_status() -> tuple[bool, str]:
    """(usable, the device or exactly why not)."""
    if config.gpu_disabled():
        return False, "TRACEARRAY_DISABLE_GPU is set (device='auto' runs on the CPU)"
    from .gpu import driver
    try:
        dev = driver.get_device()
    except Exception as e:   # noqa: BLE001 - the reason is the report
        return False, str(e)
    cc = getattr(dev, "cc", None)
    arch = f", sm_{cc[0]}{cc[1]}" if cc else ""
    return True, f"{getattr(dev, 'name', type(dev).__name__)}{arch}"


def libdevice_description() -> str:
    from .gpu import ptx
    candidates = ptx.libdevice_candidates()
    for how, path in candidates:
        if path.is_file():
            return f"{path} (found through {how})"
    return f"not found; {ptx.INSTALL_HINT}"


def ptxas_description() -> str:
    from .gpu import ptx
    found = ptx.ptxas_path()
    return found if found else "not found (PATH, CUDA_HOME, CUDA_PATH)"


def cache_description() -> tuple[str, str]:
    root = config.cache_dir()
    if root is None:
        return "off (TRACEARRAY_CACHE_DIR)", "-"
    use = cachefiles.usage(root)
    bound = config.cache_max_bytes()
    limit = "unbounded" if bound is None else f"bound {cachefiles.human_bytes(bound)} per backend"
    parts = ", ".join(f"{name}: {n} entries, {cachefiles.human_bytes(b)}"
                      for name, (n, b) in sorted(use.folders.items()))
    size = f"{use.entries} entries, {cachefiles.human_bytes(use.bytes)}" + \
        (f" ({parts})" if parts else "") + f"; {limit}"
    return root, size


def report() -> list[tuple[str, str]]:
    """The report as (label, value) rows, in the order printed."""
    import tracearray
    rows = [
        ("tracearray", tracearray.__version__),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("platform", platform.platform()),
        ("numpy", package_version("numpy")),
        ("llvmlite", package_version("llvmlite")),
        ("cuda-python", package_version("cuda-python")),
        ("cuda-bindings", package_version("cuda-bindings")),
        ("hypothesis", package_version("hypothesis")),
    ]
    try:
        cpu, features = cpu_description()
        rows += [("CPU", cpu), ("vector features", " ".join(features) or "none")]
    except Exception as e:   # noqa: BLE001 - a broken llvmlite is worth reporting too
        rows.append(("CPU", f"unknown (llvmlite: {e})"))
    rows.append(("threads", threads_description()))
    variables = config.set_variables()
    if variables:
        for name, value in variables.items():
            known = "" if config.is_declared(name) else "  (unknown to tracearray)"
            rows.append((name, f"{value!r}{known}"))
    else:
        rows.append(("TRACEARRAY_* set", "none"))
    root, size = cache_description()
    rows += [("cache directory", root), ("cache size", size)]
    usable, why = gpu_status()
    rows.append(("GPU", f"usable: {why}" if usable else f"not usable: {why}"))
    rows += [("libdevice", libdevice_description()), ("ptxas", ptxas_description())]
    return rows


def format_report() -> str:
    rows = report()
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
