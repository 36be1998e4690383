"""A SIMT emulator for tracearray's GPU kernels, so their logic is tested without a GPU.

``EmulatedDevice`` implements the interface of ``tracearray.gpu.driver.Device`` with host
memory (poisoned with 0xCD bytes, so unwritten outputs show up). A "module load" takes the
kernel's LLVM IR (the same IR that became PTX), rewrites it for the host — address spaces
dropped, ``ptx_kernel`` removed, libdevice ``__nv_expf`` -> libm ``expf``, and the NVVM
intrinsics (special registers, ``barrier``, ``shfl.sync``) turned into calls to Python — and
JIT-compiles it with llvmlite. A launch runs every block of the grid in turn, each with one
OS thread per GPU thread: barriers are ``threading.Barrier``s (with a timeout, so a barrier
some threads skip fails the test instead of hanging), shuffles exchange values through a
per-warp slot array between two warp barriers.

Kernels without barriers (grid-stride loops: map, thread-per-row, scan, gather) run as one
thread of one block, which covers their whole range; ``EmulatedDevice(reverse_threads=True)``
instead runs them as two blocks of 32 threads, one thread after another from the last to
the first, so a kernel whose result depends on which thread writes first (plain stores
racing for one element) gives a different answer than in the forward order. Block reductions run with two warps per
block (so both the shuffle tree and the cross-warp shared-memory stage are exercised), and
at most four blocks, except the first stage of a full reduction, whose grid is the number of
partial results.
"""
from __future__ import annotations

import ctypes
import re
import threading
from typing import Any

import numpy as np

from tracearray.gpu.driver import CudaError
from tracearray.gpu.memory import CachingAllocator
from tracearray.gpu.ptx import DEFAULT_TARGET

_tls = threading.local()
_dynamic_smem: dict[str, Any] = {}


# Barriers, shuffles and the special registers run natively (``_NATIVE_IR``, compiled once
# per process): a block's threads meet at a futex barrier with no Python and no GIL between
# them (a Python ``threading.Barrier`` of 64 threads took 2.2 ms a round, and the block
# sorts and scans of the tests meet at thousands). Each thread's state (its registers, its
# block, an error flag) is found through a pthread key that ``_enter`` sets before the
# kernel runs. A block's state is 32-bit words: its barrier (arrivals, generation, threads,
# broken, seconds to wait), a barrier per warp, and a slot per thread for the shuffles'
# exchanges. A barrier some threads never reach (a kernel's divergent barrier, or a thread
# that failed) breaks after ``_BARRIER_TIMEOUT_S``, or within a second once a failed thread
# marks its block broken: the waiting threads return with their error flag set and the
# launch raises instead of hanging.
_MAX_WARPS = 32
_WARP_BARRIERS = 8                      # words: the block barrier's, then each warp's
_SLOTS = _WARP_BARRIERS + 4 * _MAX_WARPS
_BLOCK_WORDS = _SLOTS + 32 * _MAX_WARPS
_THREAD_WORDS = 8                       # tid, ntid, ctaid, nctaid, block (i64), error, pad
_BARRIER_TIMEOUT_S = 60
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}


