"""A stand-in for rocmcheck.probes.child that speaks the same JSON protocol but misbehaves on demand, so the
parent's handling of hangs, crashes and garbage is tested with real processes. ROCMCHECK_FAKE="mode:probe":
hang (sleeps past every limit), watchdog (faulthandler fires, as in the real child), abort (os.abort),
garbage (truncated JSON, then exit), missing (result without the data the judge needs), noreason (a skip
without a reason), nobinary (the error torch raises without kernels for the GPU), slow (its result comes 1.5 s
late), note (a progress note before its result), measured (its result's data is the JSON of ROCMCHECK_FAKE_DATA: a
planted measurement for the parent's judge). Other probes report a skip, naming the duration and limit the plan gave
a probe that has a duration.
ROCMCHECK_FAKE_HIP=VERSION reports a ROCm build of torch on an MI300X instead of a CUDA one on an H200. No torch."""

import faulthandler
import json
import os
import sys
import time


def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main():
    with open(sys.argv[sys.argv.index("--request-file") + 1], encoding="utf-8") as fh:
        plan = json.load(fh)
    mode, _, target = os.environ.get("ROCMCHECK_FAKE", "").partition(":")
    if mode == "nodevice":
        print("Segmentation fault in libamdhip64 (not JSON)")
        sys.exit(0)
    hip = os.environ.get("ROCMCHECK_FAKE_HIP")
    device = ({"index": 0, "name": "AMD Instinct MI300X", "arch": "gfx942", "total_bytes": 0} if hip else
              {"index": 0, "name": "NVIDIA H200", "arch": "sm_90", "total_bytes": 0})
    emit({"event": "device", "available": True, "count": 1, "torch": "fake", "hip": hip,
          "cuda": None if hip else "fake", "devices": [device]})
    durations = plan.get("durations", {})
    for name, timeout in plan["probes"]:
        emit({"event": "start", "probe": name})
        if name == target:
            if mode == "slow":
                time.sleep(1.5)
            if mode == "note":
                emit({"event": "note", "probe": name, "text": "half way"})
            if mode == "hang":
                time.sleep(600)
            if mode == "watchdog":
                faulthandler.dump_traceback_later(0.2, exit=True)
                time.sleep(600)
            if mode == "abort":
                sys.stderr.write("HIP error: an illegal memory access was encountered\n")
                sys.stderr.flush()
                os.abort()
            if mode == "garbage":
                sys.stdout.write('{"event": "result", "probe": "' + name + '", "outc')
                sys.stdout.flush()
                sys.exit(0)
            if mode == "measured":
                emit({"event": "result", "probe": name, "outcome": "ok",
                      "data": json.loads(os.environ["ROCMCHECK_FAKE_DATA"])})
                continue
            if mode == "missing":
                emit({"event": "result", "probe": name, "outcome": "ok", "data": {"tflops": 1.0}})
                continue
            if mode == "noreason":
                emit({"event": "result", "probe": name, "outcome": "skip"})
                continue
            if mode == "nobinary":
                emit({"event": "result", "probe": name, "outcome": "error", "data": {},
                      "error": "RuntimeError: HIP error: invalid device function", "traceback": []})
                continue
        reason = "fake child" + (f" (duration {durations[name]:g} s, limit {timeout:g} s)" if name in durations else "")
        emit({"event": "result", "probe": name, "outcome": "skip", "reason": reason, "data": {}})
    emit({"event": "done"})


if __name__ == "__main__":
    main()
