"""Level-3 stress probes: probe.stress_gemm and probe.memory_pattern, the ECC/RAS counters read around them, the
telemetry sampled during them, and the ROCm runtime's "HW Exception ... GPU Hang" line caught from a dead child.
Planted faults go through the real runners on the CPU (a product that changes its bits, a binding that reports a
slowdown, a flipped bit in memory) or straight into the judges (a falling curve, grown counters)."""

from __future__ import annotations

import sys
import time

import pytest
import torch

from rocmcheck.child import ChildRun
from rocmcheck.facts.parsers.smi_monitor import GpuReading
from rocmcheck.probes.catalog import BY_NAME
from rocmcheck.probes.catalog import memory_pattern as memory_pattern_probe
from rocmcheck.probes.catalog import stress_gemm as stress_probe
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.gpu_fault import find_hw_exception, hw_exception_verdict
from rocmcheck.probes.memtest import PATTERNS, bytes_to_test, pattern_test, pattern_words
from rocmcheck.probes.ras import from_sysfs_gpu, increases, read_counters
from rocmcheck.probes.stage import died_verdict, run_stage
from rocmcheck.probes.stress import sustained_gemm
from rocmcheck.probes.telemetry import Telemetry, open_telemetry, slowdown
from rocmcheck.result import Status
from rocmcheck.runner import run_command
from rocmcheck.units import GIB, MIB

CPU = torch.device("cpu")
AMD = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=1)
NVIDIA = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", count=1)
# A real line from a fine-tune that died 5 h in (ROCm/legacy-rocm-build#4021), and the abort after it.
GPU_HANG_LINE = "HW Exception by GPU node-9 (Agent handle: 0x631351bb5a20) reason :GPU Hang"


def _gemm(**kw):
    return sustained_gemm(CPU, kw.pop("duration_s", 0.6), size=64, warmup_s=0.05, interval_s=0.1, **kw)


def _stress_data(rates, **point):
    """A stress_gemm result with these per-interval rates."""
    return {"shape": [8192, 8192, 8192], "ran_s": float(len(rates)), "gemms_per_interval": 100,
            "intervals": [{"t_s": float(i), "tflops": r, "differ": 0, **point} for i, r in enumerate(rates)],
            "telemetry": {"source": None, "why_not": "test"}, "ras": {"before": {}, "after": {}}}


class FakeNvml:
    """The two calls Telemetry makes of a binding (facts/bindings.py's Nvml), answering what a slowed GPU reports."""

    name = "nvml"

    def __init__(self, reasons: int = 0, bus_ids=("00000000:1B:00.0",)) -> None:
        self.handles = list(bus_ids)
        self.reasons = reasons
        self.closed = False

    def reading(self, index: int) -> GpuReading:
        return GpuReading(gpu=index, power_w=690.0, temp_c=71.0, sm_clock_mhz=1755.0, mem_clock_mhz=3201.0)

    def health(self, handle):
        return {"bus_id": handle, "clock_event_reasons": self.reasons, "ecc_uncorrected_volatile": 0,
                "ecc_corrected_volatile": 0}

    def close(self) -> None:
        self.closed = True


# ------------------------------------------------------------------------------------------ stress_gemm

def test_a_healthy_cpu_run_holds_every_repeat_bitwise_identical():
    data = _gemm(duration_s=1.0, min_intervals=2)
    assert len(data["intervals"]) >= 2 and all(p["differ"] == 0 for p in data["intervals"])
    assert all(p["tflops"] > 0 for p in data["intervals"]) and data["gemms_per_interval"] >= 1