class _BlockState:
    def __init__(self, ntid: int):
        self.words = (ctypes.c_int32 * _BLOCK_WORDS)()
        self.words[2] = ntid
        self.words[4] = _BARRIER_TIMEOUT_S
        for w in range(ntid // 32):
            self.words[_WARP_BARRIERS + 4 * w + 2] = 32

    def abort(self) -> None:
        """Break the block's barriers: its waiting threads return within a second."""
        self.words[3] = 1


_NATIVE_IR = r"""
declare ptr @pthread_getspecific(i32)
declare i64 @syscall(i64, ...)
@timeout = internal constant {{ i64, i64 }} {{ i64 1, i64 0 }}

define internal ptr @me() {{
  %p = call ptr @pthread_getspecific(i32 {key})
  ret ptr %p
}}

define i32 @emu_sreg(i32 %which) {{
  %t = call ptr @me()
  %a = getelementptr i32, ptr %t, i32 %which
  %v = load i32, ptr %a
  ret i32 %v
}}

define internal ptr @block(ptr %t) {{
  %a = getelementptr i32, ptr %t, i32 4
  %b = load ptr, ptr %a
  ret ptr %b
}}

; the barrier of words bar[0..2] (arrivals, generation, threads) of a block
define internal void @meet(ptr %bar, ptr %t) {{
entry:
  %blk = call ptr @block(ptr %t)
  %broken = getelementptr i32, ptr %blk, i32 3
  %genp = getelementptr i32, ptr %bar, i32 1
  %totp = getelementptr i32, ptr %bar, i32 2
  %gen = load atomic i32, ptr %genp acquire, align 4
  %old = atomicrmw add ptr %bar, i32 1 acq_rel
  %n = add i32 %old, 1
  %tot = load i32, ptr %totp
  %last = icmp eq i32 %n, %tot
  br i1 %last, label %release, label %wait
release:
  store atomic i32 0, ptr %bar monotonic, align 4
  %next = add i32 %gen, 1
  store atomic i32 %next, ptr %genp release, align 4
  %w = call i64 (i64, ...) @syscall(i64 {futex}, ptr %genp, i32 129, i32 2147483647, ptr null, ptr null, i32 0)
  ret void
wait:
  %i = phi i32 [ 0, %entry ], [ %i1, %slept ]
  %cur = load atomic i32, ptr %genp acquire, align 4
  %moved = icmp ne i32 %cur, %gen
  br i1 %moved, label %done, label %check
check:
  %b = load atomic i32, ptr %broken acquire, align 4
  %isb = icmp ne i32 %b, 0
  %limitp = getelementptr i32, ptr %blk, i32 4
  %limit = load i32, ptr %limitp
  %late = icmp uge i32 %i, %limit
  %stop = or i1 %isb, %late
  br i1 %stop, label %fail, label %sleep
sleep:
  %r = call i64 (i64, ...) @syscall(i64 {futex}, ptr %genp, i32 128, i32 %gen, ptr @timeout, ptr null, i32 0)
  %i1 = add i32 %i, 1
  br label %slept
slept:
  br label %wait
fail:
  store atomic i32 1, ptr %broken release, align 4
  %err = getelementptr i32, ptr %t, i32 6
  store i32 1, ptr %err
  ret void
done:
  ret void
}}

define void @emu_barrier(i32 %id) {{
  %t = call ptr @me()
  %blk = call ptr @block(ptr %t)
  call void @meet(ptr %blk, ptr %t)
  ret void
}}

; this thread's warp's part of the block's words: ``words`` a warp, from word ``offset``
define internal ptr @warp_part(ptr %t, i32 %words, i32 %offset) {{
  %tid = load i32, ptr %t
  %w = lshr i32 %tid, 5
  %blk = call ptr @block(ptr %t)
  %k = mul i32 %w, %words
  %o = add i32 %k, %offset
  %p = getelementptr i32, ptr %blk, i32 %o
  ret ptr %p
}}

; a warp's exchange: each lane writes its value, the warp meets, each reads lane %src's
define internal i32 @exchange(i32 %v, i32 %src) {{
  %t = call ptr @me()
  %tid = load i32, ptr %t
  %lane = and i32 %tid, 31
  %s = call ptr @warp_part(ptr %t, i32 32, i32 {slots})
  %mine = getelementptr i32, ptr %s, i32 %lane
  store i32 %v, ptr %mine
  %bar = call ptr @warp_part(ptr %t, i32 4, i32 {warp_barriers})
  call void @meet(ptr %bar, ptr %t)
  %theirs = getelementptr i32, ptr %s, i32 %src
  %out = load i32, ptr %theirs
  call void @meet(ptr %bar, ptr %t)
  ret i32 %out
}}

define i32 @emu_shfl_down(i32 %mask, i32 %v, i32 %off, i32 %c) {{
  %t = call ptr @me()
  %tid = load i32, ptr %t
  %lane = and i32 %tid, 31
  %up = add i32 %lane, %off
  %in = icmp ule i32 %up, 31
  %src = select i1 %in, i32 %up, i32 %lane
  %out = call i32 @exchange(i32 %v, i32 %src)
  ret i32 %out
}}

define i32 @emu_shfl_idx(i32 %mask, i32 %v, i32 %lane, i32 %c) {{
  %src = and i32 %lane, 31
  %out = call i32 @exchange(i32 %v, i32 %src)
  ret i32 %out
}}

define void @emu_shfl_syncwarp(i32 %mask) {{
  %t = call ptr @me()
  %bar = call ptr @warp_part(ptr %t, i32 4, i32 {warp_barriers})
  call void @meet(ptr %bar, ptr %t)
  ret void
}}

; match.any.sync.b32: the lanes whose value equals this lane's
define i32 @emu_shfl_match_any(i32 %mask, i32 %v) {{
entry:
  %t = call ptr @me()
  %tid = load i32, ptr %t
  %lane = and i32 %tid, 31
  %s = call ptr @warp_part(ptr %t, i32 32, i32 {slots})
  %mine = getelementptr i32, ptr %s, i32 %lane
  store i32 %v, ptr %mine
  %bar = call ptr @warp_part(ptr %t, i32 4, i32 {warp_barriers})
  call void @meet(ptr %bar, ptr %t)
  br label %loop
loop:
  %j = phi i32 [ 0, %entry ], [ %j1, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %acc1, %loop ]
  %p = getelementptr i32, ptr %s, i32 %j
  %x = load i32, ptr %p
  %eq = icmp eq i32 %x, %v
  %bit = shl i32 1, %j
  %add = select i1 %eq, i32 %bit, i32 0
  %acc1 = or i32 %acc, %add
  %j1 = add i32 %j, 1
  %more = icmp ult i32 %j1, 32
  br i1 %more, label %loop, label %out
out:
  call void @meet(ptr %bar, ptr %t)
  ret i32 %acc1
}}
"""

_libc = ctypes.CDLL(None, use_errno=True)
_thread_key = ctypes.c_uint(0)


def _native_functions(llvm) -> dict[str, int]:
    """Compile ``_NATIVE_IR`` (once) and return its entry points' addresses."""
    import platform
    machine = platform.machine()
    if machine not in _SYS_FUTEX:
        raise RuntimeError(f"the GPU emulator's barriers need Linux on x86-64 or AArch64, "
                           f"not {machine}")
    if _libc.pthread_key_create(ctypes.byref(_thread_key), None) != 0:
        raise RuntimeError("pthread_key_create failed")
    llvm.add_symbol("pthread_getspecific",
                    ctypes.cast(_libc.pthread_getspecific, ctypes.c_void_p).value)
    llvm.add_symbol("syscall", ctypes.cast(_libc.syscall, ctypes.c_void_p).value)
    text = _NATIVE_IR.format(key=_thread_key.value, futex=_SYS_FUTEX[machine],
                             warp_barriers=_WARP_BARRIERS, slots=_SLOTS)
    m = llvm.parse_assembly(text)
    m.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, jit=True)
    ee = llvm.create_mcjit_compiler(m, tm)
    ee.finalize_object()
    _llvm_state["native"] = ee
    return {name: ee.get_function_address(name)
            for name in ("emu_sreg", "emu_barrier", "emu_shfl_down", "emu_shfl_idx",
                         "emu_shfl_syncwarp", "emu_shfl_match_any")}


_libc.pthread_setspecific.argtypes = [ctypes.c_uint, ctypes.c_void_p]


