"""The GPU stage's parent side with real child processes: the real child on this GPU-less machine, the
real child in CPU test mode, and a misbehaving stand-in child (tests/probe_fakes) for hangs and crashes."""

import sys

import pytest

from rocmcheck.child import ChildRun
from rocmcheck.fixes import IOMMU_FIX, NUMA_FIX
from rocmcheck.probes import PROBE_NAMES, HostFacts, run_gpu_stage
from rocmcheck.probes.catalog import BY_NAME
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.levels import probes_at
from rocmcheck.probes.stage import died_verdict, run_stage
from rocmcheck.result import Status
from rocmcheck.runner import CommandResult

FAKE = "tests.probe_fakes.fake_probe_child"


def _torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture
def fake(monkeypatch):
    def set_mode(mode: str) -> None:
        monkeypatch.setenv("ROCMCHECK_FAKE", mode)
    return set_mode


def by_id(results):
    return {r.id: r for r in results}


def test_every_probe_skips_with_the_reason_when_there_is_no_gpu():
    if _torch_has_gpu():
        pytest.skip("this machine has a GPU")
    results = run_gpu_stage(timeout_s=60)
    assert [r.id for r in results] == [p.id for p in probes_at(1)]  # doctor's default: level 1
    for r in results:
        assert r.status is Status.SKIP
        assert "no GPU" in r.summary and "torch" in r.summary


# The parent's side of the probes: everything `rocmcheck probe` and the doctor import before the children start.
PARENT_MODULES = ("rocmcheck.probes", "rocmcheck.probes.stage", "rocmcheck.probes.host", "rocmcheck.probes.across",
                  "rocmcheck.probes.rejudge",
                  "rocmcheck.probes.catalog", *(f"rocmcheck.probes.catalog.{n}" for n in PROBE_NAMES),
                  "rocmcheck.commands.probe", "rocmcheck.plan.measure", "rocmcheck.commands.plan")


