"""The CUDA driver through ``cuda.bindings.driver``, imported and initialised lazily.

Importing tracearray never touches CUDA. ``is_available()`` answers whether a GPU can be used
(cuda-bindings importable, ``cuInit`` succeeds, at least one device) and never raises;
``get_device()`` initialises the process-wide ``Device`` on first use (primary context of
device 0, one non-blocking stream) or raises ``GpuUnavailableError`` saying why.

Every driver call goes through ``Device.call``, which turns a failing ``CUresult`` into a
``CudaError`` naming the call, the error and what to do about the common ones.

A CUDA context does not survive ``fork``: the process that initialised the device is
recorded, and in a forked child ``get_device()`` and every ``Device.call`` raise
``GpuUnavailableError`` saying so (a driver call there could hang), while ``is_available()``
answers False, so ``device="auto"`` functions run on the CPU. A child of a process that never
used the GPU initialises its own.
"""
from __future__ import annotations

import copy
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import config, forksafe
from ..errors import TracearrayError

if TYPE_CHECKING:  # pragma: no cover
    from .ptx import GpuTarget
# (gpu/ptx.py is imported where it is used: asking whether a GPU is there, what a
# device="auto" function does on its first call, need not load the PTX toolchain's module)

INSTALL_HINT = "pip install 'tracearray[cuda]' (or: pip install cuda-python)"


class GpuUnavailableError(TracearrayError, RuntimeError):
    """No usable GPU: cuda-bindings missing, no driver, or no device."""


class CudaError(TracearrayError, RuntimeError):
    """A CUDA driver call failed."""

    def __init__(self, message: str, code: Any = None, name: str = ""):
        super().__init__(message)
        self.code = code
        self.name = name


_HINTS = {
    "CUDA_ERROR_OUT_OF_MEMORY": "the GPU is out of memory",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the driver is older than the PTX version; "
                                          "update the NVIDIA driver",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many registers or threads for this kernel",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel accessed memory out of bounds (a tracearray bug: "
                                  "please report it with the function that triggered it); the "
                                  "CUDA context is unusable until the process restarts",
}


def _import_driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver   # cuda-python < 12.6 layout
        except ImportError:
            raise GpuUnavailableError(
                f"tracearray's GPU backend needs NVIDIA's cuda-python bindings, which are not "
                f"installed; {INSTALL_HINT}") from None
    return driver


@dataclass
class Function:
    handle: Any
    name: str
    max_threads: int
    smem_allowed: int = 0   # dynamic shared memory its launches were allowed (allow_smem)


