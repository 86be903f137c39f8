"""`rocmcheck monitor` around real child processes: exit codes, signals forwarded to the child's process group,
output passed through byte for byte, a child that exits at once, one that outlives --timeout, --pid attach,
and the readers fed by fake nvidia-smi executables / a stand-in NVML module on PATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import monitor_curves as mc
import pytest
from conftest import read_fixture
from fakes import env_with_path

H200_QUERY = "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"


def monitor(args, tmp_path, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--out", str(tmp_path / "out"),
                           *args], capture_output=True, env=env or _no_gpu_env(tmp_path), timeout=120, **kw)


def _no_gpu_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """PATH without GPU tools (an empty bin first keeps any real ones out of reach only if absent here)."""
    return env_with_path(tmp_path / "bin", **extra)


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_exit_code_and_output_pass_through_byte_exact(tmp_path):
    child = script(tmp_path, "child.py", r"""
        import os, sys
        os.write(1, b"step 1 loss 2.5\r\n\x00\xff\xfe binary\x1b[31m no newline")
        os.write(2, b"warning: \xe4\xb8\xad\xe6\x96\x87 on stderr\n")
        sys.exit(3)
    """)
    proc = monitor(["--", sys.executable, child], tmp_path)
    assert proc.returncode == 3
    assert proc.stdout == b"step 1 loss 2.5\r\n\x00\xff\xfe binary\x1b[31m no newline"
    child_err = b"warning: \xe4\xb8\xad\xe6\x96\x87 on stderr\n"
    assert child_err in proc.stderr
    # the verdict goes to stderr, after the child's own lines
    assert proc.stderr.index(b"monitor.memory_curve") > proc.stderr.index(child_err)


def test_child_that_exits_at_once_and_one_killed_by_a_signal(tmp_path):
    # No GPU reader here: the command succeeded, nothing could be judged: NOT JUDGED, exit 3 (the one rule).
    proc = monitor(["--", "true"], tmp_path)
    assert proc.returncode == 3 and b"Verdict: NOT JUDGED" in proc.stderr and b"PASS" not in proc.stderr
    # The folder asked for with --out is not made, and the line that says so names it.
    assert f"running without sampling; nothing is written to {tmp_path / 'out'}".encode() in proc.stderr
    assert not (tmp_path / "out").exists()
    # With a GPU to read the same command is judged (the peak against capacity): exit 0.
    assert monitor(["--", "true"], tmp_path / "gpu", env=fake_nvidia_smi(tmp_path / "gpu")).returncode == 0
    killed = monitor(["--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                     tmp_path / "b")
    assert killed.returncode == 128 + signal.SIGKILL


def test_a_failed_command_exits_with_its_own_code_whatever_the_verdicts(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    assert monitor(["--", sys.executable, "-c", "import sys; sys.exit(5)"], tmp_path, env=env).returncode == 5
    assert monitor(["--", sys.executable, "-c", "import sys; sys.exit(5)"], tmp_path / "n").returncode == 5


def test_command_not_found_is_127(tmp_path):
    proc = monitor(["--", "no-such-command-rocmcheck"], tmp_path)
    assert proc.returncode == 127 and b"command not found" in proc.stderr


@pytest.mark.parametrize("sig,expected", [(signal.SIGTERM, 42), (signal.SIGINT, 43)])
def test_signals_are_forwarded_to_the_childs_group(tmp_path, sig, expected):
    ready, got, grandchild = tmp_path / "ready", tmp_path / "got", tmp_path / "grandchild"
    child = script(tmp_path, "child.py", f"""
        import signal, subprocess, sys, time
        # a launcher-like child: one worker below it, in the same process group
        worker = subprocess.Popen([sys.executable, "-c",
            "import signal, sys, time\\n"
            "signal.signal(signal.SIGTERM, lambda *a: (open({str(grandchild)!r}, 'w').write('term'), sys.exit(0)))\\n"
            "signal.signal(signal.SIGINT, lambda *a: (open({str(grandchild)!r}, 'w').write('int'), sys.exit(0)))\\n"
            "time.sleep(300)"])
        def handler(signum, frame):
            worker.wait(timeout=30)
            open({str(got)!r}, "w").write(str(signum))
            sys.exit({expected})
        signal.signal({int(sig)}, handler)
        time.sleep(0.5)
        open({str(ready)!r}, "w").write("1")
        time.sleep(300)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--out", str(tmp_path / "o"),
                             "--", sys.executable, child], env=_no_gpu_env(tmp_path), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(ready)
    os.kill(proc.pid, sig)  # the monitor alone: it must pass the signal on
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == expected, err
    assert got.read_text() == str(int(sig))
    assert grandchild.read_text() == ("term" if sig == signal.SIGTERM else "int")


