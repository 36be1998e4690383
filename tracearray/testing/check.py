"""Property tests of a user's function: compiled vs NumPy over drawn inputs.

``check(fn, *strategies)`` draws arguments (one strategy per positional argument, or
``args=`` a strategy of tuples), compares ``tracearray.compile(fn)`` with NumPy on each draw
(``compare.compare_with_numpy``), lets Hypothesis shrink a failure to a minimal example, and
raises ``CheckFailure`` after printing the comparison report and a self-contained reproducer
script. ``matches_numpy(*strategies)`` is the same as a decorator that turns the function
into a pytest test.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, TextIO

import hypothesis
from hypothesis import HealthCheck
from hypothesis import strategies as st

from .compare import Comparison, MismatchError, compare_with_numpy
from .repro import reproducer


class CheckFailure(AssertionError):
    """``check`` found inputs where the compiled function differs from NumPy (or fails).
    ``.args_found``: the minimal arguments; ``.reproducer``: a script re-running them;
    ``.comparison``: the ``Comparison`` (None when the compiled call raised)."""

    def __init__(self, message: str, args_found: tuple, reproducer_text: str,
                 comparison: Comparison | None):
        super().__init__(message)
        self.args_found = args_found
        self.reproducer = reproducer_text
        self.comparison = comparison


def check(fn: Callable, *strategies: st.SearchStrategy, args: st.SearchStrategy | None = None,
          max_examples: int | None = None, device: str | None = None,
          rtol: float | None = None, atol: float | None = None,
          reference: Callable | None = None, derandomize: bool | None = None,
          seed: int | None = None, settings: hypothesis.settings | None = None,
          stream: TextIO | None = None) -> None:
    """Property test: ``tracearray.compile(fn)(*a)`` matches NumPy's ``fn(*a)`` (or
    ``reference(*a)``) for drawn argument tuples ``a``.

    Hypothesis runs under ``settings`` (default: the current profile, so a project's
    ``settings.load_profile`` and example database apply), with ``max_examples`` and
    ``derandomize`` overriding it when given; no deadline unless one was set (the first
    example compiles), and the slow-data health checks off. Failing examples are saved to
    the profile's database, under a key of ``fn``'s own, and replayed first next time.

    On failure the example is shrunk to a minimal one, the report and a reproducer are
    printed to ``stream`` (stdout by default) and ``CheckFailure`` is raised. It fails too
    when NumPy raised on every example drawn: then nothing was compared. ``derandomize``
    or ``seed`` make the run reproducible."""
    if (args is None) == (not strategies):
        raise TypeError("check(fn, *strategies) takes one strategy per argument, or args= a "
                        "strategy of argument tuples (not both)")
    drawn = args if args is not None else st.tuples(*strategies)
    import tracearray
    compiled = tracearray.compile(fn, device=device or "auto")
    last: dict[str, Any] = {}
    tally = {"examples": 0, "numpy_raised": 0}

    def property_(a: tuple) -> None:
        a = tuple(a)
        try:
            cmp = compare_with_numpy(fn, *a, rtol=rtol, atol=atol, device=device,
                                     reference=reference, compiled=compiled)
        except Exception as exc:
            last.update(args=a, cmp=None, error=exc)
            raise
        tally["examples"] += 1
        tally["numpy_raised"] += cmp.numpy_error is not None
        last.setdefault("numpy_error", cmp.numpy_error)
        if not cmp.ok:
            last.update(args=a, cmp=cmp, error=None)
            raise MismatchError(cmp)

    # The example database keys a test by its function's source: every check() would share
    # one key. Hypothesis distinguishes pytest's parametrized cases with this attribute.
    property_._hypothesis_internal_add_digest = _database_key(fn)   # type: ignore[attr-defined]
    property_ = _settings_for(settings, max_examples, derandomize)(hypothesis.given(drawn)(
        property_))
    test = hypothesis.seed(seed)(property_) if seed is not None else property_
    try:
        test()
        if tally["examples"] and tally["numpy_raised"] == tally["examples"]:
            error = last["numpy_error"]
            raise CheckFailure(
                f"tracearray.testing.check({getattr(fn, '__name__', 'fn')}): NumPy raised on "
                f"every one of the {tally['examples']} examples drawn (the first: "
                f"{type(error).__name__}: {error}), so no result was compared; draw inputs "
                f"the function accepts", (), "", None)
    except CheckFailure:
        raise
    except Exception:   # noqa: BLE001 -- report whatever the minimal example raised
        if "args" not in last:
            raise
        found = last["args"]
        cmp = last["cmp"]
        if cmp is not None:
            what = cmp.report()
        else:
            err = last["error"]
            what = f"compiling or running {getattr(fn, '__name__', 'fn')} raised " \
                   f"{type(err).__name__}: {err}"
        script = reproducer(fn, found, device=device, reference=reference,
                            title=f"Reproducer written by tracearray.testing.check for "
                                  f"{getattr(fn, '__name__', 'fn')}")
        text = (f"tracearray.testing.check: a minimal failing example after "
                f"shrinking:\n{what}\n\nReproducer:\n\n{script}")
        print(text, file=stream or sys.stdout)
        # The report says everything: no chained Hypothesis traceback (from None).
        raise CheckFailure(f"{what}\n(minimal example; the reproducer script was printed and "
                           f"is in .reproducer)", found, script, cmp) from None


def _settings_for(parent: hypothesis.settings | None, max_examples: int | None,
                  derandomize: bool | None) -> hypothesis.settings:
    parent = parent if parent is not None else hypothesis.settings()
    changes: dict[str, Any] = {}
    if max_examples is not None:
        changes["max_examples"] = max_examples
    if derandomize is not None:
        changes["derandomize"] = derandomize
    if parent.deadline == _HYPOTHESIS_DEADLINE:
        changes["deadline"] = None   # Hypothesis's own default: the first example compiles
    slow = {HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example}
    changes["suppress_health_check"] = sorted(set(parent.suppress_health_check) | slow,
                                              key=lambda h: h.value)
    return hypothesis.settings(parent, **changes)


_HYPOTHESIS_DEADLINE = hypothesis.settings.get_profile("default").deadline   # 200 ms


def _database_key(fn: Callable) -> bytes:
    code = getattr(fn, "__code__", None)
    where = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn)),
             code.co_filename if code is not None else None)
    return repr(where).encode()


def matches_numpy(*strategies: st.SearchStrategy, **options: Any
                  ) -> Callable[[Callable], Callable[[], None]]:
    """Decorator: the decorated NumPy function becomes a zero-argument test (for pytest) that
    runs ``check(fn, *strategies, **options)``. The function itself stays reachable as
    ``test.fn``."""
    def decorate(fn: Callable) -> Callable[[], None]:
        def test() -> None:
            check(fn, *strategies, **options)
        test.__name__ = fn.__name__
        test.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        test.__doc__ = fn.__doc__
        test.__module__ = fn.__module__
        test.fn = fn   # type: ignore[attr-defined]
        return test
    return decorate