def _enter(tid: int, ntid: int, ctaid: int, nctaid: int, block: _BlockState | None
           ) -> ctypes.Array:
    """This OS thread's registers and block, for the native functions and for the Python
    callbacks (cp.async); the caller keeps the returned words alive while the kernel runs."""
    _tls.tid, _tls.ntid, _tls.ctaid, _tls.nctaid = tid, ntid, ctaid, nctaid
    _tls.block = block
    _tls.errors = []
    _tls.copies = None      # cp.async's pending copies (_copies)
    words = (ctypes.c_int32 * _THREAD_WORDS)(tid, ntid, ctaid, nctaid)
    if block is not None:
        ctypes.c_uint64.from_address(ctypes.addressof(words) + 16).value = \
            ctypes.addressof(block.words)
    _libc.pthread_setspecific(_thread_key.value, ctypes.addressof(words))
    return words


# cp.async: a copy is made only when the thread waits for it (cp.async.wait.group/all), as
# late as the GPU may make it, so a read of the row cache that does not wait for its copies
# reads what the buffer held before (an earlier row, or the poison bytes) and fails a test.
def _copies() -> tuple[list, list]:
    if getattr(_tls, "copies", None) is None:
        _tls.copies, _tls.groups = [], []     # this thread's uncommitted copies; its groups
    return _tls.copies, _tls.groups


def _cp_async(n: int):
    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
    def copy(dst: int, src: int) -> None:
        _copies()[0].append((dst, src, n))
    return copy


_emu_cp_async = {n: _cp_async(n) for n in (4, 8, 16)}


def _complete(copies: list) -> None:
    for dst, src, n in copies:
        ctypes.memmove(dst, src, n)


@ctypes.CFUNCTYPE(None)
def _emu_cp_async_commit() -> None:
    copies, groups = _copies()
    groups.append(list(copies))
    copies.clear()


@ctypes.CFUNCTYPE(None, ctypes.c_int32)
def _emu_cp_async_wait_group(pending: int) -> None:
    _copies()
    groups = _tls.groups
    done = len(groups) - pending
    for g in groups[:max(done, 0)]:
        _complete(g)
    del groups[:max(done, 0)]


@ctypes.CFUNCTYPE(None)
def _emu_cp_async_wait_all() -> None:
    copies, groups = _copies()
    for g in groups + [copies]:
        _complete(g)
    groups.clear()
    copies.clear()


_SREG = {"tid.x": 0, "ntid.x": 1, "ctaid.x": 2, "nctaid.x": 3}
_llvm_lock = threading.Lock()
_llvm_state: dict = {}


def _llvm():
    if not _llvm_state:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for name, address in _native_functions(llvm).items():
            llvm.add_symbol(name, address)
        for name, cb in (("emu_cp_async_commit", _emu_cp_async_commit),
                         ("emu_cp_async_wait_group", _emu_cp_async_wait_group),
                         ("emu_cp_async_wait_all", _emu_cp_async_wait_all),
                         *((f"emu_cp_async_{n}", f) for n, f in _emu_cp_async.items())):
            llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
        llvm.add_symbol("emu_misaligned", ctypes.addressof(_misaligned))
        _llvm_state["llvm"] = llvm
        _llvm_state["engines"] = []
    return _llvm_state["llvm"]


# Misaligned shared-memory accesses: a GPU faults (CUDA_ERROR_MISALIGNED_ADDRESS, and the
# context is lost); a host does not. Every load and store of shared memory (addrspace 3)
# whose alignment is 2 or more ORs the address's low bits into this word (an atomic OR: no
# branch, so the blocks of the kernel's IR stay as they are), and ``launch`` raises what the
# GPU would when it is not zero. (Global memory's vector accesses are guarded by the
# kernels' own alignment test; shared memory's are laid out by the kernel: a row cache's
# parts of mixed item sizes once began at odd addresses, found by a GPU soak.)
_misaligned = ctypes.c_uint64(0)
_SMEM_ACCESS = re.compile(r'^(\s+)(?:%\S+ = load |store ).*?, ([^,]+?) addrspace\(3\)\* '
                          r'(%"[^"]+"|%[\w.$]+)(?:, align (\d+))?', re.M)
_NATURAL = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "float": 4, "double": 8}


def _natural_alignment(ty: str) -> int:
    """The ABI alignment of an access of type ``ty`` (what an access without ``align``
    has): a scalar's size, a vector's whole size; 1 when unknown (not checked)."""
    m = re.fullmatch(r"<(\d+) x (\w+)>", ty.strip())
    if m:
        return int(m.group(1)) * _NATURAL.get(m.group(2), 0) or 1
    return _NATURAL.get(ty.strip(), 1)


def _check_alignment(t: str) -> str:
    n = [0]

    def check(m: re.Match) -> str:
        indent, ty, ptr = m.group(1), m.group(2), m.group(3)
        align = int(m.group(4)) if m.group(4) else _natural_alignment(ty)
        if align < 2:
            return m.group(0)
        n[0] += 1
        k = n[0]
        return (f'{indent}%"emu.al.{k}" = ptrtoint {ty} addrspace(3)* {ptr} to i64\n'
                f'{indent}%"emu.am.{k}" = and i64 %"emu.al.{k}", {align - 1}\n'
                f'{indent}%"emu.ao.{k}" = atomicrmw or i64* @"emu_misaligned", '
                f'i64 %"emu.am.{k}" monotonic\n' + m.group(0))
    t = _SMEM_ACCESS.sub(check, t)
    if n[0]:
        t += '\n@"emu_misaligned" = external global i64\n'
    return t


