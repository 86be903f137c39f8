"""What triage reads beyond the error texts, each on the real pastes that show it: the answers to what it asks
people to paste (`ls -l` of the device nodes, `id`), an error that nvidia-smi printed in place of its table, the
signs of rocmcheck/triage/signs.py (a test run that never finished, a container given no GPU, a device node this
user cannot open), a message wrapped onto two lines, WSL as people write it, the topology tools' matrices, and a
library the loader did not find charged to the module that needed it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PROJECT_FIXTURES_DIR

from rocmcheck.result import Status
from rocmcheck.triage import shapes, triage
from rocmcheck.triage.catalogue import catalogue
from rocmcheck.triage.readers.paste import split_paste
from rocmcheck.triage.readers.paste_read import read_block
from rocmcheck.triage.readers.system_info import parse_device_listing, parse_id
from rocmcheck.triage.signs import SIGNS

PASTES = PROJECT_FIXTURES_DIR / "pastes"
PUBLIC = PROJECT_FIXTURES_DIR / "public"
ROOT_ONLY_KFD = PASTES / "corpus-fresh" / "04-ROCm-ROCT-Thunk-Interface-36.paste.txt"
CONTAINER_LISTING = (PASTES / "docker_run" /
                     "docker-run_rocm_u-1000_group-add-video-render_ls-lart-dev-dri-kfd_2xgfx90a_ROCm-docker-pr93.txt")
ID_OUTPUT = PASTES / "id" / "id_container-user_video-render-gids_two-forms_rocm-examples-pr172.txt"
FINISHED_RUN = (PASTES / "nccl_tests" /
                "nccl-tests_all_gather_perf_complete_4xA100-80GB-PCIe_with-topo-m_Llama2-finetune-README_excerpt.txt")
HUNG_RUN = PASTES / "corpus" / "15-ROCm-rccl-1129.paste.txt"
FLASH_ATTN_NO_CUDART = (PASTES / "traceback" /
                        "flash-attn-import_libcudart.so.12-not-found_torch-2.1.0-cu118_flash-attention-631_excerpt.txt")


def _triage(path: Path):
    return triage([(path.name, path.read_text(encoding="utf-8"))])


def _verdict(t, check_id: str):
    return next(j for j in t.judged if j.result.id == check_id)


def test_a_device_listing_gives_each_node_its_mode_and_group():
    nodes = parse_device_listing(CONTAINER_LISTING.read_text())
    assert [(n.path, n.mode, n.group) for n in nodes] == [
        ("/dev/dri/renderD129", "crw-rw----", "render"), ("/dev/dri/renderD128", "crw-rw----", "render"),
        ("/dev/dri/card2", "crw-rw----", "video"), ("/dev/dri/card1", "crw-rw----", "video"),
        ("/dev/dri/card0", "crw-rw----", "video"), ("/dev/kfd", "crw-rw----", "render")]  # not "." and ".."
    kfd = nodes[-1]
    # Group access: it depends on the user's groups, which this paste does not show.
    assert kfd.access(uid=1000) is None and kfd.access(root=False) is None
    assert kfd.access(uid=1000, groups=["video"]) is False and kfd.access(uid=1000, groups=["render"]) is True
    assert kfd.access(root=True) is True


def test_a_node_only_root_may_open_is_shut_to_a_user_prompt():
    """`$ ls -la /dev | grep kfd` showing crw------- root root: the user at a `$` prompt cannot open /dev/kfd, and
    devices.kfd (the doctor's own check) says so, quoting the listed line."""
    [node] = parse_device_listing(ROOT_ONLY_KFD.read_text())
    assert (node.path, node.mode, node.owner, node.group) == ("/dev/kfd", "crw-------", "root", "root")
    assert node.access(root=False) is False and node.access() is None and node.access(root=True) is True
    t = _triage(ROOT_ONLY_KFD)
    assert t.pasted.facts.devices["/dev/kfd"] == {"exists": True, "mode": "crw-------", "group": "root",
                                                  "readable": False, "writable": False}
    assert [name for name, _ in t.pasted.signs] == ["devices.no_access"]
    top = t.findings[0]
    assert top.id == "devices.kfd" and top.status is Status.FAIL
    assert top.quotes[0].text.startswith("crw-------   1 root    root")


def test_a_listing_does_not_judge_access_it_cannot_know():
    """The same nodes as root:render crw-rw---- with a `$` prompt and no `id`: whether the user is in render is not
    in the paste, so the node's access is not known (never "denied"), and no sign is made."""
    t = _triage(CONTAINER_LISTING)
    render = t.pasted.facts.devices["/dev/dri/renderD128"]
    assert render == {"exists": True, "mode": "crw-rw----", "group": "render"}
    assert not t.pasted.signs
    kfd = _verdict(t, "devices.kfd").result
    assert kfd.status is Status.SKIP and kfd.summary.startswith("not in the paste")


def test_id_gives_the_user_and_groups():
    ids = parse_id(ID_OUTPUT.read_text())
    assert (ids.uid, ids.user, ids.groups) == (1000, "developer", ["developer", "sudo", "video", "render"])
    assert parse_id("rocm-user sudo video\n", "groups").groups == ["rocm-user", "sudo", "video"]
    assert not parse_id("rocm-user sudo video\n", "ls").found  # a line of words is `groups` output only after it
    t = _triage(ID_OUTPUT)
    assert t.pasted.facts.user == {"uid": 1000, "name": "developer", "groups": ["developer", "render", "sudo", "video"]}


def test_an_nvml_failure_in_place_of_the_table_is_read():
    """nvidia-smi printed only "Failed to initialize NVML: Driver/library version mismatch": the block is recorded
    as nvidia-smi's output, and the cause is the driver's kernel module left from before an upgrade."""
    path = PASTES / "corpus-fresh" / "16-lyulyul-shine-cluster-30.paste.txt"
    t = _triage(path)
    assert "nvidia-smi" in t.pasted.facts.commands
    assert "Driver/library version mismatch" in t.pasted.facts.commands["nvidia-smi"].stdout
    top = t.findings[0]
    assert top.id == "nvidia.driver_module" and top.quotes[0].text.endswith("Driver/library version mismatch")
    assert "reboot" in top.fix.text


def test_an_unfinished_collective_test_is_a_sign_of_a_hang():
    hung = _triage(HUNG_RUN)
    assert [name for name, _ in hung.pasted.signs] == ["nccl_tests.unfinished"]
    assert hung.findings[0].id == "nccl.hang" and hung.findings[0].thin and hung.findings[0].ask is not None
    finished = _triage(FINISHED_RUN)
    assert not finished.pasted.signs and not any(f.id == "nccl.hang" for f in finished.findings)


def test_a_container_started_without_any_gpu_is_a_sign():
    plain = _triage(PASTES / "corpus" / "36-floydhub-dockerfiles-3.paste.txt")
    assert [name for name, _ in plain.pasted.signs] == ["docker_run.no_gpu"]
    assert "container.flags" in [f.id for f in plain.findings[:3]]
    given = sorted(p for p in (PASTES / "docker_run").glob("*.txt") if not p.name.endswith(".source"))
    assert len(given) == 9
    for path in given:  # --device, --gpus, --runtime=nvidia, --privileged: a GPU is passed some way
        assert not _triage(path).pasted.signs, path.name


def test_every_sign_has_a_signature_and_is_made_by_a_reader():
    cat = catalogue()
    named = {s.fact for s in cat.signatures if s.fact}
    assert named == set(SIGNS)
    made = {name for path in (ROOT_ONLY_KFD, HUNG_RUN, PASTES / "corpus" / "36-floydhub-dockerfiles-3.paste.txt")
            for name, _ in _triage(path).pasted.signs}
    made |= {name for name, _ in triage([("mamba", OTHER_CUDA_MAJOR["mamba"])]).pasted.signs}
    made |= {name for name, _ in triage([("tcnn", _tune_paste("NVlabs-tiny-cuda-nn-239"))]).pasted.signs}
    made |= {name for name, _ in triage([("gfx", _tune_paste("rocm-arch-rocm-arch-570"))]).pasted.signs}
    made |= {name for name, _ in triage([("wsl", _tune_paste("vllm-project-vllm-6184"))]).pasted.signs}
    made |= {name for name, _ in triage([("smi", _tune_paste("wencolani-CrossE-2"))]).pasted.signs}
    made |= {name for name, _ in triage([("ord", _tune_paste("THUDM-slime-1326"))]).pasted.signs}
    made |= {name for name, _ in triage([("fa", _tune_paste("Dao-AILab-flash-attention-205"))]).pasted.signs}
    # pytorch/pytorch#37320's collect_env: driver 410.104 and torch's CUDA 10.2, no error line between them
    made |= {name for name, _ in triage([("env", "CUDA used to build PyTorch: 10.2\nNvidia driver version: 410.104\n")])
             .pasted.signs}
    made |= {name for name, _ in triage([("nvrtc", _tune_paste("tile-ai-tilelang-90"))]).pasted.signs}
    made |= {name for name, _ in triage([("triton", _tune_paste("triton-lang-triton-5741"))]).pasted.signs}
    made |= {name for name, _ in triage([("vllm", _tune_paste("sgl-project-sglang-508"))]).pasted.signs}
    assert made == set(SIGNS)


def test_a_message_wrapped_onto_the_next_line_is_found():
    """torch's "DataLoader worker (pid 47) is killed by signal: Bus" / "error." split over two lines of prose."""
    t = _triage(PASTES / "corpus-fresh" / "02-fastai-docker-containers-21.paste.txt")
    top = t.findings[0]
    assert top.id == "host.shm" and "dataloader.bus_error" in top.signatures
    assert "killed by signal: Bus" in top.quotes[0].text or top.quotes[0].line == 1
    # Two unrelated lines never make a match: one that lies inside a single line is that line's.
    assert not triage([("p", "killed by signal: Bus\nstop.\n")]).findings


def test_wsl_as_people_write_it():
    t = _triage(PASTES / "corpus" / "45-ROCm-hip-3710.paste.txt")  # "ROCm 6.2 on wsl ubuntu 24.04"
    assert "wsl" in t.scene.flags and t.findings[0].id == "wsl.runtime"
    under_wsl = _triage(PASTES / "corpus-fresh" / "19-ROCm-legacy-rocm-build-1794.paste.txt")
    assert under_wsl.findings[0].id == "wsl.runtime"  # "ROCk module is NOT loaded" there is WSL's, not a driver's
    bare = triage([("p", "ROCk module is NOT loaded, possibly no GPU devices\n")])
    assert bare.findings[0].id == "driver.amdgpu"


@pytest.mark.parametrize("path,source,kinds", [
    (PUBLIC / "amd-smi" / "mi355x-x8-topology-xgmi.txt", "amd-smi topology", {"xgmi"}),
    (PUBLIC / "amd-smi" / "rx7900xtx-x2-topology-pcie-rocm7.2.1.txt", "amd-smi topology", {"pcie"}),
    (PUBLIC / "rocm-smi" / "4gpu-showtopo-pcie-rocm-smi-lib-108.txt", "rocm-smi --showtopo", {"pcie"}),
    (PASTES / "corpus" / "51-NVIDIA-nccl-667.paste.txt", "nvidia-smi topo -m", {"pcie"}),
    (FINISHED_RUN, "nvidia-smi topo -m", {"nvlink", "pcie"}),
], ids=lambda v: v.name[:30] if isinstance(v, Path) else "+".join(sorted(v)) if isinstance(v, set) else str(v))
def test_the_topology_tools_are_read(path, source, kinds):
    blocks = [b for b in split_paste(path.read_text()) if b.kind in ("amd_smi", "nvidia_smi", "rocm_smi")]
    [topology] = [r for r in map(read_block, blocks) if getattr(r, "source", None) == source]
    assert topology.gpus and set(topology.kinds.values()) == kinds
    pasted = _triage(path).pasted
    assert [t.source for _, t in pasted.topologies] == [source]


def test_a_skip_of_extensions_arch_speaks_the_pastes_words():
    t = _triage(PASTES / "corpus-fresh" / "03-microsoft-onnxruntime-16566.paste.txt")
    assert _verdict(t, "extensions.arch").result.summary.startswith("not in the paste: ")


def test_a_runtime_library_not_found_is_charged_to_the_module_that_needed_it():
    """The loader's message names libcudart; the failing frame is flash-attn's, so flash-attn's build is the cause,
    and a paste that only mentions flash-attn beside the bare message points the same way."""
    t = _triage(FLASH_ATTN_NO_CUDART)
    assert t.findings[0].id == "flash_attn.import"
    error = "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory"
    bare = triage([("p.txt", f"pip install flash-attn --no-build-isolation\n{error}")])
    assert "flash_attn.import" in [f.id for f in bare.findings[:2]]
    unnamed = triage([("p.txt", error)])
    assert "flash_attn.import" not in [f.id for f in unnamed.findings]


def test_a_missing_cuda_runtime_of_another_major_than_the_paste_shows_is_a_sign():
    """Real lines: a CUDA 11 runtime missing where torch is cu121 (NVlabs/MambaVision#12), where CUDA 10.2 is used
    (AlexeyAB/darknet#7686), CUDA 10.1's where CUDA 12.1 is (iSEE-Laboratory/LLMDet#32); the same major shown
    (facebookresearch/detectron2#2557) or only nvidia-smi's driver CUDA (vllm-project/vllm#15335) is no sign."""
    other = OTHER_CUDA_MAJOR
    for name, text in other.items():
        t = triage([(name, text)])
        assert [s for s, _ in t.pasted.signs] == ["cuda_library.other_major"], name
        assert "shape.library_for_other_cuda" in [f.id for f in t.findings[:3]], name
    assert "libcudart.so.11.0 is CUDA 11's runtime library; the paste shows CUDA 12" in next(
        f for f in triage([("m", other["mamba"])]).findings if f.id == "shape.library_for_other_cuda").fix.text
    same = ("I worked with Pytorch 1.7 and CUDA 11.1.\n"
            "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n")
    driver_only = "| NVIDIA-SMI 560.35.03              Driver Version: 560.35.03      CUDA Version: 12.6     |"
    assert not triage([("same", same)]).pasted.signs and shapes.cuda_majors_shown([driver_only]) == set()


OTHER_CUDA_MAJOR = {  # real lines of the three threads above
    "mamba": "my torch version is 2.1.2 with cuda 12.1 and I have already installed the requirements\n"
             "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n",
    "darknet": "OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
               "I am using CUDA 10.2 with cudnn 7 and ubuntu\n",
    "llmdet": "报错：ImportError: libcudart.so.10.1: cannot open shared object file: No such file or directory\n"
              "我的系统ubuntu20.04+nvidia530.30+cuda12.1+cudnn12.X\n",
}


def _tune_paste(name: str) -> str:
    import json

    return json.loads((PROJECT_FIXTURES_DIR / "triage_threads" / "tune" / f"{name}.json").read_text("utf-8"))["paste"]


def test_an_nvidia_gpu_newer_than_every_cuda_toolkit_shown_is_a_sign():
    """The tuning part's real pastes: an RTX 4090 (sm_89, first compiled by CUDA 11.8) beside "CUDA Version：11.3"
    (NVlabs/tiny-cuda-nn#239) is a sign; an A10 beside a CUDA 11.8 image (triton-lang/triton#2971), two GPUs of
    two archs (triton-lang/triton#1323) are not; nvcc's own "Unsupported gpu architecture 'compute_86'" beside
    "My cuda version is 11.0" (deepspeedai/DeepSpeed#607) names the arch without a GPU name."""
    t = triage([("p", _tune_paste("NVlabs-tiny-cuda-nn-239"))])
    assert [name for name, _ in t.pasted.signs] == ["nvidia_gpu.newer_than_toolkit"]
    top = t.findings[0]
    assert top.id == "shape.toolkit_older_than_gpu"
    assert top.fix.text.startswith("rtx4090 is sm_89, which CUDA 11.8 is the first toolkit to compile for; the CUDA "
                                   "here is 11.3")
    for name in ("triton-lang-triton-2971", "triton-lang-triton-1323"):
        assert shapes.gpu_newer_than_toolkit(shapes.lines_of([_tune_paste(name)])) is None, name
    asked = shapes.gpu_newer_than_toolkit(shapes.lines_of([_tune_paste("deepspeedai-DeepSpeed-607")]))
    assert asked == ("compute_86", "sm_86", "11.1", "11.0")
    smi = "| NVIDIA-SMI 560.35.03              Driver Version: 560.35.03      CUDA Version: 12.6     |"
    assert shapes.toolkits_shown([smi]) == []  # vllm-project/vllm#15335: the driver's newest CUDA, not a toolkit


def test_an_amd_gpu_arch_no_rocm_release_ships_code_for_is_a_sign():
    """The tuning part's real pastes name the machine's arch four ways: hipcc's unknown target (gfx902,
    rocm-arch/rocm-arch#570), a request for support (gfx1036, ROCm/Tensile#1907), rocminfo's ISA name (gfx1103,
    ROCm/TheRock#1184; gfx1032, ROCm/legacy-rocm-build#3401). A supported arch named the same ways is no sign."""
    named = {"rocm-arch-rocm-arch-570": "gfx902", "ROCm-Tensile-1907": "gfx1036", "ROCm-TheRock-1184": "gfx1103",
             "ROCm-legacy-rocm-build-3401": "gfx1032"}
    for name, arch in named.items():
        found = shapes.amd_arch_not_supported(shapes.lines_of([_tune_paste(name)]))
        assert found is not None and found[0] == arch, name
    t = triage([("p", _tune_paste("rocm-arch-rocm-arch-570"))])
    assert [s for s, _ in t.pasted.signs] == ["amd_gpu.arch_not_supported"]
    assert t.findings[0].id == "shape.amd_arch_unsupported"
    assert "no ROCm release ships code for gfx902" in t.findings[0].fix.text
    rocblas = shapes.lines_of([_tune_paste("YellowRoseCx-koboldcpp-rocm-91")])  # "... for GPU arch : gfx1100"
    assert any("for GPU arch : gfx1100" in line for line in rocblas)
    assert shapes.amd_arch_not_supported(rocblas) is None  # gfx1100 is on ROCm's list
