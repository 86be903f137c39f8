"""doctor's verification levels: which probes a level runs, the budgets, how --duration is split among the stress
probes and reaches them, the options that do not go together (one line, exit 2), and the stage handing each
verdict to its listener the moment it is known (real child processes: the stand-in child of tests/probe_fakes
and the real child in CPU test mode), through the doctor to its report."""

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocmcheck.probes import catalog, levels, stage
from rocmcheck.probes.catalog import BY_NAME, PROBES
from rocmcheck.probes.levels import (
    DEFAULT_DURATION_S,
    NUMERICS,
    NUMERICS_BUDGET_S,
    QUICK,
    STRESS,
    STRESS_OVERHEAD_S,
    durations,
    level_problem,
    names_at,
    probes_at,
    stage_budget_s,
)
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.probes.stage import StageListener, run_stage, select_names
from rocmcheck.result import Status

REPO = Path(__file__).resolve().parents[1]
FAKE = "tests.probe_fakes.fake_probe_child"
# What every `rocmcheck doctor` ran before levels existed: level 1 is exactly that.
QUICK_NAMES = ("memory", "gemm_numerics", "gemm_tflops", "copy_bandwidth", "host_bandwidth", "attention",
               "flash_attn", "triton", "deepspeed_ops", "collective")
# The numerics of the paths a fine-tune takes (other level-2 probes may sit among them).
NUMERICS_NAMES = ("gemm_blaslt", "gemm_blas", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "rms_norm",
                  "rms_norm_llama", "adamw_fused", "adamw_foreach")
# The design point of level 2 on one GPU (levels.py): each probe's declared budget adds up to no more than this.
NUMERICS_DESIGN_S = 90.0


def _judge(data, ctx):
    raise AssertionError("a skip is never judged")


def _stress(name: str, share: float, timeout_s: float = 30.0) -> Probe:
    return Probe(f"probe.{name}", "a stand-in stress probe", timeout_s, _judge, run=lambda d, o: {}, level=STRESS,
                 duration_share=share)


@pytest.fixture
def fake(monkeypatch):
    def set_mode(mode: str) -> None:
        monkeypatch.setenv("ROCMCHECK_FAKE", mode)
    return set_mode


def by_id(results):
    return {r.id: r for r in results}


# ---------------------------------------------------------------- which probes a level runs

def test_level_one_is_what_doctor_always_ran_and_each_level_adds_its_own():
    assert names_at(QUICK) == QUICK_NAMES
    added = [n for n in names_at(NUMERICS) if n not in QUICK_NAMES]
    assert [n for n in added if n in NUMERICS_NAMES] == list(NUMERICS_NAMES)  # in this order, among level 2's
    assert all(BY_NAME[n].level == NUMERICS for n in added)
    assert set(names_at(QUICK)) < set(names_at(NUMERICS)) <= set(names_at(STRESS)) == set(catalog.PROBE_NAMES)
    assert all(p.level == NUMERICS for p in PROBES if p.name in NUMERICS_NAMES)
    with pytest.raises(ValueError):
        probes_at(4)


def test_every_level_two_probe_declares_its_budget_and_they_fit_the_design_point():
    numerics = [p for p in PROBES if p.level == NUMERICS]
    assert all(p.budget_s is not None and 0 < p.budget_s <= p.timeout_s for p in numerics)
    assert sum(p.budget_s for p in numerics) <= NUMERICS_DESIGN_S <= NUMERICS_BUDGET_S


def test_run_order_puts_the_quick_verdicts_first_and_the_collective_last():
    order = [p.level for p in PROBES if p.child is None]
    assert order == sorted(order)
    assert catalog.PROBE_NAMES[-1] == "collective"