class Device:
    """Device 0: primary context, one stream, modules, launches, memory copies."""

    uses_cuda_libraries = True   # cuBLAS and friends can work on its stream (not emulators)

    def __init__(self, ordinal: int = 0):
        self.pid = os.getpid()   # the process whose CUDA context this is (see fork, above)
        self.cu = cu = _import_driver()
        self._lock = threading.RLock()
        forksafe.renew_at_fork(self, "_lock")
        try:
            self.call("cuInit", 0)
        except CudaError as e:
            raise GpuUnavailableError(f"the CUDA driver could not be initialised: {e}") from None
        except Exception as e:   # no libcuda.so: cuda.pathfinder raises, not a CUresult
            raise GpuUnavailableError(f"no CUDA driver on this machine ({e})") from None
        count = self.call("cuDeviceGetCount")
        if count <= ordinal:
            raise GpuUnavailableError(f"no CUDA device {ordinal} (the driver sees {count})")
        self.ordinal = ordinal
        self.dev = self.call("cuDeviceGet", ordinal)
        attr = cu.CUdevice_attribute
        self.cc = (self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.sm_count = self.attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_threads = self.attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.smem_optin = self.attribute(
            attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        name = self.call("cuDeviceGetName", 256, self.dev)
        self.name = name.split(b"\0")[0].decode(errors="replace") if isinstance(name, bytes) \
            else str(name)
        self.driver_version = self.call("cuDriverGetVersion")
        from .ptx import target_for
        self.target: GpuTarget = target_for(*self.cc, driver_version=self.driver_version)
        self.ctx = self.call("cuDevicePrimaryCtxRetain", self.dev)
        self.call("cuCtxSetCurrent", self.ctx)
        self._threads = {threading.get_ident()}
        self.stream = self.call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.stream_handle = int(self.stream)
        self._launch_kernel = cu.cuLaunchKernel
        self._success = cu.CUresult.CUDA_SUCCESS
        self._modules: dict[str, dict[str, Function]] = {}
        self.module_loads = 0   # observable: how many modules were loaded
        from .memory import CachingAllocator
        self.allocator = CachingAllocator(self)

    def __repr__(self) -> str:
        return f"<tracearray Device {self.ordinal}: {self.name}, sm_{self.cc[0]}{self.cc[1]}>"

    # -------------------------------------------------------------- errors
    def call(self, fname: str, *args: Any) -> Any:
        """``cu.<fname>(*args)``; raise CudaError unless it returns CUDA_SUCCESS."""
        if os.getpid() != self.pid:
            raise GpuUnavailableError(forked_message(self.pid))
        cu = self.cu
        ret = getattr(cu, fname)(*args)
        err, out = (ret[0], ret[1:]) if isinstance(ret, tuple) else (ret, ())
        if err != cu.CUresult.CUDA_SUCCESS:
            raise self.error(fname, err)
        if not out:
            return None
        return out[0] if len(out) == 1 else out

    def error(self, fname: str, err: Any) -> CudaError:
        cu = self.cu
        try:
            name = cu.cuGetErrorName(err)[1].decode()
            text = cu.cuGetErrorString(err)[1].decode()
        except Exception:   # noqa: BLE001 - the error itself is what matters
            name, text = str(err), ""
        hint = _HINTS.get(name)
        msg = f"{fname} failed: {name} ({text})" + (f"; {hint}" if hint else "")
        return CudaError(msg, err, name)

    def attribute(self, attr: Any) -> int:
        return int(self.call("cuDeviceGetAttribute", attr, self.dev))

    def make_current(self) -> None:
        """Make our context current in the calling thread (once per thread)."""
        ident = threading.get_ident()
        if ident not in self._threads:
            self.call("cuCtxSetCurrent", self.ctx)
            self._threads.add(ident)

    # -------------------------------------------------------------- memory
    def mem_alloc(self, nbytes: int) -> int:
        return int(self.call("cuMemAlloc", nbytes))

    def mem_free(self, ptr: int) -> None:
        self.call("cuMemFree", self.cu.CUdeviceptr(ptr))

    def htod(self, dst: int, src_addr: int, nbytes: int) -> None:
        """Host -> device on the stream (pageable host memory: staged before returning).
        (Staging small copies through a pinned buffer of our own was measured and not
        adopted: faster per copy, slower per call; benchmarks/gpu_staging.py.)"""
        if nbytes:
            self.call("cuMemcpyHtoDAsync", self.cu.CUdeviceptr(dst), src_addr, nbytes, self.stream)

    def dtoh(self, dst_addr: int, src: int, nbytes: int) -> None:
        """Device -> host, after everything queued on the stream; waits."""
        if nbytes:
            self.call("cuMemcpyDtoHAsync", dst_addr, self.cu.CUdeviceptr(src), nbytes, self.stream)
        self.synchronize()

    def dtod(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.call("cuMemcpyDtoDAsync", self.cu.CUdeviceptr(dst), self.cu.CUdeviceptr(src),
                      nbytes, self.stream)

    def memset_32(self, dst: int, pitch: int, width: int, height: int) -> None:
        """Zero ``width`` 32-bit words at each of ``height`` rows ``pitch`` bytes apart, on
        the stream (cuFFT's C2R operands: the imaginary parts it must not see)."""
        if width and height:
            self.call("cuMemsetD2D32Async", self.cu.CUdeviceptr(dst), pitch, 0, width, height,
                      self.stream)

    def synchronize(self) -> None:
        self.call("cuStreamSynchronize", self.stream)

    def wait_for_stream(self, other: int) -> None:
        """Make our stream wait for work queued so far on a foreign stream (handle)."""
        if other in (0, None) or other == self.stream_handle:
            return
        cu = self.cu
        ev = self.call("cuEventCreate", cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        try:
            self.call("cuEventRecord", ev, cu.CUstream(other))
            self.call("cuStreamWaitEvent", self.stream, ev, 0)
        finally:
            self.call("cuEventDestroy", ev)

    def make_stream_wait(self, other: int) -> None:
        """Make a foreign stream wait for the work queued so far on ours."""
        cu = self.cu
        ev = self.call("cuEventCreate", cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        try:
            self.call("cuEventRecord", ev, self.stream)
            self.call("cuStreamWaitEvent", cu.CUstream(other), ev, 0)
        finally:
            self.call("cuEventDestroy", ev)

    # -------------------------------------------------------------- code
    def load(self, ptx: str, names: list[str], ir: Any = None) -> dict[str, Function]:
        """Load a PTX module (cached by its text): as a cubin made by nvJitLink or ptxas when
        one of them is there, else through the driver's JIT, whose error log is reported.
        (``ir``, the LLVM IR the PTX came from or a function that makes it, is for emulated
        devices in tests; a device never generates it.)"""
        with self._lock:
            mod = self._modules.get(ptx)
            if mod is None:
                handle = self._load_image(ptx)
                mod = {}
                for n in names:
                    fn = self.call("cuModuleGetFunction", handle, n.encode())
                    mt = self.call("cuFuncGetAttribute", self.cu.CUfunction_attribute
                                   .CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn)
                    mod[n] = Function(fn, n, int(mt))
                self._modules[ptx] = mod
                self.module_loads += 1
            return mod

    def _load_image(self, ptx: str) -> Any:
        arch = f"sm_{self.cc[0]}{self.cc[1]}"
        mode = config.gpu_load_mode()   # auto | ptx | cubin
        if mode != "ptx":
            from .ptx import cubin_for
            cubin = cubin_for(ptx, arch)   # the disk cache, else nvJitLink or ptxas
            if cubin is not None:
                try:
                    return self.call("cuModuleLoadData", cubin)
                except CudaError:
                    if mode == "cubin":
                        raise
        return self._load_ptx(ptx)

    def _load_ptx(self, ptx: str) -> Any:
        cu = self.cu
        image = ptx.encode() + b"\0"
        log_size = 1 << 14
        log = bytearray(log_size)
        opts = [cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
                cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        try:
            ret = cu.cuModuleLoadDataEx(image, len(opts), opts, [log, log_size])
        except TypeError:   # bindings without the option-list form
            return self.call("cuModuleLoadData", image)
        err = ret[0]
        if err != cu.CUresult.CUDA_SUCCESS:
            e = self.error("cuModuleLoadDataEx", err)
            text = bytes(log).split(b"\0")[0].decode(errors="replace").strip()
            raise CudaError(f"{e}\nPTX JIT log:\n{text}" if text else str(e), err, e.name)
        return ret[1]

    def allow_smem(self, fn: Function, nbytes: int) -> None:
        """Let ``fn``'s launches take ``nbytes`` of dynamic shared memory (past 48 KB a
        kernel must opt in; block_row's two row buffers can)."""
        if nbytes > fn.smem_allowed:
            self.call("cuFuncSetAttribute", fn.handle, self.cu.CUfunction_attribute
                      .CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
            fn.smem_allowed = nbytes

    def launch(self, fn: Function, grid: int, block: int, args_addr: int, smem: int = 0) -> None:
        """Launch asynchronously on the stream; ``args_addr``: address of a ``void*[]``.

        The call path's one driver call per kernel, so it skips ``call``'s generality (the
        bound function and the success code are looked up once; the fork check is
        ``get_device``'s, which every call of a compiled function makes first)."""
        err = self._launch_kernel(fn.handle, grid, 1, 1, block, 1, 1, smem, self.stream,
                                  args_addr, 0)
        if (err[0] if isinstance(err, tuple) else err) != self._success:
            raise self.error("cuLaunchKernel", err[0] if isinstance(err, tuple) else err)


# ------------------------------------------------------------------------------------------
# Process-wide device
# ------------------------------------------------------------------------------------------

_device: Device | None = None
_device_pid = 0    # the process that made ``_device``
_device_error: Exception | None = None
_init_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_init_lock")


def forked_message(pid: int) -> str:
    return (f"the GPU was initialised in process {pid}, and this process ({os.getpid()}) is a "
            f"fork of it: a CUDA context does not survive fork. Start worker processes with "
            f"multiprocessing's 'spawn' or 'forkserver' method "
            f"(multiprocessing.get_context('spawn')), or use the GPU only in processes that "
            f"did not inherit it from their parent")


def get_device() -> Device:
    """The initialised device (first call initialises CUDA); GpuUnavailableError if none,
    or if this process is a fork of the one that initialised it."""
    global _device, _device_error, _device_pid
    device = _device
    if device is not None and not _forked:   # the warm path: no lock, no system call
        return device
    with _init_lock:
        if _device is not None and _device_pid != os.getpid():
            raise GpuUnavailableError(forked_message(_device_pid))
        if _device is None and _device_error is None:
            try:
                _device = Device(0)
                _device_pid = os.getpid()
            except GpuUnavailableError as e:
                _device_error = GpuUnavailableError(str(e))
            except Exception as e:   # noqa: BLE001 - report any initialisation failure
                _device_error = GpuUnavailableError(f"the GPU could not be initialised: {e}")
            # Kept without traceback or context: those would hold the first caller's frames.
        if _device is None:
            # A fresh exception per call: re-raising the stored one would chain every caller's
            # frames onto its __traceback__, and a module global would keep them (and the
            # arrays in them) alive - a leak on every call of a device="auto" function.
            raise copy.copy(_device_error)   # type: ignore[misc]
        return _device


def is_available() -> bool:
    """Whether a CUDA GPU can be used (never raises; after the first call a lookup)."""
    if config.gpu_disabled():
        return False
    if _device is not None:
        return _device_pid == os.getpid()   # a forked child cannot use its parent's context
    if _device_error is not None:
        return False
    try:
        get_device()
        return True
    except Exception:   # noqa: BLE001
        return False


_memo: tuple[Any, Any, bool] | None = None   # (_device, _device_error, answer)


def is_available_memo() -> bool:
    """``is_available()``, remembered while the driver's state (device, error) is the same
    object: what a warm call of a ``device="auto"`` function asks, with no environment read
    and no system call. So ``TRACEARRAY_DISABLE_GPU`` is read when a process first resolves
    "auto" (and again after the device changes, or in a forked child)."""
    global _memo
    memo = _memo
    if memo is not None and memo[0] is _device and memo[1] is _device_error:
        return memo[2]
    answer = is_available()
    _memo = (_device, _device_error, answer)
    return answer


_forked = False   # this process is a fork of one that had initialised the device


def _forget_memo_in_child() -> None:
    global _memo, _forked
    _memo = None   # the child cannot use the parent's context: ask again
    _forked = _forked or _device is not None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_memo_in_child)


def current_target() -> GpuTarget:
    """The device's target when a GPU is there, else the default (sm_90, PTX 8.0)."""
    if _device is not None:
        return _device.target
    from .ptx import DEFAULT_TARGET
    return get_device().target if is_available() else DEFAULT_TARGET


def smem_per_block_optin() -> int:
    """Shared memory a block may use once its kernel opts in (227 KB, an H200's, when there
    is no device)."""
    return getattr(_device, "smem_optin", 232448) if _device is not None else 232448


def device_name() -> str:
    """The device's name as its driver reports it ("" when there is none)."""
    return str(getattr(_device, "name", "")) if _device is not None else ""


def sm_count() -> int:
    """Multiprocessors of the device (132, an H200's, when there is none: launch shapes of
    kernels compiled without a GPU do not matter)."""
    return _device.sm_count if _device is not None else 132


def set_device_for_testing(device: Any) -> Any:
    """Install a device object (tests: a fake without a GPU); returns the previous one."""
    global _device, _device_error, _device_pid, _forked
    prev = _device
    _device, _device_error, _device_pid, _forked = device, None, os.getpid(), False
    return prev