# Inline PTX (gpu/codegen.py ``_Nvvm``: L2 eviction policies, loads and stores under them):
# each call becomes a call of a host function of the same signature that does what the
# instruction does to memory (a policy is only a hint: 0 here).
_ASM_CALL = re.compile(r'call (?P<ret>[^"]+?) asm (?:sideeffect )?"(?P<text>[^"]*)", '
                       r'"[^"]*"\(')
_ASM_FORMS = (
    (re.compile(r"createpolicy\.fractional\.L2::evict_(first|last)\.b64 "), "policy"),
    (re.compile(r"ld\.global\.L2::cache_hint(?:\.v(\d))?\.b32 "), "load"),
    (re.compile(r"st\.global\.L2::cache_hint(?:\.v(\d))?\.b32 "), "store"),
)


def _asm_helper(name: str, text: str) -> str:
    """The host definition of ``@name`` doing what the inline PTX ``text`` does."""
    for pattern, form in _ASM_FORMS:
        m = pattern.match(text)
        if m is None:
            continue
        if form == "policy":
            return f'define internal i64 @"{name}"() {{\n  ret i64 0\n}}\n'
        words = int(m.group(1) or 1)
        vty = f"<{words} x i32>"
        lines = [f"  %q = inttoptr i64 %p to {vty}*"]
        if form == "load":
            sty = "{" + ", ".join(["i32"] * words) + "}" if words > 1 else "i32"
            lines.append(f"  %v = load {vty}, {vty}* %q, align 4")
            if words == 1:
                lines.append("  %r = extractelement <1 x i32> %v, i32 0")
            else:
                prev = "undef"
                for i in range(words):
                    lines.append(f"  %e{i} = extractelement {vty} %v, i32 {i}")
                    lines.append(f"  %s{i} = insertvalue {sty} {prev}, i32 %e{i}, {i}")
                    prev = f"%s{i}"
                lines[-1] = lines[-1].replace(f"%s{words - 1} =", "%r =")
            return (f'define internal {sty} @"{name}"(i64 %p, i64 %c) {{\n'
                    + "\n".join(lines) + f"\n  ret {sty} %r\n}}\n")
        params = ", ".join(f"i32 %w{i}" for i in range(words))
        prev = "undef"
        for i in range(words):
            lines.append(f"  %v{i} = insertelement {vty} {prev}, i32 %w{i}, i32 {i}")
            prev = f"%v{i}"
        lines.append(f"  store {vty} {prev}, {vty}* %q, align 4")
        return (f'define internal void @"{name}"(i64 %p, {params}, i64 %c) {{\n'
                + "\n".join(lines) + "\n  ret void\n}\n")
    raise NotImplementedError(f"the GPU emulator does not know the inline PTX {text!r}")


def _host_asm(t: str) -> str:
    helpers: dict[str, str] = {}

    def call(m: re.Match) -> str:
        text = m.group("text")
        if text not in helpers:
            helpers[text] = f"emu_asm_{len(helpers)}"
        return f'call {m.group("ret")} @"{helpers[text]}"('
    t = _ASM_CALL.sub(call, t)
    return t + "".join("\n" + _asm_helper(name, text) for text, name in helpers.items())


def host_ir(ir_text: str) -> str:
    """The GPU kernel's IR rewritten to run on the host under the emulator."""
    t = _host_asm(_check_alignment(ir_text))
    t = re.sub(r"^declare [^\n]*@\"?llvm\.nvvm\.[^\n]*$", "", t, flags=re.M)
    for reg, k in _SREG.items():
        t = t.replace(f'@"llvm.nvvm.read.ptx.sreg.{reg}"()', f'@"emu_sreg"(i32 {k})')
    t = t.replace('@"llvm.nvvm.barrier.cta.sync.aligned.all"', '@"emu_barrier"')
    t = t.replace('@"llvm.nvvm.shfl.sync.down.i32"', '@"emu_shfl_down"')
    t = t.replace('@"llvm.nvvm.shfl.sync.idx.i32"', '@"emu_shfl_idx"')
    t = t.replace('@"llvm.nvvm.bar.warp.sync"', '@"emu_shfl_syncwarp"')
    t = t.replace('@"llvm.nvvm.match.any.sync.i32"', '@"emu_shfl_match_any"')
    t = t.replace(" addrspace(1)", "").replace(" addrspace(3)", "")
    t = t.replace("addrspacecast", "bitcast")    # (one address space here)
    # cp.async (global -> shared, asynchronous on the GPU): made at the thread's wait
    for kind, n in (("cg", 16), ("ca", 16), ("ca", 8), ("ca", 4)):
        t = t.replace(f'@"llvm.nvvm.cp.async.{kind}.shared.global.{n}"', f'@"emu_cp_async_{n}"')
    t = t.replace('@"llvm.nvvm.cp.async.wait.all"', '@"emu_cp_async_wait_all"')
    t = t.replace('@"llvm.nvvm.cp.async.commit.group"', '@"emu_cp_async_commit"')
    t = t.replace('@"llvm.nvvm.cp.async.wait.group"', '@"emu_cp_async_wait_group"')
    t = t.replace("define ptx_kernel ", "define ")
    t = re.sub(r'@"__nv_(\w+)"', r'@"\1"', t)
    t += ('\ndeclare i32 @"emu_sreg"(i32)\ndeclare void @"emu_barrier"(i32)\n'
          'declare i32 @"emu_shfl_down"(i32, i32, i32, i32)\n'
          'declare i32 @"emu_shfl_idx"(i32, i32, i32, i32)\n'
          'declare void @"emu_shfl_syncwarp"(i32)\n'
          'declare i32 @"emu_shfl_match_any"(i32, i32)\n'
          'declare void @"emu_cp_async_4"(i8*, i8*)\ndeclare void @"emu_cp_async_8"(i8*, i8*)\n'
          'declare void @"emu_cp_async_16"(i8*, i8*)\ndeclare void @"emu_cp_async_commit"()\n'
          'declare void @"emu_cp_async_wait_group"(i32)\n'
          'declare void @"emu_cp_async_wait_all"()\n')
    return t


