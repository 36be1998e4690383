"""Locks that survive ``os.fork``.

``fork`` copies the memory of the whole process but only the thread that called it. A lock
that another thread held at that moment stays held in the child, where its holder does not
exist, so the child's first compile waited on it forever (``multiprocessing``'s default start
method on Linux forks exactly like this, often while a worker thread compiles). Every lock in
tracearray is registered here, under one of two rules:

- ``wait_at_fork(owner, name, rank)``: locks around *native* state (LLVM's) are waited for.
  The fork hook acquires them before the fork (so a compile running in another thread ends
  first) and releases them in the parent and in the child, which therefore starts with LLVM
  between two operations, never half-way through one (LLVM's own mutexes, unseen from Python,
  are free too). glibc does the same for its malloc arenas. Such a lock is never held while
  waiting for another thread, so the wait ends; locks are taken in ascending ``rank``, the
  order in which the code nests them (outer first), so the hook cannot deadlock with a holder.
- ``renew_at_fork(owner, name)``: locks held around *user* code (a build lock is held while
  the user's function is traced, and that code may wait for anything, the forking thread
  included) are not waited for: the child gets a fresh, unlocked lock. The Python state they
  guard is consistent at any bytecode boundary (entries are looked up, built, then inserted),
  and what a vanished thread left half-built is simply built again.

``owner`` is a module, a class or an instance (held through a weak reference, so
registering never keeps an object alive); ``name`` the attribute holding the lock.
State that must be rebuilt in a child (thread pools, a CUDA context) registers its own
``os.register_at_fork`` hook beside it.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable

# (rank, registration number, weak reference to the owner, attribute)
_waited: list[tuple[int, int, weakref.ref, str]] = []
# owner -> {attribute: lock factory}
_renewed: "weakref.WeakKeyDictionary[Any, dict[str, Callable[[], Any]]]" = \
    weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()
_held: list[Any] = []   # the locks the before-fork hook acquired, in order


def wait_at_fork(owner: Any, name: str, rank: int) -> None:
    """Hold ``owner.<name>`` across every fork (see the module docstring)."""
    with _registry_lock:
        _waited.append((rank, len(_waited), weakref.ref(owner), name))
        _waited.sort(key=lambda entry: entry[:2])


def renew_at_fork(owner: Any, name: str) -> None:
    """Give a forked child a fresh lock of the same kind in ``owner.<name>``."""
    factory = threading.RLock if isinstance(getattr(owner, name), _RLOCK_TYPE) \
        else threading.Lock
    with _registry_lock:
        _renewed.setdefault(owner, {})[name] = factory


_RLOCK_TYPE = type(threading.RLock())


def _before_fork() -> None:
    _registry_lock.acquire()
    alive = []
    for entry in _waited:
        owner = entry[2]()
        if owner is not None:
            alive.append(entry)
            lock = getattr(owner, entry[3])
            lock.acquire()
            _held.append(lock)
    _waited[:] = alive


def _after_fork_in_parent() -> None:
    while _held:
        _held.pop().release()
    _registry_lock.release()


def _after_fork_in_child() -> None:
    global _registry_lock
    while _held:
        _held.pop().release()
    for owner, names in list(_renewed.items()):
        for name, factory in names.items():
            setattr(owner, name, factory())
    _registry_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
