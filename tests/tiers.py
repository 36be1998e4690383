"""Which tier of the test suite runs, for tests that scale their work with it.

``conftest.py`` sets ``SLOW`` before any test module is imported: True under ``--runslow``
or a ``-m`` expression naming ``slow``. Property tests write
``@settings(max_examples=examples(N))``: N examples in the slow tier, half of them (at
least 3) in the default tier, which stays a few minutes on a 2-core machine.
"""
from __future__ import annotations

SLOW = False


def examples(n: int) -> int:
    return n if SLOW else max(3, n // 2)