def test_the_parent_side_does_not_import_torch(tmp_path):
    """Imported with a torch that raises on import (as on a machine without torch): none of them needs it."""
    import subprocess

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise ImportError("No module named torch (hidden by the test)")\n')
    code = (f"import sys, importlib; sys.path.insert(0, {str(tmp_path)!r})\n"
            f"for m in {PARENT_MODULES!r}: importlib.import_module(m)\n"
            "print('torch' in sys.modules and sys.modules['torch'] is not None)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"


def test_unknown_probe_name_is_a_value_error():
    with pytest.raises(ValueError, match="valid"):
        run_gpu_stage(only={"gemm", "memory"})


def test_cpu_mode_runs_the_real_probe_code_through_the_child():
    results = by_id(run_stage(timeout_s=60, only={"gemm_numerics", "attention", "flash_attn"}, cpu=True))
    numerics = results["probe.gemm_numerics"]
    assert numerics.status is Status.PASS
    assert 0 < numerics.data["rel_err"] < 1e-2
    attention = results["probe.attention"]
    assert attention.data["default_backend"] in ("FLASH_ATTENTION", "MATH")
    assert attention.data["rel_err"] < 2e-2
    assert results["probe.flash_attn"].status is Status.SKIP  # not installed here


def test_collective_all_reduce_over_gloo_with_two_processes():
    results = by_id(run_stage(timeout_s=90, only={"collective"}, cpu=True))
    r = results["probe.collective"]
    assert r.status is Status.PASS, r.summary
    assert r.data["world"] == 2 and r.data["all_reduce"]["ok"] and r.data["all_gather"]["ok"]
    assert r.data["all_reduce"]["busbw_gbps"] == pytest.approx(r.data["all_reduce"]["algbw_gbps"])  # 2(n-1)/n = 1


def test_a_hung_child_ends_at_the_stage_timeout_as_a_hang_verdict(fake):
    fake("hang:gemm_numerics")
    results = by_id(run_stage(timeout_s=3, only={"memory", "gemm_numerics", "gemm_tflops"}, main_child=FAKE))
    hung = results["probe.gemm_numerics"]
    assert hung.status is Status.FAIL and "hung" in hung.summary and hung.data["hung"]
    assert hung.data["timeout_s"] <= 3  # killed at the stage limit, not waited for
    assert hung.fix
    assert results["probe.memory"].summary.endswith("fake child")  # reported before the hang
    assert results["probe.gemm_tflops"].status is Status.SKIP and "budget" in results["probe.gemm_tflops"].summary


def test_the_watchdog_names_the_hung_probe_and_a_new_child_runs_the_rest(fake):
    fake("watchdog:gemm_numerics")
    results = by_id(run_stage(timeout_s=60, only={"memory", "gemm_numerics", "gemm_tflops"}, main_child=FAKE))
    hung = results["probe.gemm_numerics"]
    assert hung.status is Status.FAIL and "hung" in hung.summary
    assert hung.data["timeout_s"] == 20  # the probe's own limit, not the stage's
    assert results["probe.gemm_tflops"].summary.endswith("fake child")  # run by the relaunched child


def test_an_aborting_child_is_a_crash_verdict_with_the_last_stderr_line(fake):
    fake("abort:attention")
    results = by_id(run_stage(timeout_s=60, only={"attention", "triton"}, main_child=FAKE))
    crashed = results["probe.attention"]
    assert crashed.status is Status.FAIL
    assert "SIGABRT" in crashed.summary and "illegal memory access" in crashed.summary
    assert results["probe.triton"].summary.endswith("fake child")


def test_truncated_json_is_reported_not_raised(fake):
    fake("garbage:gemm_tflops")
    results = by_id(run_stage(timeout_s=60, only={"gemm_tflops"}, main_child=FAKE))
    r = results["probe.gemm_tflops"]
    assert r.status is Status.CRASH and "unreadable" in r.summary


def test_a_result_missing_its_measurements_is_a_crash_not_a_traceback(fake):
    fake("missing:gemm_tflops")
    r = by_id(run_stage(timeout_s=60, only={"gemm_tflops"}, main_child=FAKE))["probe.gemm_tflops"]
    assert r.status is Status.CRASH and "could not read" in r.summary and r.fix


def test_a_skip_without_reason_is_malformed(fake):
    fake("noreason:triton")
    r = by_id(run_stage(timeout_s=60, only={"triton"}, main_child=FAKE))["probe.triton"]
    assert r.status is Status.CRASH and "malformed" in r.summary


def test_a_child_that_never_reports_devices_fails_once_and_skips_the_rest(fake):
    fake("nodevice:")
    results = run_stage(timeout_s=60, only={"memory", "triton"}, main_child=FAKE)
    assert [r.id for r in results] == ["probe.device", "probe.memory", "probe.triton"]
    assert results[0].status is Status.FAIL and "no device report" in results[0].summary
    assert all(r.status is Status.SKIP for r in results[1:])


def test_one_visible_gpu_skips_the_collective(fake):
    fake("")
    r = by_id(run_stage(timeout_s=60, only={"collective"}, main_child=FAKE))["probe.collective"]
    assert r.status is Status.SKIP and "1 GPU" in r.summary


def test_the_rocm_version_passed_down_names_the_wheel_in_the_fix(fake, monkeypatch):
    fake("nobinary:gemm_numerics")
    monkeypatch.setenv("ROCMCHECK_FAKE_HIP", "6.3.42131")
    r = by_id(run_stage(timeout_s=60, only={"gemm_numerics"}, main_child=FAKE,
                        host=HostFacts(rocm_version="6.3.3")))["probe.gemm_numerics"]
    assert r.status is Status.FAIL and "no GPU code" in r.summary
    assert r.fix.text.endswith("--index-url https://download.pytorch.org/whl/rocm6.3") and "gfx942" in r.fix.why


def _hung(stderr: str = "", timed_out: bool = True) -> ChildRun:
    return ChildRun(CommandResult(argv=["python"], timed_out=timed_out, stderr=stderr, timeout_s=30.0))


def test_a_hung_collective_is_explained_by_the_host_facts_passed_down():
    collective = BY_NAME["collective"]
    amd = dict(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8)
    r = died_verdict(collective, _hung(), DeviceContext(**amd, kernel_cmdline="ro quiet", numa_balancing="0"), 90)
    assert r.status is Status.FAIL and r.data["hung"] and r.fix.text == IOMMU_FIX.text
    assert any("iommu=pt" in line for line in r.evidence)
    r = died_verdict(collective, _hung(), DeviceContext(**amd, kernel_cmdline="ro iommu=pt", numa_balancing="1\n"), 90)
    assert r.fix == NUMA_FIX
    # not collected is not known: no claim about the command line, the generic debug run
    r = died_verdict(collective, _hung(), DeviceContext(**amd), 90)
    assert r.fix.text == "NCCL_DEBUG=INFO rocmcheck probe collective" and not any("iommu" in e for e in r.evidence)


def test_the_watchdog_limit_is_the_probes_own():
    r = died_verdict(BY_NAME["triton"], _hung("Timeout (0:01:00)!\nThread 0x1 (most recent call first):", False),
                     DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90"), 60)
    assert r.data["timeout_s"] == 60 and "hung" in r.summary and r.fix.text.endswith("nvidia-smi")


# ------------------------------------------------- the main child started ahead (the doctor's facts meanwhile)

def _children_started(monkeypatch) -> list[dict]:
    """Every main child the stage itself starts, by its plan."""
    from rocmcheck.probes import stage

    started: list[dict] = []
    real = stage._StreamingChild

    class Counted(real):
        def __init__(self, module, plan, *a, **k):
            started.append(plan)
            super().__init__(module, plan, *a, **k)

    monkeypatch.setattr(stage, "_StreamingChild", Counted)
    return started


def test_a_child_started_ahead_runs_the_stage_and_gives_the_same_verdicts(monkeypatch):
    from rocmcheck.probes.stage import start_early_main_child

    # Two numerics probes: their verdicts do not depend on how fast this box runs them (the attention probe's
    # speed-based verdict can differ between two runs on a busy box)
    only = {"gemm_numerics", "rms_norm"}
    early = start_early_main_child(60, only, cpu=True, wait_s=60)
    assert early is not None
    started = _children_started(monkeypatch)
    ahead = by_id(run_stage(timeout_s=60, only=only, cpu=True, early=early))
    assert started == []  # the stage started no child of its own
    alone = by_id(run_stage(timeout_s=60, only=only, cpu=True))
    assert len(started) == 1
    assert {k: r.status for k, r in ahead.items()} == {k: r.status for k, r in alone.items()}
    assert ahead["probe.gemm_numerics"].status is Status.PASS and ahead["probe.gemm_numerics"].data["rel_err"] > 0


def test_a_child_started_for_other_probes_is_stopped_and_the_stage_starts_its_own(monkeypatch):
    from rocmcheck.probes.stage import start_early_main_child

    early = start_early_main_child(60, {"attention"}, cpu=True, wait_s=60)
    started = _children_started(monkeypatch)
    results = by_id(run_stage(timeout_s=60, only={"gemm_numerics"}, cpu=True, early=early))
    assert [p[0] for p in started[0]["probes"]] == ["gemm_numerics"] and len(started) == 1
    assert results["probe.gemm_numerics"].status is Status.PASS
    early._child.join()  # let go: it left without running a probe
    assert early._child.consume(lambda event: None).command.returncode == 0


def test_a_child_started_ahead_and_never_sent_on_leaves_quietly():
    from rocmcheck.probes.stage import start_early_main_child

    early = start_early_main_child(60, {"gemm_numerics"}, cpu=True, wait_s=60)
    events: list[dict] = []
    early.stop()
    run = early._child.consume(events.append)
    assert run.command.returncode == 0 and [e["event"] for e in events][-1] == "done"
    assert not any(e["event"] == "start" for e in events)  # no probe ran


def test_the_doctor_starts_the_probe_child_ahead_only_where_a_probe_stage_will_run_on_a_gpu():
    from rocmcheck import doctor
    from rocmcheck.probes.stage import EarlyMainChild

    def start(opts: doctor.DoctorOptions, present: bool):
        return doctor.start_early_probes(opts, doctor.plan_stages(opts, []), gpu_device_present=lambda: present)

    assert start(doctor.DoctorOptions(), False) is None  # no GPU device file: the stage starts its own, if it runs
    for opts in (doctor.DoctorOptions(gpu_probes=False), doctor.DoctorOptions(only=("gpu",)),
                 doctor.DoctorOptions(across_nodes=True), doctor.DoctorOptions(only=("probe.nonesuch",))):
        assert start(opts, True) is None, opts
    early = start(doctor.DoctorOptions(only=("probe.memory",)), True)
    assert isinstance(early, EarlyMainChild)
    assert [p[0] for p in early._child.plan["probes"]] == ["memory"]
    early.stop()
    assert early._child.consume(lambda event: None).command.returncode == 0  # it left, let go
