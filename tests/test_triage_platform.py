"""The paste's platform, decided from its own evidence (rocmcheck/triage/platform.py), on real pastes of the tuning
part of tests/fixtures/triage_threads/ (never the frozen part), and the rule it serves: no fix for another platform."""

from __future__ import annotations

import json
from pathlib import Path

from rocmcheck.facts.known import ALL
from rocmcheck.triage import triage
from rocmcheck.triage.match import _FLAG_PATTERNS
from rocmcheck.triage.platform import _CUDA, _FIRST, _LITERALS, _ROCM, decide, foreign

TUNE = Path(__file__).parent / "fixtures" / "triage_threads" / "tune"
PASTES = Path(__file__).parent / "fixtures" / "pastes"


def paste(name: str) -> str:
    return json.loads((TUNE / f"{name}.json").read_text(encoding="utf-8"))["paste"]


def test_each_platform_from_real_pastes() -> None:
    cases = {
        "lm-sys-FastChat-2298": "windows",  # a D:\ path, torch not compiled with CUDA
        "vllm-project-vllm-6184": "wsl",  # microsoft-standard-WSL2 kernel
        "datalab-to-marker-42": "macos",  # an op not implemented for the MPS device
        "NixOS-nixpkgs-406675": "cuda-linux",  # sm_XX arch list
        "rocm-arch-rocm-arch-570": "rocm-linux",  # a gfx target
        # hipcc, then the shell's "nvcc: not found" for each CUDA path hipcc tried: what is absent is no evidence
        "ROCm-legacy-rocm-build-5773": "rocm-linux",
        "Parsl-parsl-3858": "rocm-linux",  # HIP's "No HIP GPUs are available", ROCR_VISIBLE_DEVICES
        # the Windows build's own source paths (D:/a/<repo>/...) in its assert, and HIP's hipGetLastError
        "LostRuins-koboldcpp-692": "windows",
        "bitsandbytes-foundation-bitsandbytes-1104": "windows",  # pathlib's WindowsPath('C') in bitsandbytes' report
        "negativo17-nvidia-driver-56": "cuda-linux",  # DKMS's tree of nvidia/390.48
        # hipify's summary in a DeepSpeed build on ROCm, beside a traceback naming CUDA_HOME
        "deepspeedai-DeepSpeed-6456": "rocm-linux",
        # "my apple silicon mac", and vLLM's own "only supports Linux platform (including WSL)", which is no WSL
        "RUC-NLPIR-FlashRAG-5": "macos",
    }
    got = {name: decide(paste(name).splitlines()).name for name in cases}
    assert got == cases
    # DeepSpeed's hipify_extension failing on CUDA_HOME (None on ROCm): as much AMD evidence as CUDA, so not CUDA
    assert decide(paste("deepspeedai-DeepSpeed-7224").splitlines()).name is None


def test_a_fix_that_names_the_other_vendors_tools_is_foreign() -> None:
    # Fixes recorded with threads whose own paste shows no platform (pytorch/pytorch#3221, ROCm/ROCgdb#6's
    # neighbour, microsoft/onnxruntime#8111's): never shown to a ROCm paste, nor to one whose platform is unknown.
    for fix in ("Start the container with nvidia-docker run (today: docker run --gpus all with the NVIDIA container "
                "toolkit)", "Install CUDA 12.1 toolkit from NVIDIA's archive",
                "Reporter installed the CUDA Toolkit 12.4 (cuda-keyring + apt-get install cuda-toolkit-12-4)"):
        assert foreign(fix, "rocm-linux") and not foreign(fix, "cuda-linux"), fix
    assert foreign("pip install torch==2.4.1+rocm6.1", "cuda-linux")


def test_a_paste_without_evidence_is_unknown() -> None:
    assert decide(["TypeError: __init__() got an unexpected keyword argument 'enable_lora'"]).name is None
    assert decide(["bash: nvcc: command not found", "sh: 1: /usr/local/cuda/bin/nvcc: not found"]).name is None


def test_no_rocm_fix_for_a_cuda_paste() -> None:
    t = triage([("-", paste("NixOS-nixpkgs-406675"))])  # CUDA "no kernel image": ROCm's wheel index must not show
    assert t.scene.platform.name == "cuda-linux"
    assert t.findings and not any(f.fix is not None and foreign(f"{f.fix.text} {f.fix.why}", "cuda-linux")
                                  for f in t.findings)
    assert "env.hsa_override" not in [f.id for f in t.findings]


