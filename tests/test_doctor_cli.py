"""`rocmcheck doctor` end to end, as a real process, with fake tools on PATH printing real recorded outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES_DIR, read_fixture
from fakes import env_with_path, make_tool

MI300X = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"


def doctor(*args: str, env=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def mi300x_path(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "rocminfo", stdout_file=FIXTURES_DIR / MI300X)
    make_tool(bin_dir, "rocm-smi", stdout_file=FIXTURES_DIR / "rocm-smi/mi300x-8gpu-rocm6.2.3-concise-ansi-literal.txt")
    return bin_dir


def by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


def test_json_report_on_a_fake_mi300x(mi300x_path):
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--arch", "gfx942", env=env_with_path(mi300x_path))
    report = json.loads(proc.stdout)
    assert report["schema_version"] == 3 and report["tool"] == "rocmcheck" and report["command"] == "doctor"
    v = by_id(report)
    assert v["gpu.present"]["status"] == "pass" and "8 AMD GPU" in v["gpu.present"]["summary"]
    assert v["gpu.expected_arch"]["status"] == "pass"
    # This CI box has no /dev/kfd, so the AMD device checks fail and the exit code says so.
    assert v["devices.kfd"]["status"] == "fail"
    assert report["verdict"] == "fail" and proc.returncode == 1
    assert report["counts"]["fail"] == sum(1 for r in report["results"] if r["status"] == "fail")
    assert v["probe.stage"]["status"] == "skip" and v["train.stage"]["status"] == "skip"


def test_arch_mismatch_fails_with_exit_1(mi300x_path):
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--arch", "gfx90a", "--only", "gpu",
                  env=env_with_path(mi300x_path))
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.expected_arch"]["status"] == "fail"
    assert proc.returncode == 1


def test_hanging_rocminfo_ends_within_the_deadline(tmp_path):
    make_tool(tmp_path, "rocminfo", hang=True)
    start = time.monotonic()
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--deadline", "3", env=env_with_path(tmp_path), timeout=60)
    elapsed = time.monotonic() - start
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.rocminfo"]["status"] == "fail" and "hung" in v["gpu.rocminfo"]["summary"]
    assert v["doctor.deadline"]["status"] == "fail" and "rocminfo" in v["doctor.deadline"]["summary"]
    assert proc.returncode == 1
    assert elapsed < 30  # the fake sleeps 300 s


def test_rocminfo_permission_denied_text(tmp_path):
    fixture = "rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt"
    read_fixture(fixture)
    make_tool(tmp_path, "rocminfo", stdout_file=FIXTURES_DIR / fixture, exit_code=1)
    proc = doctor("--json", "--no-gpu-probes", "--no-train", env=env_with_path(tmp_path))
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.rocminfo"]["status"] == "fail"
    assert "Unable to open /dev/kfd read-write: Permission denied" in v["gpu.rocminfo"]["summary"]
    assert "render" in v["gpu.rocminfo"]["fix"]["text"]


def test_crashing_rocminfo(tmp_path):
    make_tool(tmp_path, "rocminfo", stdout="ROCk module is loaded\n", crash_signal="SEGV")
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu.rocminfo", env=env_with_path(tmp_path))
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.rocminfo"]["status"] == "fail" and "crashed" in v["gpu.rocminfo"]["summary"]


def test_bundle_round_trip_gives_identical_verdicts_and_no_secrets(mi300x_path, tmp_path):
    bundle = tmp_path / "bundle.json"
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    env = env_with_path(mi300x_path, HF_TOKEN=secret, NCCL_DEBUG="INFO", HIP_VISIBLE_DEVICES="0,1")
    live = doctor("--json", "--no-gpu-probes", "--no-train", "--save-bundle", str(bundle), env=env)
    text = bundle.read_text()
    assert secret not in text and secret not in live.stdout
    saved = json.loads(text)
    assert saved["facts"]["env"]["HF_TOKEN"] == "<redacted>" and saved["facts"]["env"]["NCCL_DEBUG"] == "INFO"
    assert saved["facts"]["commands"]["rocminfo"]["stdout"] == read_fixture(MI300X)
    # Replay with no fake tools on PATH: nothing on this machine is consulted.
    replay = doctor("--json", "--no-gpu-probes", "--no-train", "--bundle", str(bundle))
    strip = lambda rep: [{k: r[k] for k in ("id", "status", "summary", "evidence", "fix")} for r in rep["results"]]
    live_report, replay_report = json.loads(live.stdout), json.loads(replay.stdout)
    assert strip(replay_report) == strip(live_report)
    assert replay_report["source"] == "bundle" and replay.returncode == live.returncode


@pytest.mark.parametrize("args, expected", [
    (["--arch", "gfx-942"], "did you mean gfx942"),
    (["--arch", "banana"], "unknown GPU arch or product 'banana'"),
    (["--only", "gpu.presnt"], "did you mean gpu.present"),
    (["--bundle", "/nonexistent/b.json"], "cannot read bundle"),
    (["--frobnicate"], "No such option"),
])
def test_bad_input_is_one_line_and_exit_2(args, expected):
    proc = doctor(*args)
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_not_a_bundle_is_rejected(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    proc = doctor("--bundle", str(bad))
    assert proc.returncode == 2 and "not a rocmcheck bundle" in proc.stderr and "Traceback" not in proc.stderr


def test_list_checks_lists_stable_ids():
    proc = doctor("--list-checks")
    assert proc.returncode == 0
    ids = [line.split()[0] for line in proc.stdout.splitlines()]
    for needed in ("os.release", "rocm.install", "devices.kfd", "gpu.arch", "env.hsa_override", "torch.arch_list",
                   "triton.pin", "flash_attn.import", "deepspeed.ops", "host.iommu", "nvidia.smi"):
        assert needed in ids


def test_console_report_on_this_cpu_machine_says_no_gpu():
    proc = doctor("--no-gpu-probes", "--no-train")
    assert "no GPU found" in proc.stdout and "Verdict:" in proc.stdout
    assert proc.returncode == 1


def test_the_cross_node_verdict_is_printed_as_well_as_counted():
    """--across-nodes outside a launcher: cluster.collective is a skip (one node), in the table as in the JSON."""
    args = ("--across-nodes", "--no-gpu-probes", "--no-train", "--only", "cluster,torch")
    text, report = doctor(*args, "-v"), json.loads(doctor(*args, "--json").stdout)
    assert by_id(report)["cluster.collective"]["status"] == "skip"
    for r in report["results"]:
        assert r["id"] in text.stdout, r["id"]
    assert "one node in this" in text.stdout


def test_importing_the_cli_and_doctor_does_not_import_torch():
    code = ("import sys, rocmcheck.cli, rocmcheck.doctor, rocmcheck.commands.doctor, rocmcheck.checks;"
            "rocmcheck.checks.all_checks(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_library_that_segfaults_on_import_is_named_and_the_others_still_report(tmp_path):
    # A real segfault inside `import flash_attn` (what an extension built for another ROCm does): the doctor's
    # Python-stack child dies; torch's result came first, and the probes it did not report are re-run alone.
    pkg = tmp_path / "site" / "flash_attn"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    env = env_with_path(tmp_path, PYTHONPATH=str(tmp_path / "site"))
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "torch,flash_attn,deepspeed", env=env)
    v = by_id(json.loads(proc.stdout))
    assert v["torch.installed"]["status"] == "pass"
    assert v["flash_attn.import"]["status"] == "fail"
    assert "crashed (signal 11)" in v["flash_attn.import"]["summary"]
    assert v["deepspeed.install"]["status"] in ("pass", "warn", "skip")  # re-run alone, so it still reports
    assert "crash" not in json.dumps(v["deepspeed.install"]).lower()


def test_a_hung_vendor_binding_is_named_alone(tmp_path):
    # amdsmi_init() talks to the driver: on a wedged GPU it hangs. Only it may be blamed, within the deadline.
    site = tmp_path / "site"
    site.mkdir()
    (site / "amdsmi.py").write_text("import time\ndef amdsmi_init():\n    time.sleep(300)\n")
    start = time.monotonic()
    # The deadline leaves the real torch + DeepSpeed import room on a loaded 2-core box (seen taking over 6 s; 15 s
    # is over twice that); the stand-in sleeps 300 s, so finishing at all shows the hung binding was given up on.
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "torch,flash_attn,deepspeed", "--deadline", "15",
                  env=env_with_path(tmp_path, PYTHONPATH=str(site)), timeout=200)
    report = json.loads(proc.stdout)
    v = by_id(report)
    assert "stopped waiting after 15 s for: amdsmi" == v["doctor.deadline"]["summary"]
    assert v["torch.installed"]["status"] == "pass" and v["deepspeed.install"]["status"] in ("pass", "warn")
    assert time.monotonic() - start < 200


@pytest.mark.parametrize("edit", [
    lambda f: f.update(os_info=None),
    lambda f: f.update(platform=[]),
    lambda f: f["probes"].update(torch="x"),
    lambda f: f.update(recorded_results=[{"id": "x"}]),
    lambda f: f.update(probes={"\n\x1b[2J": 0}),  # a key of the damaged part is echoed, on the one line
    lambda f: f.update(known={"group\nsecond line": 1}),
])
def test_a_damaged_bundle_is_one_line_and_exit_2(tmp_path, edit):
    good = tmp_path / "good.json"
    doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu,host", "--save-bundle", str(good))
    doc = json.loads(good.read_text())
    edit(doc["facts"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = doctor("--bundle", str(bad))
    assert proc.returncode == 2 and "damaged bundle" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bundle_whose_name_holds_a_newline_is_refused_on_one_line(tmp_path):
    odd = tmp_path / "node\n2.json"
    odd.write_text(json.dumps({"not": "a bundle"}))
    proc = doctor("--bundle", str(odd))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"Error: {tmp_path}/node\\n2.json is not a rocmcheck bundle (made by `rocmcheck doctor --out FILE`)"]


@pytest.mark.parametrize("argv", [["nosuch"], ["doctor", "--bundle", "/nonexistent/b.json"], ["probe", "nope"],
                                  ["lint", "--world-size", "0", "x.json"],
                                  ["doctor", "--save-bundle", "/nonexistent/x.json"]])
def test_every_usage_error_is_exactly_one_line(argv):
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("Error: ")


def test_url_passwords_are_redacted():
    from rocmcheck.facts.redact import redact_env

    env = redact_env({"HF_ENDPOINT": "https://bob:s3cretpass@mirror.example/hf", "NCCL_DEBUG": "INFO"}, [],
                     ["HF_", "NCCL_"])
    assert env["HF_ENDPOINT"] == "https://bob:<redacted>@mirror.example/hf" and env["NCCL_DEBUG"] == "INFO"


def _bundle(tmp_path, name: str = "good.json") -> dict:
    """A real bundle of this machine (no torch child: gpu and host checks only), as a document to edit."""
    path = tmp_path / name
    doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu,host", "--save-bundle", str(path))
    return json.loads(path.read_text())


def _write(tmp_path, doc: dict, name: str = "edited.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("size", ["1e999", "-1e999", "NaN", "9" * 400, "true"])
def test_a_hostile_size_from_amd_smi_still_gives_the_report(tmp_path, mi300x_path, size):
    static = '[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, "vram": {"size": {"value": %s, ' \
             '"unit": "MB"}}}]' % size
    make_tool(mi300x_path, "amd-smi", stdout=static)
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu", env=env_with_path(mi300x_path))
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1)
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.present"]["status"] == "pass" and "8 AMD GPU" in v["gpu.present"]["summary"]


def test_a_replayed_fix_with_a_newline_never_prints_as_two_lines(tmp_path):
    doc = _bundle(tmp_path)
    recorded = {"area": "probe", "status": "fail", "summary": "gemm failed", "evidence": [], "data": {}}
    doc["facts"]["recorded_results"] = [
        {**recorded, "id": "probe.gemm", "fix": {"kind": "shell", "text": "rocmcheck probe gemm\ntouch PWNED1",
                                                  "why": "rerun\ntouch PWNED2", "file": ""}},
        {**recorded, "id": "probe.memory", "fix": "rocmcheck probe memory\ntouch PWNED3  # an older bundle's string"},
        {**recorded, "id": "probe.attention", "fix": {"kind": "shell", "text": "rocmcheck probe attention",
                                                       "why": "run it alone", "file": ""}},
    ]
    bundle = _write(tmp_path, doc)
    fixes_only = doctor("--bundle", str(bundle), "--only", "probe", "--fixes-only")
    lines = fixes_only.stdout.splitlines()
    # A whole recorded shell fix is shown as what was recorded, a comment: the bundle's file wrote it, not rocmcheck
    assert "# recorded with this bundle: rocmcheck probe attention # run it alone  [probe.attention]" in lines
    assert not [line for line in lines if "PWNED" in line and not line.startswith("#")], lines
    assert fixes_only.returncode == 1
    console = doctor("--bundle", str(bundle), "--only", "probe")
    assert not [line for line in console.stdout.splitlines() if line.lstrip().startswith("touch")]
    report = json.loads(doctor("--bundle", str(bundle), "--only", "probe", "--json").stdout)
    kinds = {r["id"]: r["fix"]["kind"] for r in report["results"]}
    assert kinds == {"probe.gemm": "note", "probe.memory": "note", "probe.attention": "note"}


def test_a_replayed_fix_of_real_words_that_runs_code_is_never_a_line_to_paste(tmp_path):
    """`python -c '...'` and `sudo rm -rf ...` pass as shell lines (their words are real commands), but in a
    bundle they are whatever its writer put there: the replay and compare show them as notes only."""
    doc = _bundle(tmp_path)
    recorded = {"area": "probe", "status": "fail", "summary": "gemm failed", "evidence": [], "data": {}}
    doc["facts"]["recorded_results"] = [
        {**recorded, "id": "probe.gemm", "fix": {"kind": "shell", "text": "python -c 'import os; os.system(\"touch "
                                                  "PWNED\")'", "why": "shows the error", "file": ""}}]
    bundle = _write(tmp_path, doc)
    lines = doctor("--bundle", str(bundle), "--only", "probe", "--fixes-only").stdout.splitlines()
    assert [line for line in lines if "PWNED" in line] and all(line.startswith("#") for line in lines if line), lines
    console = doctor("--bundle", str(bundle), "--only", "probe").stdout  # problems first: a note is "do:"
    assert [line for line in console.splitlines() if line.startswith("  do: ") and "PWNED" in line]
    assert "  fix: " not in console
    verbose = doctor("--bundle", str(bundle), "--only", "probe", "-v").stdout
    assert "Fixes (paste a line" not in verbose and "What to do by hand:" in verbose


def test_nothing_judged_exits_3(tmp_path):
    doc = _bundle(tmp_path)
    doc["facts"]["recorded_results"] = [{"id": "probe.stage", "area": "probe", "status": "skip", "fix": None,
                                         "summary": "GPU probes skipped: torch sees no GPU", "evidence": [],
                                         "data": {}}]
    bundle = _write(tmp_path, doc)
    proc = doctor("--bundle", str(bundle), "--only", "probe")
    assert proc.returncode == 3 and "NOT JUDGED" in proc.stdout
    assert doctor("--bundle", str(bundle), "--only", "probe", "--json").returncode == 3


def test_a_bundle_with_too_many_recorded_results_is_refused_at_once(tmp_path):
    from rocmcheck.doctor import MAX_RECORDED_RESULTS

    doc = _bundle(tmp_path)
    one = {"id": "probe.gemm", "area": "probe", "status": "pass", "summary": "ok", "evidence": ["e"], "fix": None,
           "data": {}}
    doc["facts"]["recorded_results"] = [one] * MAX_RECORDED_RESULTS
    start = time.monotonic()
    at_cap = doctor("--bundle", str(_write(tmp_path, doc, "at-cap.json")), "--only", "probe", "--fixes-only")
    assert at_cap.returncode == 0 and time.monotonic() - start < 60
    doc["facts"]["recorded_results"] = [one] * 200_000
    start = time.monotonic()
    proc = doctor("--bundle", str(_write(tmp_path, doc, "huge.json")), "--fixes-only")
    assert proc.returncode == 2 and "200000 recorded results" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and time.monotonic() - start < 30


def test_a_tool_whose_interpreter_is_missing_is_not_called_missing(tmp_path):
    tool = tmp_path / "rocminfo"
    tool.write_text("#!/nonexistent/interpreter\necho hello\n")
    tool.chmod(0o755)
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu.rocminfo", env=env_with_path(tmp_path))
    r = by_id(json.loads(proc.stdout))["gpu.rocminfo"]
    assert r["status"] == "fail" and "not found" not in r["summary"] and "/nonexistent/interpreter" in r["summary"]
    assert r["fix"]["text"] == f"head -n 1 {tool}"


def test_a_tool_under_rocm_path_alone_is_found(tmp_path):
    # ROCm's installers put rocminfo in ROCM_PATH/bin without touching PATH: the one tool locator looks there.
    rocm = tmp_path / "rocm"
    make_tool(rocm / "bin", "rocminfo", stdout_file=FIXTURES_DIR / MI300X)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = env_with_path(empty, ROCM_PATH=str(rocm))
    env["PATH"] = f"{empty}:/usr/bin:/bin"
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "gpu", env=env)
    v = by_id(json.loads(proc.stdout))
    assert v["gpu.present"]["status"] == "pass" and "8 AMD GPU" in v["gpu.present"]["summary"]


FAKE_ROCM_TORCH = '''
__version__ = "2.5.1+rocm6.2"
class version:
    hip, cuda, git_version = "6.2.41133-dd7f95766", None, "x"
class _C:
    @staticmethod
    def _cuda_getArchFlags():
        return "--offload-arch=gfx942"
class _Props:
    name, gcnArchName, major, minor, total_memory = "AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 9, 4, 205822885888
class cuda:
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 2)
    get_arch_list = staticmethod(lambda: ["gfx942"])
    get_device_properties = staticmethod(lambda i: _Props())
'''


def test_torch_devices_are_described_once_and_the_checks_read_them(tmp_path):
    # A stand-in torch answering like a ROCm build on two MI300X (no GPU here): the probe child describes its
    # devices with facts/torch_devices.py, and the parent reads the child's events.
    from machines import amd_machine, verdicts

    from rocmcheck.child import child_env, run_child
    from rocmcheck.facts.collect import probe_answers

    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "__init__.py").write_text(FAKE_ROCM_TORCH)
    env = child_env(base=env_with_path(tmp_path, PYTHONPATH=str(tmp_path / "site")))
    run = run_child("rocmcheck.facts.python_probe", {"probes": ["torch"]}, 60, env=env)
    torch = probe_answers(run.events)["torch"]
    assert torch["devices"] == [{"index": i, "name": "AMD Instinct MI300X", "arch": "gfx942",
                                 "gcn_arch": "gfx942:sramecc+:xnack-", "capability": [9, 4],
                                 "total_bytes": 205822885888} for i in range(2)]
    v = verdicts(amd_machine(probes={"torch": torch}), "torch.sees_gpus", "torch.arch_list")
    assert v["torch.arch_list"].status.value == "pass"
    assert "AMD Instinct MI300X (gfx942:sramecc+:xnack-)" in v["torch.sees_gpus"].evidence


def test_only_probe_events_of_the_right_shape_are_answers():
    from rocmcheck.facts.collect import probe_answers

    events = [{"event": "probe", "probe": "torch", "data": {"version": "2.5"}}, {"event": "probe", "probe": 3,
              "data": {}}, {"event": "probe", "probe": "nvml", "data": "x"}, {"event": "progress", "probe": "amdsmi",
              "data": {}}, {"event": "probe", "data": {}}]
    assert probe_answers(events) == {"torch": {"version": "2.5"}}


def test_a_probe_answered_twice_is_not_believed(tmp_path):
    """A torch whose import writes its own answer to the probe's channel (the descriptor is reachable through
    /proc/self/fd) before it fails: two answers for one probe, so neither is taken."""
    from rocmcheck.facts.collect import probe_answers

    events = [{"event": "probe", "probe": "torch", "data": {"installed": True, "version": "9.9.9"}},
              {"event": "probe", "probe": "torch", "data": {"installed": True, "error": "ImportError: no torch"}},
              {"event": "probe", "probe": "deepspeed", "data": {"installed": False}}]
    answers = probe_answers(events)
    assert "version" not in answers["torch"] and "answered 2 times" in answers["torch"]["error"]
    assert answers["deepspeed"] == {"installed": False}