class EmuFunction:
    def __init__(self, name: str, address: int, nargs: int, barriers: bool, matmul: bool,
                 stage1: bool):
        self.name, self.nargs = name, nargs
        self.cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_uint64] * nargs))(address)
        self.barriers, self.matmul, self.stage1 = barriers, matmul, stage1
        self.max_threads = 1024
        self.smem_allowed = 0


class EmulatedDevice:
    """Stands in for ``tracearray.gpu.driver.Device`` (see the module docstring)."""

    name = "emulated GPU"
    ordinal = 0
    stream_handle = 0xE0
    sm_count = 4
    smem_optin = 1 << 16    # the host buffer standing in for each kernel's dynamic shared memory
    cc = (9, 0)
    target = DEFAULT_TARGET

    def __init__(self, reverse_threads: bool = False) -> None:
        self.reverse_threads = reverse_threads
        self._mem: dict[int, np.ndarray] = {}
        self.allocator = CachingAllocator(self)
        self.module_loads = 0
        self.launches: list[tuple[str, int, int]] = []
        self.smem_sizes: list[int] = []      # dynamic shared memory of each launch
        self._modules: dict[str, dict[str, EmuFunction]] = {}

    # memory
    def mem_alloc(self, nbytes: int) -> int:
        buf = np.full(nbytes, 0xCD, dtype=np.uint8)
        ptr = buf.ctypes.data
        self._mem[ptr] = buf
        return ptr

    def mem_free(self, ptr: int) -> None:
        del self._mem[ptr]

    def htod(self, dst: int, src_addr: int, nbytes: int) -> None:
        ctypes.memmove(dst, src_addr, nbytes)

    def dtoh(self, dst_addr: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst_addr, src, nbytes)

    def dtod(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memset_32(self, dst: int, pitch: int, width: int, height: int) -> None:
        for row in range(height):
            ctypes.memset(dst + row * pitch, 0, 4 * width)

    def synchronize(self) -> None:
        pass

    def wait_for_stream(self, other: int) -> None:
        pass

    def make_stream_wait(self, other: int) -> None:
        pass

    def call(self, fname: str, *args: Any) -> None:
        return None

    def make_current(self) -> None:
        pass

    # code
    def load(self, ptx: str, names: list[str], ir: str | None = None) -> dict[str, EmuFunction]:
        assert ir is not None, "the emulator runs the LLVM IR of a kernel"
        if callable(ir):   # (a kernel found by its description makes its IR when asked)
            ir = ir()
        mod = self._modules.get(ir)
        if mod is not None:
            return mod
        with _llvm_lock:
            llvm = _llvm()
            text = host_ir(ir)
            for name in re.findall(r'^@"?([\w.$]+)"? = external global \[0 x i8\]', text,
                                   flags=re.M):
                # dynamic shared memory (block_row's row cache): one host buffer per name,
                # shared by the block's threads (blocks run one after another)
                if name not in _dynamic_smem:
                    _dynamic_smem[name] = (ctypes.c_uint8 * (1 << 16))()
                    llvm.add_symbol(name, ctypes.addressof(_dynamic_smem[name]))
            m = llvm.parse_assembly(text)
            m.verify()
            tm = llvm.Target.from_default_triple().create_target_machine(
                cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                opt=1, jit=True)   # host features: f16 conversions without libcalls
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
            pb.getModulePassManager().run(m, pb)
            nargs = {n: len(list(m.get_function(n).arguments)) for n in names}
            ee = llvm.create_mcjit_compiler(m, tm)
            ee.finalize_object()
            _llvm_state["engines"].append(ee)
            # kernels that synchronise threads (barriers, or warp shuffles: warp_row's
            # rows have shuffles and no barrier) run as blocks of OS threads
            barriers = "emu_barrier" in text or "emu_shfl" in text
            # kernels that need the block they are launched with: the tiled matmul and the
            # block sort (a thread per PER_THREAD elements of its network); others run as 64
            matmul = "_As" in text or any(n.startswith("ta_sort_") for n in names)
            stage1 = any(n.endswith("_combine") for n in names)
            mod = {n: EmuFunction(n, ee.get_function_address(n), nargs[n], barriers, matmul,
                                  stage1 and not n.endswith("_combine")) for n in names}
        self._modules[ir] = mod
        self.module_loads += 1
        return mod

    def allow_smem(self, fn: EmuFunction, nbytes: int) -> None:
        assert nbytes <= self.smem_optin, nbytes
        fn.smem_allowed = max(fn.smem_allowed, nbytes)

    def launch(self, fn: EmuFunction, grid: int, block: int, args_addr: int, smem: int = 0) -> None:
        _misaligned.value = 0
        self._launch(fn, grid, block, args_addr, smem)
        if _misaligned.value:
            raise CudaError("cuLaunchKernel failed: CUDA_ERROR_MISALIGNED_ADDRESS (misaligned "
                            f"address): a shared-memory access of {fn.name} off its alignment "
                            f"(address bits {_misaligned.value:#x}; the emulator's check)",
                            name="CUDA_ERROR_MISALIGNED_ADDRESS")

    def _launch(self, fn: EmuFunction, grid: int, block: int, args_addr: int, smem: int) -> None:
        addrs = np.frombuffer((ctypes.c_uint64 * fn.nargs).from_address(args_addr), np.uint64)
        args = [int(np.frombuffer((ctypes.c_uint64 * 1).from_address(int(a)), np.uint64)[0])
                for a in addrs]
        assert block % 32 == 0 and block > 0, block
        self.launches.append((fn.name, grid, block))
        self.smem_sizes.append(smem)
        assert smem <= max(48 << 10, fn.smem_allowed), (fn.name, smem)   # (allow_smem)
        if not fn.barriers and self.reverse_threads:
            for ctaid in reversed(range(2)):
                for tid in reversed(range(32)):
                    words = _enter(tid, 32, ctaid, 2, None)
                    fn.cfunc(*args)
                    del words
            return
        if not fn.barriers:
            self._run_block(fn, args, 0, 1, 1)
            return
        if not fn.matmul:
            block = 64
        if not fn.stage1:
            grid = min(grid, 4)
        for ctaid in range(grid):
            self._run_block(fn, args, ctaid, grid, block)

    def _run_block(self, fn: EmuFunction, args: list[int], ctaid: int, nctaid: int,
                   ntid: int) -> None:
        state = _BlockState(max(ntid, 32)) if fn.barriers else None
        errors: list[BaseException] = []

        def thread(tid: int) -> None:
            words = _enter(tid, ntid, ctaid, nctaid, state)
            try:
                fn.cfunc(*args)
                if words[6]:    # a barrier broke under this thread (_NATIVE_IR's @meet)
                    raise threading.BrokenBarrierError(
                        f"{fn.name}: a barrier of block {ctaid} broke (a thread failed, or "
                        f"some threads never reached it within {_BARRIER_TIMEOUT_S} s)")
                if _tls.errors:
                    raise _tls.errors[0]
            except BaseException as e:   # noqa: BLE001
                errors.append(e)
                if state is not None:
                    state.abort()

        if ntid == 1:
            thread(0)
        else:
            threads = [threading.Thread(target=thread, args=(t,)) for t in range(ntid)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]


class ReferenceBlas:
    """cuBLAS's ``?gemmStridedBatched`` semantics (column-major operands at raw pointers,
    alpha 1, beta 0) on the emulator's host memory, fed the arguments tracearray would
    pass to the library (``blas.gemm_arguments``): checks the row-major to column-major
    translation of ``gpu/blas.py`` without a GPU."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, ...]] = []

    def gemm(self, g: Any, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        from tracearray.gpu.blas import OP_N, gemm_arguments
        args = gemm_arguments(g, a_ptr, b_ptr, c_ptr)
        self.calls.append(args)
        (op_a, op_b, m, n, k, pa, lda, sa, pb, ldb, sb, pc, ldc, sc, batch) = args
        dt = np.dtype(g.dtype)
        ctype = ctypes.c_float if dt == np.float32 else ctypes.c_double

        def colmajor(ptr: int, rows: int, cols: int, ld: int) -> np.ndarray:
            assert ld >= max(1, rows), (rows, cols, ld)   # cuBLAS's rule
            span = (cols - 1) * ld + rows
            flat = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), (span,))
            return np.lib.stride_tricks.as_strided(flat, (rows, cols),
                                                   (dt.itemsize, ld * dt.itemsize))

        for b in range(batch):
            a = colmajor(pa + b * sa * dt.itemsize, *((m, k) if op_a == OP_N else (k, m)), lda)
            bm = colmajor(pb + b * sb * dt.itemsize, *((k, n) if op_b == OP_N else (n, k)), ldb)
            a = a if op_a == OP_N else a.T
            bm = bm if op_b == OP_N else bm.T
            colmajor(pc + b * sc * dt.itemsize, m, n, ldc)[...] = \
                (a.astype(np.float64) @ bm.astype(np.float64)).astype(dt)

    def scale(self, dtype: Any, ptr: int, count: int, factor: float) -> None:
        """cuBLAS's ``?scal``: ``count`` contiguous elements multiplied in place."""
        dt = np.dtype(dtype)
        ctype = ctypes.c_float if dt == np.float32 else ctypes.c_double
        x = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), (count,))
        x *= dt.type(factor)


    # ---- batched LU (gpu/linalg.py), by the semantics of cuBLAS's ?getrf/?getrs/?getriBatched
    _factored: dict = {}

    @staticmethod
    def _pointers(ptr: int, count: int) -> list[int]:
        return [int(p) for p in np.ctypeslib.as_array(
            ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint64)), (count,))]

    @staticmethod
    def _colmajor(ptr: int, rows: int, cols: int, ld: int, dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        ctype = ctypes.c_float if dt == np.float32 else ctypes.c_double
        span = (cols - 1) * ld + rows
        flat = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), (span,))
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (dt.itemsize, ld * dt.itemsize))

    def lu_batched(self, dtype, n, a_ptrs, lda, pivots, info, batch) -> None:
        """getrf's factors in place (LAPACK's dgetf2 in float64, stored in the dtype: the
        unit lower L below the diagonal, U on and above it, column-major), its 1-based int32
        pivots and info (the first exact zero pivot, 1-based; 0 if none); the matrices are
        remembered too, for the solve and inverse references."""
        infos = np.ctypeslib.as_array(ctypes.cast(info, ctypes.POINTER(ctypes.c_int32)), (batch,))
        pivs = np.ctypeslib.as_array(ctypes.cast(pivots, ctypes.POINTER(ctypes.c_int32)),
                                     (batch * n,))
        for i, p in enumerate(self._pointers(a_ptrs, batch)):
            m = self._colmajor(p, n, n, lda, dtype)
            self._factored[p] = m.copy()
            f = m.astype(np.float64)
            infos[i] = 0
            for k in range(n):
                jp = k + int(np.argmax(np.abs(f[k:, k])))
                pivs[i * n + k] = jp + 1
                if f[jp, k] != 0:
                    f[[k, jp]] = f[[jp, k]]
                    f[k + 1:, k] /= f[k, k]
                elif infos[i] == 0:
                    infos[i] = k + 1
                f[k + 1:, k + 1:] -= np.outer(f[k + 1:, k], f[k, k + 1:])
            m[...] = f.astype(m.dtype)

    def lu_solve_batched(self, dtype, trans, n, nrhs, a_ptrs, lda, pivots, b_ptrs, ldb,
                         batch) -> None:
        from tracearray.gpu.blas import OP_N
        for pa, pb in zip(self._pointers(a_ptrs, batch), self._pointers(b_ptrs, batch)):
            m = self._factored[pa]
            rhs = self._colmajor(pb, n, nrhs, ldb, dtype)
            try:
                rhs[...] = np.linalg.solve(m if trans == OP_N else m.T, rhs)
            except np.linalg.LinAlgError:
                rhs[...] = np.inf

    def lu_inverse_batched(self, dtype, n, a_ptrs, lda, pivots, c_ptrs, ldc, info,
                           batch) -> None:
        for pa, pc in zip(self._pointers(a_ptrs, batch), self._pointers(c_ptrs, batch)):
            out = self._colmajor(pc, n, n, ldc, dtype)
            try:
                out[...] = np.linalg.inv(self._factored[pa])
            except np.linalg.LinAlgError:
                out[...] = np.inf


