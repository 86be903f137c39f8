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


def test_a_script_whose_interpreter_is_missing_is_found_but_cannot_start(tmp_path):
    script = tmp_path / "rocminfo"
    script.write_text("#!/opt/no-such-python3.9/bin/python3\nprint('hello')\n")
    script.chmod(0o755)
    for argv, env in (([str(script)], None), (["rocminfo"], env_with_path(tmp_path))):
        res = run_command(argv, timeout=5, env=env)
        assert not res.not_found and res.interpreter_missing and res.returncode is None
        assert "/opt/no-such-python3.9/bin/python3" in res.error
        assert "could not be run" in res.describe_failure() and "not found" not in res.describe_failure()


def test_a_missing_program_and_a_missing_working_folder_are_told_apart(tmp_path):
    gone = run_command([str(tmp_path / "no-such-tool")], timeout=5)
    assert gone.not_found and not gone.interpreter_missing
    res = run_command(["true"], timeout=5, cwd=str(tmp_path / "no-such-folder"))
    assert not res.not_found and not res.interpreter_missing
    assert "working folder" in res.error and str(tmp_path / "no-such-folder") in res.error


def test_a_fifo_named_as_the_program_does_not_block_the_interpreter_check(tmp_path):
    import os

    from rocmcheck.runner import shebang_interpreter

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert shebang_interpreter(str(fifo)) is None
