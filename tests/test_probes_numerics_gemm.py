"""probe.gemm_blaslt and probe.gemm_blas on real CPU tensors: the healthy run passes, and each planted fault fails
with the library and the dtype named: alpha dropped when beta != 0, a scaled product, an out= that leaves elements
unwritten, garbage rows past the large-M boundary, fp32 computed at reduced precision, a library that raises
(with the hipBLASLt workaround on ROCm), and a library torch silently fell back from."""

import warnings

import pytest

torch = pytest.importorskip("torch")

from rocmcheck.probes import gemm_paths  # noqa: E402
from rocmcheck.probes.catalog import gemm_blas, gemm_blaslt  # noqa: E402
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.gemm_paths import ALPHA, BETA, CPU_SHAPES, CPU_TAIL, KERNELS, gemm_path  # noqa: E402
from rocmcheck.probes.numerics_verdicts import judge_gemm  # noqa: E402
from rocmcheck.result import Status  # noqa: E402

CPU = torch.device("cpu")
CTX = DeviceContext(vendor="cpu", name="CPU", arch="")
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", hip="6.3.42131")
H200 = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90")


def planted(**kernels):
    """The CPU run with some call forms replaced by a faulty kernel."""
    return gemm_path(CPU, "lt", CPU_SHAPES, CPU_TAIL, kernels={**KERNELS, **kernels})


@pytest.fixture(scope="module")
def healthy():
    return gemm_path(CPU, "lt", CPU_SHAPES, CPU_TAIL)


def test_the_healthy_cpu_run_of_both_probes_passes():
    for probe in (gemm_blaslt, gemm_blas):
        data = probe.run_cpu(CPU, None)
        verdict = probe.judge(data, CTX)
        assert verdict.status is Status.PASS, verdict.summary
        dtypes = {c["dtype"] for c in data["cases"]}
        assert dtypes == {"fp32", "tf32", "bf16", "fp16"}
        assert {c["op"] for c in data["cases"]} == set(KERNELS)
        assert {c["layout"] for c in data["cases"]} == {"nn", "nt", "tn"}
        assert any("tail_rel_err" in c for c in data["cases"])  # the large-M rows judged on their own
        assert verdict.data["failed"] == 0 and verdict.data["worst"]["rel_err"] < verdict.data["worst"]["limit"]


def test_alpha_dropped_when_beta_is_not_zero_fails_on_the_addmm_cases(healthy):
    def drops_alpha(o):
        return torch.addmm(o.c, o.a, o.b, beta=BETA, alpha=1.0)

    verdict = judge_gemm("probe.gemm_blaslt", "lt", planted(addmm=drops_alpha), MI300X)
    assert verdict.status is Status.FAIL
    assert "hipBLASLt" in verdict.summary and "wrong" in verdict.summary
    assert f"addmm(beta={BETA:g}, alpha={ALPHA:g})" in verdict.summary
    wrong = [c for c in verdict.data["cases"] if c["rel_err"] is not None and c["rel_err"] > c["limit"]]
    assert wrong and all("addmm(" in c["what"] and "out=" not in c["what"] for c in wrong)
    assert {c["group"] for c in wrong} == {"fp32", "tf32", "bf16", "fp16"}
    assert verdict.fix.text == "export TORCH_BLAS_PREFER_HIPBLASLT=0"
    assert judge_gemm("probe.gemm_blaslt", "lt", healthy, MI300X).status is Status.PASS


def test_a_scaled_product_fails_every_dtype():
    verdict = judge_gemm("probe.gemm_blas", "classic", planted(mm=lambda o: torch.matmul(o.a, o.b) * 1.05), H200)
    assert verdict.status is Status.FAIL and "cuBLAS" in verdict.summary
    assert "fp32, tf32, bf16, fp16" in verdict.summary
    assert verdict.fix.text.startswith("pip install --force-reinstall torch")


def test_an_out_that_leaves_elements_unwritten_is_caught_by_the_nan_it_was_filled_with():
    def half_written(o):
        out = o.poisoned()
        rows = o.a.shape[0] // 2
        torch.matmul(o.a[:rows], o.b, out=out[:rows])
        return out

    verdict = judge_gemm("probe.gemm_blaslt", "lt", planted(mm_out=half_written), CTX)
    assert verdict.status is Status.FAIL and "NaN/inf or unwritten" in verdict.summary
    assert any(c["nonfinite"] > 0 for c in verdict.data["cases"])


