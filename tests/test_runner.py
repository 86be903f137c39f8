"""The one command runner, on real processes: output, exit codes, missing tools, hangs, crashes, garbage."""

from __future__ import annotations

import time

from fakes import env_with_path, make_tool

from rocmcheck.runner import run_command


def test_captures_stdout_and_exit_code(tmp_path):
    make_tool(tmp_path, "tool", stdout="hello\n", exit_code=3)
    res = run_command(["tool"], timeout=10, env=env_with_path(tmp_path))
    assert res.stdout == "hello\n"
    assert res.returncode == 3
    assert not res.ok
    assert res.describe_failure() == "tool exited 3: hello"


def test_missing_tool_is_a_result_not_an_exception():
    res = run_command(["rocmcheck-no-such-tool-xyz"], timeout=5)
    assert res.not_found and res.returncode is None
    assert "not found" in res.describe_failure()


def test_hung_tool_is_killed_at_its_timeout(tmp_path):
    make_tool(tmp_path, "hangs", stdout="partial output\n", hang=True)
    start = time.monotonic()
    res = run_command(["hangs"], timeout=1.0, env=env_with_path(tmp_path))
    elapsed = time.monotonic() - start
    assert res.timed_out and res.returncode is None
    assert "partial output" in res.stdout
    assert "hung" in res.describe_failure()
    assert elapsed < 10  # killed, not waited for (the tool sleeps 300 s)


def test_tool_whose_child_keeps_the_pipe_open_is_killed_too(tmp_path):
    # The background sleep inherits stdout; killing only the parent would leave communicate() blocked.
    script = tmp_path / "forker"
    script.write_text("#!/bin/sh\nsleep 300 &\necho started\nwait\n")
    script.chmod(0o755)
    start = time.monotonic()
    res = run_command([str(script)], timeout=1.0)
    assert res.timed_out
    assert time.monotonic() - start < 10


def test_crashing_tool_reports_the_signal(tmp_path):
    make_tool(tmp_path, "crashes", stdout="before crash\n", crash_signal="SEGV")
    res = run_command(["crashes"], timeout=10, env=env_with_path(tmp_path))
    assert res.returncode == -11
    assert "crashed" in res.describe_failure() and "11" in res.describe_failure()


def test_binary_garbage_is_decoded_not_raised(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    make_tool(tmp_path, "garbage", stdout_file=blob)
    res = run_command(["garbage"], timeout=10, env=env_with_path(tmp_path))
    assert res.ok
    assert "\ufffd" in res.stdout  # undecodable bytes replaced


def test_not_executable_file_is_an_error_result(tmp_path):
    path = tmp_path / "plain"
    path.write_text("not a program")
    res = run_command([str(path)], timeout=5)
    assert res.returncode is None and res.error and "PermissionError" in res.error
