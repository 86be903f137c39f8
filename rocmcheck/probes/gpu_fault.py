"""A GPU that hung under a probe, named from the ROCm runtime's own line on the child's stderr. No torch; pure.

When a queue stops making progress the ROCm runtime (ROCr) prints, to the stderr of the process that owns it,
  HW Exception by GPU node-1 (Agent handle: 0x12e78350) reason :GPU Hang
and aborts the process ("Aborted (core dumped)"). The line is not in the kernel log (the driver logs its own
ring timeout there), so the doctor's kernel-log check does not see it; the probe that was running does: the stage
reads the dead child's stderr here before it falls back to the generic crash or hang verdict. Seen hours into a
fine-tune on MI300X machines (ROCm/legacy-rocm-build#4021) and under load on consumer GPUs."""

from __future__ import annotations

import re
from typing import Any

from rocmcheck.fixes import shell
from rocmcheck.result import CheckResult, failed

HW_EXCEPTION = re.compile(r"HW Exception by GPU node-(?P<node>\d+)(?:\s*\(Agent handle:\s*(?P<agent>[^)]*)\))?"
                          r"\s*reason\s*:\s*(?P<reason>[^\r\n]*)")
MAX_STDERR_CHARS = 1_000_000  # the newest part of a long stderr is where the line is

_HANG_FIX = shell("sudo dmesg | grep -i -e amdgpu -e 'ring .* timeout' -e 'GPU reset' | tail -30",
                  "the GPU stopped responding under load (the driver's ring timeout and reset are in the kernel "
                  "log); once it is idle reset it (sudo amd-smi reset -G) or reboot; if it hangs again under "
                  "rocmcheck probe stress_gemm, drain the node and update the amdgpu driver and the firmware "
                  "(PLDM bundle)")


def find_hw_exception(stderr: str | None) -> dict[str, Any] | None:
    """{"node", "reason", "line", "count"} of the runtime's HW Exception lines in stderr (the last one), or None."""
    text = (stderr or "")[-MAX_STDERR_CHARS:]
    found = list(HW_EXCEPTION.finditer(text))
    if not found:
        return None
    last = found[-1]
    return {"node": int(last.group("node")), "reason": last.group("reason").strip() or "unknown",
            "line": last.group(0).strip()[:300], "count": len(found)}


def hw_exception_verdict(pid: str, name: str, stderr: str | None, label: str) -> CheckResult | None:
    """The verdict for a probe whose child printed the HW Exception line; None when it did not."""
    fault = find_hw_exception(stderr)
    if fault is None:
        return None
    reason = fault["reason"]
    what = "hung" if "hang" in reason.lower() else f"raised a hardware exception ({reason})"
    return failed(f"the GPU {what} while {name} ran on {label}: the ROCm runtime reports HW Exception by GPU "
                  f"node-{fault['node']}, reason {reason}", _HANG_FIX,
                  [f"stderr: {fault['line']}"] + ([f"{fault['count']} such lines"] if fault["count"] > 1 else []),
                  gpu_fault=True, kfd_node=fault["node"], reason=reason, id=pid)