class ReferenceFFT:
    """cuFFT's semantics (unnormalised transforms, ``cufftPlanMany``'s advanced layout:
    element ``x`` of batch ``b`` at ``b * idist + x * stride``) on the emulator's host
    memory, computed with NumPy: checks ``gpu/fft.py``'s layouts and executions without a
    GPU."""

    def __init__(self) -> None:
        self.executions = 0

    def execute(self, lay: Any, src: int, dst: int, in_itemsize: int, out_itemsize: int,
                direction: int) -> None:
        assert lay.batch >= 1 and lay.n >= 1, f"cuFFT refuses this plan (CUFFT_INVALID_SIZE): {lay}"
        single = lay.kind in (0x29, 0x2a, 0x2c)
        real, cplx = (np.float32, np.complex64) if single else (np.float64, np.complex128)
        n = lay.n
        in_t, in_n = {0x29: (cplx, n), 0x69: (cplx, n), 0x2a: (real, n), 0x6a: (real, n),
                      0x2c: (cplx, n // 2 + 1), 0x6c: (cplx, n // 2 + 1)}[lay.kind]
        out_t, out_n = {0x29: (cplx, n), 0x69: (cplx, n), 0x2a: (cplx, n // 2 + 1),
                        0x6a: (cplx, n // 2 + 1), 0x2c: (real, n), 0x6c: (real, n)}[lay.kind]
        assert np.dtype(in_t).itemsize == in_itemsize and np.dtype(out_t).itemsize == out_itemsize

        def view(ptr: int, t: Any, count: int, stride: int, dist: int) -> np.ndarray:
            it = np.dtype(t).itemsize
            span = (lay.batch - 1) * dist + (count - 1) * stride + 1
            raw = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint8)),
                                        (span * it,))
            return np.lib.stride_tricks.as_strided(raw.view(t), (lay.batch, count),
                                                   (dist * it, stride * it))

        for i_off, o_off in lay.starts:
            self.executions += 1
            x = view(src + i_off * in_itemsize, in_t, in_n, lay.istride, lay.idist).copy()
            y = view(dst + o_off * out_itemsize, out_t, out_n, lay.ostride, lay.odist)
            if lay.kind in (0x29, 0x69):
                y[...] = np.fft.fft(x, axis=1) if direction < 0 else \
                    np.fft.ifft(x, axis=1, norm="forward")
            elif lay.kind in (0x2a, 0x6a):
                y[...] = np.fft.rfft(x, axis=1)
            else:
                y[...] = np.fft.irfft(x, n=n, axis=1, norm="forward")
                # cuFFT's C2R overwrites its input (its documented behaviour)
                view(src + i_off * in_itemsize, in_t, in_n, lay.istride, lay.idist)[...] = np.nan


class ReferenceSolver:
    """cuSOLVER's semantics (``gpu/solver.py``'s methods: column-major matrices at raw
    pointers, in place, int32 info words, int64 pivots) on the emulator's host memory,
    computed with NumPy's LAPACK in float64: checks ``gpu/dense.py``'s layouts, transposes
    and readings of the results without a GPU. Inputs a routine destroys are overwritten with
    NaN, so a caller that reads them again is caught."""

    def __init__(self, missing: tuple = ()) -> None:
        self.calls: list[str] = []
        self.missing = set(missing)
        self._originals: dict[int, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return name not in self.missing

    @staticmethod
    def _mat(ptr: int, rows: int, cols: int, ld: int, dtype: Any) -> np.ndarray:
        assert ptr != 0 and ld >= max(1, rows), (rows, cols, ld)
        return ReferenceBlas._colmajor(ptr, rows, cols, ld, dtype)

    @staticmethod
    def _ints(ptr: int, count: int, ctype: Any = ctypes.c_int32) -> np.ndarray:
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), (count,))

    def _vec(self, ptr: int, count: int, dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        ctype = ctypes.c_float if dt == np.float32 else ctypes.c_double
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), (count,))

    def potrf(self, dev, dtype, uplo, n, a, lda, info) -> None:
        from tracearray.gpu.solver import LOWER
        self.calls.append("potrf")
        m = self._mat(a, n, n, lda, dtype)
        f = m.astype(np.float64)
        f = np.tril(f) + np.tril(f, -1).T if uplo == LOWER else np.triu(f) + np.triu(f, 1).T
        bad = 0
        low = np.zeros((n, n))
        for j in range(n):        # potf2's order: the first non-positive pivot is info
            d = f[j, j] - low[j, :j] @ low[j, :j]
            if not d > 0:
                bad = j + 1
                break
            low[j, j] = np.sqrt(d)
            low[j + 1:, j] = (f[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
        self._ints(info, 1)[0] = bad
        if bad == 0:
            if uplo == LOWER:
                m[np.tril_indices(n)] = low[np.tril_indices(n)].astype(m.dtype)
            else:
                m[np.triu_indices(n)] = low.T[np.triu_indices(n)].astype(m.dtype)

    def getrf(self, dev, dtype, n, a, lda, pivots, info) -> None:
        self.calls.append("getrf")
        m = self._mat(a, n, n, lda, dtype)
        self._originals[a] = m.copy()
        f = m.astype(np.float64)
        piv = self._ints(pivots, n, ctypes.c_int64)
        bad = 0
        for k in range(n):
            jp = k + int(np.argmax(np.abs(f[k:, k])))
            piv[k] = jp + 1
            if f[jp, k] != 0:
                f[[k, jp]] = f[[jp, k]]
                f[k + 1:, k] /= f[k, k]
            elif bad == 0:
                bad = k + 1
            f[k + 1:, k + 1:] -= np.outer(f[k + 1:, k], f[k, k + 1:])
        self._ints(info, 1)[0] = bad
        m[...] = f.astype(m.dtype)

    def getrs(self, dtype, trans, n, nrhs, a, lda, pivots, b, ldb, info) -> None:
        from tracearray.gpu.solver import OP_N
        self.calls.append("getrs")
        orig = self._originals[a].astype(np.float64)
        rhs = self._mat(b, n, nrhs, ldb, dtype)
        try:
            rhs[...] = np.linalg.solve(orig if trans == OP_N else orig.T,
                                       rhs.astype(np.float64))
        except np.linalg.LinAlgError:
            rhs[...] = np.inf
        self._ints(info, 1)[0] = 0

    def syevd(self, dev, dtype, vectors, uplo, n, a, lda, w, info) -> None:
        from tracearray.gpu.solver import LOWER
        self.calls.append("syevd")
        m = self._mat(a, n, n, lda, dtype)
        f = m.astype(np.float64)
        f = np.tril(f) + np.tril(f, -1).T if uplo == LOWER else np.triu(f) + np.triu(f, 1).T
        if not np.isfinite(f).all():     # (LAPACK's answer is undefined: garbage)
            vals, vecs = np.full(n, 7.0), np.full((n, n), 7.0)
        else:
            vals, vecs = np.linalg.eigh(f)
        self._vec(w, n, dtype)[...] = vals
        if vectors:
            m[...] = vecs
        self._ints(info, 1)[0] = 0

    def gesvd(self, dev, dtype, jobu, jobvt, m, n, a, lda, s, u, ldu, vt, ldvt, info) -> None:
        self.calls.append("gesvd")
        assert m >= n, "cuSOLVER's gesvd takes m >= n only"
        mat = self._mat(a, m, n, lda, dtype)
        f = mat.astype(np.float64)
        k = min(m, n)
        if not np.isfinite(f).all():
            uu, ss, vv = np.full((m, m), 7.0), np.full(k, 7.0), np.full((n, n), 7.0)
        else:
            uu, ss, vv = np.linalg.svd(f, full_matrices=True)
        self._vec(s, k, dtype)[...] = ss
        if jobu in ("A", "S"):
            cols = m if jobu == "A" else k
            self._mat(u, m, cols, ldu, dtype)[...] = uu[:, :cols]
        if jobvt in ("A", "S"):
            rows = n if jobvt == "A" else k
            self._mat(vt, rows, n, ldvt, dtype)[...] = vv[:rows]
        mat[...] = np.nan
        self._ints(info, 1)[0] = 0

    def geev(self, dev, dtype, vectors, n, a, lda, w, vr, ldvr, info) -> None:
        self.calls.append("geev")
        mat = self._mat(a, n, n, lda, dtype)
        f = mat.astype(np.float64)
        if not np.isfinite(f).all():
            vals, vecs = np.full(n, 7.0 + 1j), np.full((n, n), 7.0 + 0j)
        else:
            vals, vecs = np.linalg.eig(f)
            vals, vecs = vals.astype(complex), vecs.astype(complex)
        out = self._vec(w, 2 * n, dtype)
        out[:n], out[n:] = vals.real, vals.imag
        if vectors:      # LAPACK's real packing: a pair's vector as (real, imaginary) columns
            v = self._mat(vr, n, n, ldvr, dtype)
            j = 0
            while j < n:
                if vals[j].imag == 0:
                    v[:, j] = vecs[:, j].real
                    j += 1
                else:
                    assert vals[j].imag > 0 and vals[j + 1] == np.conj(vals[j])
                    v[:, j], v[:, j + 1] = vecs[:, j].real, vecs[:, j].imag
                    j += 2
        mat[...] = np.nan
        self._ints(info, 1)[0] = 0

    def geqrf(self, dev, dtype, m, n, a, lda, tau, info) -> None:
        self.calls.append("geqrf")
        mat = self._mat(a, m, n, lda, dtype)
        h, t = np.linalg.qr(mat.astype(np.float64), mode="raw")
        mat[...] = h.T
        self._vec(tau, min(m, n), dtype)[...] = t
        self._ints(info, 1)[0] = 0

    def orgqr(self, dev, dtype, m, n, k, a, lda, tau, info) -> None:
        self.calls.append("orgqr")
        mat = self._mat(a, m, n, lda, dtype)
        t = self._vec(tau, k, dtype).astype(np.float64)
        q = np.eye(m)
        for i in reversed(range(k)):       # Q = H_0 ... H_{k-1}, applied to I from the right end
            v = np.zeros(m)
            v[i] = 1.0
            v[i + 1:] = mat[i + 1:, i]
            q -= t[i] * np.outer(v, v @ q)
        mat[...] = q[:, :n]
        self._ints(info, 1)[0] = 0
