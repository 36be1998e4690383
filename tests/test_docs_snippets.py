"""Every Python block of the README and the docs runs, and prints what the page shows.

A page is one program, as a reader pastes it: its ```python blocks run in order in one
namespace (so a later block may use what an earlier one defined), each compiled under the file
name ``example.py`` (the name an error message shows). Conventions of the pages:

- A ```output block right after a python block is that block's standard output, compared line
  by line (trailing spaces ignored); ``...`` in it matches any text, as doctest's ELLIPSIS.
- A block whose first line is ``# needs an NVIDIA GPU`` is left out of the page's run
  everywhere, and run (with the whole page before it) by ``test_page_gpu_code_runs``, a
  ``gpu`` test that is skipped, with that reason, when no GPU is usable.
- A block of ``>>>`` lines is an interpreter transcript, run by doctest in the page's namespace.
- A block that shows an error catches it itself (``try`` / ``except``) and prints it, so the
  page's output is checked like any other.

The README's install and test commands (its first ```bash block) are the lines ``.ci/run``
runs: ``test_readme_commands_are_what_ci_runs`` keeps the two the same.

After a change of what a block prints, ``python tests/test_docs_snippets.py PAGE...`` runs the
pages (GPU blocks only where a GPU is usable) and writes each block's new output into the
output block after it (adding one where a block prints and has none); an output block that
still matches, ``...`` included, is left as it is. Read the diff before committing it.
"""
from __future__ import annotations

import contextlib
import doctest
import io
import linecache
import pathlib
import re
from dataclasses import dataclass

import pytest

import tracearray.gpu

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GPU_MARK = "# needs an NVIDIA GPU"
FILENAME = "example.py"

# A fenced block: its info string's first word and its text (fences at the line start).
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass
class Block:
    code: str
    line: int                   # where the block starts in its page (1-based)
    expected: str | None        # the ```output block that follows it, if any


def page_blocks(path: pathlib.Path) -> list[Block]:
    text = path.read_text()
    blocks: list[Block] = []
    last_end = None
    for m in _FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        if lang == "python":
            blocks.append(Block(body, text.count("\n", 0, m.start()) + 1, None))
        elif lang == "output" and blocks and last_end is not None and \
                not text[last_end:m.start()].strip() and blocks[-1].expected is None:
            blocks[-1].expected = body
        last_end = m.end() if lang == "python" else None
    return blocks


def output_matches(expected: str, got: str) -> bool:
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    have = [line.rstrip() for line in got.rstrip("\n").splitlines()]
    if len(want) != len(have):
        return False
    for w, h in zip(want, have):
        pattern = ".*".join(re.escape(part) for part in w.split("..."))
        if not re.fullmatch(pattern, h):
            return False
    return True


def run_block(block: Block, namespace: dict, where: str) -> str:
    """Run one block in ``namespace`` and return what it printed."""
    out = io.StringIO()
    if block.code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block.code, namespace, where, FILENAME, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        report = io.StringIO()
        runner.run(test, out=report.write, clear_globs=False)
        assert runner.failures == 0, f"{where}: transcript differs:\n{report.getvalue()}"
        return ""
    # The source is registered so that an error's location shows the line, as in a file.
    linecache.cache[FILENAME] = (len(block.code), None, block.code.splitlines(True), FILENAME)
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, FILENAME, "exec"), namespace)
    return out.getvalue()


PAGES_WITH_CODE = [p for p in PAGES if page_blocks(p)]


def test_the_readme_and_docs_have_code() -> None:
    assert ROOT / "README.md" in PAGES_WITH_CODE
    assert len(PAGES_WITH_CODE) >= 5, [p.name for p in PAGES_WITH_CODE]


def run_page(page: pathlib.Path, with_gpu_blocks: bool) -> None:
    namespace: dict = {"__name__": "__main__"}
    for block in page_blocks(page):
        where = f"{page.name}:{block.line}"
        if block.code.startswith(GPU_MARK) and not with_gpu_blocks:
            continue
        got = run_block(block, namespace, where)
        if block.expected is not None:
            assert output_matches(block.expected, got), (
                f"{where}: the block printed\n{got}\nbut the page shows\n{block.expected}")


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=[p.name for p in PAGES_WITH_CODE])
def test_page_code_runs_and_prints_what_the_page_shows(page: pathlib.Path) -> None:
    run_page(page, with_gpu_blocks=False)


PAGES_WITH_GPU_CODE = [p for p in PAGES_WITH_CODE
                       if any(b.code.startswith(GPU_MARK) for b in page_blocks(p))]


@pytest.mark.gpu
@pytest.mark.parametrize("page", PAGES_WITH_GPU_CODE, ids=[p.name for p in PAGES_WITH_GPU_CODE])
def test_page_gpu_code_runs(page: pathlib.Path) -> None:
    if not tracearray.gpu.is_available():
        pytest.skip("needs an NVIDIA GPU (tracearray.gpu.is_available() is False): the "
                    "page's '# needs an NVIDIA GPU' blocks")
    if "import dask" in page.read_text():
        pytest.importorskip("dask.array")   # (the test extra installs it; a GPU host may not)
    run_page(page, with_gpu_blocks=True)


def test_output_blocks_follow_python_blocks() -> None:
    """Every ```output block belongs to the python block just before it (else it is never
    compared)."""
    for page in PAGES:
        text = page.read_text()
        n_output = len(re.findall(r"^```output", text, re.M))
        n_attached = sum(b.expected is not None for b in page_blocks(page))
        assert n_output == n_attached, f"{page.name}: an output block follows no python block"


def test_readme_commands_are_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    first_bash = re.search(r"^```bash\n(.*?)^```", readme, re.S | re.M)
    assert first_bash, "README.md: no bash block with the install and test commands"
    commands = [line for line in first_bash.group(1).splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert len(commands) == 2, commands
    for command in commands:
        assert command.strip() in ci, f".ci/run does not run the README's command {command!r}"


def test_output_matching() -> None:
    assert output_matches("a 1\n b\n", "a 1  \n b")
    assert output_matches("took ... ms\n", "took 3.2 ms\n")
    assert not output_matches("a\n", "a\nb\n")
    assert not output_matches(" b\n", "b\n")
    assert not output_matches("took ... ms\n", "took 3.2 s\n")


def update_outputs(page: pathlib.Path) -> bool:
    """Rewrite ``page``'s output blocks from what its blocks print now; True if it changed."""
    text = page.read_text()
    namespace: dict = {"__name__": "__main__"}
    gpu = tracearray.gpu.is_available()
    pieces, pos = [], 0
    for m in _FENCE.finditer(text):
        if m.group(1) != "python" or (m.group(2).startswith(GPU_MARK) and not gpu):
            continue
        got = run_block(Block(m.group(2), 0, None), namespace, page.name)
        old = re.match(r"\n\n```output\n(.*?)^```[ \t]*$", text[m.end():], re.S | re.M)
        if old and output_matches(old.group(1), got):
            continue
        pieces.append(text[pos:m.end()])
        if got.strip():
            pieces.append("\n\n```output\n" + got.rstrip("\n") + "\n```")
        pos = m.end() + (old.end() if old else 0)
    new = "".join(pieces) + text[pos:]
    if new != text:
        page.write_text(new)
    return new != text


if __name__ == "__main__":
    import sys
    for arg in sys.argv[1:]:
        changed = update_outputs(pathlib.Path(arg).resolve())
        print(f"{arg}: {'updated' if changed else 'unchanged'}")