def test_a_machine_that_slows_after_the_calibration_still_gives_the_judge_enough_intervals():
    # The batch per interval is calibrated once; here every product after the first 40 takes 20 ms longer, so
    # the whole duration fits in one interval and the run goes on to the judge's minimum.
    calls = {"n": 0}

    def slowing(a, b, out):
        torch.matmul(a, b, out=out)
        calls["n"] += 1
        if calls["n"] > 40:
            time.sleep(0.02)

    data = sustained_gemm(CPU, 0.01, size=16, warmup_s=0.0, interval_s=0.01, matmul=slowing,
                          min_intervals=stress_probe.MIN_INTERVALS_JUDGED)
    assert len(data["intervals"]) == stress_probe.MIN_INTERVALS_JUDGED
    assert data["ran_s"] >= 0.06  # four products of 20 ms at least, against a duration of 10 ms


def test_a_product_that_returns_other_bits_on_a_repeat_fails():
    calls = {"n": 0}

    def flaky(a, b, out):
        torch.matmul(a, b, out=out)
        calls["n"] += 1
        if calls["n"] % 50 == 0:  # now and then one element comes back one ulp off
            out.view(torch.int16)[3, 5] += 1

    data = _gemm(matmul=flaky)
    data.update(ras={"before": {}, "after": {}})
    data["telemetry"]["why_not"] = "test"
    r = stress_probe.judge(data, NVIDIA)
    assert r.status == Status.FAIL and "differ bitwise from the first" in r.summary
    assert r.data["differing_repeats"] >= 1 and "RMA" in r.fix.text


def test_a_slowdown_reason_from_the_binding_warns_and_names_it():
    binding = FakeNvml(reasons=0x40 | 0x4)  # HW thermal slowdown, and the SW power cap every loaded GPU sits at
    data = _gemm(telemetry=Telemetry(binding, 0, "pci address"))
    data.update(ras={"before": {}, "after": {}})
    for point in data["intervals"]:  # the shared CPU's rate wavers; what is judged here is the binding's reasons
        point["tflops"] = 690.0
    assert data["telemetry"]["source"] == "nvml" and data["intervals"][0]["power_w"] == 690.0
    r = stress_probe.judge(data, NVIDIA)
    assert r.status == Status.WARN and "HW thermal slowdown" in r.summary and "SW power cap" not in r.summary
    assert "nvidia-smi -q -d PERFORMANCE" in r.fix.text
    assert any("power W min / median / max: 690" in e for e in r.evidence)


def test_open_telemetry_matches_torchs_device_by_pci_address():
    binding = FakeNvml(bus_ids=("00000000:1A:00.0", "00000000:1B:00.0"))
    tel, why = open_telemetry("nvidia", "0000:1b:00.0", 1, opener=lambda: binding)
    assert why == "" and tel.index == 1 and tel.matched_by == "pci address"
    tel, why = open_telemetry("nvidia", "0000:99:00.0", 1, opener=lambda: binding)
    assert tel is None and "lists 2 GPUs" in why and binding.closed


def test_slowdown_counts_heat_and_power_hardware_not_the_power_cap():
    assert slowdown({"clock_event_reasons": 0x4}) == []
    assert slowdown({"clock_event_reasons": 0x8 | 0x80}) == ["HW slowdown", "HW power brake slowdown"]
    assert slowdown({"throttle_status": 0}) == [] and slowdown({"throttle_status": 5}) == ["amdsmi throttle status 5"]


def test_a_falling_tflops_curve_fails_and_a_wavering_one_warns():
    falling = stress_probe.judge(_stress_data([690, 688, 685, 640, 560, 470, 430, 410]), NVIDIA)
    assert falling.status == Status.FAIL and "does not hold" in falling.summary
    assert falling.data["trend"] < 0.7
    wavering = stress_probe.judge(_stress_data([690, 688, 690, 600, 689, 690, 691, 688]), NVIDIA)
    assert wavering.status == Status.WARN and "wavers" in wavering.summary


def test_a_steady_curve_passes():
    r = stress_probe.judge(_stress_data([690, 688, 692, 689, 690, 687, 691, 690]), NVIDIA)
    assert r.status == Status.PASS and "every repeat bitwise identical" in r.summary
    assert r.data["stability"] > 0.99


