"""Turn a probe's measurements (the child's JSON "data") into a verdict. Pure functions, no torch,
so every threshold is tested on plain numbers. Thresholds and their sources are listed in docs/probes.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from rocmcheck.knowledge import Product, arch_info
from rocmcheck.probes.catalog import probe_id
from rocmcheck.probes.hints import smi_processes_command, torch_wheel_fix
from rocmcheck.result import CheckResult, failed, passed, warned
from rocmcheck.units import GIB

# Relative norm error ||out - ref|| / ||ref|| against a float64/float32 reference. bf16 operands with
# fp32 accumulation land between 1e-3 and 1e-2 (rounding the inputs and the output to 8 mantissa bits).
BF16_MAX_REL_ERR = 1e-2
# Attention adds a softmax in low precision: flash kernels vs an fp32 reference sit near 3e-3; allow 2e-2.
ATTENTION_MAX_REL_ERR = 2e-2
# Gradients through attention accumulate more rounding (flash-attn's own tests compare against 2x the
# error of a bf16 PyTorch reference); 5e-2 still catches a wrong kernel, which is off by O(1).
ATTENTION_GRAD_MAX_REL_ERR = 5e-2
# An fp32 optimizer step computed two ways differs by rounding only (~1e-7); a wrong formula is off by O(1).
OPTIMIZER_MAX_REL_ERR = 1e-3
TRITON_MAX_REL_ERR = 1e-6

# GEMM rate vs what this GPU typically reaches (datasheet peak x typical fraction, knowledge/gpus.json).
GEMM_PASS_OF_TYPICAL = 0.75  # run-to-run and clock spread stays well inside this
GEMM_FAIL_OF_TYPICAL = 0.50  # below half of typical something is wrong: clocks, power cap, another job, BLAS
# Without a typical fraction only the datasheet peak is known: flag only a rate far below it.
GEMM_WARN_OF_PEAK_ONLY = 0.30
# Device copy (bytes read + written) vs datasheet HBM bandwidth: an H200 reached 4.2 of 4.8 TB/s (0.875).
COPY_PASS_OF_PEAK = 0.60
COPY_FAIL_OF_PEAK = 0.35
# Pinned host<->device GB/s. PCIe 3.0 x16 carries 15.75 GB/s per direction, 4.0 x16 31.5, 5.0 x16 63.
HOST_PASS_GBPS = 20.0  # more than PCIe 3.0 x16 can carry: the link is 4.0 x16 or better and pinned copies work
HOST_FAIL_GBPS = 6.0  # below half a PCIe 3.0 x16: a narrow/downgraded link or unpinned memory
# A fused attention backend that is not clearly faster than the math path is not really running.
ATTENTION_MIN_SPEEDUP = 1.2
# Memory: torch's total vs the driver tool's; and memory already taken by others when the probe ran.
MEMORY_TOTAL_TOLERANCE = 0.05
MEMORY_IN_USE_WARN_FRACTION = 0.10
MEMORY_IN_USE_WARN_MIN_BYTES = 2 * GIB  # the probe's own CUDA/HIP context takes ~0.5 GiB


@dataclass
class DeviceContext:
    """What the parent knows about the GPUs: from the child's device report plus the system tools."""

    vendor: str = ""  # "amd" | "nvidia"
    name: str = ""  # torch's device name, e.g. "NVIDIA H200", "AMD Instinct MI300X"
    arch: str = ""  # "gfx942" or "sm_90"
    count: int = 0
    torch: str = ""
    hip: str | None = None
    gpu_names: list[str] = field(default_factory=list)  # what amd-smi/nvidia-smi reported
    smi_memory_bytes: list[int] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_device_event(cls, device: dict[str, Any], gpu_names: list[str] | None = None,
                          smi_memory_bytes: list[int] | None = None, env: dict[str, str] | None = None) -> "DeviceContext":
        first = (device.get("devices") or [{}])[0]
        return cls(
            vendor="amd" if device.get("hip") else "nvidia",
            name=str(first.get("name") or ""),
            arch=str(first.get("arch") or ""),
            count=int(device.get("count") or 0),
            torch=str(device.get("torch") or ""),
            hip=device.get("hip"),
            gpu_names=list(gpu_names or []),
            smi_memory_bytes=list(smi_memory_bytes) if smi_memory_bytes is not None else None,
            env=dict(env or {}),
        )

    def product(self) -> Product | None:
        arch = arch_info(self.arch) if self.arch else None
        if arch is None:
            return None
        for name in [self.name, *self.gpu_names]:
            product = arch.match_product(name)
            if product is not None:
                return product
        return None

    def label(self) -> str:
        return f"{self.name} ({self.arch})" if self.arch else self.name or "this GPU"


