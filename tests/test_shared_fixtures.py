"""A shared fixture that fails is one red test (tests/conftest.py): the suite's own conftest, run by a real pytest on a
module whose module-scoped fixture raises, shows the failure once and skips the other tests that ask for it, naming
the fixture and the test that showed it; a test that does not ask for it still runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DEMO = '''
import pytest


@pytest.fixture(scope="module")
def slow_run():
    raise TimeoutError("the run took longer than its limit")


def test_first(slow_run):
    pass


def test_second(slow_run):
    pass


def test_third(slow_run):
    pass


def test_apart():
    pass
'''


def test_a_failing_shared_fixture_is_one_error_and_the_rest_skip(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_demo.py").write_text(DEMO, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    tail = proc.stdout.strip().splitlines()[-1]
    assert "1 passed, 2 skipped, 1 error" in tail, proc.stdout[-3000:]
    assert proc.stdout.count("TimeoutError: the run took longer than its limit") == 1
    assert "the shared fixture slow_run failed in test_demo.py::test_first" in proc.stdout
