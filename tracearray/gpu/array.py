"""``tracearray.Array``: an array in GPU memory, and zero-copy exchange with other libraries.

An ``Array`` is a pointer, a shape, a NumPy dtype and byte strides, plus the object that owns
the memory (a cached ``memory.Block``, or a foreign array it views). It exports
``__cuda_array_interface__`` (version 3, with our stream) and ``__dlpack__`` /
``__dlpack_device__``, so CuPy, PyTorch, JAX and Numba take it without a copy; ``as_array``
turns their arrays into ``Array`` views the same way. Host data is produced only by
``.numpy()`` / ``np.asarray()``, which wait for the stream.

Nothing here initialises CUDA until a device array is created or read.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
from typing import Any

import numpy as np

from ..trace import pytree

KDL_CUDA = 2
# DLPack type codes (kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool): complex arrays are
# bound as their interleaved real pairs by the call path (interleaved.py)
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}


class Array:
    """A strided array in GPU memory: what a ``device="cuda"`` function returns for device
    inputs, and what it takes without a copy.

    ``ptr``, ``shape``, ``dtype`` (a NumPy dtype), ``strides`` (bytes), ``ndim``, ``size``,
    ``nbytes``. ``Array.from_numpy(a)`` copies host data to the GPU and ``.numpy()`` (or
    ``np.asarray(arr)``) copies it back, waiting for the GPU's work on it first; ``.copy()``
    is a device copy. ``__cuda_array_interface__`` (version 3) and ``__dlpack__`` hand the
    memory to CuPy, PyTorch, JAX or Numba without a copy (``torch.from_dlpack(arr)``,
    ``cupy.asarray(arr)``). Creating or reading one initialises CUDA; nothing else here does.
    """

    __array_priority__ = 100

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: Any,
                 strides: tuple[int, ...] | None = None, owner: Any = None, stream: int = 0):
        self.ptr = int(ptr)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(int(s) for s in strides) if strides is not None else \
            _c_strides(self.shape, self.dtype.itemsize)
        self._owner = owner
        self._stream = stream   # a foreign producer's stream (0: ours or none)
        self._size = math.prod(self.shape)
        self._sig = fast_signature(self.dtype, self.shape, self.strides)

    # -------------------------------------------------------------- construction
    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: Any) -> "Array":
        from .driver import get_device
        dev = get_device()
        dt = np.dtype(dtype)
        nbytes = math.prod(shape) * dt.itemsize
        block = dev.allocator.allocate(nbytes)
        return cls(block.ptr, shape, dt, None, block)

    @classmethod
    def _of_block(cls, block: Any, shape: tuple[int, ...], dtype: np.dtype,
                  strides: tuple[int, ...], size: int) -> "Array":
        """A C-contiguous array in a fresh block, from a layout worked out beforehand (the
        GPU call path's outputs: no conversions, about 0.3 us)."""
        a = cls.__new__(cls)
        a.ptr, a.shape, a.dtype, a.strides = block.ptr, shape, dtype, strides
        a._owner, a._stream, a._size = block, 0, size
        a._sig = fast_signature(dtype, shape, strides)
        return a

    @classmethod
    def from_numpy(cls, a: Any) -> "Array":
        """Copy a host array to the device (C-contiguous)."""
        from .driver import get_device
        host = np.require(np.asarray(a), requirements="C")   # (0-d stays 0-d)
        if not host.dtype.isnative:
            host = host.astype(host.dtype.newbyteorder("="))
        out = cls.empty(host.shape, host.dtype)
        get_device().htod(out.ptr, host.ctypes.data, host.nbytes)
        return out

    # -------------------------------------------------------------- properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        return self.size <= 1 or all(
            s == c for s, c, n in zip(self.strides, _c_strides(self.shape, self.itemsize),
                                      self.shape) if n != 1)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"tracearray.Array(shape={self.shape}, dtype={self.dtype})"

    # -------------------------------------------------------------- to the host
    def numpy(self) -> np.ndarray:
        """A host copy (waits for every queued kernel; raises the IndexError of a compiled
        call that found an index out of range)."""
        out = self._to_host()
        from .runtime import _PENDING, raise_pending_index_errors
        if _PENDING:
            raise_pending_index_errors()
        return out

    def _to_host(self) -> np.ndarray:
        from .driver import get_device
        dev = get_device()
        if self._stream:
            dev.wait_for_stream(self._stream)
        out = np.empty(self.shape, self.dtype)
        if self.size == 0:
            return out
        if self.is_c_contiguous:
            dev.dtoh(out.ctypes.data, self.ptr, self.nbytes)
            return out
        lo, hi = _extent(self.shape, self.strides, self.itemsize)
        raw = np.empty(hi - lo, np.uint8)
        dev.dtoh(raw.ctypes.data, self.ptr + lo, hi - lo)
        out[...] = np.ndarray(self.shape, self.dtype, raw, offset=-lo, strides=self.strides)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """NumPy 2's protocol: the data is in device memory, so every conversion copies it
        to the host (a fresh array, ``copy=True`` or not); ``copy=False`` asks for no copy
        and gets the ValueError NumPy specifies for a copy that cannot be avoided."""
        if copy is False:
            raise ValueError(
                f"tracearray.Array of shape {self.shape} is in GPU memory: a NumPy array of "
                f"it is always a copy to the host, which copy=False forbids; use "
                f"np.asarray(x) or x.numpy() (or keep it on the device)")
        a = self.numpy()
        return a.astype(dtype, copy=False) if dtype is not None else a

    def copy(self) -> "Array":
        """A C-contiguous device copy."""
        if not self.is_c_contiguous:
            return Array.from_numpy(self.numpy())
        from .driver import get_device
        out = Array.empty(self.shape, self.dtype)
        get_device().dtod(out.ptr, self.ptr, self.nbytes)
        return out

    # -------------------------------------------------------------- export
    @property
    def __cuda_array_interface__(self) -> dict:
        from .driver import get_device
        stream = get_device().stream_handle
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr if self.size else 0, False),
            "version": 3,
            "strides": None if self.is_c_contiguous else self.strides,
            "stream": stream if stream not in (0, 1, 2) else None,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        from .driver import get_device
        return (KDL_CUDA, get_device().ordinal)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        from .driver import get_device
        dev = get_device()
        if copy:
            return self.copy().__dlpack__(stream=stream)
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("tracearray.Array can only be exported to its own CUDA device")
        if stream is None or stream in (1, 2):
            dev.synchronize()         # the consumer works on a default stream
        elif stream != -1:
            dev.make_stream_wait(int(stream))
        return _dlpack_capsule(self, dev.ordinal)