def test_memory_errors_that_appear_during_the_stress_fail():
    data = _stress_data([690] * 8)
    data["ras"] = {"before": {"0000:1b:00.0": {"ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0}},
                   "after": {"0000:1b:00.0": {"ecc_corrected_volatile": 2, "ecc_uncorrected_volatile": 0}}}
    r = stress_probe.judge(data, NVIDIA)
    assert r.status == Status.FAIL and "ecc_corrected_volatile 0 -> 2" in r.summary
    assert r.fix.text == "nvidia-smi -q -d ECC,ROW_REMAPPER"


def test_the_stress_runs_through_the_real_child_in_cpu_mode():
    r = run_stage(timeout_s=120, only={"stress_gemm"}, cpu=True)[0]
    assert r.id == "probe.stress_gemm" and r.status in (Status.PASS, Status.WARN, Status.FAIL), r.summary
    # The CPU box is shared, so its rate wavers; the bits never may. However slow the box gets after the batch
    # was calibrated, the run goes on until the judge has enough intervals.
    assert r.data["differing_repeats"] == 0 and r.data["ras_increases"] == []
    assert r.data["intervals"] >= stress_probe.MIN_INTERVALS_JUDGED


# --------------------------------------------------------------------------------------------- RAS

def test_counters_are_read_through_the_binding_and_the_amdgpu_ras_files(tmp_path):
    dev = tmp_path / "bus/pci/devices/0000:0b:00.0"
    (dev / "ras").mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "class").write_text("0x038000\n")
    (dev / "ras/umc_err_count").write_text("ue: 0\nce: 3\n")
    (dev / "ras/gfx_err_count").write_text("ue: 1\nce: 0\n")
    (dev / "ras/gpu_vram_bad_pages").write_text("0x00000001 : 0x00001000 : R\n")

    class FakeAmdsmi(FakeNvml):
        name = "amdsmi"

        def health(self, handle):
            return {"bus_id": "0000:0b:00.0", "ecc_correctable": 3, "ecc_uncorrectable": 1, "bad_pages": 1}

    counters = read_counters("amd", sysfs_root=str(tmp_path), openers={"amd": FakeAmdsmi})
    assert counters == {"0000:0b:00.0": {"ecc_correctable": 3, "ecc_uncorrectable": 1, "bad_pages": 1,
                                         "ras_uncorrectable": 1, "ras_correctable": 3, "ras_bad_pages": 1}}
    assert read_counters("nvidia", openers={}) == {}  # no binding: not known, not zero


def test_increases_compare_only_counters_read_both_times():
    before = {"a": {"ce": 1, "ue": 0, "gone": 4}, "b": {"ce": None}}
    after = {"a": {"ce": 1, "ue": 2}, "b": {"ce": 9}, "c": {"ce": 5}}
    assert increases(before, after) == ["a: ue 0 -> 2"]
    assert from_sysfs_gpu({"ras": {"umc_err_count": "garbage"}, "bad_pages": None}) == {}


# ------------------------------------------------------------------------------------ memory_pattern

def _patterns(**kw):
    return pattern_test(CPU, 4 * MIB, 0.0, block_words=1 << 16, chunk_bytes=MIB, **kw)


def test_patterns_are_functions_of_the_address():
    words = pattern_words("walking_ones", 30, 4, 0, CPU).tolist()
    assert [w & 0xFFFFFFFF for w in words] == [1 << 30, 1 << 31, 1, 2]
    assert pattern_words("address", 7, 2, 1, CPU).tolist() == [~7, ~8]  # complemented on odd rounds
    seeded = pattern_words("random", 0, 1000, 0, CPU)
    assert torch.equal(seeded, pattern_words("random", 0, 1000, 0, CPU))
    assert not torch.equal(seeded, pattern_words("random", 0, 1000, 1, CPU))
    assert len(set(seeded.tolist())) > 990


def test_a_flipped_bit_in_memory_is_counted_and_located():
    def flip(chunks):
        chunks[2][777] ^= 1 << 12

    data = _patterns(corrupt=flip)
    assert data["mismatches"] == len(PATTERNS)  # one word, wrong in every pattern's pass
    first = data["first_mismatches"][0]
    assert first["word"] == 2 * (MIB // 4) + 777 and first["bits"] == 1
    data.update(free_bytes=None, ras={"before": {}, "after": {}})
    r = memory_pattern_probe.judge(data, AMD)
    assert r.status == Status.FAIL and "read back wrong" in r.summary and "1 bit(s) flipped" in r.summary
    assert "rvs" in r.fix.text


def test_a_clean_pattern_run_passes_and_too_small_a_share_of_free_memory_warns():
    data = _patterns()
    assert data["mismatches"] == 0 and data["bytes_tested"] == 4 * MIB and data["rounds"] == 1
    data.update(free_bytes=6 * MIB, ras={"before": {}, "after": {}})
    assert memory_pattern_probe.judge(data, AMD).status == Status.PASS
    data["free_bytes"] = 100 * MIB
    r = memory_pattern_probe.judge(data, AMD)
    assert r.status == Status.WARN and "only 4%" in r.summary


def test_the_test_takes_most_of_free_memory_less_the_reserve():
    assert bytes_to_test(140 * GIB) == int(138 * GIB * 0.9)
    assert bytes_to_test(GIB) == 0


def test_the_pattern_test_runs_through_the_real_child_in_cpu_mode():
    r = run_stage(timeout_s=120, only={"memory_pattern"}, cpu=True)[0]
    assert r.status == Status.PASS, r.summary
    assert r.data["mismatches"] == 0 and r.data["rounds"] >= 1 and r.data["bytes_tested"] == 8 * MIB


# ------------------------------------------------------------------------------------- GPU hang line

def test_the_rocm_runtime_hang_line_is_found():
    found = find_hw_exception("step 366/903\n" + GPU_HANG_LINE + "\n" + GPU_HANG_LINE + "\nAborted (core dumped)\n")
    assert found == {"node": 9, "reason": "GPU Hang", "line": GPU_HANG_LINE, "count": 2}
    assert find_hw_exception("HIP error: an illegal memory access was encountered") is None
    assert find_hw_exception(None) is None


def test_a_child_that_dies_with_the_hang_line_gets_its_own_verdict():
    # A real process that prints the runtime's line and aborts, as ROCr does.
    code = f"import os, sys; sys.stderr.write({GPU_HANG_LINE + chr(10)!r}); sys.stderr.flush(); os.abort()"
    res = run_command([sys.executable, "-c", code], timeout=30)
    assert res.returncode is not None and res.returncode < 0
    r = died_verdict(BY_NAME["stress_gemm"], ChildRun(res), AMD, 90.0)
    assert r.status == Status.FAIL and r.id == "probe.stress_gemm"
    assert "the GPU hung while stress_gemm ran" in r.summary and "node-9" in r.summary
    assert r.data["gpu_fault"] is True and "amd-smi reset -G" in r.fix.why
    plain = run_command([sys.executable, "-c", "import os; os.abort()"], timeout=30)
    assert "crashed the probe process" in died_verdict(BY_NAME["stress_gemm"], ChildRun(plain), AMD, 90.0).summary


def test_the_hang_verdict_names_another_reason_as_it_is():
    r = hw_exception_verdict("probe.stress_gemm", "stress_gemm",
                             "HW Exception by GPU node-1 (Agent handle: 0x55cf74a379c0) reason :Unknown", "MI300X")
    assert r is not None and "raised a hardware exception (Unknown)" in r.summary


@pytest.mark.parametrize("name", ["stress_gemm", "memory_pattern"])
def test_stress_probes_take_their_share_of_the_duration(name):
    probe = BY_NAME[name]
    assert probe.level == 3 and probe.duration_share > 0 and probe.run_cpu is not None
