"""The generic readers of rocmcheck/triage/shapes.py and system_shapes.py, each on real pastes from at least 10
different libraries (the port taken and the checkpoint torch could not finish writing: the 3 and 2 threads found so
far): the tuning part of tests/fixtures/triage_threads/ (never the frozen part), and the real lines of
tests/fixtures/triage_shapes/ (each under the URL of the thread it was read from)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocmcheck.triage import shapes, triage
from rocmcheck.triage.rank import Finding

FIXTURES = Path(__file__).parent / "fixtures"
TUNE = FIXTURES / "triage_threads" / "tune"


def lines(name: str) -> list[str]:
    return shapes.lines_of([json.loads((TUNE / f"{name}.json").read_text(encoding="utf-8"))["paste"]])


def test_missing_library_names_its_provider_and_torch_build() -> None:
    threads = {  # thread -> the library the loader could not open (11 projects)
        "Dao-AILab-flash-attention-1644": "libc10.so", "Dao-AILab-flash-attention-236": "libtorch_cuda_cu.so",
        "JIA-Lab-research-Seg-Zero-63": "libcuda.so", "NVIDIA-cuda-python-17": "libcuda.so",
        "chn-lee-yumi-MaterialSearch-105": "fbgemm.dll", "facebookresearch-nougat-105": "libcudnn_cnn_infer.so.8",
        "iSEE-Laboratory-LLMDet-32": "libcudart.so.10.1", "ollama-ollama-602": "libcudart.so.12",
        "pytorch-pytorch-10910": "libcudart.so.9.0", "sgl-project-sglang-5002": "libnvrtc.so.12",
        "vllm-project-vllm-1718": "libcudart.so.12",
    }
    found = {name: shapes.missing_libraries(lines(name))[:1] for name in threads}
    assert found == {name: [lib] for name, lib in threads.items()}
    assert "nvidia-cuda-nvrtc-cu12" in shapes.library_advice("libnvrtc.so.12", None)
    assert "part of the torch build here (cu121)" in shapes.library_advice("libcudart.so.12", "cu121")
    assert "another CUDA" in shapes.library_advice("libcudart.so.12", "cu118")
    assert "NVIDIA driver" in shapes.library_advice("libcuda.so", None)
    assert "torch's own libraries" in shapes.library_advice("libc10.so", None)
    assert "itself" in shapes.library_advice("libcudart.so.9.0", None)  # only other versions are in the table
    windows = [  # bitsandbytes#713, jllllll/bitsandbytes-windows-webui#20: ctypes' words on Windows
        "Could not find module 'C:\\Users\\robin\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\"
        "bitsandbytes\\cuda_setup\\libbitsandbytes_cuda116.dll' (or one of its dependencies). Try using the full path "
        "with constructor syntax.",
        "Could not find module 'e:\\Anaconda\\envs\\torch_v1\\lib\\site-packages\\bitsandbytes\\"
        "libbitsandbytes_cuda120.dll' (or one of its dependencies). Try using the full path with constructor syntax."]
    assert shapes.missing_libraries(windows) == ["libbitsandbytes_cuda116.dll", "libbitsandbytes_cuda120.dll"]
    unnamed = "ImportError: DLL load failed: The specified module could not be found."  # pytorch#28363
    assert shapes.missing_libraries([unnamed]) == [] and shapes.dll_failure(unnamed)
    assert "Visual C++ Redistributable" in triage([("-", unnamed + "\n")]).findings[0].fix.text


def test_undefined_symbol_is_demangled_and_owned() -> None:
    owners = {  # thread -> whose namespace the undefined symbol is in (13 projects)
        "Dao-AILab-flash-attention-1783": "torch", "OpenGVLab-InternVL-467": "torch",
        "agentmorris-MegaDetector-127": "Intel MKL / ITT", "atzkenneth-dragonfly_gen-3": "Intel MKL / ITT",
        "axolotl-ai-cloud-axolotl-892": "torch", "deepspeedai-DeepSpeed-1879": "CUDA",
        "flashinfer-ai-flashinfer-382": "torch", "huggingface-open-r1-684": "torch",
        "open-mmlab-mmpretrain-1900": "Intel MKL / ITT", "pytorch-pytorch-103832": "CUDA",
        "pytorch-xla-8406": "torch", "sgl-project-sglang-5100": "torch", "vllm-project-vllm-3147": "torch",
    }
    got = {name: shapes.read_symbol(shapes.undefined_symbols(lines(name))[0]).owner for name in owners}
    assert got == owners
    assert shapes.nested_name("_ZN3c104cuda9SetDeviceEi") == ["c10", "cuda", "SetDevice"]
    assert "c10::cuda::SetDevice" in shapes.demangle("_ZN3c104cuda9SetDeviceEi")


@given(st.text(max_size=200))
def test_symbol_readers_never_raise(text: str) -> None:
    shapes.nested_name(text)
    shapes.read_symbol(text or "x")


def test_pip_resolver_conflicts_from_eleven_projects() -> None:
    text = (FIXTURES / "triage_shapes" / "pip_requires.txt").read_text(encoding="utf-8").splitlines()
    pasted = [line for line in text if line and not line.startswith(("#", "http"))]
    found = [shapes.conflicts([line]) for line in pasted]
    assert len(pasted) == 11 and all(len(c) == 1 for c in found)
    assert all(shapes.outside(c[0]) for c in found)  # each installed version is outside the range it quotes
    advice = shapes.conflict_advice(found[-1])
    assert advice.startswith("llamafactory 0.9.3.dev0 requires trl<=0.9.6,>=0.8.6, but trl 0.16.1 is installed")
    t = triage([("-", "\n".join(pasted[:2]) + "\n")])
    assert t.findings[0].id == "shape.requires_conflict"


def test_missing_module_names_the_distribution_or_the_missing_build() -> None:
    modules = {  # thread -> the module (12 projects)
        "EuroEval-EuroEval-148": "numpy", "InternLM-InternLM-109": "torch._six", "NVIDIA-apex-499":
        "fused_layer_norm_cuda", "antgroup-echomimic_v2-39": "triton", "hiyouga-LlamaFactory-2050": "triton.common",
        "invoke-ai-InvokeAI-4055": "triton", "jzhang38-TinyLlama-168": "flash_attn",
        "lum3on-comfyui_HiDream-Sampler-34": "triton", "ostris-ai-toolkit-279": "triton.ops",
        "unslothai-unsloth-540": "Triton", "vllm-project-vllm-15592": "vllm._version", "whyNLP-LCKV-17": "torch",
    }
    assert {name: shapes.missing_modules(lines(name))[0] for name in modules} == modules
    assert "pip install flash-attn" in shapes.module_advice("flash_attn")
    assert "compiled part of apex" in shapes.module_advice("fused_layer_norm_cuda")
    assert "has no torch._six" in shapes.module_advice("torch._six")
    assert "triton-windows" in shapes.module_advice("triton", "windows")


def test_undefined_symbol_names_the_module_and_torch_here() -> None:
    line = ("ImportError: /usr/lib/python3/site-packages/vllm/_C.abi3.so: undefined symbol: "
            "_ZN3c104cuda9SetDeviceEi")
    assert shapes.symbol_module([line]) == "_C.abi3.so"
    advice = shapes.symbol_advice("_ZN3c104cuda9SetDeviceEi", "_C.abi3.so", "2.3.0+cu121")
    assert "needed by _C.abi3.so" in advice and "torch here: 2.3.0+cu121" in advice


def test_built_for_names_both_sides() -> None:
    advice = shapes.built_for_advice(lines("unslothai-unsloth-8580"))
    assert "built for torch 2.10.0+cu128; the torch here is 2.11.0+cu130" in advice
    assert "Python 3.10.19 (here 3.13.9)" in advice
    cpu = shapes.built_for_advice(["    PyTorch 2.2.0+cu121 with CUDA 1201 (you have 2.2.0+cpu)"])  # xformers#982
    assert "CPU build" in cpu


def _records(name: str) -> list[tuple[str, list[str]]]:
    """(URL line, the pasted lines under it) of a tests/fixtures/triage_shapes/ file."""
    out: list[tuple[str, list[str]]] = []
    for line in (FIXTURES / "triage_shapes" / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("https://"):
            out.append((line, []))
        elif line and not line.startswith("#") and out:
            out[-1][1].append(line)
    return out


def test_version_checks_from_fifteen_projects_name_the_range_and_the_way_out() -> None:
    records = _records("version_requirements.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        found = shapes.requirements(pasted)
        assert len(found) == 1, url
        expected = url.split()[1]
        assert (shapes.direction(found[0]) or "none") == expected, (url, found)
    ocs = shapes.requirements(next(pasted for url, pasted in records if "ocs-ci" in url))[0]
    assert (ocs.package, ocs.spec, ocs.have, ocs.by) == ("pyparsing", "<3,>=2.4.2", "3.0.0", "httplib2")
    assert "newer than that range" in shapes.requirement_advice([ocs])
    flash = shapes.requirement_advice(shapes.requirements(lines("hiyouga-LlamaFactory-3464")))
    assert "flash_attn 2.0.4 is installed: it is older than that: pip install -U 'flash_attn>=2.1.0'" in flash
    t = triage([("-", "\n".join(records[0][1]) + "\n")])
    assert t.findings[0].id == "shape.version_requirement"


def test_models_a_library_does_not_know_from_ten_projects() -> None:
    records = _records("unknown_models.txt")
    assert len({url.split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        library, model = pasted[-1].removeprefix("= ").split()
        assert shapes.unknown_models(pasted[:-1])[:1] == [(library, model)], url
    vllm = shapes.model_advice(lines("vllm-project-vllm-3463"))
    assert "vLLM (here: 0.2.4) does not list Qwen2ForCausalLM" in vllm
    key_error = next(pasted for url, pasted in records if "Qwen3/issues/434" in url)[:-1]  # a KeyError traceback
    assert triage([("-", "\n".join(key_error) + "\n")]).findings[0].id == "shape.model_unsupported"


def test_missing_headers_from_eleven_projects_name_what_ships_them() -> None:
    records = _records("missing_headers.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        header = url.split()[1]
        assert shapes.missing_headers(pasted) == [header], url
        assert shapes.header_provider(header) is not None, header
    assert "python3-dev" in shapes.header_advice(["`fatal error: Python.h: No such file or directory`"])
    nccl = shapes.header_advice(lines("NVIDIA-nccl-139"))
    assert nccl.startswith("nccl.h comes with NCCL's development files") and "NCCL_HOME" in nccl
    assert triage([("-", "\n".join(records[5][1]) + "\n")]).findings[0].id == "shape.missing_header"


def test_the_gpus_arch_against_torchs_arch_list_from_fourteen_projects() -> None:
    records = _records("arch_list_vs_gpu.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        gap = shapes.arch_list_gap(pasted)
        assert gap is not None and gap.gpu == url.split()[1], url
        fix = triage([("-", "\n".join(pasted) + "\n")]).findings[0]
        assert fix.id == "torch.arch_list" and gap.gpu in fix.fix.text and "index-url" not in fix.fix.text or \
            gap.side != "older", url
    newer = shapes.arch_list_advice(shapes.ArchListGap("sm_120", ("sm_50", "sm_90")))
    assert "CUDA 12.8 is the first toolkit" in newer and "/whl/cu128" in newer
    older = shapes.arch_list_advice(shapes.ArchListGap("sm_61", ("sm_75", "sm_120")))
    assert "dropped GPUs this old" in older and "TORCH_CUDA_ARCH_LIST=6.1" in older
    assert shapes.arch_list_gap(["The current PyTorch install supports CUDA capabilities sm_80 sm_90."]) is None


def test_the_machines_amd_arch_from_eleven_projects_against_rocms_targets() -> None:
    records = _records("amd_arch_unsupported.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    known = shapes.rocm_known_archs()
    for url, pasted in records:
        expected = url.split()[1]
        assert [arch for arch, _ in shapes.amd_machine_archs(pasted)][:1] == [expected], url
        found = shapes.amd_arch_not_supported(pasted)
        assert (found[0] if found else None) == (None if expected in known else expected), url
        if "rocminstaller" not in url:  # rocminfo's agent names alone: no error, no cause
            ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
            assert {"shape.amd_arch_unsupported", "rocblas.arch_library_missing", "torch.arch_list",
                    "extensions.arch", "gpu.arch"} & set(ids), (url, ids)
    # gfx1201 and gfx1030 are ROCm targets: their records are not called unsupported (the first is a Windows build
    # whose rocBLAS lacks it, named as such).
    assert {"gfx1201", "gfx1030"} <= known


def test_nvcc_older_than_the_arch_it_was_asked_for_from_eleven_projects() -> None:
    from rocmcheck.knowledge import arch_info

    records = _records("toolkit_older_than_gpu.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        arch, toolkit = url.split()[1:3]
        found = shapes.gpu_newer_than_toolkit(pasted)
        assert found is not None, url
        assert (found[1], found[3]) == (arch_info("sm_" + arch.removeprefix("compute_")).name, toolkit), url
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "shape.toolkit_older_than_gpu" in ids, (url, ids)


# Threads where the CUDA needed is said in words only ("our container's CUDA is 12.1", "compatible only with CUDA
# 12", "we adopt CUDA 11.8"): no reader takes a version from prose, so that side is not shown.
PROSE_ONLY_CUDA = ("Yuan-2.0", "CTranslate2", "ST-LLM")


def test_the_driver_against_the_cuda_needed_from_ten_projects() -> None:
    from rocmcheck.triage.versions import driver_and_cuda, driver_claim_of

    records = _records("driver_older_than_cuda.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        driver, cuda = url.split()[1:3]
        found = driver_and_cuda(pasted)
        assert found.shown == driver, (url, found)
        prose = any(f"/{name}/" in url for name in PROSE_ONLY_CUDA)
        assert found.needed == (None if prose else cuda), (url, found)
        assert found.too_old is (None if prose else True), (url, found)
        claim = driver_claim_of(found)
        assert "upgrade" in claim or (prose and "paste" in claim), (url, claim)
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "nvidia.driver_cuda" in ids, (url, ids)
    # vllm-project/vllm#15335's header: a CUDA 12.8 torch runs on a driver of CUDA 12.6 (minor-version compatibility);
    # a container that asks for cuda>=12.8 does not (nvidia-container-cli compares the two as they are).
    smi = "| NVIDIA-SMI 560.35.03              Driver Version: 560.35.03      CUDA Version: 12.6     |"
    assert driver_and_cuda([smi, "PyTorch version: 2.7.0+cu128"]).too_old is False
    assert driver_and_cuda([smi, "unsatisfied condition: cuda>=12.8, please update your driver"]).too_old is True


def test_a_library_of_the_other_vendors_stack_is_that_vendors_build() -> None:
    # tile-ai/tilelang#90: "Running on amd gpu", and the CUDA wheel's ctypes load of libnvrtc.so.12 fails. The
    # library's name says what the module was built for, not what the machine has.
    t = triage([("-", json.loads((TUNE / "tile-ai-tilelang-90.json").read_text(encoding="utf-8"))["paste"])])
    assert t.scene.platform.name == "rocm-linux"
    top = t.findings[0]
    assert top.id == "shape.other_vendor_library" and "shape.missing_library" not in [f.id for f in t.findings]
    assert "install the package's ROCm build" in top.fix.text.replace("Install", "install")
    assert shapes.other_vendor_library("libamdhip64.so.6", "cuda-linux") == "ROCm"
    assert shapes.other_vendor_library("libcudart.so.12", "cuda-linux") is None


def test_the_build_tool_a_build_names_is_the_one_advised() -> None:
    # microsoft/Codex-CLI#128: aiohttp built from source on Windows without MSVC.
    paste = json.loads((TUNE / "microsoft-Codex-CLI-128.json").read_text(encoding="utf-8"))["paste"]
    assert shapes.build_tools_named(shapes.lines_of([paste])) == ["msvc"]
    t = triage([("-", paste)])
    assert t.scene.platform.name == "windows"
    fix = next(f.fix for f in t.findings if f.id == "shape.build_tool")
    assert "C++ Build Tools" in fix.text and "hipcc" not in fix.text and "nvcc" not in fix.text
    assert shapes.build_tools_named(["      RuntimeError: Ninja is required to load C++ extensions",
                                     "error: command 'gcc' failed: No such file or directory"]) == ["cc", "ninja"]


def test_os_resource_limits_from_twenty_eight_projects_name_the_limit_and_what_raises_it() -> None:
    from rocmcheck.triage import system_shapes

    records = _records("os_resource_errors.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    remedy = {"EMFILE": "ulimit -n", "ENOSPC": "df -h", "EDQUOT": "quota", "MEMLOCK": "ulimit -l"}
    for url, pasted in records:
        kind, path = url.split()[1:3]
        found = system_shapes.resource_limits(pasted)
        assert [r.kind for r in found] == [kind], (url, found)
        assert found[0].path == (None if path == "-" else path), (url, found)
        assert remedy[kind] in system_shapes.resource_advice(found), url
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "shape.os_resource" in ids, (url, ids)
    # A full /dev/shm is the shared-memory cause, with its own fix (host.shm), not a full disk.
    shm = "NCCL WARN Error: failed to extend /dev/shm/nccl-3Qm9 to 9637892 bytes: No space left on device"
    ids = [f.id for f in triage([("-", shm + "\n")]).findings]
    assert ids[0] == "host.shm" and "shape.os_resource" not in ids, ids
    # Out of host memory (fork, a tensor) is not a limit: ENOMEM counts only from a call that pins memory.
    assert system_shapes.resource_limits(["OSError: [Errno 12] Cannot allocate memory"]) == []


def test_binaries_built_for_another_platform_from_twenty_five_projects() -> None:
    from rocmcheck.triage import system_shapes

    records = _records("binary_for_other_platform.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        kind, built, _, running = url.split()[1:5]
        [found] = system_shapes.foreign_binaries(pasted)
        assert found.kind == kind, (url, found)
        if kind == "wheel":
            assert found.built_for == built.replace("-", " "), (url, found)
            if running.startswith("python"):
                assert running.removeprefix("python").startswith(found.running or "?"), (url, found)
            elif running in ("aarch64", "x86_64"):
                assert found.machine == running, (url, found)
            else:
                assert found.running is None and found.machine is None, (url, found)
        elif kind in ("macho", "elf"):
            assert (found.built_for, found.running) == (built, None if running == "-" else running), (url, found)
        elif found.built_for is not None:  # exec: the sides only where a container engine or `file` names them
            assert built in found.built_for and found.running in (None, running), (url, found)
        advice = system_shapes.foreign_binary_advice([found])
        assert (found.built_for or "architecture").split()[-1] in advice, (url, advice)
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "shape.foreign_binary" in ids, (url, ids)
    # The Python the wheel wants and the one that ran pip, both from the paste (Qengineering/TensorFlow-JetsonNano#2).
    [wheel] = system_shapes.foreign_binaries(["ERROR: tensorflow-2.3.1-cp36-cp36m-linux_aarch64.whl is not a supported "
                                              "wheel on this platform.", "Was using wrong pip (python 3.8)."])
    advice = system_shapes.foreign_binary_advice([wheel])
    assert "CPython 3.6 on linux_aarch64; the Python here is 3.8" in advice and "python3.6 -m pip" in advice


def test_a_dkms_failure_names_the_module_it_shows_of_either_vendor() -> None:
    from rocmcheck.triage import system_shapes

    # negativo17/nvidia-driver#56: a stale NVIDIA tree; ROCm/legacy-rocm-build#3608: amdgpu for a newer kernel.
    nvidia = ["$ dkms status", "Error! Could not locate dkms.conf file.",
              "File: /var/lib/dkms/nvidia/390.48/source/dkms.conf does not exist."]
    failure = system_shapes.dkms_failure(nvidia)
    assert (failure.module, failure.version, failure.stale, failure.vendor) == ("nvidia", "390.48", True, "nvidia")
    t = triage([("-", "\n".join(nvidia) + "\n")])
    assert t.scene.platform.name == "cuda-linux"
    top = t.findings[0]
    assert top.id == "driver.dkms" and "sudo dkms remove nvidia/390.48 --all" in top.fix.text
    assert "amdgpu" not in top.fix.text
    amd = ["DKMS (dkms-3.2.0) make.log for amdgpu/6.12.12-2202139.24.04 for kernel 6.17.0-6-generic (x86_64)",
           "Error! Bad return status for module build on kernel: 6.17.0-6-generic (x86_64)"]
    failure = system_shapes.dkms_failure(amd)
    assert (failure.module, failure.kernel, failure.stale, failure.vendor) == (
        "amdgpu", "6.17.0-6-generic", False, "amd")
    advice = system_shapes.dkms_advice(failure)
    assert "amdgpu/6.12.12-2202139.24.04 for kernel 6.17.0-6-generic" in advice and "ROCm's support list" in advice


def test_a_linux_only_package_on_windows_or_macos_from_seventeen_projects() -> None:
    from rocmcheck.triage import system_shapes
    from rocmcheck.triage.platform import decide

    records = _records("no_build_for_os.txt")
    assert len({url.split()[0].split("/")[4] for url, _ in records}) >= 10
    for url, pasted in records:
        package, system = url.split()[1:3]
        assert decide(pasted).name == system, url
        found = system_shapes.package_without_build(pasted, system)
        assert found is not None and found.package == package, (url, found)
        advice = system_shapes.no_build_advice(found)
        assert f"{package} publishes wheels for linux" in advice and ("WSL 2" in advice) is (system == "windows")
        t = triage([("-", "\n".join(pasted) + "\n")])
        assert t.findings[0].id == "shape.no_build_for_os", (url, [f.id for f in t.findings])
    # The same messages on Linux, or for a package with a build for the system, are not this cause.
    triton = ["ERROR: Could not find a version that satisfies the requirement triton (from versions: none)"]
    assert system_shapes.package_without_build(triton, "cuda-linux") is None
    assert system_shapes.package_without_build(["ModuleNotFoundError: No module named 'torch'"], "windows") is None
    # vLLM publishes Linux wheels and a source build without classifiers that leave macOS out: not "no build".
    assert system_shapes.package_without_build(["AssertionError: vLLM only supports Linux platform (including WSL)."],
                                               "macos") is None


def test_a_port_another_process_holds_names_the_port_and_how_to_free_it() -> None:
    from rocmcheck.triage import system_shapes

    records = _records("port_in_use.txt")
    assert len(records) >= 3
    for url, pasted in records:
        port = url.split()[1]
        found = system_shapes.port_in_use(pasted)
        assert found is not None and found.port == (None if port == "-" else port), (url, found)
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "shape.port_in_use" in ids, (url, ids)
    # torch 2.13's own words, as LLaMA-Factory's parser printed them when two runs on one machine both asked for 29500.
    line = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
            "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    advice = system_shapes.port_advice(system_shapes.port_in_use([line]))
    assert "holds port 29500" in advice and "ss -ltnp | grep :29500" in advice and "MASTER_PORT" in advice


def test_a_checkpoint_torch_could_not_finish_writing_is_said_as_the_usual_cause() -> None:
    from rocmcheck.triage import system_shapes

    for url, pasted in _records("checkpoint_write_failed.txt"):
        path = url.split()[1]
        [found] = system_shapes.resource_limits(pasted)
        assert (found.kind, found.path) == ("WRITE", None if path == "-" else path), (url, found)
        advice = system_shapes.resource_advice([found])
        assert advice.startswith("torch could not finish writing") and "the usual cause is a full disk" in advice
        ids = [f.id for f in triage([("-", "\n".join(pasted) + "\n")]).findings[:3]]
        assert "shape.checkpoint_write_failed" in ids, (url, ids)
    # Where the OS error is pasted too, it says more than torch's writer: the disk is full, stated as shown.
    both = ["RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1 vs 0",
            "OSError: [Errno 28] No space left on device"]
    assert [r.kind for r in system_shapes.resource_limits(both)] == ["ENOSPC"]


def test_windows_and_macos_wordings_of_known_failures() -> None:
    """The same failures as other platforms word them: Windows' "VCRUNTIME140.dll was not found" dialog and cuDNN's
    "Could not locate zlibwapi.dll" name the missing DLL; torch's "MPS backend out of memory" is out of memory;
    ggml's "compiled without support for the current GPU architecture" (llama.cpp, koboldcpp, ollama) is a build
    without the GPU's arch, answered with ggml's own build settings, never torch's."""
    def top(name: str) -> Finding:
        paste = json.loads((TUNE / f"{name}.json").read_text(encoding="utf-8"))["paste"]
        return triage([("-", paste + "\n")]).findings[0]

    for name, dll in (("nomic-ai-gpt4all-3479", "VCRUNTIME140.dll"), ("NickSwardh-YoloDotNet-18", "zlibwapi.dll")):
        finding = top(name)
        assert finding.id == "shape.missing_library" and finding.fix.text.startswith(dll), (name, finding.fix.text)
    assert top("lllyasviel-Fooocus-980").id == "gpu.oom"
    for name in ("LostRuins-koboldcpp-610", "ollama-ollama-12622"):  # Windows, WSL
        finding = top(name)
        assert finding.id == "ggml.arch_not_compiled" and "CMAKE_CUDA_ARCHITECTURES" in finding.fix.text, name
        assert "PYTORCH_ROCM_ARCH" not in finding.fix.text and "TORCH_CUDA_ARCH_LIST" not in finding.fix.text