def _num(value: Any) -> float | None:
    """A finite float, or None for missing / NaN / inf (NaN must never pass)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt_err(value: Any) -> str:
    v = _num(value)
    return "NaN/inf" if v is None else f"{v:.1e}"


# ---------------------------------------------------------------------------------------------- numerics

def judge_numerics(pid: str, what: str, rel_err: Any, limit: float, ctx: DeviceContext,
                   nonfinite: int = 0, evidence: list[str] | None = None, **data: Any) -> CheckResult:
    """NaN never passes: the output was poisoned with NaN before the run, so an unwritten element shows too."""
    err = _num(rel_err)
    evidence = list(evidence or [])
    if err is None or nonfinite:
        return failed(f"{what} produced NaN/inf on {ctx.label()} ({nonfinite} non-finite or unwritten elements)",
                      f"rocmcheck probe {pid.split('.', 1)[1]}  # if it repeats, test the GPU with the vendor diagnostics (rvs / dcgmi diag)",
                      evidence, rel_err=None, nonfinite=nonfinite, limit=limit, **data, id=pid)
    if err > limit:
        return failed(f"{what} is wrong on {ctx.label()}: relative error {err:.1e} > {limit:.0e}",
                      torch_wheel_fix(ctx.vendor, ctx.arch), evidence, rel_err=err, limit=limit, **data, id=pid)
    return passed(f"{what} is right on {ctx.label()}: relative error {err:.1e} (limit {limit:.0e})",
                  evidence, rel_err=err, limit=limit, **data, id=pid)


def judge_gemm_numerics(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    m, n, k = data["shape"]
    return judge_numerics(probe_id("gemm_numerics"), f"bf16 GEMM {m}x{n}x{k}", data["rel_err"], BF16_MAX_REL_ERR,
                          ctx, nonfinite=int(data.get("nonfinite") or 0),
                          evidence=[f"reference: {data.get('reference', 'float64')} product of the same bf16 operands"],
                          shape=[m, n, k])


def judge_triton(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_numerics(probe_id("triton"), f"a Triton {data.get('version', '')} kernel".replace("  ", " "),
                          data["rel_err"], TRITON_MAX_REL_ERR, ctx,
                          evidence=[f"compiled and ran in {data.get('compile_s', 0):.2f} s, {data.get('n')} elements"],
                          version=data.get("version"), compile_s=data.get("compile_s"))


# ------------------------------------------------------------------------------------------- performance

def rate_verdict(pid: str, what: str, measured: float, unit: str, expected: float, expected_text: str,
                 pass_at: float, fail_below: float, fix: str, ctx: DeviceContext, **data: Any) -> CheckResult:
    """pass at >= pass_at x expected, fail below fail_below x expected, warn between."""
    ratio = measured / expected
    text = f"{what} {measured:,.1f} {unit} on {ctx.label()} = {ratio:.0%} of {expected_text}"
    data.update(measured=measured, expected=expected, ratio=round(ratio, 4))
    if ratio >= pass_at:
        return passed(text, **data, id=pid)
    if ratio >= fail_below:
        return warned(text + f" (expected >= {pass_at:.0%})", fix, **data, id=pid)
    return failed(text + f": far below what it should reach (< {fail_below:.0%})", fix, **data, id=pid)


def _gemm_fix(ctx: DeviceContext) -> str:
    if ctx.vendor == "amd":
        return ("export TORCH_BLAS_PREFER_HIPBLASLT=1 PYTORCH_TUNABLEOP_ENABLED=1  # then rerun; also check "
                "`amd-smi metric --power --clock` for a power cap or low clocks and `amd-smi process` for other jobs")
    return ("nvidia-smi -q -d PERFORMANCE,CLOCK  # look for throttle reasons or a power cap; "
            "nvidia-smi --query-compute-apps=pid,used_memory --format=csv lists other jobs on the GPU")


def judge_gemm_tflops(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("gemm_tflops")
    tflops = _num(data["tflops"])
    m, n, k = data["shape"]
    what = f"bf16 GEMM {m}x{n}x{k}:"
    if tflops is None or tflops <= 0:
        return failed(f"bf16 GEMM rate could not be measured on {ctx.label()}", _gemm_fix(ctx), tflops=None, id=pid)
    product = ctx.product()
    info = dict(tflops=round(tflops, 1), shape=[m, n, k])
    if product is None or not product.bf16_tflops:
        return passed(f"{what} {tflops:,.1f} TFLOP/s on {ctx.label()} (no datasheet figure for this GPU to compare)",
                      **info, id=pid)
    peak = product.bf16_tflops
    info["peak_tflops"] = peak
    if product.typical_fraction:
        typical = peak * product.typical_fraction
        return rate_verdict(pid, what, tflops, "TFLOP/s", typical,
                            f"the {typical:,.0f} typically reached ({product.typical_fraction:.0%} of the {peak:,.0f} datasheet peak)",
                            GEMM_PASS_OF_TYPICAL, GEMM_FAIL_OF_TYPICAL, _gemm_fix(ctx), ctx,
                            typical_fraction=product.typical_fraction, **info)
    ratio = tflops / peak
    text = f"{what} {tflops:,.1f} TFLOP/s on {ctx.label()} = {ratio:.0%} of the {peak:,.0f} datasheet peak"
    if ratio < GEMM_WARN_OF_PEAK_ONLY:
        return warned(text + f" (< {GEMM_WARN_OF_PEAK_ONLY:.0%})", _gemm_fix(ctx), ratio=round(ratio, 4), **info, id=pid)
    return passed(text, ratio=round(ratio, 4), **info, id=pid)


def judge_copy_bandwidth(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("copy_bandwidth")
    tbps = _num(data["tb_per_s"])
    info = dict(tb_per_s=tbps, bytes=data.get("bytes"))
    if tbps is None or tbps <= 0:
        return failed(f"device copy bandwidth could not be measured on {ctx.label()}", _gemm_fix(ctx), **info, id=pid)
    product = ctx.product()
    if product is None or not product.hbm_tbps:
        return passed(f"device copy: {tbps:.2f} TB/s on {ctx.label()} (no datasheet figure for this GPU to compare)", **info, id=pid)
    return rate_verdict(pid, "device copy:", tbps, "TB/s", product.hbm_tbps,
                        f"the {product.hbm_tbps} TB/s datasheet memory bandwidth", COPY_PASS_OF_PEAK, COPY_FAIL_OF_PEAK,
                        _gemm_fix(ctx), ctx, **info)


def judge_host_bandwidth(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("host_bandwidth")
    h2d, d2h = _num(data["h2d_gb_per_s"]), _num(data["d2h_gb_per_s"])
    info = dict(h2d_gb_per_s=h2d, d2h_gb_per_s=d2h, bytes=data.get("bytes"))
    text = f"pinned host->device {h2d or 0:.1f} GB/s, device->host {d2h or 0:.1f} GB/s on {ctx.label()}"
    slowest = min(h2d or 0.0, d2h or 0.0)
    tool = "amd-smi static --bus" if ctx.vendor == "amd" else "nvidia-smi -q -d PCI"
    fix = (f"{tool}  # check the PCIe link generation and width; run on the CPU socket nearest the GPU "
           f"(numactl --cpunodebind=N --membind=N)")
    if slowest >= HOST_PASS_GBPS:
        return passed(text, **info, id=pid)
    if slowest >= HOST_FAIL_GBPS:
        return warned(text + f": below {HOST_PASS_GBPS:.0f} GB/s, so CPU offload will be slow", fix, **info, id=pid)
    return failed(text + f": below {HOST_FAIL_GBPS:.0f} GB/s, far under any PCIe 3.0 x16 link", fix, **info, id=pid)


# ------------------------------------------------------------------------------------------------ memory

def judge_memory(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("memory")
    devices = data["devices"]
    smi = [int(b) for b in (ctx.smi_memory_bytes or []) if b]
    evidence, mismatched, busy = [], [], []
    for dev in devices:
        total, free = int(dev["total_bytes"]), int(dev["free_bytes"])
        used = total - free
        line = f"GPU {dev['index']}: torch sees {total / GIB:.1f} GiB total, {free / GIB:.1f} GiB free"
        if smi:
            # Index order can differ between torch and the tools (pytorch#131901): match by size.
            closest = min(smi, key=lambda b: abs(b - total))
            line += f"; the system tool reports {closest / GIB:.1f} GiB"
            if abs(closest - total) > MEMORY_TOTAL_TOLERANCE * closest:
                mismatched.append(dev["index"])
        evidence.append(line)
        if used > max(MEMORY_IN_USE_WARN_FRACTION * total, MEMORY_IN_USE_WARN_MIN_BYTES):
            busy.append((dev["index"], used))
    totals = {"devices": devices, "smi_memory_bytes": smi or None}
    if mismatched:
        fix = ("amd-smi static --partition  # a partitioned MI300X (CPX/QPX, NPS4) shows a fraction of its memory per GPU"
               if ctx.vendor == "amd" else "nvidia-smi -q -d MEMORY  # MIG or a visibility setting can shrink what torch sees")
        return warned(f"torch sees a different GPU memory size than the system tool on GPU {', '.join(map(str, mismatched))}",
                      fix, evidence, **totals, id=pid)
    if busy:
        worst = max(busy, key=lambda b: b[1])
        return warned(f"{worst[1] / GIB:.1f} GiB of GPU {worst[0]} memory is already in use by other processes",
                      smi_processes_command(ctx.vendor) + "  # stop what you don't need before training", evidence, **totals, id=pid)
    total = sum(int(d["total_bytes"]) for d in devices)
    compared = "matches the system tool" if smi else "no system-tool figure to compare"
    return passed(f"{len(devices)} GPU(s), {total / GIB:.1f} GiB total as torch sees it ({compared}); free for use",
                  evidence, **totals, id=pid)


# --------------------------------------------------------------------------------------------- attention

def judge_attention(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("attention")
    backends: dict[str, dict[str, Any]] = data["backends"]
    default = data["default_backend"]
    b, h, s, d = data["shape"]
    shape = f"bf16 causal attention {b}x{h}x{s}x{d}"
    evidence = []
    for name, info in backends.items():
        if info.get("usable"):
            evidence.append(f"{name}: runs, {info.get('ms', 0):.3f} ms, rel err {_fmt_err(info.get('rel_err'))}")
        else:
            evidence.append(f"{name}: not usable: {info.get('why_not') or 'no reason given'}")
    evidence += [f"torch warning: {w}" for w in data.get("warnings", [])[:5]]
    fused = [n for n, i in backends.items() if n != "MATH" and i.get("usable")]
    info = dict(default_backend=default, usable=fused, shape=[b, h, s, d], default_ms=data.get("default_ms"),
                math_ms=data.get("math_ms"))
    if default == "MATH" or not fused:
        reason_text = " ".join(data.get("warnings", [])) + " " + " ".join(
            str(i.get("why_not") or "") for i in backends.values())
        if ctx.vendor == "amd" and "experimental" in reason_text.lower() and not ctx.env.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"):
            fix = "export TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1  # AOTriton treats this GPU as experimental"
            why = f"AOTriton's flash/efficient kernels are experimental on {ctx.arch} and TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL is unset"
        else:
            fix = torch_wheel_fix(ctx.vendor, ctx.arch) + "  # a build with flash/memory-efficient attention for this GPU"
            why = "no fused backend (flash / memory-efficient / cuDNN) runs here"
        return failed(f"SDPA silently falls back to the slow math path for {shape} on {ctx.label()}: {why}",
                      fix, evidence, **info, id=pid)
    err = _num(data.get("default_rel_err"))
    if err is None or err > ATTENTION_MAX_REL_ERR:
        return failed(f"SDPA backend {default} gives wrong results for {shape}: relative error {_fmt_err(err)} vs the math path",
                      torch_wheel_fix(ctx.vendor, ctx.arch), evidence, rel_err=err, **info, id=pid)
    speedup = None
    if _num(data.get("default_ms")) and _num(data.get("math_ms")):
        speedup = data["math_ms"] / data["default_ms"]
    info.update(rel_err=err, speedup_vs_math=speedup)
    if speedup is not None and speedup < ATTENTION_MIN_SPEEDUP:
        return warned(f"SDPA picks {default} for {shape} but it is only {speedup:.1f}x faster than math",
                      "rocmcheck probe attention --json  # compare the per-backend timings; a fused kernel should be several times faster",
                      evidence, **info, id=pid)
    faster = f", {speedup:.1f}x faster than math" if speedup else ""
    return passed(f"SDPA runs {default} for {shape}{faster}, relative error {err:.1e}", evidence, **info, id=pid)


def judge_flash_attn(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("flash_attn")
    errs = {k: data.get(k) for k in ("out_rel_err", "dq_rel_err", "dk_rel_err", "dv_rel_err")}
    backend = data.get("backend") or "unknown"
    evidence = [f"{k}: {_fmt_err(v)}" for k, v in errs.items()] + [f"backend evidence: {data.get('backend_evidence', '')}"]
    info = dict(backend=backend, version=data.get("version"), **{k: _num(v) for k, v in errs.items()})
    limits = {"out_rel_err": ATTENTION_MAX_REL_ERR}
    bad = [k for k, v in errs.items() if _num(v) is None or _num(v) > limits.get(k, ATTENTION_GRAD_MAX_REL_ERR)]
    if bad:
        fix = ("pip uninstall -y flash-attn && FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE pip install --no-build-isolation flash-attn  # or rebuild CK with GPU_ARCHS=" + (ctx.arch or "gfx942")
               if ctx.vendor == "amd" else "pip install --force-reinstall --no-build-isolation flash-attn  # rebuild against the installed torch")
        return failed(f"flash-attn {data.get('version', '')} ({backend}) gives wrong results: {', '.join(bad)} over the limit",
                      fix, evidence, **info, id=pid)
    return passed(f"flash-attn {data.get('version', '')} forward+backward matches SDPA on {ctx.label()} (backend: {backend})",
                  evidence, **info, id=pid)


# ------------------------------------------------------------------------------------------ DeepSpeed ops

_DS_PREBUILD = ("DS_BUILD_FUSED_ADAM=1 DS_BUILD_CPU_ADAM=1 pip install --no-build-isolation --no-cache-dir --force-reinstall deepspeed"
                "  # or let rocmcheck JIT-build them now: rocmcheck probe deepspeed_ops")


def judge_deepspeed_ops(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("deepspeed_ops")
    ops: dict[str, dict[str, Any]] = data["ops"]
    evidence, failures, not_built = [], [], []
    for name, op in ops.items():
        state = op["state"]
        line = f"{name}: {state}"
        if op.get("error_line"):
            line += f": {op['error_line']}"
        if _num(op.get("rel_err")) is not None:
            line += f" (one step vs torch AdamW: relative error {op['rel_err']:.1e})"
        evidence.append(line)
        if state == "not_built":
            not_built.append(name)
        elif state != "ok" or _num(op.get("rel_err")) is None or op["rel_err"] > OPTIMIZER_MAX_REL_ERR:
            failures.append((name, op))
    info = dict(version=data.get("version"), ops=ops)
    if failures:
        name, op = failures[0]
        if op["state"] == "build_failed":
            return failed(f"DeepSpeed {name} does not build: {op.get('error_line') or 'see the build log'}",
                          "sudo apt-get install -y python3-dev ninja-build  # then: " + _DS_PREBUILD, evidence, **info, id=pid)
        if op["state"] == "ok":
            return failed(f"DeepSpeed {name} computes a different AdamW step than torch (relative error {_fmt_err(op.get('rel_err'))})",
                          "pip install --force-reinstall --no-build-isolation deepspeed  # rebuild the ops against the installed torch",
                          evidence, **info, id=pid)
        return failed(f"DeepSpeed {name} cannot be used: {op.get('error_line') or op['state']}",
                      _DS_PREBUILD, evidence, **info, id=pid)
    if not_built:
        return warned(f"DeepSpeed {', '.join(not_built)} not built yet: the first training run will JIT-compile them (minutes)",
                      _DS_PREBUILD, evidence, **info, id=pid)
    return passed(f"DeepSpeed {data.get('version', '')} {' and '.join(ops)} load and step like torch AdamW", evidence, **info, id=pid)


# ------------------------------------------------------------------------------------------- collective

def bus_bandwidth_gbps(op: str, size_bytes: float, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s the way nccl-tests/rccl-tests compute them (doc/PERFORMANCE.md there):
    algbw = size / time; all_reduce busbw = algbw * 2(n-1)/n; all_gather busbw = algbw * (n-1)/n, where
    for all_gather size is the whole gathered buffer (n x the per-rank piece)."""
    if seconds <= 0 or world < 1:
        raise ValueError("seconds must be > 0 and world >= 1")
    algbw = size_bytes / seconds / 1e9
    factor = {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world}[op]
    return algbw, algbw * factor


