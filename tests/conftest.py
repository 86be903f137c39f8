"""Shared test helpers. Keep this file small; add fixtures, do not rework the existing ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

import pytest

# Every shell fix any test builds, in this process or in a rocmcheck child it starts, is appended here
# (rocmcheck/fixes.py); at the end of the session each one must parse as bash (`bash -n`), so a new stage's fixes
# are held to the rule without a test of their own. Set before rocmcheck is imported: its module-level fixes count.
_FIX_LOG = Path(tempfile.mkdtemp(prefix="rocmcheck-fix-log-")) / "fixes.txt"
os.environ["ROCMCHECK_FIX_LOG"] = str(_FIX_LOG)

# The suite runs as three xdist workers on a 2-core machine, each starting torch and its children: torch's OpenMP
# threads sleep while they wait, as rocmcheck's own runs make them (rocmcheck/train/cpu_threads.py), so a waiting
# thread never spins on a CPU the other worker needs (benchmarks/RESULTS.md, section 25). Before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rocmcheck.fixes import FIX_LOG_ENV  # noqa: E402

assert FIX_LOG_ENV == "ROCMCHECK_FIX_LOG"


# A parametrized value longer than this gets a short test id. pytest < 9.2 writes a str value into the id whole,
# and the id into PYTEST_CURRENT_TEST, which every child inherits: a 200,000-character hostile input made that
# one variable longer than Linux lets execve pass (MAX_ARG_STRLEN, 128 KiB), so each subprocess of that test
# failed with E2BIG ("Argument list too long") before it started.
MAX_PARAM_ID_CHARS = 100


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    if isinstance(val, (str, bytes)) and len(val) > MAX_PARAM_ID_CHARS:
        return f"{argname}-{len(val)}-long"
    return None


def shell_fixes_that_do_not_parse(lines: list[str]) -> list[str]:
    """The lines bash -n refuses, each checked alone."""
    bad = []
    for line in lines:
        proc = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            bad.append(f"{line}\n    {proc.stderr.strip()}")
    return bad


# A test that measures records its figure lines with record_property(FIGURES, [...]): they are printed after the
# run, whether the test passed or failed (xdist carries a report's properties to the process that prints).
FIGURES = "figures"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for status in ("passed", "failed"):
        for report in terminalreporter.stats.get(status, []):
            lines = dict(getattr(report, "user_properties", ())).get(FIGURES)
            if lines and getattr(report, "when", "call") == "call":
                terminalreporter.write_sep("-", f"figures of {report.nodeid}")
                for line in lines:
                    terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _end_ops_build()
    if not _FIX_LOG.is_file() or shutil.which("bash") is None:
        return
    lines = sorted(set(_FIX_LOG.read_text(encoding="utf-8", errors="replace").splitlines()) - {""})
    script = "\n".join(lines) + "\n"  # one bash for all of them first: the usual case is that every line parses
    whole = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=60)
    bad = shell_fixes_that_do_not_parse(lines) if whole.returncode != 0 else []
    if bad:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = f"{len(bad)} of the {len(lines)} shell fixes the tests built do not parse as bash:\n" + "\n".join(bad)
        if reporter is not None:
            reporter.write_line(text, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(_FIX_LOG.parent, ignore_errors=True)

# Verbatim real tool outputs from public sources, each with a .source file beside it (tests/fixtures/public/README.md).
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures" / "public"


def read_fixture(relpath: str) -> str:
    """The fixture's text exactly as stored (no newline translation)."""
    return (FIXTURES_DIR / relpath).read_bytes().decode("utf-8")


# Outputs this project recorded itself, and public inputs gathered since: each with its source
# (tests/fixtures/*/README.md or a .source file beside it).
PROJECT_FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"


def project_fixture(relpath: str) -> str:
    return (PROJECT_FIXTURES_DIR / relpath).read_bytes().decode("utf-8")


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """fixture_text("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt") -> that file's text."""
    return read_fixture


# DeepSpeed JIT-builds DeepSpeedCPUAdam for the offload recipe on this CPU (ops/adam/cpu_adam.py), the way its own
# code asks for it (its shared-memory collective is not built: rocmcheck.train.distributed.skip_deepspeed_cpu_shm).
# About 45 s of g++ on 2 cores, which the first test that needs it used to wait out. When the collected tests need
# it, one child builds it from the end of collection on, beside the tests that come first; torch's build lock (a
# baton file in the op's build folder) makes a test that gets there before it finishes wait for that build rather
# than start a second one.
_BUILD_DEEPSPEED_OPS = (
    "from deepspeed.ops.op_builder import CPUAdamBuilder\n"
    "CPUAdamBuilder().load()\n")
# Over six times the slowest build of the op seen on a loaded 2-core box: only a wedged build hits it.
DEEPSPEED_OPS_BUILD_TIMEOUT_S = 600
KEPT_EXTENSIONS_ENV = "ROCMCHECK_TEST_TORCH_EXTENSIONS_DIR"


@dataclass
class _OpsBuild:
    proc: subprocess.Popen
    folder: Path
    log: IO[bytes]
    ours: bool  # a temporary folder of this session (removed at its end), not the kept one