def test_garbage_rows_past_the_large_m_boundary_are_named():
    def garbage_tail(o):
        out = torch.matmul(o.a, o.b)
        if out.shape[0] > CPU_TAIL:
            out[CPU_TAIL:] = 0.25
        return out

    verdict = judge_gemm("probe.gemm_blaslt", "lt", planted(mm=garbage_tail), CTX)
    assert verdict.status is Status.FAIL
    assert f"rows {CPU_TAIL}+" in verdict.summary  # the tail is worse than the whole output
    assert all(f"{CPU_SHAPES['large_m'][0]}x" in c["what"] for c in verdict.data["cases"]
               if c["rel_err"] is not None and c["rel_err"] > c["limit"])


def test_fp32_at_reduced_precision_fails_fp32_only_and_says_so():
    def reduced(o):
        if o.a.dtype == torch.float32:  # fp16-rounded operands: what TF32 does, where fp32 was asked for
            return (o.a.half().float() @ o.b.half().float())
        return torch.matmul(o.a, o.b)

    verdict = judge_gemm("probe.gemm_blaslt", "lt", planted(mm=reduced), H200)
    assert verdict.status is Status.FAIL
    assert {c["group"] for c in verdict.data["cases"] if c["rel_err"] and c["rel_err"] > c["limit"]} == {"fp32"}
    assert any("TF32-like" in line for line in verdict.evidence)


def test_a_library_that_raises_fails_naming_it_and_the_dtype_with_the_workaround():
    def not_supported(o):
        if o.a.dtype == torch.float32:
            raise RuntimeError("CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED when calling `hipblasLtMatmul( ...)`")
        return torch.matmul(o.a, o.b)

    data = planted(mm=not_supported)
    verdict = judge_gemm("probe.gemm_blaslt", "lt", data, MI300X)
    assert verdict.status is Status.FAIL
    assert "GEMM via hipBLASLt raised on AMD Instinct MI300X (gfx942) for fp32, tf32" in verdict.summary
    assert "HIPBLAS_STATUS_NOT_SUPPORTED" in verdict.summary
    assert verdict.fix.text == "export TORCH_BLAS_PREFER_HIPBLASLT=0" and "HIPBLASLT_TENSILE_LIBPATH" in verdict.fix.why
    classic = judge_gemm("probe.gemm_blas", "classic", data, MI300X)
    assert "hipBLAS (rocBLAS)" in classic.summary
    assert classic.fix.text.endswith("--index-url https://download.pytorch.org/whl/rocm6.4")
    assert "ROCBLAS_TENSILE_LIBPATH" in classic.fix.why


def test_a_library_torch_fell_back_from_is_a_warning():
    def recovered(o):
        warnings.warn("gemm_internal_cublaslt error: HIPBLAS_STATUS_INTERNAL_ERROR when calling hipblasLtMatmul. "
                      "Will attempt to recover by calling cublas instead.", UserWarning, stacklevel=1)
        return torch.matmul(o.a, o.b)

    verdict = judge_gemm("probe.gemm_blaslt", "lt", planted(mm=recovered), MI300X)
    assert verdict.status is Status.WARN and "fell back" in verdict.summary
    assert verdict.fix.text == "export TORCH_BLAS_PREFER_HIPBLASLT=0"


class _Stop(BaseException):
    """Not an error of the case: it ends the run (as Ctrl-C would)."""


def test_the_settings_are_put_back_after_the_run_whatever_happens():
    def stops(o):
        raise _Stop()

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # neither value the run sets
    try:
        with pytest.raises(_Stop):
            planted(mm=stops)
        assert torch.get_float32_matmul_precision() == "medium"
        gemm_path(CPU, "lt", {"odd": (9, 7, 5)}, CPU_TAIL, dtypes=("tf32",))
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_operands_and_products_are_shared_between_the_two_libraries():
    gemm_paths._PRODUCTS.clear()
    gemm_path(CPU, "lt", {"odd": (9, 7, 5)}, CPU_TAIL, dtypes=("fp32", "bf16"))
    made = dict(gemm_paths._PRODUCTS)
    gemm_path(CPU, "classic", {"odd": (9, 7, 5)}, CPU_TAIL, dtypes=("fp32", "bf16"))
    assert len(made) == 2 and all(gemm_paths._PRODUCTS[k] is v for k, v in made.items())