def fast_signature(dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """What the call fast path keys an ``Array`` by (``api._fast_key``); None for complex
    values, which are bound as pair views."""
    return None if dtype.kind == "c" else (Array, dtype, shape, strides)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _extent(shape, strides, itemsize) -> tuple[int, int]:
    """Byte range [lo, hi) touched by a strided view, relative to its first element."""
    lo = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0 and n > 0)
    hi = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0 and n > 0) + itemsize
    return lo, hi


# ------------------------------------------------------------------------------------------
# Import: foreign device arrays as Array views (no copy)
# ------------------------------------------------------------------------------------------

def is_device_array(x: Any) -> bool:
    """A device array tracearray passes through without a copy."""
    if isinstance(x, Array):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return False
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and hasattr(x, "__dlpack__"):
        try:
            return dev()[0] == KDL_CUDA
        except Exception:   # noqa: BLE001
            return False
    return False


def as_array(x: Any) -> Array:
    """An Array viewing a CuPy / PyTorch / JAX / Numba device array (no copy)."""
    if isinstance(x, Array):
        return x
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        raise TypeError(f"tracearray.gpu.as_array views device memory without copying; a "
                        f"{type(x).__name__} lives in host memory: copy it to the GPU with "
                        f"tracearray.gpu.to_device(x)")
    cai = None
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        pass
    except Exception:   # noqa: BLE001 - e.g. torch tensors that need grad: try DLPack
        cai = None
    if cai is not None:
        return _from_cai(x, cai)
    return _from_dlpack(x)


def _from_cai(x: Any, cai: dict) -> Array:
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    if cai.get("mask") is not None:
        raise TypeError("masked __cuda_array_interface__ arrays are not supported")
    ptr = cai["data"][0] or 0
    strides = cai.get("strides")
    _check_alignment(type(x).__name__, ptr, dtype, strides)
    # The producer's stream (1, 2: the legacy / per-thread default streams): our stream
    # waits for it before a kernel reads the array (an event, no host synchronisation).
    stream = cai.get("stream") or 0
    return Array(ptr, shape, dtype, tuple(strides) if strides is not None else None, owner=x,
                 stream=int(stream))


