"""Every NumPy function written in the README and the docs traces, unmodified.

The ```python blocks of README.md and docs/*.md are parsed; each top-level ``def`` (its
decorators removed: they compile or test it) is traced on float32 inputs. Shapes follow the
docs' examples: a matrix and vectors of its row length (layer norm), else vectors.
"""
from __future__ import annotations

import ast
import pathlib
import re

import numpy as np
import pytest

from tracearray.trace import trace_function

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CANDIDATE_SHAPES = ((8, 16), (16,))


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def numpy_functions() -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for path in DOCS:
        for block in python_blocks(path):
            if block.lstrip().startswith(">>>"):
                continue   # an interpreter transcript, not a program
            for node in ast.parse(block).body:
                if isinstance(node, ast.FunctionDef) and "np." in ast.unparse(node):
                    out.append((f"{path.name}:{node.name}", node))
    return out


FUNCTIONS = numpy_functions()


def test_the_docs_have_numpy_functions() -> None:
    assert any(name.startswith("README.md:") for name, _ in FUNCTIONS)


@pytest.mark.parametrize("name, fdef", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_doc_function_traces(name: str, fdef: ast.FunctionDef) -> None:
    fdef.decorator_list = []
    namespace: dict = {"np": np}
    exec(compile(ast.Module([fdef], []), name, "exec"), namespace)
    fn = namespace[fdef.name]
    n_args = len(fdef.args.args) - len(fdef.args.defaults)
    rng = np.random.default_rng(0)
    errors = []
    for first in CANDIDATE_SHAPES:   # a matrix and its row-length vectors, or vectors
        args = tuple(rng.standard_normal(first if i == 0 else first[-1:]).astype(np.float32)
                     for i in range(n_args))
        try:
            graph = trace_function(fn, args, {}, frozenset(), frozenset()).graph
        except ValueError as e:   # shapes that do not fit this function: try the next ones
            errors.append(e)
            continue
        assert graph.outputs
        return
    raise AssertionError(f"{name} did not trace with any of {CANDIDATE_SHAPES}: {errors}")
