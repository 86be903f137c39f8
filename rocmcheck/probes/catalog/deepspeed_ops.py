"""probe.deepspeed_ops: DeepSpeed's FusedAdam (GPU) and DeepSpeedCPUAdam load (prebuilt or JIT-cached) and step
like torch AdamW. JIT-building them takes minutes: only `rocmcheck probe deepspeed_ops` builds; the doctor's stage
never does."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell, then
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import fmt_err, number
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.deepspeed_ops"
# An fp32 optimizer step computed two ways differs by rounding only (~1e-7); a wrong formula is off by O(1).
OPTIMIZER_MAX_REL_ERR = 1e-3
# How long a JIT build of the ops may take when the person asked for this probe by name.
DEEPSPEED_BUILD_TIMEOUT_S = 900.0

_PREBUILD = shell("DS_BUILD_FUSED_ADAM=1 DS_BUILD_CPU_ADAM=1 pip install --no-build-isolation --no-cache-dir "
                  "--force-reinstall deepspeed", "or let rocmcheck JIT-build them now: rocmcheck probe deepspeed_ops")
_BUILD_TOOLS = then(shell("sudo apt-get install -y python3-dev ninja-build",
                          "the headers and ninja the op build needs; then the ops are built into the wheel"),
                    _PREBUILD)
_REBUILD = shell("pip install --force-reinstall --no-build-isolation deepspeed",
                 "rebuild the ops against the installed torch")


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.extensions import deepspeed_ops

    return deepspeed_ops(device, options.allow_build)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    ops: dict[str, dict[str, Any]] = data["ops"]
    evidence, failures, not_built = [], [], []
    for name, op in ops.items():
        state = op["state"]
        line = f"{name}: {state}"
        if op.get("error_line"):
            line += f": {op['error_line']}"
        if number(op.get("rel_err")) is not None:
            line += f" (one step vs torch AdamW: relative error {op['rel_err']:.1e})"
        evidence.append(line)
        if state == "not_built":
            not_built.append(name)
        elif state != "ok" or number(op.get("rel_err")) is None or op["rel_err"] > OPTIMIZER_MAX_REL_ERR:
            failures.append((name, op))
    info = dict(version=data.get("version"), ops=ops)
    if failures:
        name, op = failures[0]
        if op["state"] == "build_failed":
            return failed(f"DeepSpeed {name} does not build: {op.get('error_line') or 'see the build log'}",
                          _BUILD_TOOLS, evidence, **info, id=ID)
        if op["state"] == "ok":
            return failed(f"DeepSpeed {name} computes a different AdamW step than torch (relative error "
                          f"{fmt_err(op.get('rel_err'))})", _REBUILD, evidence, **info, id=ID)
        return failed(f"DeepSpeed {name} cannot be used: {op.get('error_line') or op['state']}",
                      _PREBUILD, evidence, **info, id=ID)
    if not_built:
        return warned(f"DeepSpeed {', '.join(not_built)} not built yet: the first training run will JIT-compile "
                      "them (minutes)", _PREBUILD, evidence, **info, id=ID)
    return passed(f"DeepSpeed {data.get('version', '')} {' and '.join(ops)} load and step like torch AdamW",
                  evidence, **info, id=ID)


PROBE = Probe(ID, "DeepSpeed FusedAdam and DeepSpeedCPUAdam load and step like torch AdamW", 60, judge,
              run=run, run_cpu=run, build_timeout_s=DEEPSPEED_BUILD_TIMEOUT_S)