def test_timeout_ends_a_child_that_never_exits(tmp_path):
    start = time.monotonic()
    proc = monitor(["--timeout", "1", "--", sys.executable, "-c", "import time; time.sleep(300)"], tmp_path)
    # The report wraps its lines to the terminal's width: where "timed out" falls depends on the Python's path.
    assert proc.returncode == 124 and b"timed out" in b" ".join(proc.stderr.split())
    assert time.monotonic() - start < 60


def test_attach_to_a_running_pid(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        proc = monitor(["--pid", str(sleeper.pid)], tmp_path)
    finally:
        sleeper.wait(timeout=30)
    # Nothing to read the GPUs with here: the one rule's "nothing could be judged", exit 3.
    assert proc.returncode == 3 and f"pid {sleeper.pid}".encode() in b" ".join(proc.stderr.split())
    assert monitor(["--pid", "999999999"], tmp_path / "x").returncode == 2  # bad input: one line, exit 2


def test_bad_usage_is_one_line_and_exit_2(tmp_path):
    proc = monitor([], tmp_path)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1


# ---- readers fed by fakes ------------------------------------------------------------------------------------

FAKE_NVIDIA_SMI = r'''#!{python}
"""nvidia-smi stand-in: answers the monitor's two queries in nvidia-smi's csv layout (header with units in
brackets, nounits values), with the recorded H200s' uuids and capacity; memory.used climbs by 1 GiB a call."""
import os, sys
counter = {counter!r}
try:  # several monitors may share one counter: it is replaced whole, never read half-written
    n = int(open(counter).read())
except (OSError, ValueError):
    n = 0
open(f"{{counter}}.{{os.getpid()}}", "w").write(str(n + 1))
os.replace(f"{{counter}}.{{os.getpid()}}", counter)
args = " ".join(sys.argv[1:])
if "--query-compute-apps" in args:
    print("gpu_uuid, pid, used_gpu_memory [MiB]")
    sys.exit(0)
print("index, uuid, memory.used [MiB], memory.total [MiB], power.draw [W], utilization.gpu [%], "
      "temperature.gpu, clocks.sm [MHz], clocks.mem [MHz]")
for i, uuid in enumerate({uuids!r}):
    print(f"{{i}}, {{uuid}}, {{1024 * n + 500 * i}}, 143771, 412.50, 97, 61, 1980, 3201")
'''


def fake_nvidia_smi(tmp_path: Path) -> dict[str, str]:
    rows = [line.split(", ") for line in read_fixture(H200_QUERY).splitlines() if line.strip()]
    uuids = [r[-1] for r in rows]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text(FAKE_NVIDIA_SMI.format(python=sys.executable, counter=str(tmp_path / "calls"), uuids=uuids))
    tool.chmod(0o755)
    # no NVML driver here, so the reader falls through to the CLI (the real nvidia-ml-py is installed in CI)
    return env_with_path(bin_dir)


def test_a_command_that_ends_before_the_first_tick_still_gets_one_reading(tmp_path):
    """The stop event set before the sampling thread first runs (a command quicker than a busy scheduler)."""
    from rocmcheck.monitor.sampler import open_reader
    from rocmcheck.monitor.wrap import Sampler

    reader, tried = open_reader("nvidia-smi", fake_nvidia_smi(tmp_path))
    assert reader is not None, tried
    sampler = Sampler(reader, 60.0, None, None, "vm", {}, time.monotonic())
    sampler.stop_event.set()
    sampler.start()
    sampler.join(timeout=60)
    reader.close()
    assert not sampler.is_alive()
    assert sorted(s.gpu for s in sampler.samples) == [0, 1]


def test_readings_from_nvidia_smi_are_recorded(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    proc = monitor(["--interval", "0.1", "--", sys.executable, "-c", "import time; time.sleep(1.5)"], tmp_path,
                   env=env)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    host_files = list(out.glob("memory-*.jsonl"))
    assert len(host_files) == 1 and (out / host_files[0].name.replace(".jsonl", ".csv")).exists()
    rows = [json.loads(line) for line in host_files[0].read_text().splitlines()]
    assert {r["gpu"] for r in rows} == {0, 1} and len(rows) >= 6
    gpu0 = [r["used_bytes"] for r in rows if r["gpu"] == 0]
    assert gpu0 == sorted(gpu0) and gpu0[-1] > gpu0[0]
    assert rows[0]["total_bytes"] == 143771 * 1024**2
    assert rows[0]["power_w"] == 412.5 and rows[0]["sm_clock_mhz"] == 1980
    verdict = json.loads(next(out.glob("verdict-*.json")).read_text())
    assert verdict["reader"] == "nvidia-smi" and verdict["exit_code"] == 0
    assert {r["id"] for r in verdict["results"]} == {"monitor.memory_curve", "monitor.memory_peak"}
    assert b"via nvidia-smi" in b" ".join(proc.stderr.split())  # the header wraps to the terminal's width


def test_cuda_visible_devices_selects_the_gpus(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    rows = [line.split(", ") for line in read_fixture(H200_QUERY).splitlines() if line.strip()]
    env["CUDA_VISIBLE_DEVICES"] = rows[1][-1][:12]  # a UUID prefix, as CUDA accepts
    monitor(["--interval", "0.1", "--", sys.executable, "-c", "import time; time.sleep(0.8)"], tmp_path, env=env)
    rows = [json.loads(line) for line in next((tmp_path / "out").glob("memory-*.jsonl")).read_text().splitlines()]
    assert rows and {r["gpu"] for r in rows} == {1}


STAND_IN_PYNVML = '''
"""pynvml stand-in (nvidia-ml-py's names and shapes): 2 GPUs; GPU 1 lists every process whose command line
holds the marker, as NVML lists the processes holding memory."""
import os
NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
class _Mem:
    total, used = 150754820096, 3 * 1024**3
class _Util:
    gpu = 88
class _Proc:
    def __init__(self, pid): self.pid, self.usedGpuMemory = pid, 2 * 1024**3
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetUUID(h): return "GPU-%d" % h
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetPowerUsage(h): return 401500
def nvmlDeviceGetUtilizationRates(h): return _Util()
def nvmlDeviceGetTemperature(h, kind): return 58
def nvmlDeviceGetClockInfo(h, kind): return 1980 if kind == NVML_CLOCK_SM else 3201
def nvmlDeviceGetComputeRunningProcesses(h):
    if h != 1:
        return []
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"rocmcheck-marker" in open(f"/proc/{pid}/cmdline", "rb").read():
                out.append(_Proc(int(pid)))
        except OSError:
            pass
    return out
'''


def test_nvml_process_list_picks_the_gpu_the_command_uses(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "pynvml.py").write_text(STAND_IN_PYNVML)
    env = _no_gpu_env(tmp_path, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    # the launcher (python) starts a worker that holds the marker, as torchrun starts its ranks
    child = script(tmp_path, "launch.py", """
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.2)", "rocmcheck-marker"], check=True)
    """)
    proc = monitor(["--interval", "0.1", "--", sys.executable, child], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(next((tmp_path / "out").glob("verdict-*.json")).read_text())
    assert verdict["reader"] == "nvml" and verdict["watched"] == [1]
    assert "processes hold memory" in verdict["watched_by"]
    rows = [json.loads(line) for line in next((tmp_path / "out").glob("memory-*.jsonl")).read_text().splitlines()]
    assert any(r["gpu"] == 1 and r["proc_bytes"] == 2 * 1024**3 for r in rows)
    assert rows[0]["power_w"] == 401.5 and rows[0]["temp_c"] == 58


def test_replay_merges_nodes_and_finds_the_staircase(tmp_path):
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    for host, curve in (("node1", mc.flat()), ("node2", mc.staircase())):
        with open(recordings / f"memory-{host}.jsonl", "w") as f:
            for t, used in zip(*curve):
                f.write(json.dumps({"t": t, "gpu": 0, "used_bytes": int(used), "total_bytes": mc.H200,
                                    "host": host}) + "\n")
    proc = monitor(["--replay", str(recordings)], tmp_path)
    assert proc.returncode == 1
    text = proc.stderr.decode()
    assert "FAIL" in text and "monitor.memory_curve" in text and "node2:0" in text and "node1:0: flat" in text
    assert (tmp_path / "out" / "verdict-merged.json").exists()