_ops_build: _OpsBuild | None = None


_SHARED_EXTENSIONS: Path | None = None  # made by the process that runs the session, removed when it ends


def pytest_configure(config: pytest.Config) -> None:
    """Without a kept folder, the process that runs the session (xdist's controller, or pytest alone) makes one
    folder for the DeepSpeed ops and gives it to its workers as the kept one: each op is then built once for the
    whole run (torch's per-op build lock makes a second builder wait and load it), not once per worker."""
    global _SHARED_EXTENSIONS
    if os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get(KEPT_EXTENSIONS_ENV):
        return
    _SHARED_EXTENSIONS = Path(tempfile.mkdtemp(prefix="rocmcheck-torch-extensions-"))
    os.environ[KEPT_EXTENSIONS_ENV] = str(_SHARED_EXTENSIONS)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _SHARED_EXTENSIONS
    if _SHARED_EXTENSIONS is not None:
        os.environ.pop(KEPT_EXTENSIONS_ENV, None)
        shutil.rmtree(_SHARED_EXTENSIONS, ignore_errors=True)
        _SHARED_EXTENSIONS = None


# The modules that hold the suite's longest tests (fine-tunes, multi-process launches, the triage figures, the attack
# replay and the tool flood: 10-40 s each on the 2-core box, benchmarks/RESULTS.md section 37) run first. xdist hands
# tests out in collection order, and a long test handed out last keeps one worker busy while the others are idle.
LONG_FIRST = frozenset({"test_train_run", "test_train_distributed", "test_train_deepspeed", "test_train_reference",
                        "test_train_drift", "test_triage_threads", "test_compare_launch", "test_attack_replay",
                        "test_hostile_flood", "test_train_own_model", "test_probes_collective_sweep"})


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.stem not in LONG_FIRST)  # stable: each module's tests stay in order


def pytest_collection_finish(session: pytest.Session) -> None:
    import importlib.util
    import sys

    global _ops_build
    if session.config.option.collectonly or not any(
            "torch_extensions_dir" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    if importlib.util.find_spec("deepspeed") is None or not (shutil.which("g++") and shutil.which("ninja")):
        return  # those tests skip themselves
    keep = os.environ.get(KEPT_EXTENSIONS_ENV)
    folder = Path(keep or tempfile.mkdtemp(prefix="rocmcheck-torch-extensions-"))
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "rocmcheck-test-build.log", "wb")
    env = dict(os.environ, DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(folder))
    proc = subprocess.Popen([sys.executable, "-c", _BUILD_DEEPSPEED_OPS], env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _ops_build = _OpsBuild(proc, folder, log, ours=not keep)


def _stop_ops_build(build: _OpsBuild) -> None:
    """Kill the build child if it still runs. torch's build lock is a file (<op>/lock) that only its holder
    removes, so a killed holder would leave every later build of that op waiting on it forever: the locks it held
    go with it."""
    if build.proc.poll() is None:
        import signal

        os.killpg(build.proc.pid, signal.SIGKILL)
        build.proc.wait()
        for lock in build.folder.glob("*/lock"):
            lock.unlink(missing_ok=True)


def _end_ops_build() -> None:
    global _ops_build
    if _ops_build is None:
        return
    _stop_ops_build(_ops_build)
    _ops_build.log.close()
    if _ops_build.ours:
        shutil.rmtree(_ops_build.folder, ignore_errors=True)
    _ops_build = None


@pytest.fixture(scope="session")
def torch_extensions_dir(tmp_path_factory) -> str:
    """Where DeepSpeed JIT-builds its CPU op (cpu_adam) during this test session: built once per
    session, by the child pytest_collection_finish started, never in the user's ~/.cache. Set
    ROCMCHECK_TEST_TORCH_EXTENSIONS_DIR to keep the builds between sessions (a CI cache)."""
    if _ops_build is not None:
        try:
            _ops_build.proc.wait(timeout=DEEPSPEED_OPS_BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_ops_build(_ops_build)  # the tests' own DeepSpeed runs then build (or fail to build) and say why
        return str(_ops_build.folder)
    return os.environ.get(KEPT_EXTENSIONS_ENV) or str(tmp_path_factory.mktemp("torch-extensions"))


# A shared fixture (module or session scope) that fails is one red test, not one per test that asks for it: the first
# test shows the failure; every later test that asks for the same fixture is skipped, naming it and that test.
_FAILED_SHARED: dict[str, str] = {}


def _shared_fixtures(item: pytest.Item) -> list[tuple[str, object]]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [(name, defs[-1]) for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope in ("module", "session", "package")]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, fixturedef in _shared_fixtures(item):
        key = f"{fixturedef.baseid}::{name}"
        if key in _FAILED_SHARED:
            pytest.skip(f"the shared fixture {name} failed in {_FAILED_SHARED[key]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup" and report.failed:
        for name, fixturedef in _shared_fixtures(item):
            cached = getattr(fixturedef, "cached_result", None)
            if cached is not None and cached[2] is not None:  # (result, key, exception info): this one raised
                _FAILED_SHARED.setdefault(f"{fixturedef.baseid}::{name}", item.nodeid)

