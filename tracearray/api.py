"""``tracearray.compile``: the user-facing entry, caches, ``lower()`` and ``explain()``.

Call path: argument signature -> trace (cached per shapes/dtypes/static values) -> plan ->
tiles -> executable (cached per signature including strides; kernels themselves are cached
by their IR text, so a new size compiles nothing new) -> run.

Both per-function caches are bounded LRUs (``CompiledFunction.max_traces``,
``max_executables``): a function called with ever new shapes or static values keeps the most
recent ones, and the machine code of evicted executables is freed once no other executable
uses it. A Python scalar argument is a static value (NumPy treats it as weakly typed: its
value, not only its type, can decide a result's dtype), so a float that changes on every
call traces on every call; after ``RETRACE_WARN_AFTER`` such traces the function warns once
(``RetraceWarning``) with the fix.
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading
import types
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence, overload

import numpy as np

from . import cachemiss, config, forksafe, interleaved
from .signature import refuse_identity_constants, static_arguments
from .stagelog import ShapesText, report_executable
from .fuse import plan_graph
from .gpu import array as _gpu_array
from .fuse.plan import Plan
from .templates import SizeTemplates
from .tile import TileSpec, tile_plan
from .trace import (PLAIN_ARRAY_TYPES, Trace, argument_names, check_array_argument, format_graph,
                    is_array_leaf, plain_function, pytree, random_key_source, trace_function)
from .errors import (InputError, TracearrayError, UnsupportedOperationError, node_location,
                     with_location)
from .trace import captured as _captured
from .trace import reads as _reads
from .trace import context as trace_context
from .trace.graph import Graph

if TYPE_CHECKING:
    from .explain import Explanation

DEVICES = ("auto", "cpu", "cuda")
MATMUL_PRECISIONS = ("float32", "tf32")
# A call traces in at most this many stages (a probe per data-dependent size, then the rest).
MAX_DATA_SIZES = 64

# New traces for arguments that differ from an earlier call's only in the values of Python
# scalars, after which a function warns (once) that a changing value re-traces every call.
RETRACE_WARN_AFTER = 8


class RetraceWarning(UserWarning):
    """A compiled function keeps tracing again because a Python scalar argument changes."""


@dataclass
class Stats:
    """Counters of a compiled function (observable caches): ``traces`` (times the function
    was traced), ``resizes`` (new input sizes whose graph and plan were re-derived from a
    size template instead: ``templates.py``), ``executables`` (executables built: compiled or
    loaded kernels for a signature) and ``calls``. A second call with the same signature adds
    only to ``calls``."""
    traces: int = 0
    executables: int = 0
    calls: int = 0
    compiles: int = 0       # kernels compiled by LLVM for this function's executables
    disk_hits: int = 0      # kernels loaded from the disk cache instead
    disk_misses: int = 0    # disk lookups that found no usable entry (then compiled)
    # new sizes whose graph and plan were re-derived from a size template (templates.py)
    # instead of tracing the function again
    resizes: int = 0
    device: str | None = None   # where the last call ran ("cpu" or "cuda"; device="auto" picks)


class CacheInfo(NamedTuple):
    """``CompiledFunction.cache_info()``, in the spirit of ``functools.lru_cache``'s:
    ``traces`` (Python traces of the function), ``compiles`` (kernels compiled by LLVM),
    ``disk_hits`` and ``disk_misses`` (kernel lookups in the disk cache). A kernel already in
    memory, built for another function or an earlier signature, counts in none of the last
    three: a new size of an argument compiles nothing, and is traced again only when no size
    template serves it (``Stats.resizes`` counts those that one did)."""
    traces: int
    compiles: int
    disk_hits: int
    disk_misses: int


@dataclass
class Lowered:
    """The artifacts of every stage for one argument signature (``CompiledFunction.lower``).

    ``graph``: the traced graph; ``plan``: its kernels; ``tiles``: how each kernel walks its
    data; ``executable``: the compiled program (CPU or CUDA); ``probe``: set when this is a
    probe, the first part of a function whose sizes depend on the data. ``as_text(stage)``
    prints any of them.
    """
    graph: Graph
    plan: Plan
    tiles: list[TileSpec]
    executable: Any
    probe: str | None = None     # a probe's graph computes this data-dependent size

    def as_text(self, stage: str = "graph") -> str:
        """The text of one stage of the pipeline.

        :param stage: ``"graph"``: the traced graph, one node a line; ``"plan"``: the kernels,
            what each computes, reads and writes, and its tiling; ``"llvm"``: the LLVM IR of
            every kernel as generated; ``"llvm-opt"``: the same after LLVM's optimisation for
            the target; ``"asm"``: the machine code (the host's assembly for the CPU, PTX for
            CUDA); ``"ptx"``: the PTX of every kernel (``device="cuda"`` only; it needs no GPU,
            only llvmlite).
        :raises ValueError: for another stage, or ``"ptx"`` of a CPU signature.
        """
        from .explain import format_plan
        if stage == "graph":
            return format_graph(self.graph)
        if stage == "plan":
            return format_plan(self.plan, self.tiles)
        kernels = [k for k in self.executable.kernels if k is not None]
        if stage == "llvm":
            return "\n".join(k.ir for k in kernels)
        if stage == "llvm-opt":
            return "\n".join(self.executable.jit.optimized_ir(k.ir) for k in kernels)
        if stage == "asm":
            return "\n".join(self.executable.jit.asm(k.ir) for k in kernels)
        if stage == "ptx":   # GPU hook (tracearray/gpu)
            if not hasattr(self.executable, "ptx"):
                raise ValueError("PTX exists for device='cuda' only; this signature was "
                                 "compiled for the CPU")
            return self.executable.ptx()
        raise ValueError(f"unknown stage {stage!r}: expected graph, plan, llvm, llvm-opt, asm "
                         f"or ptx")


class CompiledFunction:
    """A NumPy function compiled by tracearray (made by ``tracearray.compile``). Call it like
    the original: NumPy arrays in, NumPy arrays out (device arrays in, ``tracearray.Array``
    out on the GPU). ``fn`` is the original function; ``stats`` counts traces, builds and
    calls; ``lower(*args)`` gives every stage's artifacts for a signature and
    ``explain(*args)`` what its kernels read and write.

    Caches are bounded, least recently used first out: ``max_traces`` traces (one per
    argument shapes, dtypes and static values; a few KB each) and ``max_executables``
    executables (one per trace and strides and device; each holds its kernels' machine
    code, about 1 MB per kernel, while no other executable shares it). 64 of each cover any
    realistic set of shapes a function is called with; past that, the least recently used
    signature is traced and built again when it returns.
    """

    max_traces = 64
    max_executables = 64
    # Traces kept for one argument signature whose globals or captured arrays differ (a
    # global flag toggled between calls, a captured array alternating between two shapes):
    # each is found again by its guards instead of tracing at every change.
    max_variants = 4

    def __init__(self, fn: Callable, device: str = "auto", static_argnums: Any = (),
                 static_argnames: Any = (), fallback: str | None = None,
                 matmul_precision: str = "float32"):
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
        if fallback not in (None, "numpy"):
            raise ValueError(f"fallback must be None or 'numpy', got {fallback!r}")
        if matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {MATMUL_PRECISIONS}, got "
                             f"{matmul_precision!r}")
        config.check_environment()   # a misspelt TRACEARRAY_* name, warned about once
        self.fn = fn
        self.device = device
        # validated against fn's signature, and each completed by the other (signature.py)
        self.static_argnums, self.static_argnames = static_arguments(fn, static_argnums,
                                                                     static_argnames)
        self.fallback = fallback
        self.matmul_precision = matmul_precision
        self.stats = Stats()
        # (argument signature, variant) -> trace; the variants of a signature, most recently
        # used first (their guards tell them apart: _find_trace)
        self._traces: OrderedDict[Any, tuple[Trace, Plan, list[TileSpec]]] = OrderedDict()
        self._variants: dict[Any, list[int]] = {}
        self._variant_count = 0
        # (signature, variant) -> captured paths other variants of the signature read as
        # arrays and this one did not (it saw a number there): it holds only while none of
        # them leads to an array again
        self._absent: dict[Any, tuple] = {}
        self._templates = SizeTemplates()   # new sizes re-derived, not traced (templates.py)
        self._executables: OrderedDict[Any, Any] = OrderedDict()
        # Call fast path (see _fast_key): plain-array signature -> what to run.
        self._fast: dict[Any, _FastCall] = {}
        self._fast_ok = not self.static_argnums and not self.static_argnames
        self._fixed_device = None if device == "auto" else device   # else resolved per call
        self._staged = False   # sizes depend on the data: every call runs probes first
        self._build_lock = threading.RLock()
        forksafe.renew_at_fork(self, "_build_lock")   # held while the user's code is traced
        self._retraces = _RetraceCounter()
        self._read_retraces: dict[str, int] | None = {}   # (_note_read_retrace)
        plain, bound, bound_kw = plain_function(fn)
        _refuse_lazy_function(plain if plain is not None else fn)
        # The globals the traced function reads (checked at every call: see _guards_hold).
        self._globals: dict = plain.__globals__ if plain is not None else {}
        # Where arrays reached through closures, defaults, the bound object and global
        # containers are found again at every call (trace/captured.py); input name -> path
        self._roots = _captured.Roots(plain, bound, bound_kw)
        self._captured_paths: dict[str, _captured.Path] = {}
        # (the function's name, doc and module; of its __dict__ only a plain function's own
        # attributes that name nothing of this object's: a callable object's attributes,
        # self.device or self.fn of a model, are its state, not the compiled function's)
        functools.update_wrapper(self, fn, updated=())
        if isinstance(fn, types.FunctionType):
            for k, v in vars(fn).items():
                if k not in vars(self) and not hasattr(type(self), k):
                    setattr(self, k, v)
        if not hasattr(self, "__name__"):   # functools.partial, callable objects
            self.__name__ = getattr(plain, "__name__", None) or type(fn).__name__
            self.__qualname__ = getattr(plain, "__qualname__", self.__name__)

    # --------------------------------------------------------------- signatures
    def _flatten_args(self, args: tuple, kwargs: dict, draw: bool = False
                      ) -> tuple[list[np.ndarray], Any, tuple[Any, ...]]:
        """Array leaves in graph-input order, the cache key of everything else, and that key
        with the values of Python scalars in the argument trees replaced by their types
        (explicitly static arguments keep theirs): the key up to values that re-trace.

        Objects with ``__array__`` are array leaves, converted here at every call (their
        data may have changed since the last one); ndarray subclasses other than np.memmap
        are refused (``check_array_argument``). A ``np.random.Generator`` leaf is a fresh
        key drawn from it (advancing it), or a zero key when not ``draw`` (``lower`` and
        ``explain`` look at the code a call would run and advance nothing)."""
        leaves: list[np.ndarray] = []
        statics: list[Any] = []
        blind: list[Any] = []

        def visit(value: Any, static: bool, name: Callable[[], str]) -> None:
            if static:
                statics.append(_hashable(value))
                blind.append(statics[-1])
                return
            flat, tree = pytree.flatten(value, is_array_leaf)
            # which leaves are generators: a uint64 key like any 0-d uint64 array, but traced
            # as a generator (so not the same trace as an array)
            refuse_identity_constants(tree, name)
            gens = tuple(j for j, v in enumerate(flat) if isinstance(v, np.random.Generator))
            # which are NumPy scalars: traced as immutable values (``s += 1`` rebinds s, as
            # for a scalar; a 0-d array is written in place), so not the same trace either
            scalars = tuple(j for j, v in enumerate(flat) if isinstance(v, np.generic))
            key = (tree, "generators", gens) if gens else tree
            key = (key, "scalars", scalars) if scalars else key
            try:
                hash(key)
            except (TypeError, ValueError):
                raise InputError(
                    f"argument {name()!r} holds a value that is neither an array nor a "
                    f"hashable constant ({_unhashable_in(value)}): the trace would keep it "
                    f"as a constant it cannot compare at the next call; pass its data as an "
                    f"array (np.asarray(...)), or its numbers as a tuple or a dataclass") \
                    from None
            statics.append(_hashable(key))
            bkey = (_value_blind(tree), gens) if gens else _value_blind(tree)
            blind.append((bkey, "scalars", scalars) if scalars else bkey)
            for j, v in enumerate(flat):
                check_array_argument(v, name if tree == ("leaf",) else
                                     lambda: f"{name()}[{j}]")
                if isinstance(v, np.random.Generator):
                    leaves.append(_random_key(v) if draw else np.zeros((), np.uint64))
                else:
                    leaves.append(_as_input_array(v))

        for i, a in enumerate(args):
            visit(a, i in self.static_argnums,
                  lambda: argument_names(self.fn, len(args))[i])
        for k in sorted(kwargs):
            statics.append(k)
            blind.append(k)
            visit(kwargs[k], k in self.static_argnames, lambda: k)
        return leaves, tuple(statics), tuple(blind)

    def _static_labels(self, args: tuple, kwargs: dict) -> list[str]:
        """The argument each element of ``_flatten_args``'s key belongs to, by name."""
        labels = _positional_names(self.fn, len(args))
        for k in sorted(kwargs):
            labels += [k, k]
        return labels

    def _resolve_device(self) -> str:
        # GPU hook: "cuda" always builds GPU code (running it needs a GPU; PTX does not);
        # "auto" uses the GPU when cuda-bindings, a driver and a device are present.
        if self.device == "cuda":
            return "cuda"
        if self.device == "auto":
            return "cuda" if _gpu_driver().is_available_memo() else "cpu"
        return "cpu"

    # --------------------------------------------------------------- stages
    def _lower(self, args: tuple, kwargs: dict, draw: bool = False
               ) -> tuple[Lowered, list[np.ndarray]]:
        """The lowered function for these arguments. A function whose sizes depend on the
        data (``x[mask]``, ``np.nonzero``) is traced in stages: each probe runs on these
        arguments to find the next size, and the trace for the sizes found is used.
        ``draw``: a call's random keys are drawn (generators passed in and NumPy's global
        state advance); ``lower`` and ``explain`` draw none (zero keys)."""
        args, kwargs = _gpu_array.adopt_device_arrays(args, kwargs)   # GPU hook: no copies
        if not self._fast_ok:   # static arguments: roots of captured arrays' paths
            self._roots.use_statics(args, kwargs, self.static_argnums, self.static_argnames)
        leaves, statics, blind = self._flatten_args(args, kwargs, draw)
        shapes = tuple((a.shape, a.dtype.str) for a in leaves)
        # this call's random keys, one per source (zeros when nothing is drawn)
        keys: dict[str, np.ndarray] = {} if draw else \
            {"global": np.zeros((), np.uint64), "entropy": np.zeros((), np.uint64)}
        name = _kernel_prefix(self.fn)
        sizes: tuple[int, ...] = ()
        while True:
            tkey = (statics, shapes, sizes)
            with self._build_lock:   # concurrent first calls build one trace and executable
                lowered, all_leaves = self._lower_locked(args, kwargs, leaves, tkey, sizes,
                                                         name, keys)
                # (a new data-dependent size is not a changed Python scalar: sizes are part
                # of the value-blind key too)
                changed = self._retraces.note(tkey, (blind, shapes, sizes)) \
                    if self.stats.traces != self._retraces.traces_seen else None
                self._retraces.traces_seen = self.stats.traces
            if changed:
                self._warn_retrace(args, kwargs, changed)
            if lowered.probe is None:
                return lowered, all_leaves
            if len(sizes) >= MAX_DATA_SIZES:
                count_node = lowered.graph.outputs[0] if lowered.graph.outputs else None
                where = lowered.graph.locations.get(count_node) or \
                    node_location(count_node) if count_node is not None else None
                raise UnsupportedOperationError(
                    f"{self.__name__} needs more than {MAX_DATA_SIZES} values that depend "
                    f"on the data ({lowered.probe}{f' at {where}' if where else ''}, ...): "
                    f"sizes, branches (if/while on a value) and int() / float() / .item() "
                    f"of values, each found by running the function up to it. A Python "
                    f"loop whose length, indices or condition are traced values "
                    f"unrolls into one such value per step; write it with whole-array "
                    f"operations (np.where for choices), or compile with fallback='numpy' "
                    f"to run such calls with NumPy (how many values a loop needs can "
                    f"depend on the data: a convergence loop)")
            (count,) = lowered.executable.run(all_leaves)
            count = int(np.asarray(count.numpy() if hasattr(count, "numpy") else count))
            config.log(config.COMPILES, "%s: %s is %d", self.__name__, lowered.probe, count)
            sizes += (count,)

    def _warn_retrace(self, args: tuple, kwargs: dict, changed: tuple[int, ...]) -> None:
        labels = self._static_labels(args, kwargs)
        names = sorted({labels[i] for i in changed if i < len(labels)})
        which = ", ".join(repr(n) for n in names) or "a Python scalar argument"
        warnings.warn(
            f"{self.__name__} was traced {RETRACE_WARN_AFTER} times for arguments that differ "
            f"only in the value of {which}: a Python scalar is a static value (NumPy treats "
            f"it as weakly typed), so every new value traces the function and builds it "
            f"again (milliseconds per call). If it changes from call to call, pass a NumPy "
            f"scalar or 0-d array instead (np.float32(v) beside float32 arrays: a NumPy scalar "
            f"takes part in dtype promotion, a Python float does not): it becomes a run-time "
            f"input and one trace serves every value. If it takes a few values that should "
            f"specialise the function, mark it static (static_argnums / static_argnames), "
            f"which also silences this warning. (Warned once per function.)",
            RetraceWarning, stacklevel=4)

    def _lower_locked(self, args: tuple, kwargs: dict, leaves: list, tkey: Any,
                      sizes: tuple[int, ...], name: str, keys: dict
                      ) -> tuple[Lowered, list[np.ndarray]]:
        vkey, traced, guards_changed = self._find_trace(tkey)
        what = None
        if guards_changed:
            text = self._changed_read(tkey)
            what = f"the value of {text} it reads" if text else "a global it reads"
            config.log(config.COMPILES, "%s: %s changed: re-tracing", self.__name__, what)
            if text:
                self._note_read_retrace(text)
        if traced is None:
            if config.explain_cache_misses():
                config.explain_miss(f"{self.__name__}: trace cache miss: {what} changed"
                                    if what is not None else self._trace_miss(tkey, args, kwargs))
            # new sizes of a size class seen before: the graph and plan re-derived from the
            # class's template (templates.py), else traced and planned
            skey = self._templates.key(tkey[0], tkey[1]) if not sizes else None
            template = self._templates.template_trace(skey) if skey is not None else None
            if template is not None and not guards_changed and self._guards_hold(template):
                traced = self._templates.derive(skey, tkey[1])
            derived = traced is not None
            if derived:
                self.stats.resizes += 1
            else:
                # (the device a function runs on is fixed in a process, so it is not part of
                # the trace's key: a GPU's traces write large regions with selects)
                # (a traced value the function stores in an object it reaches, as in
                # ``self.w = self.w - g``, is taken back out: it would escape the trace)
                state = _captured.snapshot(self._roots)
                try:
                    trace = trace_function(self.fn, args, kwargs, self.static_argnums,
                                           self.static_argnames, sizes,
                                           joins=self._resolve_device() == "cpu")
                finally:
                    stored = _captured.restore(state)
                if stored:
                    raise UnsupportedOperationError(
                        f"{self.__name__} stores a traced value in {stored[0]} (an object "
                        f"it reaches, not an argument or a local); the value would escape "
                        f"the trace, and tracearray reads such arrays but does not write "
                        f"them: return the new value and assign it outside the compiled "
                        f"function (m.w = step(g)), or pass the array as an argument and "
                        f"update it in place (w -= lr * g)")
                plan = plan_graph(trace.graph)
                traced = (trace, plan, tile_plan(plan))
                self.stats.traces += 1
                if skey is not None:
                    self._templates.offer(skey, tkey[1], trace, plan, self.__name__,
                                          self._guards_hold)
            trace, plan = traced[0], traced[1]
            self.note_captured(trace)
            vkey = self._new_variant(tkey, trace)
            self._traces[vkey] = traced
            while len(self._traces) > self.max_traces:
                self._forget_trace(next(iter(self._traces)))
            self._fast.clear()
            if sizes or trace.probe is not None:
                self._staged = True
            self._report(name, Lowered(trace.graph, plan, traced[2], None), vkey, derived)
        else:
            self._traces.move_to_end(vkey)
        leaves = leaves + self._global_arrays(traced[0].graph, keys)
        device = self.stats.device = self._resolve_device()
        if device == "cpu":   # GPU hook: device arrays given to a CPU function are copied
            leaves = [_gpu_array.to_host(a) for a in leaves]
        # complex arguments as the real pair views the graph's inputs are (both runtimes)
        leaves = [interleaved.pair_view(a) for a in leaves]
        ekey = (vkey, tuple(a.strides for a in leaves), device,
                tuple(isinstance(a, np.ndarray) for a in leaves))
        exe = self._executables.get(ekey)
        if exe is None:
            if config.explain_cache_misses():
                same_trace = [k for k in self._executables if k[0] == vkey]
                config.explain_miss(cachemiss.explain_executable_miss(
                    self.__name__, same_trace[-1] if same_trace else None, ekey,
                    traced[0].graph.input_names))
            if device == "cuda" and traced[0].probe is not None and \
                    not any(isinstance(a, _gpu_array.Array) for a in leaves):
                # a probe's count of NumPy inputs (in host memory): the CPU computes the same
                # number where the data is, and a function compiled for the GPU can be
                # lowered (to PTX) on a machine without one
                from .cpu.runtime import Executable
            elif device == "cuda":   # GPU hook
                from .gpu.runtime import GpuExecutable as Executable
            else:
                from .cpu.runtime import Executable
            # (the precision of float32 products: an option of the GPU's cuBLAS calls only)
            options = {"matmul_precision": self.matmul_precision} \
                if getattr(Executable, "takes_matmul_precision", False) else {}
            exe = Executable(traced[1], traced[2], leaves, name=name, **options)
            self._executables[ekey] = exe
            while len(self._executables) > self.max_executables:
                self._forget_executable(next(iter(self._executables)))
            self.stats.executables += 1
            self.stats.compiles += getattr(exe, "compiles", 0)
            self.stats.disk_hits += getattr(exe, "disk_hits", 0)
            self.stats.disk_misses += getattr(exe, "disk_misses", 0)
            config.log(config.COMPILES, "%s: built %d kernel(s) for %s on %s", self.__name__,
                       len(exe.kernels), ShapesText(leaves), device)
            report_executable(self.__name__, name, exe, ekey, leaves)
        else:
            self._executables.move_to_end(ekey)
            config.log(config.COMPILES, "%s: cache hit (%s)", self.__name__, device)
        return Lowered(traced[0].graph, traced[1], traced[2], exe, traced[0].probe), leaves

    def _find_trace(self, tkey: Any) -> tuple[Any, Any, bool]:
        """The trace of this argument signature whose guards hold now (globals and captured
        arrays as it saw them): (its key, it, False); (None, None, True) when the signature
        has traces but none holds; (None, None, False) when it has none."""
        ids = self._variants.get(tkey)
        if not ids:
            return None, None, False
        for v in ids:
            traced = self._traces.get((tkey, v))
            if traced is not None and self._guards_hold(traced[0]) and \
                    not any(type(self._roots.resolve(p)) in PLAIN_ARRAY_TYPES
                            for p in self._absent.get((tkey, v), ())):
                if v != ids[0]:   # most recently used first
                    ids.remove(v)
                    ids.insert(0, v)
                    self.note_captured(traced[0])
                return (tkey, v), traced, False
        return None, None, True

    def _changed_read(self, tkey: Any) -> str | None:
        """The value read through an attribute or item (its text: ``cfg.dt``) that changed
        since the most recent trace of ``tkey``, if one did."""
        ids = self._variants.get(tkey) or ()
        traced = self._traces.get((tkey, ids[0])) if ids else None
        return _reads.changed(self._roots, traced[0].reads, _static_key) if traced else None

    def _note_read_retrace(self, text: str) -> None:
        """Warn once when a value read through an attribute or item (``text``:
        ``self.step``) keeps changing: every change traces the function again."""
        if self._read_retraces is None:
            return
        self._read_retraces[text] = self._read_retraces.get(text, 0) + 1
        if self._read_retraces[text] < RETRACE_WARN_AFTER:
            return
        self._read_retraces = None   # (warned once per function)
        warnings.warn(
            f"{self.__name__} was traced {RETRACE_WARN_AFTER} times because the value of "
            f"{text} it reads changed: a number read through an attribute or item is a "
            f"constant of the trace, so every new value traces the function and builds it "
            f"again (milliseconds per call). If it changes from call to call, pass it as an "
            f"argument (a NumPy scalar or 0-d array: one trace serves every value). (Warned "
            f"once per function.)", RetraceWarning, stacklevel=5)

    def _new_variant(self, tkey: Any, trace: Trace) -> Any:
        """A key for ``trace``, a new trace of ``tkey``; past ``max_variants``, the least
        recently used variant (and its executables) goes. Paths the other variants read
        arrays from and this one did not (``self.w`` a number now, an array before) are
        remembered: an array there again is not this trace's (a number there is a constant
        of the trace, checked only where the function's own code reads it: ``Trace.reads``)."""
        ids = self._variants.setdefault(tkey, [])
        while len(ids) >= max(self.max_variants, 1):
            self._forget_trace((tkey, ids[-1]))
        mine = {c.path for c in trace.captured.values()}
        absent = {c.path for v in ids for c in self._traces[(tkey, v)][0].captured.values()
                  if c.path not in mine}
        self._variant_count += 1
        ids.insert(0, self._variant_count)
        vkey = (tkey, self._variant_count)
        if absent:
            self._absent[vkey] = tuple(absent)
        return vkey

    def _trace_miss(self, tkey: Any, args: tuple, kwargs: dict) -> str:
        """Why ``tkey`` is not in the trace cache, against the most recently used key."""
        old = next(reversed(self._traces), None)
        names = self._traces[old][0].graph.input_names if old is not None else ()
        return cachemiss.explain_trace_miss(self.__name__, old[0] if old else None, tkey,
                                            self._static_labels(args, kwargs), names)

    def cache_info(self) -> CacheInfo:
        """Counters of this function's caches: traces, kernels compiled, disk hits and
        misses (``CacheInfo``)."""
        s = self.stats
        return CacheInfo(s.traces, s.compiles, s.disk_hits, s.disk_misses)

    def _forget_trace(self, vkey: Any) -> None:
        """Drop a trace (its (signature, variant) key) and the executables built from it
        (the caller holds the build lock)."""
        ids = self._variants.get(vkey[0])
        if ids is not None and vkey[1] in ids:
            ids.remove(vkey[1])
            if not ids:
                del self._variants[vkey[0]]
        self._absent.pop(vkey, None)
        if self._traces.pop(vkey, None) is not None:
            for ekey in [k for k in self._executables if k[0] == vkey]:
                self._forget_executable(ekey)

    def _forget_executable(self, ekey: Any) -> None:
        """Drop an executable and the fast-path entries that call it; its machine code is
        freed with the last executable that uses it (``cpu.jit``)."""
        exe = self._executables.pop(ekey)
        stale = [k for k, call in self._fast.items() if call.executable is exe]
        for k in stale:
            del self._fast[k]

    def global_inputs(self, graph: Graph) -> list[np.ndarray]:
        """The values of ``graph``'s global inputs now (a traced graph of this function, as
        ``lower`` returns it): the global arrays it reads, and zero random keys, as
        ``lower`` draws none (the testing comparator evaluates the graph on them)."""
        return self._global_arrays(graph, {"global": np.zeros((), np.uint64),
                                           "entropy": np.zeros((), np.uint64)})

    def _same_globals(self, hit: "_FastCall") -> bool:
        """``_guards_hold`` for the fast path: identity first (``np``, helper functions are
        the same objects from call to call), the full comparison only when one differs."""
        g = self._globals
        for name, seen in hit.guards:
            if g.get(name, _MISSING) is not seen:
                return self._guards_hold(hit.trace)
        return not hit.reads or hit.trace.reads_hold(self._roots, _static_key)

    def _guards_hold(self, trace: Trace) -> bool:
        """Whether every global the trace read is still what it saw: the same object (an
        equal number or string will do), or for a global array one of the same shape and
        dtype (its values are read at every call)."""
        g = self._globals
        layouts = trace.global_layouts
        for name, seen in trace.guards.items():
            now = g.get(name, _MISSING)
            if name in layouts:   # a global array (the same object may have been reshaped)
                shape, dtype = layouts[name]
                if not (type(now) in PLAIN_ARRAY_TYPES and now.shape == shape
                        and now.dtype == dtype):
                    return False
                continue
            if now is seen:   # the common case (``np``, helper functions): no more to check
                continue
            if type(now) is not type(seen) or not isinstance(seen, _VALUE_TYPES + (list, dict)) \
                    or _static_key(now) != _static_key(seen):
                # (a dict or list rebound to one of the same keys, numbers and arrays' shapes
                # and dtypes holds: its arrays are read through their paths, trace/captured.py)
                return False
        if trace.reads and not trace.reads_hold(self._roots, _static_key):
            return False   # (cfg.dt, self.lr: a number read through an attribute changed)
        return self._captured_hold(trace)

    def _captured_hold(self, trace: Trace) -> bool:
        """Whether every captured array's path (``trace/captured.py``) still leads to the
        array the trace saw, or to one of its shape and dtype (read in its place)."""
        for used in trace.captured.values():
            if not _captured.still_holds(self._roots, used):
                return False
        return True

    def _global_arrays(self, graph: Graph, keys: dict | None = None) -> list[np.ndarray]:
        """The current values of the global arrays ``graph`` reads (its last inputs; complex
        ones as their real pair views), and the call's random keys (``keys``: drawn once per
        call and source, so that every stage of a staged call sees the same numbers)."""
        keys = {} if keys is None else keys
        out = []
        for name in graph.globals:
            source = random_key_source(name)
            if source is None:
                out.append(interleaved.pair_view(_as_input_array(self.global_value(name))))
                continue
            if source not in keys:
                keys[source] = _random_key(source)
            out.append(keys[source])
        return out

    def note_captured(self, trace: Trace) -> None:
        """Remember where ``trace``'s captured arrays are found (``global_value``)."""
        for name, used in trace.captured.items():
            self._captured_paths[name] = used.path

    def global_value(self, name: str) -> Any:
        """The value now of a global input of this function's graphs that is not a random
        key: a global array by name, or a captured array by its path."""
        path = self._captured_paths.get(name)
        if path is not None:
            return _captured.current_array(self._roots, path)
        return self._globals[name]

    def _fast_inputs(self, hit: "_FastCall", args: tuple) -> list | None:
        """The fast path's inputs: the arguments, then the graph's global inputs now (global
        and captured arrays, fresh random keys); None when one of them is no longer what
        the executable was built for (another layout; a captured path that leads elsewhere,
        or an array used by value that holds other values): the general path decides."""
        roots = self._roots
        for used in hit.fixed:
            if not _captured.still_holds(roots, used):
                return None
        out = list(args)
        keys: dict[str, np.ndarray] = {}
        for kind, key, seen, layout, ready, shape, dtype in hit.bound:
            if kind is _BIND_RANDOM:
                if key not in keys:
                    keys[key] = _random_key(key)
                out.append(keys[key])
                continue
            now = roots.resolve(key) if kind is _BIND_CAPTURED else \
                self._globals.get(key, _MISSING)
            if kind is _BIND_CAPTURED and seen.also and \
                    any(roots.resolve(p) is not now for p in seen.also):
                return None   # the same array at two places then, two arrays now
            if ready is not None and now is ready() and now.shape == shape and \
                    now.dtype is dtype:   # the array bound when the entry was made, as it was
                out.append(now)
                continue
            if now is _MISSING or (kind is _BIND_CAPTURED and not (
                    type(now) in PLAIN_ARRAY_TYPES and now.shape == seen.shape and
                    now.dtype == seen.dtype)):
                return None   # (a global array's shape and dtype: the guards)
            arr = interleaved.pair_view(_as_input_array(now))
            if (type(arr), arr.strides) != layout or arr.shape != shape:
                return None   # another layout: another executable (the general path's key)
            out.append(arr)
        return out

    def _report(self, name: str, lowered: "Lowered", vkey: Any, derived: bool = False) -> None:
        config.log(config.COMPILES, "%s: %s (%d kernel(s))", self.__name__,
                   "re-derived for new sizes, no trace" if derived else "traced",
                   len(lowered.plan.kernels))
        # Formatting a graph costs about as much as tracing it: only when it is shown.
        dumping = config.dump_dir() is not None
        signature = config.signature_id(vkey) if dumping else ""
        describe = ShapesText(vkey[0][1]) if dumping else ""
        if config.enabled(config.GRAPH) or dumping:
            graph = lowered.as_text("graph")
            config.log(config.GRAPH, "graph of %s:\n%s", self.__name__, graph)
            config.dump(name, "graph", graph, signature, f"{self.__name__} {describe}")
        if config.enabled(config.PLAN) or dumping:
            plan = lowered.as_text("plan")
            config.log(config.PLAN, "plan of %s:\n%s", self.__name__, plan)
            config.dump(name, "plan", plan, signature, f"{self.__name__} {describe}")

    def lower(self, /, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and compile for these arguments (as a call would, using the same caches)
        without running the kernels; ``.as_text(stage)`` of the result shows each stage. For a
        function whose sizes depend on the data, the probes run on these arguments first."""
        if "dask.array" in sys.modules:
            from . import dask as _dask
            _dask.refuse_dask_arrays("lower() and explain()", args, kwargs)
        return self._lower(args, kwargs)[0]

    def __reduce__(self) -> tuple:
        # By reference to the user's function and the options, never the caches and machine
        # code: the receiving process rebuilds it and loads its kernels from the disk cache.
        from .pickling import reduce_compiled
        return reduce_compiled(self)

    def __repr__(self) -> str:
        return f"<tracearray.CompiledFunction {self.__qualname__} (device={self.device!r})>"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A compiled function defined in a class body is a method: ``obj.method(x)`` calls
        it with ``obj`` as its first argument, traced like any argument (a dataclass or
        namedtuple instance is a tree of inputs; another object must be marked static and
        compare by value: see ``_refuse_identity_constant``). One CompiledFunction, and so
        one set of caches, serves every instance."""
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        if getattr(_tracing, "stack", None):   # trace_context.current(), inlined
            # Called by a function being traced (in this thread): inlined into that trace,
            # as any Python helper is; the outer compiled function compiles it with the rest.
            return self.fn(*args, **kwargs)
        fast_key = self._fast_key(args) if not kwargs and self._fast_ok else None
        if fast_key is not None:
            hit = self._fast.get(fast_key)
            # (the guards first: the inputs draw the call's random keys)
            inputs = None if hit is None or ((hit.guards or hit.reads) and
                                             not self._same_globals(hit)) \
                else self._fast_inputs(hit, args) if hit.bound or hit.fixed else args
            if inputs is not None:
                self.stats.calls += 1
                self.stats.device = fast_key[0]
                if hit.single:   # the common case, with nothing to check or write back
                    out = hit.run(inputs)[0]
                    return out[()] if hit.scalar and isinstance(out, np.ndarray) else out
                graph = hit.trace.graph
                if graph.updates:
                    targets = list(args) + self._global_targets(graph)
                    _check_update_targets(graph, targets,
                                          _reads.arrays_read(self._roots, hit.trace.reads))
                    return _results(hit.executable.run(inputs), graph, targets)
                return _results(hit.executable.run(inputs), graph)
        if "dask.array" in sys.modules:   # Dask arrays in: a Dask graph of kernels out
            from . import dask as _dask
            if _dask.has_dask_arrays(args, kwargs):
                return _dask.call_on_dask(self, args, kwargs)
        try:
            lowered, leaves = self._lower(args, kwargs, draw=True)
        except TracearrayError:
            if self.fallback != "numpy":
                raise
            warnings.warn(f"tracearray could not compile {self.__name__}; running it with "
                          f"NumPy (fallback='numpy')", RuntimeWarning, stacklevel=2)
            return self.fn(*args, **kwargs)
        n_args = len(leaves) - len(lowered.graph.globals)
        graph = lowered.graph
        found = self._trace_of(graph)
        if found is not None and found[1].assumes_c_arguments:
            _check_argument_layouts(found[1].assumes_c_arguments, graph, leaves)
        self.stats.calls += 1
        if graph.updates:
            targets = self._update_targets(args, kwargs, graph)
            _check_update_targets(graph, targets, _reads.arrays_read(self._roots, found[1].reads)
                                  if found is not None else ())
            outs = lowered.executable.run(leaves)
        else:
            # (a Generator argument returned is the caller's object: ``pytree`` "input")
            targets = self._update_targets(args, kwargs, graph) \
                if pytree.returns_inputs(graph.out_tree) else None
            outs = lowered.executable.run(leaves)
        # the fast path's entry, made after the run (an executable may choose its warm path
        # on its first run: ``GpuExecutable.fast_run``)
        trace = self._traces_entry(lowered.graph) if fast_key is not None and \
            not self._staged and n_args == len(args) and all(
                a is b for a, b in zip(leaves, args)) else None
        if trace is not None:
            self._fast[fast_key] = _FastCall(lowered.executable, trace, leaves[n_args:],
                                             self.global_value)
        return _results(outs, graph, targets)

    def _update_targets(self, args: tuple, kwargs: dict, graph: Graph) -> list[Any]:
        """The caller's objects behind the graph's inputs (argument leaves, then global
        arrays): where the function's in-place updates are written back."""
        args, kwargs = _gpu_array.adopt_device_arrays(args, kwargs)
        out: list[Any] = []
        for i, a in enumerate(args):
            if i not in self.static_argnums:
                out.extend(pytree.flatten(a, is_array_leaf)[0])
        for k in sorted(kwargs):
            if k not in self.static_argnames:
                out.extend(pytree.flatten(kwargs[k], is_array_leaf)[0])
        return out + self._global_targets(graph)

    def _global_targets(self, graph: Graph) -> list[Any]:
        """The objects behind the graph's global inputs now: global and captured arrays
        (a captured one by its path; checked for memory shared with a written argument),
        None for random keys."""
        return [None if random_key_source(n) is not None else self.global_value(n)
                for n in graph.globals]

    def _trace_of(self, graph: Graph) -> tuple[Any, Trace] | None:
        """The trace cache's key and entry whose graph is ``graph``; None when another
        thread's build evicted it."""
        with self._build_lock:   # (another thread's build may be changing the cache)
            for vkey, (trace, _plan, _tiles) in self._traces.items():
                if trace.graph is graph:
                    return vkey, trace
        return None

    def _traces_entry(self, graph: Graph) -> Trace | None:
        """The trace of ``graph`` for a fast-path entry; None when it was evicted, or when
        it holds only while some captured paths lead to no array (``_absent``: checked by
        the general path alone)."""
        found = self._trace_of(graph)
        return None if found is None or found[0] in self._absent else found[1]

    def _fast_key(self, args: tuple) -> Any:
        """The signature of a call whose arguments are all plain, aligned NumPy arrays or
        ``tracearray.Array``s (the common cases), from which the executable follows
        directly; None for any other call.

        The general path flattens pytrees, builds static keys and locks (~0.1 ms per call,
        more with cold caches); this one is a flat tuple of the resolved device and each
        array's dtype, shape and strides (about 0.25 us per array). An entry is recorded only
        after the general path used the arrays unchanged (native byte order, whole-element
        strides), so the key need not say so; alignment is checked here."""
        key = [self._fixed_device or self._resolve_device()]
        for a in args:
            t = type(a)
            if t is np.ndarray:
                # (a complex argument is bound as a pair view, not as given: the general
                # path records no entry for it, so its key misses, as it should)
                if not a.flags.aligned:
                    return None
                key += (a.dtype, a.shape, a.strides)
            elif t is _DEVICE_ARRAY:   # a tracearray.Array: its type keeps it apart
                sig = a._sig
                if sig is None:
                    return None   # complex: bound as pair views by the general path
                key += sig
            else:
                return None
        return tuple(key)

    def explain(self, /, *args: Any, **kwargs: Any) -> "Explanation":
        """What the compiled function does for these arguments: an ``Explanation`` with one
        report per kernel (its strategy, iteration space, ops, bytes read and written and the
        temporaries NumPy would have made that it avoids). ``print()`` it for a table."""
        from .explain import explain_plan
        lowered = self.lower(*args, **kwargs)
        notes = getattr(lowered.executable, "kernel_notes", dict)()
        bound = getattr(lowered.executable, "bound_kernels", dict)()
        return explain_plan(lowered.plan, lowered.tiles, notes, bound)


_BIND_GLOBAL, _BIND_CAPTURED, _BIND_RANDOM = "global", "captured", "random"


class _FastCall:
    """What the call fast path runs for one signature: the executable, the trace it was
    built from (guards, graph), whether its result needs no processing (one array, no
    in-place updates, no run-time checks), and how its global inputs are found at each call
    (``bound``: kind, global name / captured path / random source, the array the trace saw,
    and the (type, strides) the executable was built for; ``fixed``: captured arrays used by
    value, ``CompiledFunction._fast_inputs``)."""

    __slots__ = ("executable", "run", "trace", "guards", "reads", "single", "scalar", "bound",
                 "fixed")

    def __init__(self, executable: Any, trace: Trace, global_leaves: Sequence[Any],
                 global_now: Callable[[str], Any]) -> None:
        graph = trace.graph
        self.executable = executable
        self.run = getattr(executable, "fast_run", None) or executable.run
        self.trace = trace
        self.guards = tuple(trace.guards.items())
        self.reads = trace.reads
        self.scalar = bool(graph.outputs) and graph.outputs[0].ndim == 0   # -> NumPy scalar
        self.single = (graph.out_tree == ("leaf",) and len(graph.outputs) == 1
                       and not graph.updates and not graph.checks
                       and not graph.readonly_results and not graph.python_results)
        bound = []
        for name, leaf in zip(graph.globals, global_leaves):
            source = random_key_source(name)
            if source is not None:
                bound.append((_BIND_RANDOM, source, None, None, None, None, None))
                continue
            kind, key, seen = (_BIND_CAPTURED, trace.captured[name].path,
                               trace.captured[name]) \
                if name in trace.captured else (_BIND_GLOBAL, name, None)
            # the object bound as it is (no conversion): the next call may bind it again
            # without a look at its layout while its shape and dtype stay (``x.shape = ...``
            # and ``x.dtype = ...`` are in place)
            now = global_now(name)
            # (weakly: the entry must not keep an array the function's owner rebound alive)
            ready = weakref.ref(now) if leaf is now else None
            bound.append((kind, key, seen, (type(leaf), leaf.strides), ready, leaf.shape,
                          leaf.dtype))
        self.bound = tuple(bound)
        self.fixed = tuple(v for v in trace.captured.values() if v.values is not None)


@functools.cache
def _gpu_driver() -> Any:
    """``tracearray.gpu.driver``, imported on first use (a function call is cheaper than an
    import statement on the call path)."""
    from .gpu import driver
    return driver


def _refuse_lazy_function(fn: Callable) -> None:
    """Generator and async functions produce their values after they return, so after the
    trace: the caller would get a generator (or coroutine) of the trace's tracers, the same
    ones on every call. Refused when compiling, before any call."""
    kind = ("a generator function" if inspect.isgeneratorfunction(fn) else
            "an async generator function" if inspect.isasyncgenfunction(fn) else
            "an async function" if inspect.iscoroutinefunction(fn) else None)
    if kind is not None:
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise UnsupportedOperationError(with_location(
            f"tracearray.compile: {name} is {kind}; its values would be produced after it "
            f"returns, after the trace, so they cannot be compiled. Compile a function that "
            f"returns the arrays (a tuple, list, dict, namedtuple or dataclass of them)"))


@overload
def compile(fn: Callable, *, device: str = "auto", static_argnums: Any = (),
            static_argnames: Any = (), fallback: str | None = None,
            matmul_precision: str = "float32") -> CompiledFunction: ...


@overload
def compile(fn: None = None, *, device: str = "auto", static_argnums: Any = (),
            static_argnames: Any = (),
            fallback: str | None = None, matmul_precision: str = "float32"
            ) -> Callable[[Callable], CompiledFunction]: ...


def compile(fn: Callable | None = None, *, device: str = "auto", static_argnums: Any = (),
            static_argnames: Any = (), fallback: str | None = None,
            matmul_precision: str = "float32"
            ) -> CompiledFunction | Callable[[Callable], CompiledFunction]:
    """Compile a NumPy function into fused kernels.

    Use it as ``@tracearray.compile``, as ``@tracearray.compile(device="cuda", ...)`` or as
    ``tracearray.compile(fn, ...)``. Nothing is traced or compiled until the first call. Each
    new combination of argument shapes, dtypes and static values traces the function once on
    stand-in arrays and plans its kernels; each new combination of strides and device builds
    an executable for that trace (kernels are cached by their code, so a new size or layout
    rarely compiles anything new). Later calls with a known signature run the machine code
    directly.

    :param fn: the function to compile: plain NumPy code over array arguments (NumPy arrays,
        NumPy scalars, Python numbers, and tuples, lists, dicts, namedtuples or dataclasses of
        them). It may return the same structures of arrays. Generator and async functions are
        refused (their values are produced after the trace).
    :param device: ``"auto"`` (the default): the GPU when one is usable, else the CPU;
        ``"cpu"``: LLVM-compiled native code on a thread pool; ``"cuda"``: PTX on an NVIDIA
        GPU through cuda-python. NumPy inputs come back as NumPy arrays on every device;
        device arrays (CuPy, PyTorch, JAX, ``tracearray.Array``) stay on the GPU.
    :param static_argnums: positions (an int or a sequence of ints) of arguments whose
        *values* are part of the cache key instead of being traced: Python control flow may
        depend on them (``if n > 2``, ``range(n)``). Python scalars are always static.
    :param static_argnames: the same by keyword name (a str or a sequence of str).
    :param fallback: ``None`` (the default): an operation tracearray cannot compile raises a
        ``TracearrayError`` naming it and your line. ``"numpy"``: such a call runs the
        original function with NumPy instead, with a ``RuntimeWarning``.
    :param matmul_precision: ``"float32"`` (the default): float32 matrix products round as
        float32 multiply-adds, as NumPy's do. ``"tf32"``: on the GPU, the float32 products
        cuBLAS runs may use TF32 tensor cores (operands rounded to 10 mantissa bits before
        multiplying, float32 sums: about 1e-3 relative error; several times faster on Hopper
        GPUs), as ``torch.backends.cuda.matmul.allow_tf32`` and JAX's default precision do.
        A documented divergence from NumPy (``docs/divergences.md``, ``gpu-matmul-tf32``);
        float64 products, the CPU and the products of tracearray's own matmul kernel are
        unaffected.
    :returns: a ``CompiledFunction`` (called like ``fn``; ``.lower()``, ``.explain()``,
        ``.stats``, ``.fn``), or, called without ``fn``, a decorator that makes one.
    :raises ValueError: for an unknown ``device``, ``fallback`` or ``matmul_precision``.
    """
    def wrap(f: Callable) -> Any:
        # @compile above @staticmethod / @classmethod: compile the function, keep the kind
        if isinstance(f, (staticmethod, classmethod)):
            return type(f)(wrap(f.__func__))
        return CompiledFunction(f, device=device, static_argnums=static_argnums,
                                static_argnames=static_argnames, fallback=fallback,
                                matmul_precision=matmul_precision)
    return wrap if fn is None else wrap(fn)


def _results(outs: list[Any], graph: Graph, targets: list[Any] | None = None) -> Any:
    """The function's return structure, 0-d results as NumPy scalars (as NumPy returns them),
    after the run-time checks of the graph (the error NumPy would raise, at the user's
    line) and the in-place updates written back into the caller's arrays (``targets``)."""
    n = len(graph.results)
    if graph.checks:
        m = n + len(graph.updates)
        for (error, message), ok in zip(graph.checks, outs[m:]):
            if not bool(np.asarray(ok.numpy() if hasattr(ok, "numpy") else ok)):
                raise error(message)
    if graph.updates:
        values = outs[n:n + len(graph.updates)]
        outs = _unshared_before_writes(outs, n + len(graph.updates),
                                       [targets[i] for i in graph.updates], values)
        for i, value in zip(graph.updates, outs[n:n + len(graph.updates)]):
            _write_into(targets[i], value)
    outs = outs[:n]
    if n > 1:
        outs = _result_identities(outs, graph)
    views: dict[int, np.ndarray] = {}
    for i in graph.readonly_results:
        o = outs[i]
        if isinstance(o, np.ndarray) and o.ndim:
            # a read-only view of the result's memory (another result may be that memory,
            # writeable); one view of an array returned twice
            view = views.get(id(o))
            if view is None:
                view = views[id(o)] = o.view()
                view.flags.writeable = False
            outs[i] = view
    outs = [o[()] if isinstance(o, np.ndarray) and o.ndim == 0 else o for o in outs]
    for i, kind in graph.python_results:   # (a Python float / int in NumPy)
        v = outs[i]
        v = v.numpy()[()] if hasattr(v, "numpy") else v   # (a device Array: its value)
        outs[i] = float(v) if kind == "float" else int(v)
    return pytree.unflatten(graph.out_tree, outs, targets or ())


def _result_identities(outs: list[Any], graph: Graph) -> list[Any]:
    """The results as NumPy's objects: one array where the function returned one array twice
    (``graph.same_results``), arrays of their own where it made two (a runtime returns one
    array for two results of one graph node: ``np.zeros_like(p), np.zeros_like(p)``); an
    argument returned as it is stays the caller's array (``f(x, x)`` returning both)."""
    same = graph.same_results
    outs = list(outs)
    seen: set[int] = set()
    for i, o in enumerate(outs):
        if same and same[i] != i:
            outs[i] = outs[same[i]]
            continue
        if isinstance(o, (np.ndarray, _gpu_array.Array)):
            if id(o) in seen and graph.outputs[i].op != "input":
                outs[i] = o = o.copy()
            seen.add(id(o))
    return outs


def _unshared_before_writes(outs: list[Any], count: int, targets: list[Any],
                            values: list[Any]) -> list[Any]:
    """``outs`` with each of its first ``count`` (the results and the updates' values) that
    shares memory with an argument the call is about to write into replaced by a copy: a
    runtime returns an input's value as the input's own array (``y[:] = x`` gives y's new
    value as x's array; ``x[:] = y`` then writes into x first)."""
    pending = [t for t, v in zip(targets, values)
               if v is not t and v is not interleaved.pair_view(t)]
    if not pending:
        return outs
    outs = list(outs)
    for j in range(count):
        o = outs[j]
        if isinstance(o, (np.ndarray, _gpu_array.Array)) and \
                any(_may_share_memory(o, t) for t in pending):
            outs[j] = o.copy()
    return outs


def _check_update_targets(graph: Graph, targets: list[Any],
                          read: Sequence[tuple[str, np.ndarray]] = ()) -> None:
    """Before a call that writes into the caller's arrays: each must be writeable, none may
    overlap itself (``as_strided``: which write lands last is NumPy's element order), and
    none may share memory with another input or an array the trace read by NumPy's own
    operations (``read``): NumPy would see the write through the other name; the compiled
    function read that input before writing."""
    for i in graph.updates:
        t = targets[i]
        name = graph.input_names[i]
        if not isinstance(t, (np.ndarray, np.generic, _gpu_array.Array)):
            # an object converted with __array__: what writing into it means is its own
            raise InputError(
                f"the compiled function writes into {name!r} (as NumPy would), but it is a "
                f"{type(t).__name__}, not a NumPy array; pass np.asarray({name}) and use "
                f"that array afterwards")
        if isinstance(t, np.ndarray) and not t.flags.writeable:
            raise ValueError(f"the compiled function writes into {name!r} (as NumPy would), "
                             f"but that array is read-only")
        if isinstance(t, (np.ndarray, _gpu_array.Array)) and _gpu_array._self_overlapping(t):
            raise InputError(
                f"the compiled function writes into {name!r}, whose elements share memory "
                f"(a view made by as_strided or broadcast_to): NumPy's result depends on the "
                f"order of its element writes, which the compiled function does not model; "
                f"pass a copy")
        others = [(graph.input_names[j], o) for j, o in enumerate(targets) if j != i] + \
            list(read)
        for other_name, other in others:
            if _may_share_memory(t, other):
                raise InputError(
                    f"{name!r} and {other_name!r} share memory and the compiled "
                    f"function writes into {name!r}: NumPy would see the write through "
                    f"{other_name!r} too, which the compiled function does not "
                    f"model; pass separate arrays (or a copy of one)")


def _check_argument_layouts(assumed: tuple, graph: Graph, leaves: list) -> None:
    """Refuse a call whose trace wrote memory that NumPy lays out as the arguments (``x + 1``
    of a Fortran-ordered x is Fortran-ordered) after deciding a reshape or ravel of it a view
    or a copy for C-ordered arguments, when an argument or global array of several
    dimensions is laid out otherwise: NumPy's decision, and so its result, would differ."""
    where, indices, raw_where, raw_indices = assumed
    for i in sorted(raw_indices):
        name, a = graph.input_names[i], leaves[i]
        contiguous = a.flags.c_contiguous if isinstance(a, np.ndarray) else \
            bool(getattr(a, "is_c_contiguous", True))
        if not contiguous:
            raise UnsupportedOperationError(
                f"{name!r} is not C-contiguous, and the function reads its memory with "
                f"np.lib.stride_tricks.as_strided and explicit strides (at {raw_where}): "
                f"NumPy reads the argument's own memory there, which the trace took as a "
                f"C-contiguous array's; pass np.ascontiguousarray({name})")
    for i in sorted(indices):
        name, a = graph.input_names[i], leaves[i]
        if isinstance(a, np.ndarray) and sum(n > 1 for n in a.shape) > 1 and \
                not _c_order(a):
            kind = "Fortran-ordered" if a.flags.f_contiguous else "with its axes out of C order"
            raise UnsupportedOperationError(
                f"{name!r} is not C-ordered ({kind}), and the function writes memory NumPy "
                f"lays out as {name!r} after a reshape or ravel of it (at {where}): NumPy "
                f"makes that reshape a view or a copy by the layout, which the trace took as "
                f"C's; pass np.ascontiguousarray({name}), or copy before reshaping "
                f"(t = t.copy())")


def _c_order(a: np.ndarray) -> bool:
    """Whether NumPy lays results of ``a`` out in C order (order 'K' keeps the order of its
    strides: a strided C-ordered view's results are C-contiguous)."""
    strides = [abs(st) for st, n in zip(a.strides, a.shape) if n > 1]
    return all(x >= y for x, y in zip(strides, strides[1:]))


def _may_share_memory(a: Any, b: Any) -> bool:
    """Whether two arguments share an element of memory: NumPy's exact answer where it is
    cheap (``b[::2]`` and ``b[1::2]`` interleave and share none: red-black sweeps, real
    and imaginary parts kept apart), else their bounds overlapping."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if not np.may_share_memory(a, b):
            return False
        try:
            return bool(np.shares_memory(a, b, max_work=10_000))
        except np.exceptions.TooHardError:
            return True
    if isinstance(a, _gpu_array.Array) and isinstance(b, _gpu_array.Array):
        return _gpu_array.may_share_memory(a, b)
    return a is b and a is not None


def _write_into(target: Any, value: Any) -> None:
    """Write an updated input's final value into the caller's array (nothing to do when the
    kernel wrote it there itself: ``Plan.in_place``)."""
    if value is target:
        return
    target = interleaved.pair_view(target)   # a complex argument: its real pair view
    if value is target:
        return
    if isinstance(target, np.ndarray):
        np.copyto(target, value.numpy() if hasattr(value, "numpy") else value,
                  casting="unsafe")
    elif isinstance(target, _gpu_array.Array):
        _gpu_array.write_into(target, value)
    # else a NumPy scalar: immutable, so NumPy's in-place operator rebinds the name


_MISSING = object()
_tracing = trace_context._local   # the per-thread stack of running traces
_DEVICE_ARRAY = _gpu_array.Array   # the call fast path keys device arrays by their type
# Globals whose *value* (not identity) the guards compare.
_VALUE_TYPES = (bool, int, float, complex, str, bytes, type(None), np.generic, tuple,
                frozenset)


# NumPy's global RandomState: the legacy np.random functions draw from it (np.random.seed seeds
# it), and so do their compiled versions, once per call.
_GLOBAL_RANDOM_STATE = np.random.mtrand._rand


def _random_key(source: Any) -> np.ndarray:
    """A fresh 64-bit key (a 0-d uint64 array) for a call's random draws, from a Generator
    passed in (advancing it by one 64-bit output), NumPy's global RandomState ("global") or
    the OS's entropy ("entropy")."""
    if isinstance(source, np.random.Generator):
        value = source.bit_generator.random_raw()
    elif source == "global":
        value = _GLOBAL_RANDOM_STATE.randint(0, 1 << 64, dtype=np.uint64)
    else:
        value = np.random.SeedSequence().generate_state(1, np.uint64)[0]
    return np.array(value, dtype=np.uint64)


def _as_input_array(value: Any) -> np.ndarray:
    """A NumPy array the kernels can address: native byte order, strides in whole elements."""
    if isinstance(value, _gpu_array.Array):   # GPU hook: device arrays stay on the device
        return value
    arr = np.asarray(value)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if any(s % arr.itemsize for s in arr.strides) or not arr.flags.aligned:
        arr = np.ascontiguousarray(arr)
    return arr


def _unhashable_in(value: Any) -> str:
    """The type of the first value in an argument's tree that cannot be hashed."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
        else:
            try:
                hash(v)
            except (TypeError, ValueError):
                return f"a {type(v).__name__}"
    return f"a {type(value).__name__}"


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        raise InputError(f"static argument {value!r} of type {type(value).__name__} is not "
                         f"hashable; static arguments are part of the cache key") from None
    return _static_key(value)


def _static_key(value: Any) -> Any:
    """Cache key of a static value (or of a pytree definition holding Python scalars): its
    type and value, recursively, floats by their bits. Plain equality aliased values that
    trace differently: ``1 == 1.0 == True`` (``int8 + 1`` is int8, ``int8 + 1.0`` float64 under
    NEP 50) and ``0.0 == -0.0`` (``x * -0.0`` flips signs), so a cached trace of one was
    reused for the other; and ``nan != nan`` never hit."""
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_static_key(v) for v in value))
    if type(value) is dict:   # (a guarded global dict: PARAMS = {k: v - lr * g[k] ...})
        return (dict, tuple((k, _static_key(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(_static_key(v) for v in value))
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return (type(value), np.asarray(value).tobytes())
    if isinstance(value, np.ndarray):
        # an array in a global tuple (PARAMS = tuple(p - lr * g for p in PARAMS)): its shape
        # and dtype; its values are read at every call through its path (trace/captured.py)
        return (np.ndarray, value.shape, value.dtype.str)
    return (type(value), value)


def _value_blind(tree: Any) -> Any:
    """A pytree definition with every constant's value replaced by its type (which kinds
    of nodes a tree has is ``pytree``'s; any other kind is kept whole)."""
    kind = tree[0]
    if kind == "const":
        return ("const", type(tree[1]))
    if kind in ("tuple", "list"):
        return (kind, tuple(_value_blind(c) for c in tree[1]))
    if kind == "dict":
        return (kind, tree[1], tuple(_value_blind(c) for c in tree[2]))
    return _hashable(tree)


class _RetraceCounter:
    """Counts new traces whose key differs from an earlier one's only in Python scalar
    values, and says when to warn (once). Bounded: at most ``KEEP`` value-blind keys."""

    KEEP = 256

    def __init__(self) -> None:
        self.traces_seen = 0      # the function's trace count when ``note`` last looked
        self.warned = False
        # value-blind key -> [new traces made for it, the last full key seen, positions that
        # changed between them]
        self._by_blind: OrderedDict[Any, list] = OrderedDict()

    def note(self, tkey: Any, blind: Any) -> tuple[int, ...] | None:
        """A new trace for ``tkey``; the key positions whose values changed when it is time
        to warn, else None."""
        if self.warned:
            return None
        entry = self._by_blind.get(blind)
        if entry is None:
            self._by_blind[blind] = [1, tkey, set()]
            if len(self._by_blind) > self.KEEP:
                self._by_blind.popitem(last=False)
            return None
        self._by_blind.move_to_end(blind)
        before, entry[1] = entry[1], tkey
        if before == tkey:   # the same key again: a global changed, or the LRU evicted it
            return None
        entry[0] += 1
        entry[2].update(i for i, (a, b) in enumerate(zip(before[0], tkey[0])) if a != b)
        if entry[0] < RETRACE_WARN_AFTER:
            return None
        self.warned = True
        self._by_blind.clear()
        return tuple(sorted(entry[2]))


def _positional_names(fn: Callable, n: int) -> list[str]:
    """Names of the first ``n`` positional parameters (``argument i`` where unknown)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"argument {i}" for i in range(n)]


def _kernel_prefix(fn: Callable) -> str:
    name = getattr(fn, "__name__", "fn")
    return "".join(c if c.isalnum() else "_" for c in name)[:40] + "_k"