def _check_alignment(what: str, ptr: int, dtype: np.dtype, strides: Any) -> None:
    """Kernels load whole elements: addresses and strides must be multiples of the size."""
    size = dtype.itemsize
    if ptr % size or (strides is not None and any(s % size for s in strides)):
        from ..errors import InputError
        raise InputError(f"a {what} device array whose address or strides are not multiples "
                         f"of its element size ({size} bytes) cannot be read by tracearray's "
                         f"kernels; pass a contiguous copy")


# DLPack structures (the unversioned ABI, which every consumer and producer supports).
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_capsule_get_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))

_exported: dict[int, tuple] = {}   # DLManagedTensor address -> what must stay alive


def _exported_deleter(addr: int) -> None:
    _exported.pop(addr, None)


_deleter = _DELETER(_exported_deleter)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # Unconsumed capsule (still named "dltensor"): we own the tensor, delete it.
    if _capsule_is_valid_raw(capsule, b"dltensor"):
        addr = _capsule_get_raw(capsule, b"dltensor")
        if addr:
            _exported_deleter(addr)


def _dlpack_capsule(arr: Array, device_id: int) -> Any:
    nd = arr.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*(s // arr.itemsize for s in arr.strides))
    mt = _DLManagedTensor()
    t = mt.dl_tensor
    t.data = arr.ptr or None
    t.device = _DLDevice(KDL_CUDA, device_id)
    t.ndim = nd
    t.dtype = _DLDataType(_DL_CODES[arr.dtype.kind], 8 * arr.itemsize, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    mt.manager_ctx = None
    mt.deleter = _deleter
    addr = ctypes.addressof(mt)
    _exported[addr] = (arr, mt, shape, strides)
    return _capsule_new(addr, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class _ImportedDLPack:
    """Owns a consumed DLManagedTensor: calls its deleter when the last view goes away."""

    def __init__(self, addr: int, source: Any):
        self.addr, self.source = addr, source

    def __del__(self) -> None:
        mt = _DLManagedTensor.from_address(self.addr)
        if mt.deleter:
            mt.deleter(self.addr)


def _from_dlpack(x: Any) -> Array:
    from .driver import get_device
    dev = get_device()
    try:
        capsule = x.__dlpack__(stream=dev.stream_handle)
    except TypeError:
        capsule = x.__dlpack__()
    addr = _capsule_get(capsule, b"dltensor")
    if not addr:
        raise TypeError(f"{type(x).__name__}.__dlpack__ returned no DLPack tensor")
    _capsule_set_name(capsule, b"used_dltensor")
    mt = _DLManagedTensor.from_address(addr)
    t = mt.dl_tensor
    if t.device.device_type != KDL_CUDA:
        raise TypeError(f"{type(x).__name__} is not in CUDA memory (DLPack device "
                        f"{t.device.device_type})")
    kind = _DL_KINDS.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        raise TypeError(f"unsupported DLPack dtype code {t.dtype.code} bits {t.dtype.bits}")
    dtype = np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{t.dtype.bits // 8}")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None
    if t.strides:
        strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    _check_alignment(type(x).__name__, (t.data or 0) + t.byte_offset, dtype, strides)
    owner = _ImportedDLPack(addr, x)
    return Array((t.data or 0) + t.byte_offset, shape, dtype, strides, owner=owner)


def to_device(a: Any) -> Array:
    """A device copy of a host array (or the same Array / a view of a device array)."""
    if is_device_array(a):
        return as_array(a)
    return Array.from_numpy(a)


__all__ = ["Array", "as_array", "is_device_array", "to_device"]


# ------------------------------------------------------------------------------------------
# Arguments of a compiled function
# ------------------------------------------------------------------------------------------

_PLAIN = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None))


def _adopt(v: Any) -> Any:
    if isinstance(v, _PLAIN) or isinstance(v, Array):
        return v
    if isinstance(v, (tuple, list)):
        new = [_adopt(c) for c in v]
        if all(a is b for a, b in zip(new, v)):
            return v
        return type(v)(*new) if hasattr(type(v), "_fields") else type(v)(new)   # namedtuple
    if isinstance(v, dict):
        new = {k: _adopt(c) for k, c in v.items()}
        return v if all(new[k] is v[k] for k in v) else new
    if pytree.is_dataclass_instance(v):
        old = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
        new = {k: _adopt(c) for k, c in old.items()}
        return v if all(new[k] is old[k] for k in old) else \
            pytree.make_dataclass_instance(type(v), new)
    return as_array(v) if is_device_array(v) else v


def adopt_device_arrays(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments with every foreign device array (CuPy, PyTorch, JAX, Numba) replaced by
    an ``Array`` view of the same memory (the containers are rebuilt only where needed)."""
    new_args = _adopt(args)
    new_kwargs = _adopt(kwargs) if kwargs else kwargs
    return new_args, new_kwargs


def to_host(a: Any) -> Any:
    """NumPy data for the CPU backend (a copy of a device array)."""
    return a.numpy() if isinstance(a, Array) else a


def may_share_memory(a: Array, b: Array) -> bool:
    """Whether the byte ranges two device arrays span overlap."""
    if a.size == 0 or b.size == 0:
        return False
    lo_a, hi_a = _extent(a.shape, a.strides, a.itemsize)
    lo_b, hi_b = _extent(b.shape, b.strides, b.itemsize)
    return a.ptr + lo_a < b.ptr + hi_b and b.ptr + lo_b < a.ptr + hi_a


def write_into(target: Array, value: Any) -> None:
    """Copy ``value`` (a device Array or host data of target's shape) into ``target``'s
    memory: an in-place update of a device array argument, written on the device. A
    non-contiguous target (a reversed, sliced or transposed view) is written through its
    strides by a scatter kernel (``gpu/copy.py``); one whose elements overlap each other
    (a zero stride) is refused, as its final values would depend on the order of writes."""
    from .driver import get_device
    from ..errors import UnsupportedOperationError
    if target.size == 0:
        return
    if isinstance(value, Array) and value.ptr == target.ptr and value.dtype == target.dtype \
            and value.shape == target.shape and value.strides == target.strides:
        return   # the kernel wrote it there (an in-place update: GpuExecutable.in_place)
    dev = get_device()
    if target.is_c_contiguous:
        if isinstance(value, Array):
            src = value if value.is_c_contiguous and value.dtype == target.dtype else \
                Array.from_numpy(value.numpy().astype(target.dtype))
            dev.dtod(target.ptr, src.ptr, target.nbytes)
        else:
            host = np.ascontiguousarray(np.asarray(value), dtype=target.dtype)
            dev.htod(target.ptr, host.ctypes.data, host.nbytes)
        return
    item = target.itemsize
    if any(st % item for st in target.strides):
        raise UnsupportedOperationError(
            f"the compiled function writes into a device array argument whose strides "
            f"{target.strides} (bytes) are not multiples of its item size {item}: pass an "
            f"aligned array")
    if _self_overlapping(target):
        raise UnsupportedOperationError(
            f"the compiled function writes into a device array argument whose elements may "
            f"overlap in memory (shape {target.shape}, strides {target.strides} bytes): the "
            f"values NumPy would leave there depend on the order of its writes; pass an "
            f"array whose elements are distinct")
    if isinstance(value, Array) and value.is_c_contiguous and value.dtype == target.dtype \
            and not may_share_memory(value, target):
        src = value
    else:   # host data, another dtype or layout, or memory the scatter would overwrite
        host = value.numpy() if isinstance(value, Array) else np.asarray(value)
        src = Array.from_numpy(np.ascontiguousarray(host, dtype=target.dtype))
    from .copy import strided_copy
    strided_copy(dev, target.ptr, src.ptr, target.shape,
                 tuple(st // item for st in target.strides), 0, item, scatter=True)
    # (src stays alive until here: the stream orders the copy before any reuse of its block)


def _self_overlapping(a: Array) -> bool:
    """Whether two elements of ``a`` may share memory: sufficient for distinct elements is
    that each axis (by increasing stride) steps past everything the axes before it span."""
    if 0 in a.shape:   # (no elements: NumPy gives an empty array's axes any strides)
        return False
    span = a.itemsize
    for st, n in sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n > 1):
        if st < span:
            return True
        span += st * (n - 1)
    return False
