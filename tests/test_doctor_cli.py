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
    assert report["schema_version"] == 2 and report["tool"] == "rocmcheck" and report["command"] == "doctor"
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
    assert "render" in v["gpu.rocminfo"]["fix"]


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
    # The deadline leaves the real torch + DeepSpeed import room on a loaded 2-core box (seen taking over 6 s);
    # the stand-in sleeps 300 s, so finishing at all shows the hung binding was given up on.
    proc = doctor("--json", "--no-gpu-probes", "--no-train", "--only", "torch,flash_attn,deepspeed", "--deadline", "30",
                  env=env_with_path(tmp_path, PYTHONPATH=str(site)), timeout=200)
    report = json.loads(proc.stdout)
    v = by_id(report)
    assert "stopped waiting after 30 s for: amdsmi" == v["doctor.deadline"]["summary"]
    assert v["torch.installed"]["status"] == "pass" and v["deepspeed.install"]["status"] in ("pass", "warn")
    assert time.monotonic() - start < 200


@pytest.mark.parametrize("edit", [
    lambda f: f.update(os_info=None),
    lambda f: f.update(platform=[]),
    lambda f: f["probes"].update(torch="x"),
    lambda f: f.update(recorded_results=[{"id": "x"}]),
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


@pytest.mark.parametrize("argv", [["nosuch"], ["doctor", "--bundle", "/nonexistent/b.json"], ["probe", "nope"],
                                  ["lint", "--world-size", "0", "x.json"], ["doctor", "--save-bundle", "/nonexistent/x.json"]])
def test_every_usage_error_is_exactly_one_line(argv):
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("Error: ")


def test_url_passwords_are_redacted():
    from rocmcheck.facts.redact import redact_env

    env = redact_env({"HF_ENDPOINT": "https://bob:s3cretpass@mirror.example/hf", "NCCL_DEBUG": "INFO"}, [], ["HF_", "NCCL_"])
    assert env["HF_ENDPOINT"] == "https://bob:<redacted>@mirror.example/hf" and env["NCCL_DEBUG"] == "INFO"
