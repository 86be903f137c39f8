"""The judges the level-2 numerics probes share, one per family: GEMM per BLAS library, SDPA forward and backward
per backend, RMSNorm per form, AdamW per implementation. Each catalog module (rocmcheck/probes/catalog/) calls its
family's judge with its own literal id. Pure functions of the child's numbers and the facts passed down; the
limits come from rocmcheck/probes/tolerance.py. No torch."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import Fix, note, shell, with_why
from rocmcheck.probes.case_judging import Case, cases_verdict
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import wheel_fix
from rocmcheck.probes.tolerance import ADAMW_MAX_REL_ERR, attention_limit, gemm_limit, norm_limit
from rocmcheck.result import CheckResult, Status, skipped, warned

# ---------------------------------------------------------------- GEMM per BLAS library

LIBRARY_LABELS = {("lt", "amd"): "hipBLASLt", ("classic", "amd"): "hipBLAS (rocBLAS)",
                  ("lt", "nvidia"): "cuBLASLt", ("classic", "nvidia"): "cuBLAS"}
CPU_LIBRARY = "torch's CPU BLAS (test mode)"
# What torch warns when hipBLASLt/cuBLASLt failed and it called hipBLAS/cuBLAS instead (CUDABlas.cpp:
# "... Will attempt to recover by calling cublas instead.").
FALLBACK_WORDS = "attempt to recover"

_HIPBLASLT_RAISED = shell("export TORCH_BLAS_PREFER_HIPBLASLT=0",
                          "the workaround: torch then calls hipBLAS (rocBLAS; probe.gemm_blas checks that path). "
                          "hipBLASLt raises like this when its kernel files are not where HIPBLASLT_TENSILE_LIBPATH "
                          "points (by default the hipblaslt/library folder beside the libhipblaslt torch loads); the "
                          "fix is a torch/ROCm whose hipBLASLt has them for this GPU")
_HIPBLASLT_WRONG = shell("export TORCH_BLAS_PREFER_HIPBLASLT=0",
                         "the workaround: torch then calls hipBLAS (rocBLAS), which probe.gemm_blas checks; the fix "
                         "is a torch/ROCm whose hipBLASLt computes these cases right (rocmcheck probe gemm_blaslt "
                         "--json lists them)")
_ROCBLAS_WHY = ("a torch whose rocBLAS has kernel files for this GPU (ROCBLAS_TENSILE_LIBPATH points rocBLAS at "
                "them); hipBLASLt, the default on gfx942/gfx950, is checked by probe.gemm_blaslt")
_CUBLAS_WHY = "a current torch wheel (cuBLAS and cuBLASLt ship inside it); then rerun rocmcheck doctor --level 2"


def library_label(path: str, vendor: str) -> str:
    return LIBRARY_LABELS.get((path, vendor), CPU_LIBRARY)


def _gemm_fix(path: str, ctx: DeviceContext, raised: bool) -> Fix:
    if ctx.vendor == "amd":
        if path == "lt":
            return _HIPBLASLT_RAISED if raised else _HIPBLASLT_WRONG
        return with_why(wheel_fix(ctx), _ROCBLAS_WHY)
    return with_why(wheel_fix(ctx), _CUBLAS_WHY)


def _call_text(op: str, alpha: float, beta: float) -> str:
    scaled = f"beta={beta:g}, alpha={alpha:g}"
    return {"mm": "matmul", "mm_out": "matmul(out=)", "addmm": f"addmm({scaled})",
            "addmm_out": f"addmm({scaled}, out=)", "linear": "linear(bias)"}.get(op, op)


def judge_gemm(pid: str, path: str, data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    """One BLAS library ("lt" or "classic") over every dtype, shape, call and layout."""
    label = library_label(path, ctx.vendor)
    alpha, beta, tail = data["alpha"], data["beta"], data["tail_from"]
    cases: list[Case] = []
    tf32_sized = []  # fp32 cases past the fp32 limit but inside TF32's: reduced precision, not a broken kernel
    for c in data["cases"]:
        m, n, k = c["mnk"]
        what = f"{c['dtype']} {_call_text(c['op'], alpha, beta)} {c['layout']} {m}x{n}x{k}"
        limit = gemm_limit(c["dtype"], k)
        case = Case.of(what, c["dtype"], c.get("rel_err"), limit, c.get("nonfinite"), c.get("error"))
        cases.append(case)
        if "tail_rel_err" in c:
            cases.append(Case.of(f"{what} rows {tail}+", c["dtype"], c["tail_rel_err"], limit))
        if c["dtype"] == "fp32" and case.wrong:
            tf32_sized.append(case.err is not None and case.err <= gemm_limit("tf32", k))
    evidence = []
    if data.get("in_effect"):
        evidence.append(f"torch.backends.cuda.preferred_blas_library(): {data.get('default')} by default here, "
                        f"{data['in_effect']} while these ran")
    if tf32_sized and all(tf32_sized):
        evidence.append("every wrong fp32 result is off by what reduced-precision (TF32-like) arithmetic gives, "
                        "although torch.get_float32_matmul_precision() was 'highest'")
    warnings = [str(w) for w in data.get("warnings") or []]
    evidence += [f"torch warning: {w}" for w in warnings[:4]]
    fix = _gemm_fix(path, ctx, raised=False)
    verdict = cases_verdict(pid, f"GEMM via {label}", cases, ctx, wrong_fix=fix,
                            raised_fix=_gemm_fix(path, ctx, raised=True),
                            evidence=evidence, library=label, in_effect=data.get("in_effect"),
                            default=data.get("default"))
    fell_back = [w for w in warnings if FALLBACK_WORDS in w.lower()]
    if verdict.status is Status.PASS and fell_back:
        return warned(f"GEMM via {label} gave right numbers on {ctx.label()} only because torch fell back to "
                      f"another library when {label} failed: {fell_back[0][:160]}", fix, verdict.evidence,
                      **verdict.data, id=pid)
    return verdict


# ---------------------------------------------------------------- SDPA forward and backward per backend

ATTENTION_OUTPUTS = ("out", "dq", "dk", "dv")
BACKEND_LABELS = {"flash": "flash", "efficient": "memory-efficient", "cudnn": "cuDNN", "math": "math"}
# The switch that keeps SDPA off one fused backend (torch.backends.cuda.enable_*_sdp), for the fix.
BACKEND_SWITCH = {"flash": "enable_flash_sdp", "efficient": "enable_mem_efficient_sdp", "cudnn": "enable_cudnn_sdp"}


def _attention_fix(backend: str, ctx: DeviceContext) -> Fix:
    if backend == "math":  # plain matmuls and a softmax: the GEMM probes say which library is wrong
        return with_why(wheel_fix(ctx), "SDPA's math path is batched GEMMs and a softmax: probe.gemm_blaslt and "
                                        "probe.gemm_blas name the BLAS library at fault")
    return note(f"keep SDPA off the {BACKEND_LABELS[backend]} kernel until torch is fixed: "
                f"torch.backends.cuda.{BACKEND_SWITCH[backend]}(False) at the top of the training script "
                "(transformers' attn_implementation='eager' avoids SDPA altogether); then upgrade torch")


def judge_attention(pid: str, backend: str, data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    label = BACKEND_LABELS[backend]
    usable = [c for c in data["cases"] if c.get("usable") or c.get("error")]
    not_usable = [c for c in data["cases"] if not (c.get("usable") or c.get("error"))]
    why_not = [f"{c['dtype']} {'x'.join(map(str, c['bhsd']))}: not usable: {c.get('why_not') or 'no reason given'}"
               for c in not_usable]
    warnings = [f"torch warning: {w}" for w in (data.get("warnings") or [])[:3]]
    if not usable:
        reason = not_usable[0].get("why_not") if not_usable else "no case ran"
        return skipped(f"SDPA {label} attention does not run here ({data.get('where') or ctx.label()}): {reason}",
                       why_not + warnings, id=pid)
    cases: list[Case] = []
    for c in usable:
        b, h, s, d = c["bhsd"]
        shape = f"{b}x{h}x{s}x{d}"
        if c.get("error"):
            cases.append(Case.of(f"{c['dtype']} causal {shape}", c["dtype"], None, 0.0, error=c["error"]))
            continue
        for output in ATTENTION_OUTPUTS:
            cases.append(Case.of(f"{c['dtype']} {output} causal {shape}", f"{c['dtype']} {output}",
                                 c.get(output), attention_limit(c["dtype"], output, d, s),
                                 (c.get("nonfinite") or {}).get(output, 0)))
    fix = _attention_fix(backend, ctx)
    return cases_verdict(pid, f"SDPA {label} forward+backward", cases, ctx, wrong_fix=fix, raised_fix=fix,
                         evidence=why_not + warnings, backend=label)


# ---------------------------------------------------------------- RMSNorm per form

NORM_OUTPUTS = ("y", "dx", "dw")
NORM_LABELS = {"torch": "torch.nn.functional.rms_norm", "llama": "LlamaRMSNorm (decomposed)"}
# A weight gradient this many times its right size is the "abnormally large bf16 weight gradients" failure.
LARGE_GRADIENT_RATIO = 2.0

_DECOMPOSED = note("use the decomposed RMSNorm (transformers' LlamaRMSNorm: x.float(), mean of squares, rsqrt, "
                   "weight times the result cast back) instead of torch.nn.functional.rms_norm / torch.nn.RMSNorm "
                   "until torch is fixed; probe.rms_norm_llama checks that form here")


def judge_norm(pid: str, form: str, data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    tokens, hidden = data["shape"]
    cases: list[Case] = []
    large = []
    for c in data["cases"]:
        if c.get("error"):
            cases.append(Case.of(f"{c['dtype']} {tokens}x{hidden}", c["dtype"], None, 0.0, error=c["error"]))
            continue
        for output in NORM_OUTPUTS:
            limit = norm_limit(c["dtype"], output, hidden, tokens)
            cases.append(Case.of(f"{c['dtype']} {output} {tokens}x{hidden}", f"{c['dtype']} {output}", c.get(output),
                                 limit, (c.get("nonfinite") or {}).get(output)))
        ratio = (c.get("norm_ratio") or {}).get("dw")
        if isinstance(ratio, (int, float)) and ratio > LARGE_GRADIENT_RATIO:
            large.append(f"{c['dtype']} weight gradient is {ratio:.3g}x the size of the float64 one")
    fix = _DECOMPOSED if form == "torch" else with_why(wheel_fix(ctx), "the decomposed RMSNorm is plain torch "
                                                                       "element-wise ops and reductions: a torch "
                                                                       "built for this GPU computes them right")
    verdict = cases_verdict(pid, f"{NORM_LABELS[form]} forward+backward", cases, ctx, wrong_fix=fix, raised_fix=fix,
                            evidence=large, form=NORM_LABELS[form], eps=data.get("eps"))
    if large and verdict.status is Status.FAIL:
        verdict.summary += f" ({large[0]})"
    return verdict


# ---------------------------------------------------------------- AdamW per implementation

ADAMW_QUANTITIES = {"change": "parameter change", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}
ADAMW_LABELS = {"fused": "fused AdamW (fused=True)", "foreach": "foreach AdamW (foreach=True)"}
# What the parameter change matched instead of AdamW's, when it did (the runner compares both look-alikes).
LOOK_ALIKES = {"no_weight_decay": "AdamW without its weight decay",
               "coupled_weight_decay": "Adam with L2 weight decay (coupled: added to the gradient), not AdamW's"}
_ADAMW_FIXES = {
    "fused": note("use the foreach AdamW until torch is fixed (transformers: optim='adamw_torch'; torch: "
                  "torch.optim.AdamW(..., foreach=True)); probe.adamw_foreach checks it here"),
    "foreach": note("use the per-tensor AdamW until torch is fixed (torch.optim.AdamW(..., foreach=False)); "
                    "probe.adamw_fused checks the fused one here"),
}


def judge_adamw(pid: str, form: str, data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    label = ADAMW_LABELS[form]
    what = f"{data['steps']} steps over {data['elements']:,} fp32 parameters in {data['tensors']} tensors"
    if data.get("error"):
        cases = [Case.of(what, "fp32", None, ADAMW_MAX_REL_ERR, error=data["error"])]
    else:
        cases = [Case.of(f"{label_q} after {what}", "fp32", data.get(q), ADAMW_MAX_REL_ERR,
                         (data.get("nonfinite") or {}).get(q)) for q, label_q in ADAMW_QUANTITIES.items()]
    matched = [LOOK_ALIKES[name] for name in data.get("matches") or [] if name in LOOK_ALIKES]
    evidence = [f"the update matches {m}" for m in matched]
    evidence.append(f"lr {data['lr']:g}, betas {tuple(data['betas'])}, eps {data['eps']:g}, weight decay "
                    f"{data['weight_decay']:g}, against AdamW's formula in float64")
    verdict = cases_verdict(pid, label, cases, ctx, wrong_fix=_ADAMW_FIXES[form], raised_fix=_ADAMW_FIXES[form],
                            evidence=evidence, implementation=label)
    if matched and verdict.status is Status.FAIL:
        verdict.summary += f": the update is {matched[0]}"
    return verdict