def test_a_package_that_refuses_the_operating_system_from_its_own_words() -> None:
    from rocmcheck.triage import system_shapes

    records = _records("os_refused.txt")
    assert len({url.split()[1] for url, _ in records}) >= 10  # packages that printed the refusal
    read = 0
    for url, pasted in records:
        package, system = url.split()[1:3]
        found = system_shapes.os_refusal(pasted)
        if found is None:  # only where the lines name no system at all
            assert not any(w in " ".join(pasted).lower() for w in ("windows", "win32", "darwin", "macos", "linux")), url
            continue
        read += 1
        named = (found.package or "").lower().replace("_", "-")
        # speechbrain's message names the backend it refuses (torchaudio's sox_io), not itself
        assert not named or named in package or package.split("-")[0] in named or named == "sox-io", (url, found)
        assert found.refused == system or system not in found.runs_on, (url, found)
        t = triage([("-", "\n".join(pasted) + "\n")])
        if t.scene.platform.name in ("rocm-linux", "cuda-linux", "wsl", "cpu"):
            continue  # a paste that shows a Linux machine: the refusal is not read there
        ids = [f.id for f in t.findings[:3]]
        assert {"shape.os_refused", "shape.no_build_for_os"} & set(ids), (url, ids)
        advice = system_shapes.os_refusal_advice(found, t.scene.platform.name)
        assert ("WSL 2" in advice) is (system == "windows" and (not found.runs_on or "linux" in found.runs_on)), \
            (url, advice)
    assert read >= len(records) - 1
    pyobjc = system_shapes.os_refusal(["      error: PyObjC requires macOS to build"])
    assert pyobjc.runs_on == ("macos",) and "run it on macOS" in system_shapes.os_refusal_advice(pyobjc, "windows")
    # Words that name no package, a refusal of Linux, and Linux pastes are not this cause.
    assert system_shapes.os_refusal(["This is not supported on Windows yet"]) is None
    assert system_shapes.os_refusal(["RuntimeError: foo is not supported on Linux"]) is None
    linux = ["AssertionError: vLLM only supports Linux platform (including WSL).",
             "  File \"/home/me/venv/lib/python3.10/site-packages/setup.py\", line 12"]
    assert "shape.os_refused" not in [f.id for f in triage([("-", "\n".join(linux) + "\n")]).findings]