def test_a_container_restart_of_an_unknown_vendor_names_the_setting_only() -> None:
    from rocmcheck.checks.containers import container_restart

    # /dev/shm too small in a container started with `docker run --gpus all` (an NVIDIA flag the paste's platform
    # reader does not count): no line of either vendor's GPU flags is a fix here.
    t = triage([("-", paste("fal-ai-community-video-diffusion-speedrun-2"))])
    shm = next(f for f in t.findings if f.id == "host.shm")
    assert "--shm-size" in shm.fix.text and "/dev/kfd" not in shm.fix.text and "--gpus" not in shm.fix.text
    unknown = container_restart("unknown", "restart the container with --ipc=host")
    assert unknown.line() == "restart the container with --ipc=host, keeping the GPU flags it was started with"
    assert "/dev/kfd" in container_restart("amd").line() and "--gpus all" in container_restart("nvidia").line()


def test_unknown_platform_asks_instead_of_picking_a_wheel() -> None:
    t = triage([("-", "AssertionError: Torch not compiled with CUDA enabled\n")])
    fix = next(f.fix for f in t.findings if f.id == "torch.build")
    assert fix is not None and "does not show its platform" in fix.text and "index-url" not in fix.text


def test_a_cause_the_paste_does_not_show_says_if() -> None:
    t = triage([("-", "RuntimeError: HIP error: invalid device function\n")])  # no paste sets the override
    override = [f for f in t.findings if f.id == "env.hsa_override"]
    assert override and override[0].text.startswith("If HSA_OVERRIDE_GFX_VERSION is set")


def test_a_pip_freeze_fragment_is_not_everything_installed() -> None:
    t = triage([("-", "$ pip freeze | grep torch\ntorch==2.3.0\n")])
    assert "transformers" not in t.pasted.facts.packages
    assert t.pasted.facts.known.get("packages") != ALL and "transformers" not in (t.pasted.facts.known.get("packages")
                                                                                 or [])


def test_the_driver_floor_is_the_exact_cuda_release() -> None:
    from rocmcheck.triage.versions import driver_claim

    claim = driver_claim("12.4", "535.54.03")  # CUDA 12.x's 525 floor would call 535 new enough
    assert "550.54.14" in claim and "535.54.03" in claim and "upgrade" in claim
    assert "new enough" in driver_claim("12.1", "535.54.03")
    assert driver_claim("12.4", None).startswith("if ")


def test_a_one_platform_fix_on_an_unknown_platform_says_if_and_asks() -> None:
    from rocmcheck.triage.rank import _narrow

    assert _narrow(("rocm-linux",), "sudo apt install amdgpu-dkms && sudo reboot")
    assert not _narrow(("rocm-linux",), "pip install --force-reinstall deepspeed")
    t = triage([("-", "docker: Error response from daemon: error gathering device information while adding custom "
                      "device \"/dev/kfd\": no such file or directory.\n")])
    narrow = [f for f in t.findings if f.fix is not None and f.cause is not None and len(f.cause.platforms) == 1]
    assert t.scene.platform.name is None
    assert narrow and all(f.fix.text.startswith("if this machine runs") and "uname -a" in f.fix.text for f in narrow)


def test_every_match_holds_one_of_its_literals() -> None:
    """decide() and the scene's flags search a pattern only in the lines that hold one of its literals: on every line
    of the tuning pastes and the paste fixtures, each match holds one (lower-cased)."""
    pastes = [paste(p.stem) for p in sorted(TUNE.glob("*.json"))]
    pastes += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(PASTES.rglob("*")) if p.is_file()]
    lines = [line for text in pastes for line in text.splitlines()]
    patterns = [(name, pattern, _LITERALS[name]) for name, pattern in _FIRST]
    patterns += [("rocm", _ROCM, _LITERALS["rocm"]), ("cuda", _CUDA, _LITERALS["cuda"]), *_FLAG_PATTERNS]
    matched = 0
    for name, pattern, literals in patterns:
        for line in lines:
            for m in pattern.finditer(line):
                matched += 1
                assert any(lit in m.group(0).lower() for lit in literals), (name, m.group(0))
    assert matched > 1000