def test_a_probe_declares_a_real_level_and_only_a_stress_probe_shares_the_duration():
    with pytest.raises(ValueError):
        Probe("probe.x", "x", 1, _judge, level=4)
    with pytest.raises(ValueError):
        Probe("probe.x", "x", 1, _judge, level=2, duration_share=1.0)
    stress = _stress("x", 2.0, timeout_s=20)
    assert stress.limit(False, 100.0) == 120.0 and stress.listing()["level"] == 3


def test_names_asked_for_win_over_the_level_and_skip_takes_away():
    assert select_names({"rms_norm", "memory"}) == ["memory", "rms_norm"]  # run order, level ignored
    assert select_names(None, {"gemm_tflops"}) == [n for n in QUICK_NAMES if n != "gemm_tflops"]
    assert select_names(None, None, NUMERICS)[-1] == "collective"
    with pytest.raises(ValueError, match="valid"):
        select_names({"gemm"})
    with pytest.raises(ValueError):
        select_names(None, {"nonsense"})


# ---------------------------------------------------------------- budgets and durations

def test_the_stage_budget_grows_with_the_level():
    assert stage_budget_s(120, QUICK, probes_at(QUICK)) == 120
    assert stage_budget_s(120, NUMERICS, probes_at(NUMERICS)) == 120 + NUMERICS_BUDGET_S
    assert stage_budget_s(120, QUICK, [BY_NAME["rms_norm"]]) == 120 + NUMERICS_BUDGET_S  # asked for by name
    a, b = _stress("a", 1.0, 30), _stress("b", 3.0, 20)
    assert stage_budget_s(120, STRESS, [a, b], 400) == 120 + NUMERICS_BUDGET_S + 400 + 50 + STRESS_OVERHEAD_S


def test_the_duration_is_split_by_share_and_defaults_to_ten_minutes():
    a, b = _stress("a", 1.0), _stress("b", 3.0)
    assert durations([a, b, BY_NAME["memory"]], 400) == {"a": 100.0, "b": 300.0}
    assert sum(durations([a, b], None).values()) == DEFAULT_DURATION_S <= 15 * 60
    assert durations(probes_at(NUMERICS), 400) == {}


@pytest.mark.parametrize("args, problem", [
    ((1, None), None), ((2, None), None), ((3, 60.0), None), ((3, None), None),
    ((2, 60.0), "give it with --level 3"), ((1, 60.0), "give it with --level 3"),
    ((3, 1.0), "between"), ((4, None), "choose 1"),
])
def test_level_options_that_do_not_go_together(args, problem):
    found = level_problem(*args)
    assert (found is None) if problem is None else (problem in found)
    assert "--no-gpu-probes" in level_problem(2, None, gpu_probes=False)
    assert "replayed bundle" in level_problem(3, None, replay=True)
    assert level_problem(1, None, gpu_probes=False, replay=True) is None


def test_a_stress_probe_gets_its_share_of_the_duration_and_a_limit_that_holds_it(fake, monkeypatch):
    """What the stress probes will do: declare a share; the stage splits --duration, the child receives each
    probe's seconds in its plan, and each probe's limit is its own plus those seconds."""
    a, b = _stress("stress_a", 1.0, 30), _stress("stress_b", 3.0, 30)
    monkeypatch.setattr(levels, "PROBES", PROBES[:-1] + (a, b) + PROBES[-1:])
    monkeypatch.setattr(stage, "PROBE_NAMES", tuple(p.name for p in levels.PROBES))
    monkeypatch.setitem(stage.BY_NAME, a.name, a)
    monkeypatch.setitem(stage.BY_NAME, b.name, b)
    fake("")
    results = by_id(run_stage(timeout_s=600, only={"memory", a.name, b.name}, duration_s=40, main_child=FAKE))
    assert results["probe.stress_a"].summary.endswith("fake child (duration 10 s, limit 40 s)")
    assert results["probe.stress_b"].summary.endswith("fake child (duration 30 s, limit 60 s)")
    assert results["probe.memory"].summary.endswith("fake child")  # no duration for a probe without a share


