"""Processes that leave their tool's process group or session (setsid, setpgid, a daemon that forks twice) are
found and ended by the runner: when they hold the tool's pipes after it exited (found by the pipes themselves),
when the tool times out (its tree, group and session), and, with rocmcheck a child subreaper, on the way out
(rocmcheck.runner.end_descendants). Real processes; each helper writes its pid to a file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rocmcheck.runner import PIPE_GRACE_S, run_command

REPO = Path(__file__).resolve().parents[1]

# How a helper leaves: python code run in the helper before it writes its pid and sleeps.
ESCAPES = {
    "setsid": "os.setsid()",
    "setpgid": "os.setpgid(0, 0)",
    "double fork": "os.setsid()\nif os.fork():\n    os._exit(0)",
}


def helper_tool(folder: Path, escape: str, *, keep_pipes: bool, then: str = "exit", orphan: bool = True
                ) -> tuple[Path, Path]:
    """folder/tool: starts a helper that leaves as ESCAPES[escape] says (holding the tool's stdout and stderr, or
    with them pointed at /dev/null), prints a line, then exits or hangs ("hang"); returns (tool, the helper's pid
    file). An orphan helper forks away from the child the tool started (so its parent is gone); otherwise the tool
    starts it in the background and stays its parent."""
    pid_file = folder / f"helper-{escape.replace(' ', '-')}.pid"
    helper = folder / "helper.py"
    helper.write_text(textwrap.dedent(f"""\
        import os, sys, time
        if not {keep_pipes!r}:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
        if {orphan!r} and os.fork():
            os._exit(0)  # the tool's own child ends: the helper is an orphan from here on
        """) + ESCAPES[escape] + textwrap.dedent(f"""
        with open({str(pid_file)!r} + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
        print("helper line", flush=True)
        time.sleep(300)
        """))
    tool = folder / "tool"
    tail = "exec sleep 300" if then == "hang" else "exit 0"
    tool.write_text(f"#!/bin/sh\n{sys.executable} {helper}{'' if orphan else ' &'}\n"
                    f"while [ ! -s {pid_file} ]; do sleep 0.05; done\necho tool line\n{tail}\n")
    tool.chmod(0o755)
    return tool, pid_file


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def gone_soon(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _cleanup(pid_file: Path) -> None:
    if pid_file.exists() and alive(int(pid_file.read_text())):
        os.kill(int(pid_file.read_text()), 9)


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_helper_holding_the_pipes_after_the_tool_exited_is_ended_and_its_output_kept(tmp_path, escape):
    tool, pid_file = helper_tool(tmp_path, escape, keep_pipes=True)
    try:
        start = time.monotonic()
        res = run_command([str(tool)], timeout=60)
        took = time.monotonic() - start
        assert res.returncode == 0 and not res.timed_out
        assert "tool line" in res.stdout and "helper line" in res.stdout  # read to the end, not given up on
        assert took < PIPE_GRACE_S + 10, took  # the grace, then the holder is ended: not the 300 s it sleeps
        assert gone_soon(int(pid_file.read_text())), f"the {escape} helper outlived its tool's run"
    finally:
        _cleanup(pid_file)


@pytest.mark.parametrize("escape", ["setsid", "setpgid"])
def test_a_timed_out_tool_takes_a_helper_that_left_its_group_with_it(tmp_path, escape):
    # The helper stays the tool's child (no double fork) with its pipes closed: found through the tool's tree.
    tool, pid_file = helper_tool(tmp_path, escape, keep_pipes=False, then="hang", orphan=False)
    try:
        res = run_command([str(tool)], timeout=3)
        assert res.timed_out and "tool line" in res.stdout
        assert gone_soon(int(pid_file.read_text())), f"the {escape} helper outlived its hung tool"
    finally:
        _cleanup(pid_file)


ADOPTING_PARENT = textwrap.dedent("""
    import os, sys, time
    from rocmcheck.runner import adopt_orphans, end_descendants, run_command
    assert adopt_orphans()
    res = run_command([sys.argv[1]], timeout=30)
    pid = int(open(sys.argv[2]).read())
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    print("adopted" if int(stat[1]) == os.getpid() else f"parent {stat[1]}", res.returncode, flush=True)
    end_descendants()
""")


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_subreaper_adopts_a_detached_helper_and_ends_it_on_the_way_out(tmp_path, escape):
    """A helper with its pipes closed that outlives its tool (a daemon an import starts): nothing ties it to
    the run but its ancestry, which adopt_orphans keeps pointing at rocmcheck."""
    tool, pid_file = helper_tool(tmp_path, escape, keep_pipes=False)
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.run([sys.executable, "-c", ADOPTING_PARENT, str(tool), str(pid_file)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.split() == ["adopted", "0"], proc.stdout
        assert gone_soon(int(pid_file.read_text())), f"the {escape} helper outlived rocmcheck"
    finally:
        _cleanup(pid_file)


def test_a_forked_copy_of_rocmcheck_holding_only_read_ends_is_left_alone(tmp_path):
    """A process forked from rocmcheck without exec (a DataLoader worker) while a command runs inherits the read
    ends of its pipes: it is no holder of the command's output and must survive the holder search."""
    import threading

    tool, pid_file = helper_tool(tmp_path, "setsid", keep_pipes=True)
    tool.write_text(tool.read_text().replace("echo tool line", "sleep 1\necho tool line"))
    results = []
    runner = threading.Thread(target=lambda: results.append(run_command([str(tool)], timeout=60)))
    runner.start()
    time.sleep(0.5)  # the command is running: its pipes exist in this process
    worker = os.fork()
    if worker == 0:
        time.sleep(30)
        os._exit(0)
    try:
        runner.join(60)
        assert results and "helper line" in results[0].stdout
        assert gone_soon(int(pid_file.read_text())), "the helper holding the write ends outlived its tool's run"
        assert alive(worker), "the forked copy holding only read ends was ended"
    finally:
        os.kill(worker, 9)
        os.waitpid(worker, 0)
        _cleanup(pid_file)
