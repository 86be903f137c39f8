"""probe.memory_pattern (level 3): most of the free device memory written with patterns (walking ones, each word's
own address, seeded random) and read back on the GPU, round after round for its share of `doctor --duration`;
any word read back wrong fails, and so does any memory-error counter (ECC / RAS) that grew meanwhile.
Runner: rocmcheck/probes/memtest.py."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import note, smi_processes
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.ras import memory_errors_fix, ras_lines
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned
from rocmcheck.units import GIB, MIB, fmt_bytes

ID = "probe.memory_pattern"
# The test should cover most of what was free when it started (memtest.bytes_to_test takes 90 % of it less a
# 2 GiB reserve); below half, other processes hold the GPU's memory and most of it went untested.
MIN_TESTED_OF_FREE = 0.5
FALLBACK_DURATION_S = 20.0
CPU_BYTES = 8 * MIB  # CPU test mode: the real passes over a few blocks
CPU_BLOCK_WORDS = 1 << 18
CPU_CHUNK_BYTES = 2 * MIB
CPU_MAX_DURATION_S = 0.5

_BAD_MEMORY_FIX = note("device memory returned other bits than were written: drain the node and test it with the "
                       "vendor memory test (AMD: rvs, module mem; NVIDIA: dcgmi diag -r 4, memtest); read the ECC "
                       "counters (amd-smi metric --ecc / nvidia-smi -q -d ECC); if it repeats, contact the vendor")


def _run(device: Any, options: RunOptions, cpu: bool) -> dict[str, Any]:
    import torch

    from rocmcheck.probes.memtest import bytes_to_test, pattern_test
    from rocmcheck.probes.ras import read_counters

    duration = options.duration_s if options.duration_s is not None else FALLBACK_DURATION_S
    if cpu:
        data = pattern_test(device, CPU_BYTES, min(duration, CPU_MAX_DURATION_S), block_words=CPU_BLOCK_WORDS,
                            chunk_bytes=CPU_CHUNK_BYTES, note=options.note)
        data.update(free_bytes=None, total_bytes=None, vendor="cpu", ras={"before": {}, "after": {}})
        return data
    vendor = "amd" if torch.version.hip else "nvidia"
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    before = read_counters(vendor)
    data = pattern_test(device, bytes_to_test(free), duration, note=options.note)
    torch.cuda.empty_cache()
    after = read_counters(vendor)
    data.update(free_bytes=free, total_bytes=total, vendor=vendor, ras={"before": before, "after": after})
    return data


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    return _run(device, options, cpu=False)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    return _run(device, options, cpu=True)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    tested, rounds = int(data["bytes_tested"]), int(data["rounds"])
    patterns: dict[str, dict[str, int]] = data["patterns"]
    bad = int(data["mismatches"])
    grew, ras_line = ras_lines(data)
    rate = data.get("gb_per_s")
    what = f"{fmt_bytes(tested, 1, smallest='B')} of device memory, {rounds} round(s) of {', '.join(patterns)}"
    evidence = [f"{name}: {p['passes']} pass(es), {p['mismatches']} mismatching words" for name, p in patterns.items()]
    evidence += [ras_line] + ([f"{rate:.3g} GB/s written and read back"] if isinstance(rate, (int, float)) else [])
    if data.get("stopped_short"):
        evidence.append(str(data["stopped_short"]))
    info = dict(bytes_tested=tested, rounds=rounds, mismatches=bad, patterns=patterns, ras_increases=grew,
                free_bytes=data.get("free_bytes"), first_mismatches=data.get("first_mismatches") or [],
                gb_per_s=rate if isinstance(rate, (int, float)) else None, seconds_tested=data.get("seconds"))
    if bad:
        first = (data.get("first_mismatches") or [{}])[0]
        where = (f"; first at byte {first.get('byte_offset')} ({first.get('pattern')}: wrote {first.get('expected')}, "
                 f"read {first.get('read')}, {first.get('bits')} bit(s) flipped)") if first else ""
        evidence[:0] = [f"{m['pattern']} round {m['round']}: byte {m['byte_offset']} wrote {m['expected']} read "
                        f"{m['read']}" for m in (data.get("first_mismatches") or [])[:4]]
        return failed(f"{what}: {bad} word(s) read back wrong on {ctx.label()}{where}", _BAD_MEMORY_FIX, evidence,
                      **info, id=ID)
    if grew:
        return failed(f"{what}: GPU memory errors appeared during the test on {ctx.label()} ({grew[0]})",
                      memory_errors_fix(ctx.vendor), evidence, **info, id=ID)
    if not tested:
        return failed(f"no device memory could be allocated for the pattern test on {ctx.label()}: "
                      f"{data.get('stopped_short') or 'nothing free'}",
                      smi_processes(ctx.vendor, "another process holds the GPU's memory"), evidence, **info, id=ID)
    free = data.get("free_bytes")
    if isinstance(free, int) and free > 0 and tested < MIN_TESTED_OF_FREE * free:
        return warned(f"{what}: every word read back right, but only {tested / free:.0%} of the "
                      f"{free / GIB:.1f} GiB free was tested on {ctx.label()}",
                      smi_processes(ctx.vendor, "stop what holds GPU memory, then rerun: rocmcheck probe "
                                                "memory_pattern"), evidence, **info, id=ID)
    return passed(f"{what}: every word read back as written on {ctx.label()}, no new memory errors", evidence,
                  **info, id=ID)


PROBE = Probe(ID, "most of the free GPU memory holds walking-ones, address and random patterns without error",
              90, judge, run=run, run_cpu=run_cpu, level=3, duration_share=0.3)
