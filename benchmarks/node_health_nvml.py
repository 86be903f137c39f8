"""Read the NVML path of the node-health checks on a real NVIDIA GPU and print it, step by step.

Run on the GPU machine:  python benchmarks/node_health_nvml.py
1. the bindings child (`python -m rocmcheck.facts.python_probe --request '{"probes": ["nvml"]}'`): ECC, retired pages,
   row remapping, clock event (throttle) reasons, PCIe gen/width current vs max, power limit, clocks, per GPU;
2. `nvidia-smi -q -d ECC,PERFORMANCE` parsed the way the doctor parses it when NVML is missing;
3. the sysfs PCIe link files of each GPU;
4. the doctor's health.* checks, live.
Exits 1 when the NVML child gave no per-GPU health record (the path the lead asked to see working).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.child import run_child  # noqa: E402
from rocmcheck.facts.health import node_health  # noqa: E402
from rocmcheck.facts.parsers.gpu_health import describe_reasons, parse_nvidia_smi_q  # noqa: E402
from rocmcheck.facts.python_probe import parse_probe_output  # noqa: E402
from rocmcheck.runner import run_command  # noqa: E402


def main() -> int:
    print("== 1. NVML through the bindings child", flush=True)
    res = run_child("rocmcheck.facts.python_probe", {"probes": ["nvml"]}, 60).command
    nvml = parse_probe_output(res.stdout).get("nvml") or {}
    print(f"   child: {res.describe_failure()} in {res.duration_s:.2f} s; driver {nvml.get('driver_version')}")
    healthy = 0
    for g in nvml.get("gpus") or []:
        h = g.get("health") or {}
        healthy += bool(h)
        print(f"   GPU {g['index']} {g['name']}: " + json.dumps(h, sort_keys=True))
        print(f"      reasons: {describe_reasons(h.get('clock_event_reasons'))}; link Gen{h.get('pcie_gen_current')} "
              f"x{h.get('pcie_width_current')} of Gen{h.get('pcie_gen_max')} x{h.get('pcie_width_max')}")
    if nvml.get("error"):
        print(f"   NVML error: {nvml['error']}")
    print("== 2. nvidia-smi -q -d ECC,PERFORMANCE (the fallback parser)", flush=True)
    if shutil.which("nvidia-smi"):
        smi = run_command(["nvidia-smi", "-q", "-d", "ECC,PERFORMANCE"], timeout=30)
        for g in parse_nvidia_smi_q(smi.stdout):
            print("   " + json.dumps(g, sort_keys=True))
    else:
        print("   nvidia-smi not on PATH")
    print("== 3. sysfs PCIe links", flush=True)
    for dev in node_health({})["pci_gpus"]:
        print(f"   {dev['bdf']}: " + ", ".join(f"{k}={str(dev.get(k)).strip()}" for k in
                                               ("current_link_speed", "current_link_width", "max_link_speed",
                                                "max_link_width")) + f"; upstream {dev.get('upstream')}")
    print("== 4. doctor --only health (live)", flush=True)
    out = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes", "--no-train",
                          "--only", "health,host,env"], capture_output=True, text=True, timeout=240)
    try:
        for r in json.loads(out.stdout)["results"]:
            print(f"   {r['status']:5} {r['id']:22} {r['summary']}")
            for e in r["evidence"][:4]:
                print(f"         {e}")
    except (ValueError, KeyError):
        print("   doctor gave no JSON:", out.stderr.strip()[-500:])
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
