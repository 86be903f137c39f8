"""Causes and readers written from the tuning part of the recorded threads (tests/fixtures/triage_threads/tune/),
each tested on the real pastes it was written from and on real lines it must leave alone."""

from __future__ import annotations

import json

from conftest import PROJECT_FIXTURES_DIR

from rocmcheck.triage import triage


def _tune_paste(name: str) -> str:
    path = PROJECT_FIXTURES_DIR / "triage_threads" / "tune" / f"{name}.json"
    return json.loads(path.read_text("utf-8"))["paste"]


def _top_ids(text: str, n: int = 3) -> list[str]:
    return [f.id for f in triage([("p", text)]).findings[:n]]


def test_rocblas_without_a_kernel_library_for_the_arch_on_windows():
    """YellowRoseCx/koboldcpp-rocm#91: a Windows build whose bundled rocBLAS lacks the gfx1100 Tensile files. The
    Linux-only causes of the same line (the ROCm release's GPU list, HSA_OVERRIDE_GFX_VERSION) do not hold on
    Windows; the missing library does, and its fix names no Linux or ROCm-on-Linux step."""
    t = triage([("p", _tune_paste("YellowRoseCx-koboldcpp-rocm-91"))])
    top = t.findings[0]
    assert top.id == "rocblas.arch_library_missing"
    assert "for GPU arch : gfx1100" in top.quotes[0].text
    for word in ("/opt/rocm", "sudo", "apt ", "HSA_OVERRIDE", "PYTORCH_ROCM_ARCH"):
        assert word not in top.fix.text


def test_nccl_shm_open_permission_denied_is_a_permission_not_a_size():
    """NVIDIA/nccl#328: shm_open in /dev/shm fails with Permission denied (the fix was chmod on /dev/shm); the
    segment error printed beside it is then evidence of the permission too. A segment that cannot grow for lack of
    space (nccl.shm_segment's own example) stays host.shm."""
    assert _top_ids(_tune_paste("NVIDIA-nccl-328"), 1) == ["host.shm_permission"]
    size = "NCCL WARN Error: failed to extend /dev/shm/nccl-xyz to 9637892 bytes\n"
    ids = _top_ids(size)
    assert ids[0] == "host.shm" and "host.shm_permission" not in ids


def test_pcie_acs_redirect_in_lspci_output():
    """NVIDIA/nccl#2079: GPUs behind bridges with ACS redirect on (ReqRedir+) deadlocked NCCL; lspci's ACSCtl line
    (and the summary of it the reporter wrote) names it. The bits off (ReqRedir-) are no evidence."""
    assert "pcie.acs_redirect" in _top_ids(_tune_paste("NVIDIA-nccl-2079"))
    on = "                ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    off = "                ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    assert _top_ids(on, 1) == ["pcie.acs_redirect"]
    assert "pcie.acs_redirect" not in _top_ids(off)


def test_mps_backend_refused_on_this_macos():
    """pytorch/pytorch#139425: torch 2.5 refuses MPS on macOS 12.7.6 with a message naming 12.3+ (the real floor
    was 13.0). The answer names the refusal and asks for the versions; its fix names no Linux or CUDA step."""
    t = triage([("p", _tune_paste("pytorch-pytorch-139425"))])
    top = t.findings[0]
    assert top.id == "macos.mps_os_too_old"
    for word in ("sudo", "apt ", "nvidia", "rocm"):
        assert word not in top.fix.text.lower()
    assert _top_ids("NotImplementedError: The operator 'aten::roll' is not currently implemented for the MPS "
                    "device.\n", 1) == ["shape.mps_op_missing"]