def test_the_child_hands_a_probe_its_duration_and_a_note_line():
    import io

    from rocmcheck.child import Channel
    from rocmcheck.probes.child import probe_options

    out = io.StringIO()
    options = probe_options(RunOptions(), "stress_a", {"stress_a": 12.5}, Channel(out))
    assert options.duration_s == 12.5 and not options.allow_build
    options.note("minute 3 of 10:\n612 TFLOP/s")
    assert '"event": "note", "probe": "stress_a", "text": "minute 3 of 10: 612 TFLOP/s"' in out.getvalue()
    assert probe_options(RunOptions(), "memory", {"stress_a": 12.5}, Channel(out)).duration_s is None


# ---------------------------------------------------------------- each verdict as soon as it is known

def test_each_verdict_reaches_the_listener_the_moment_it_is_known(fake):
    fake("slow:triton")
    t0 = time.monotonic()
    heard, starts = [], []
    listener = StageListener(result=lambda r: heard.append((time.monotonic() - t0, r)),
                             start=lambda name, number, total: starts.append((name, number, total)))
    results = run_stage(timeout_s=60, only={"memory", "attention", "triton"}, main_child=FAKE, listener=listener)
    ended = time.monotonic() - t0
    assert len(heard) == len(results) and all(a is b for (_, a), b in zip(heard, results))  # each once, the same
    assert ended - heard[0][0] >= 1.0  # memory's verdict came while the child still worked on triton
    assert starts == [("memory", 1, 3), ("attention", 2, 3), ("triton", 3, 3)]


def test_progress_notes_reach_the_listener_and_are_not_garbage(fake):
    fake("note:attention")
    notes = []
    results = by_id(run_stage(timeout_s=60, only={"attention", "triton"}, main_child=FAKE,
                              listener=StageListener(note=lambda name, text: notes.append((name, text)))))
    assert notes == [("attention", "half way")]
    assert results["probe.attention"].status is Status.SKIP and results["probe.attention"].summary.endswith(
        "fake child")


def test_verdicts_that_come_from_the_parent_reach_the_listener_too(fake):
    fake("hang:gemm_numerics")
    heard = []
    results = run_stage(timeout_s=3, only={"memory", "gemm_numerics", "gemm_tflops"}, main_child=FAKE,
                        listener=StageListener(result=heard.append))
    assert [r.id for r in heard] == [r.id for r in results]  # the hang and the budget skip included
    assert heard[1].data["hung"] and "budget" in heard[2].summary


def test_the_real_child_runs_the_numerics_in_cpu_mode_with_the_collective_after_them():
    heard = []
    asked = {*NUMERICS_NAMES, "collective"}
    results = by_id(run_stage(timeout_s=240, only=asked, cpu=True, listener=StageListener(result=heard.append)))
    assert set(results) == {f"probe.{n}" for n in asked} and len(heard) == len(results)
    for name in NUMERICS_NAMES:
        expected = Status.SKIP if name in ("sdpa_efficient", "sdpa_cudnn") else Status.PASS  # CUDA/ROCm kernels
        assert results[f"probe.{name}"].status is expected, results[f"probe.{name}"].summary
    assert results["probe.collective"].status is Status.PASS  # started after the main child, released at its end
    assert heard[-1].id == "probe.collective"


# ---------------------------------------------------------------- through the doctor

class _Progress:
    def __init__(self):
        self.stages = []

    def begin(self, stage_name):
        self.stages.append(stage_name)