def judge_collective(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pid = probe_id("collective")
    world, backend = data["world"], data["backend"]
    evidence, wrong = [], []
    for op in ("all_reduce", "all_gather"):
        r = data[op]
        evidence.append(f"{op}: {'right' if r['ok'] else 'WRONG'} result, {r['bytes'] / 1e6:.0f} MB in {r['ms']:.3f} ms, "
                        f"algbw {r['algbw_gbps']:.1f} GB/s, busbw {r['busbw_gbps']:.1f} GB/s")
        if not r["ok"]:
            wrong.append(op)
    info = dict(world=world, backend=backend, all_reduce=data["all_reduce"], all_gather=data["all_gather"],
                phases=data.get("phases"))
    if wrong:
        fix = ("export RCCL_MSCCL_ENABLE=0  # AMD's validation guide disables MSCCL to avoid data mismatches; then rerun"
               if ctx.vendor == "amd" else "NCCL_DEBUG=INFO rocmcheck probe collective  # see which transport corrupts data")
        return failed(f"{' and '.join(wrong)} across {world} ranks ({backend}) returned wrong data", fix, evidence, **info, id=pid)
    ar = data["all_reduce"]
    ranks = "GPUs" if backend == "nccl" else "processes"
    return passed(f"all-reduce and all-gather right across {world} {ranks} ({backend}); all-reduce busbw {ar['busbw_gbps']:.1f} GB/s",
                  evidence, **info, id=pid)


JUDGES: dict[str, Callable[[dict[str, Any], DeviceContext], CheckResult]] = {
    "memory": judge_memory,
    "gemm_numerics": judge_gemm_numerics,
    "gemm_tflops": judge_gemm_tflops,
    "copy_bandwidth": judge_copy_bandwidth,
    "host_bandwidth": judge_host_bandwidth,
    "attention": judge_attention,
    "flash_attn": judge_flash_attn,
    "triton": judge_triton,
    "deepspeed_ops": judge_deepspeed_ops,
    "collective": judge_collective,
}
