"""The config module, the DEBUG ladder through ``logging``, dumps, the environment report and
``python -m tracearray`` (docs/configuration.md)."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray import __main__ as cli
from tracearray import cachefiles, config, envreport
from tracearray.cpu import pool
from tracearray.gpu import driver

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tracearray"


# ------------------------------------------------------------------ one table, one reader

def test_only_config_reads_the_environment() -> None:
    readers = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "config.py":
            continue
        text = path.read_text()
        if re.search(r"os\.environ|os\.getenv|getenv\(", text):
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_every_variable_named_in_the_package_is_declared() -> None:
    named = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name != "config.py":   # (which names the reserved prefixes themselves)
            named |= set(re.findall(r"TRACEARRAY_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    read = set(re.findall(r"environ\.get\(\s*\"([A-Z0-9_]+)\"",
                          (PACKAGE / "config.py").read_text()))
    assert {"TRACEARRAY_DEBUG", "TRACEARRAY_NUM_THREADS"} <= read
    undeclared = sorted(n for n in named | read - {"LOCALAPPDATA", "XDG_CACHE_HOME"}
                        if not config.is_declared(n))
    assert undeclared == []


def test_configuration_page_lists_every_variable_with_its_default() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    rows = {m.group(1): m.group(2).strip() for m in
            re.finditer(r"^\| `([A-Z0-9_]+)` \| ([^|]*) \|", page, re.M)}
    for v in config.VARIABLES:
        assert v.name in rows, f"{v.name} is missing from docs/configuration.md"
        assert rows[v.name] == f"`{v.default}`" or rows[v.name] == v.default, v.name
    for step, what in config.LADDER.items():
        assert f"| {step} | {what} |" in page


def test_unknown_variable_warned_once_with_a_close_match(monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_NUM_THRAEDS", "2")
    monkeypatch.setenv("TRACEARRAY_ZZQX", "1")
    monkeypatch.setenv("TRACEARRAY_TEST_SOMETHING", "1")   # the test scripts' prefix
    monkeypatch.setattr(config, "_warned_unknown", set())
    with pytest.warns(RuntimeWarning) as record:
        tracearray.compile(lambda x: x + 1)
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2
    assert "TRACEARRAY_NUM_THRAEDS; did you mean TRACEARRAY_NUM_THREADS?" in messages[0]
    assert "TRACEARRAY_ZZQX (docs" in messages[1]   # nothing close: no suggestion
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tracearray.compile(lambda x: x + 1)         # once per name


def test_values_are_validated(monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_MAX_TRACE_OPS", "many")
    with pytest.raises(ValueError, match="TRACEARRAY_MAX_TRACE_OPS must be a positive"):
        config.max_trace_ops()
    monkeypatch.setenv("TRACEARRAY_DEBUG", "high")
    with pytest.raises(ValueError, match="TRACEARRAY_DEBUG must be an integer"):
        config.debug_level()


# ------------------------------------------------------------------ threads

def test_set_num_threads_overrides_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_NUM_THREADS", "3")
    try:
        assert tracearray.get_num_threads() == 3
        tracearray.set_num_threads(5)
        assert tracearray.get_num_threads() == 5 == pool.num_threads()
        # the running pool follows: 5 threads take part in a parallel loop of 5 chunks
        seen = set()
        barrier = __import__("threading").Barrier(5, timeout=30)

        def chunk(b: int, e: int) -> None:
            seen.add(__import__("threading").get_ident())
            barrier.wait()
        pool.parallel_for(chunk, [(i, i + 1) for i in range(5)])
        assert len(seen) == 5
        assert dict(envreport.report())["threads"] == "5 (tracearray.set_num_threads)"
        tracearray.set_num_threads(None)
        assert tracearray.get_num_threads() == 3
    finally:
        tracearray.set_num_threads(None)
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match="set_num_threads"):
            tracearray.set_num_threads(bad)


# ------------------------------------------------------------------ logging and the ladder

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _records(caplog, step: int) -> list[str]:
    level = config.logging_level(step)
    return [r.getMessage() for r in caplog.records if r.name == "tracearray" and
            r.levelno == level]


@pytest.fixture
def clean_logger(monkeypatch):
    monkeypatch.delenv("TRACEARRAY_DEBUG", raising=False)
    config._sync_debug_env()
    yield config.logger
    config.logger.setLevel(logging.NOTSET)


def test_ladder_steps_through_the_logging_api(caplog, clean_logger) -> None:
    caplog.set_level(config.logging_level(config.ASSEMBLY), logger="tracearray")
    f = tracearray.compile(softmax, device="cpu")
    f(np.ones((4, 8), np.float32))
    f(np.ones((4, 8), np.float32))
    assert any(m.startswith("softmax: traced") for m in _records(caplog, 1))
    assert any("built" in m and "f4[4,8] on cpu" in m for m in _records(caplog, 1))
    assert any(re.fullmatch(r"softmax_k\d+: \d+\.\d{3} ms", m) for m in _records(caplog, 2))
    assert any(m.startswith("plan of softmax:\nkernel 0") for m in _records(caplog, 3))
    assert any(m.startswith("graph of softmax:\n%0 = input") for m in _records(caplog, 4))
    assert any(m.startswith("tiles of softmax:\nsoftmax_k0: ") for m in _records(caplog, 5))
    assert any("define" in m for m in _records(caplog, 6))
    assert any(m.startswith("softmax_k0 assembly:\n") and "ret" in m
               for m in _records(caplog, 7))


def test_debug_level_ladder_is_cumulative(caplog, clean_logger, monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_DEBUG", "3")
    caplog.set_level(logging.NOTSET)
    tracearray.compile(softmax, device="cpu")(np.ones((3, 5), np.float32))
    levels = {r.levelno for r in caplog.records if r.name == "tracearray"}
    assert levels == {config.logging_level(s) for s in (1, 2, 3)}


def test_debug_env_prints_to_stderr(clean_logger, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRACEARRAY_DEBUG", "1")
    tracearray.compile(softmax, device="cpu")(np.ones((2, 3), np.float32))
    err = capsys.readouterr().err
    assert "[tracearray] softmax: traced (" in err
    assert "graph of" not in err
    monkeypatch.setenv("TRACEARRAY_DEBUG", "0")
    tracearray.compile(softmax, device="cpu")(np.ones((2, 3), np.float32))
    assert capsys.readouterr().err == ""
    assert config._handler not in config.logger.handlers


def test_nothing_is_formatted_when_the_step_is_not_shown(clean_logger, monkeypatch) -> None:
    formatted = []

    class Loud:
        def __str__(self) -> str:
            formatted.append(1)
            return "loud"
    config.log(config.COMPILES, "%s", Loud())
    assert formatted == []
    from tracearray import api
    monkeypatch.setattr(api.Lowered, "as_text", lambda *a: pytest.fail("graph formatted"))
    tracearray.compile(softmax, device="cpu")(np.ones((2, 7), np.float32))


def test_device_auto_says_which_device_ran(caplog, clean_logger, monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_DISABLE_GPU", "1")
    caplog.set_level(logging.DEBUG, logger="tracearray")
    f = tracearray.compile(lambda x: x * 2)
    assert f.stats.device is None
    x = np.ones(5)
    f(x)
    assert f.stats.device == "cpu"
    assert any(m.endswith("on cpu") for m in _records(caplog, 1))
    f(x)   # the fast path keeps it
    assert f.stats.device == "cpu"


def test_device_auto_on_a_gpu_says_cuda(emulated_gpu) -> None:
    f = tracearray.compile(lambda x: x * 2)
    f(np.ones(5, np.float32))
    assert f.stats.device == "cuda"


# ------------------------------------------------------------------ dump directory

def test_dump_files_are_unique_per_signature(tmp_path, monkeypatch, clean_logger) -> None:
    monkeypatch.setenv("TRACEARRAY_DUMP_DIR", str(tmp_path))
    f = tracearray.compile(softmax, device="cpu")
    f(np.ones((4, 8), np.float32))
    f(np.ones((2, 3), np.float64))
    names = sorted(p.name for p in tmp_path.iterdir())
    for stage in ("graph", "plan", "tiles", "ll", "s"):
        files = [n for n in names if n.endswith("." + stage)]
        assert len(files) >= 2 and len(set(files)) == len(files), (stage, names)
    graphs = [p.read_text() for p in tmp_path.glob("*.graph")]
    assert any("f32[4,8]" in g for g in graphs) and any("f64[2,3]" in g for g in graphs)
    index = (tmp_path / "index.txt").read_text().splitlines()
    assert any(line.endswith("softmax f4[4,8]") for line in index)
    assert any("softmax f8[2,3] on cpu" in line for line in index)


# ------------------------------------------------------------------ environment report

def test_report_says_exactly_why_there_is_no_gpu(monkeypatch) -> None:
    monkeypatch.delenv("TRACEARRAY_DISABLE_GPU", raising=False)
    try:
        driver.get_device()
        pytest.skip("a GPU is usable here")
    except driver.GpuUnavailableError as e:
        reason = str(e)
    rows = dict(envreport.report())
    assert rows["GPU"] == f"not usable: {reason}"
    monkeypatch.setattr(driver, "get_device", lambda: (_ for _ in ()).throw(
        driver.GpuUnavailableError("no CUDA driver on this machine (libcuda.so.1)")))
    assert dict(envreport.report())["GPU"] == \
        "not usable: no CUDA driver on this machine (libcuda.so.1)"
    monkeypatch.setenv("TRACEARRAY_DISABLE_GPU", "1")
    assert dict(envreport.report())["GPU"] == \
        "not usable: TRACEARRAY_DISABLE_GPU is set (device='auto' runs on the CPU)"


def test_report_rows(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_NUM_THREADS", "3")
    monkeypatch.setenv("TRACEARRAY_NOT_A_SETTING", "x")
    rows = dict(envreport.report())
    assert rows["tracearray"] == tracearray.__version__
    assert rows["numpy"] == np.__version__
    assert rows["threads"] == "3 (TRACEARRAY_NUM_THREADS)"
    assert rows["TRACEARRAY_NUM_THREADS"] == "'3'"
    assert rows["TRACEARRAY_NOT_A_SETTING"] == "'x'  (unknown to tracearray)"
    assert rows["cache directory"] == str(tmp_path)
    assert rows["cache size"].startswith("0 entries, 0 B")
    from llvmlite import binding as llvm
    assert rows["CPU"] == llvm.get_host_cpu_name()
    assert set(rows) >= {"llvmlite", "cuda-python", "vector features", "libdevice", "ptxas"}
    import io
    out = io.StringIO()
    tracearray.show_config(file=out)
    assert out.getvalue() == envreport.format_report() + "\n"


def test_vector_features_are_the_enabled_vector_extensions() -> None:
    assert envreport.vector_features({"avx2": True, "avx512f": False, "sse4.2": True,
                                      "aes": True, "neon": True, "v": True}) == \
        ["avx2", "neon", "sse4.2", "v"]


def _fill_cache(root: Path) -> tuple[Path, Path]:
    (root / "cpu").mkdir(parents=True)
    (root / "ptx").mkdir()
    (root / "cpu" / ("a" * 64 + ".bin")).write_bytes(b"x" * 100)
    (root / "ptx" / ("b" * 64 + ".bin")).write_bytes(b"y" * 50)
    young = root / "cpu" / ".aaaaaaaaaaaaaaaa.xyz.tmp"
    young.write_bytes(b"z")          # a write in flight: kept by clear
    other = root / "cpu" / "notes.txt"
    other.write_text("the user's file")
    return young, other


def test_cache_commands(tmp_path, monkeypatch, capsys) -> None:
    root = tmp_path / "cache"
    young, other = _fill_cache(root)
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    assert cli.main(["cache", "dir"]) == 0
    assert capsys.readouterr().out == f"{root}\n"
    cli.main(["cache", "size"])
    out = capsys.readouterr().out
    assert out.startswith("3 entries, 151 B (cpu: 2 entries, 101 B, ptx: 1 entries, 50 B)")
    cli.main(["cache", "clear"])
    assert capsys.readouterr().out == f"deleted 2 file(s), 150 B, from {root}\n"
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == [young.name, other.name]
    old = os.path.getmtime(young) - 2 * cachefiles.STALE_TEMPORARY_S
    os.utime(young, (old, old))
    assert cachefiles.clear(str(root)) == (1, 1)
    assert other.exists()
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    cli.main(["cache", "dir"])
    assert capsys.readouterr().out == "off (TRACEARRAY_CACHE_DIR)\n"
    cli.main(["cache", "clear"])
    assert "nothing to clear" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["cache", "drop"])


def test_python_dash_m_tracearray_info(tmp_path) -> None:
    env = {**os.environ, "TRACEARRAY_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tracearray", "info"], capture_output=True,
                          text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["tracearray", tracearray.__version__]
    assert any(re.match(r"GPU\s+(usable|not usable): ", line) for line in lines)
    assert any(re.match(rf"cache directory\s+{re.escape(str(tmp_path))}$", line)
               for line in lines)


def test_gpu_kernels_dump_their_ptx(tmp_path, monkeypatch, clean_logger, emulated_gpu,
                                    caplog) -> None:
    monkeypatch.setenv("TRACEARRAY_DUMP_DIR", str(tmp_path))
    caplog.set_level(config.logging_level(config.ASSEMBLY), logger="tracearray")
    f = tracearray.compile(softmax, device="cuda")
    f(np.ones((4, 8), np.float32))
    ptx = list(tmp_path.glob("softmax_k*.ptx"))
    assert ptx and all(".target sm_" in p.read_text() for p in ptx)
    assert any(m.startswith("softmax_k0 PTX:\n") for m in _records(caplog, 7))
    assert any(re.fullmatch(r"softmax_k\d+: \d+\.\d{3} ms \(GPU, synchronised\)", m)
               for m in _records(caplog, 2))
    assert f.stats.device == "cuda"
