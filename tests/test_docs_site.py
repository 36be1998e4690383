"""The docs site's sources agree with the repository: every page is in the navigation, the
README's benchmark figures are the ones the plotted JSON gives, and the package's version has
one source."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import tracearray

ROOT = Path(__file__).resolve().parents[1]


def test_every_docs_page_is_in_the_navigation() -> None:
    nav = set(re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages == nav, f"missing from mkdocs.yml: {sorted(pages - nav)}; " \
                         f"not a page: {sorted(nav - pages)}"


def test_readme_benchmark_figures_come_from_the_json() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import plot
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import json
    speed = plot.cpu_speedups(json.loads(plot.CPU_RUN.read_text()))
    readme = (ROOT / "README.md").read_text()
    for fw in ("tracearray", "numba", "numexpr"):
        figure = f"{plot.geomean(list(speed[fw].values())):.2f}×"
        assert figure in readme, (fw, figure)
    for png in ("bench-cpu.png", "bench-gpu.png"):
        assert (ROOT / "docs" / "img" / png).stat().st_size > 10_000
        assert f"docs/img/{png}" in readme


def test_one_version_source() -> None:
    from tracearray import _version
    from tracearray.diskcache import tracearray_version
    assert tracearray.__version__ == _version.__version__ == tracearray_version()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert "version = \"" not in pyproject   # no second, literal version
    assert (ROOT / "tracearray" / "py.typed").exists()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