def test_the_doctor_prints_each_probe_verdict_once_as_it_arrives(monkeypatch):
    import rocmcheck.probes
    from rocmcheck.doctor import DoctorOptions, run_gpu_stage
    from rocmcheck.result import passed, skipped

    streamed = passed("streamed", id="probe.memory")
    late = skipped("decided at the end", id="probe.triton")
    asked = {}

    def stage_stub(timeout_s, host, only, *, level, duration_s, skip, listener, early=None):
        asked.update(level=level, duration_s=duration_s, skip=skip, only=only)
        listener.start("memory", 1, 2)
        listener.result(streamed)
        listener.start("triton", 2, 2)
        return [streamed, late]

    monkeypatch.setattr(rocmcheck.probes, "run_gpu_stage", stage_stub)
    ctx = SimpleNamespace(torch={"device_count": 1}, gpus=[], rocm=None, facts=SimpleNamespace(files={}))
    heard, progress = [], _Progress()
    opts = DoctorOptions(level=2, duration_s=None, skip=("probe.gemm_tflops", "host"))
    results = run_gpu_stage(ctx, opts, [], heard.append, progress)
    assert results == [streamed, late] and heard == [streamed]
    assert progress.stages == ["GPU probe 1/2: memory", "GPU probe 2/2: triton"]
    # the plan's probes by name (plan_stages: the level's, less --skip), decided once before the stage starts
    from rocmcheck.probes.stage import select_names

    assert asked == {"level": 2, "duration_s": None, "skip": None,
                     "only": set(select_names(None, {"gemm_tflops"}, 2))}


def test_run_doctor_emits_a_streamed_verdict_once(monkeypatch):
    import rocmcheck.doctor as doctor
    import rocmcheck.probes
    from rocmcheck.result import passed, skipped

    streamed = passed("streamed", id="probe.memory")
    late = skipped("decided at the end", id="probe.triton")

    def stage_stub(timeout_s, host, only, *, level, duration_s, skip, listener, early=None):
        listener.result(streamed)
        return [streamed, late]

    monkeypatch.setattr(rocmcheck.probes, "run_gpu_stage", stage_stub)
    monkeypatch.setattr(doctor, "_gpu_present", lambda ctx, cheap: True)
    batches = []
    run = doctor.run_doctor(doctor.DoctorOptions(only=("probe",), train=False, level=2),
                            on_results=lambda new, revised: batches.append([r.id for r in new]))
    probe_batches = [b for b in batches if any(i.startswith("probe.") for i in b)]
    assert probe_batches == [["probe.memory"], ["probe.triton"]]
    assert [r.id for r in run.results if r.id.startswith("probe.")] == ["probe.memory", "probe.triton"]


# ---------------------------------------------------------------- the command lines

def run_cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "rocmcheck", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=env)


@pytest.mark.parametrize("args, words", [
    (("doctor", "--duration", "60"), "--level 3"),
    (("doctor", "--level", "2", "--no-gpu-probes"), "--no-gpu-probes"),
    (("doctor", "--level", "4"), "--level"),
    (("doctor", "--level", "3", "--duration", "5"), "--duration"),
    (("probe", "gemm_blaslt", "--level", "2"), "rocmcheck probe all"),
    (("probe", "all", "--duration", "60"), "stress"),
])
def test_level_options_that_do_not_go_together_are_one_line_and_exit_2(args, words):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_probe_list_shows_each_probes_level():
    from click.testing import CliRunner

    from rocmcheck.cli import cli

    result = CliRunner().invoke(cli, ["probe", "--list"])
    levels_shown = {line.split()[0]: int(line.split()[2]) for line in result.output.splitlines()}
    assert levels_shown == {p.name: p.level for p in PROBES}


def test_verdicts_streamed_one_at_a_time_print_their_areas_title_once():
    import io

    from rich.console import Console

    from rocmcheck.report.console import Stream
    from rocmcheck.result import passed, skipped

    out = io.StringIO()
    stream = Stream(Console(file=out, width=120, color_system=None), verbose=True)  # -v: every verdict as it comes
    stream.results([passed("streamed first", id="probe.memory")], [])
    stream.results([skipped("streamed second", id="probe.rms_norm")], [])
    stream.results([passed("a stage later", id="train.loss")], [])
    text = out.getvalue()
    assert text.count("GPU probes") == 1 and text.count("Smoke-train") == 1
    assert text.index("streamed first") < text.index("streamed second") < text.index("Smoke-train")
