"""Verdicts that said the wrong thing, each judged on its real input (tests/fixtures/verdicts, pastes/, public/; the
source of each beside it): TunableOp with tuning off, RCCL channels below 8 GPUs, allocator options a torch does not
know or that corrupt memory on ROCm 7.14, MI350 partitions, NVIDIA containers, NVIDIA GPUs without bf16."""

from __future__ import annotations

import re
import shlex

from conftest import project_fixture, read_fixture
from machines import amd_machine, ran, verdicts
from test_checks_nvidia import nvidia_machine

from rocmcheck.facts.known import ALL, FACT_GROUPS
from rocmcheck.result import Status

TUNABLEOP_JOB = "verdicts/tunableop/slurm-mi300-tunableop-tuning0-filename_train-job.sh"
TUNABLEOP_RESULTS = "verdicts/tunableop/tunableop_results0_gfx942_pt2.4.0_rocm6.1_rocm-docs.csv"
RCCL_STRINGS = "pastes/nccl_log/rccl-NCCL_MIN_NCHANNELS-ignored-less-than-8-GPUs_MI355X_rocm7.2.3_rocm-systems-11253_" \
               "excerpt.txt"
MI300X_X4 = "pastes/rocminfo/rocminfo_full_MI300X-x4_EPYC9474F_thamada-gls.txt"
ZEROS = "verdicts/alloc_conf/rocm7.14-max_split_size_mb-plus-expandable_segments-zeros_ROCm-6603_excerpt.txt"
TORCH_201 = "verdicts/alloc_conf/torch2.0.1-Unrecognized-CachingAllocator-option-expandable_segments_DeepSeek-VL2-" \
            "103_excerpt.txt"


def exported(script: str) -> dict[str, str]:
    """The `export NAME=value` lines of a shell script, as the shell would set them."""
    out = {}
    for line in script.splitlines():
        if line.startswith("export "):
            words = shlex.split(line, comments=True)
            name, _, value = words[1].partition("=")
            out[name] = value
    return out


def _torch(version: str, hip: str | None = "6.1.40091-a8dbc0c19") -> dict:
    base = amd_machine().probes["torch"]
    return {**base, "version": version, "hip": hip}


# ---- env.tunableop --------------------------------------------------------------------------------------------------

def _tunableop_machine(torch_version: str):
    env = {k: v for k, v in exported(project_fixture(TUNABLEOP_JOB)).items() if k.startswith("PYTORCH_TUNABLEOP_")}
    results = project_fixture(TUNABLEOP_RESULTS)
    probes = {**amd_machine().probes, "torch": _torch(torch_version)}
    return amd_machine(env=env, probes=probes,
                       node_health={"tunableop_files": {env["PYTORCH_TUNABLEOP_FILENAME"]: results}})


def test_tunableop_with_tuning_off_and_a_results_file_passes():
    # The MI300 job sets TUNING=0 and names its results file: TunableOp reads the tuned GEMMs and tunes no more.
    r = verdicts(_tunableop_machine("2.4.0+rocm6.1"), "env.tunableop")["env.tunableop"]
    assert r.status == Status.PASS and "without tuning" in r.summary
    assert any("PYTORCH_TUNABLEOP_TUNING=0" in e for e in r.evidence)
    assert any("rocm7_tuned.csv" in e for e in r.evidence)  # the file the job names, not the default


def test_tunableop_results_made_for_another_torch_are_stale():
    r = verdicts(_tunableop_machine("2.5.1+rocm6.2"), "env.tunableop")["env.tunableop"]
    assert r.status == Status.WARN and "another stack" in r.summary
    assert any("made with torch 2.4.0" in e for e in r.evidence)


def test_a_live_collection_records_the_tunableop_variables(tmp_path, monkeypatch):
    # The same job's variables in the doctor's own environment: the collector records them and finds the file.
    from rocmcheck.facts.collect import collect_facts

    env = exported(project_fixture(TUNABLEOP_JOB))
    results = tmp_path / "rocm7_tuned.csv"
    results.write_text(project_fixture(TUNABLEOP_RESULTS))
    for name in ("PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_TUNABLEOP_TUNING"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("PYTORCH_TUNABLEOP_FILENAME", str(results))
    facts = collect_facts(deadline_s=20, python_probes=False)
    assert facts.env["PYTORCH_TUNABLEOP_TUNING"] == "0"
    assert facts.env["PYTORCH_TUNABLEOP_FILENAME"] == str(results)
    assert list(facts.node_health["tunableop_files"]) == [str(results)]


# ---- env.nccl_channels ----------------------------------------------------------------------------------------------

def test_min_channels_above_64_on_four_mi300x_is_said_to_be_ignored():
    # RCCL (src/graph/connect.cc) drops NCCL_MIN_NCHANNELS > 64 below 8 ranks; 112 is the MI300X inference guide's.
    rccl_text = next(line for line in project_fixture(RCCL_STRINGS).splitlines() if "less than 8 GPUs" in line)
    facts = amd_machine(env={"NCCL_MIN_NCHANNELS": "112"},
                        commands={"rocminfo": ran("rocminfo", stdout=project_fixture(MI300X_X4))})
    r = verdicts(facts, "env.nccl_channels")["env.nccl_channels"]
    assert r.status == Status.WARN and "ignored with 4 ranks" in r.summary and rccl_text in r.summary
    assert r.fix.line().startswith("unset NCCL_MIN_NCHANNELS")
    # 64 or less is honoured with 4 GPUs; 112 on eight MI300X is not judged as ignored.
    facts.env = {"NCCL_MIN_NCHANNELS": "64"}
    assert verdicts(facts, "env.nccl_channels")["env.nccl_channels"].status == Status.PASS
    eight = amd_machine(env={"NCCL_MIN_NCHANNELS": "112"})
    assert verdicts(eight, "env.nccl_channels")["env.nccl_channels"].status == Status.PASS


# ---- env.alloc_conf -------------------------------------------------------------------------------------------------

def test_expandable_segments_on_torch_2_0_fails():
    # DeepSeek-VL2#103: torch 2.0.1 raises "Unrecognized CachingAllocator option: expandable_segments".
    title = project_fixture(TORCH_201).splitlines()[0]
    version = re.search(r"torch==(\d+\.\d+\.\d+)", title).group(1)
    facts = nvidia_machine()
    facts.probes["torch"] = {**facts.probes["torch"], "version": f"{version}+cu118", "cuda": "11.8"}
    facts.env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    r = verdicts(facts, "env.alloc_conf")["env.alloc_conf"]
    assert r.status == Status.FAIL and "unknown to torch 2.0.1" in r.summary
    assert "Unrecognized CachingAllocator option: expandable_segments" in r.summary
    assert r.fix.line().startswith("unset PYTORCH_CUDA_ALLOC_CONF")
    facts.probes["torch"]["version"] = "2.1.0+cu118"  # torch 2.1 knows it
    assert verdicts(facts, "env.alloc_conf")["env.alloc_conf"].status == Status.PASS


def test_max_split_size_with_expandable_segments_on_rocm_7_14_fails():
    # ROCm/ROCm#6603: on ROCm 7.14 a live allocation reads back as zeros with this pair; ROCm 7.2 is not affected.
    text = project_fixture(ZEROS)
    hip = re.search(r"`torch.version.hip` (7\.14\.\d+)", text).group(1)
    setting = "max_split_size_mb:128,expandable_segments:True"  # the setting the title names (and #193400 uses)
    facts = amd_machine(env={"PYTORCH_ALLOC_CONF": setting},
                        probes={**amd_machine().probes, "torch": _torch("2.12.0+rocm7.14.0", hip)})
    r = verdicts(facts, "env.alloc_conf")["env.alloc_conf"]
    assert r.status == Status.FAIL and "read back as zeros" in r.summary and "6603" in r.summary
    assert r.fix.line().startswith("export PYTORCH_ALLOC_CONF=expandable_segments:True")
    old = re.search(r"`torch.version.hip` (7\.2\.\d+)", text).group(1)
    facts.probes["torch"] = _torch("2.12.0+rocm7.2", old)
    assert verdicts(facts, "env.alloc_conf")["env.alloc_conf"].status == Status.PASS


# ---- gpu.partition on MI350 (gfx950) --------------------------------------------------------------------------------

def _amd_smi_only(relpath: str):
    """A machine known through one `amd-smi static` text (rocminfo's output not known), as a partial source gives it."""
    from rocmcheck.triage.readers.paste import split_paste

    (block,) = [b for b in split_paste(project_fixture(relpath)) if b.kind == "amd_smi"]
    facts = amd_machine(commands={"amd-smi-static": ran("amd-smi-static", stdout=block.text)})
    facts.known = {g: ALL for g in FACT_GROUPS}
    facts.known["commands"] = ["amd-smi-static", "amd-smi-version", "rocm-smi", "rocm-smi-json"]
    return facts


def test_mi350x_with_128_of_its_256_compute_units_is_partitioned():
    facts = _amd_smi_only("pastes/amd_smi/static_MI350X_driver-6.18.3_rocm-systems-pr2987_excerpt.txt")
    v = verdicts(facts, "gpu.partition", "gpu.arch")
    r = v["gpu.partition"]
    assert r.status == Status.WARN and "MI350X" in r.summary
    assert "128" in r.evidence[1] and "256" in r.evidence[1]
    assert v["gpu.arch"].status == Status.PASS and v["gpu.arch"].data["archs"] == ["gfx950"]


def test_mi300a_spx_nps1_from_amd_smi_is_whole():
    facts = _amd_smi_only("pastes/amd_smi/static_MI300A_x4_driver-6.9.0-rc5_amdsmi-readme.txt")
    r = verdicts(facts, "gpu.partition")["gpu.partition"]
    assert r.status == Status.PASS and "SPX" in r.evidence[0] and "NPS1" in r.evidence[0]


def test_the_gemm_target_of_mi355x_is_its_datasheet_peak():
    from rocmcheck.knowledge import arch_info

    entry = arch_info("gfx950")
    assert entry.match_product("AMD Instinct MI355X").bf16_tflops == 2516.6
    assert entry.match_product("AMD Instinct MI350X").bf16_tflops == 2306.9
    assert all(p.compute_units == 256 for p in entry.products)


# ---- NVIDIA: containers and GPUs without bf16 -----------------------------------------------------------------------

def test_a_small_shm_in_an_nvidia_container_gets_the_nvidia_docker_line():
    # torchtitan#853 (corpus 04): an 8x H100 CI container with /dev/shm of 16 MB; NCCL cannot create its segment.
    paste = project_fixture("pastes/corpus/04-pytorch-torchtitan-853.paste.txt")
    size_mb = int(re.search(r"/dev/shm to (\d+)MB", paste).group(1))
    facts = nvidia_machine()
    facts.present = {**facts.present, "/.dockerenv": True}
    facts.limits = {**facts.limits, "shm_bytes": size_mb << 20}
    v = verdicts(facts, "host.shm", "host.memlock")
    r = v["host.shm"]
    assert r.status == Status.FAIL and "16 MiB" in r.summary
    assert "--gpus all" in r.fix.line() and "/dev/kfd" not in r.fix.line() and "--ipc=host" in r.fix.line()
    facts.limits["memlock_soft"] = 64 << 20
    memlock = verdicts(facts, "host.memlock")["host.memlock"]
    assert "--gpus all" in memlock.fix.line() and "/dev/kfd" not in memlock.fix.line()


def _table_only(fixture: str, capability=None):
    facts = nvidia_machine()
    facts.commands = {"nvidia-smi": ran("nvidia-smi", stdout=read_fixture(fixture))}
    facts.probes["torch"]["devices"] = [{"capability": list(capability)}] if capability else []
    return facts


def test_t4_and_v100_cannot_run_bf16():
    for fixture, arch, name in (("nvidia-smi/t4-colab-driver525.85.12-cuda12.0-default.txt", "sm_75", "T4"),
                                ("nvidia-smi/v100-sxm2-driver435.21-cuda10.1-default-excerpt.txt", "sm_70", "V100")):
        v = verdicts(_table_only(fixture), "gpu.arch", "gpu.present", "nvidia.smi")
        r = v["gpu.arch"]
        assert r.status == Status.FAIL and f"{arch} ({name})" in r.summary and "cannot run bf16" in r.summary
        assert "fp16" in r.fix.line() and "not in rocmcheck's table" not in r.summary
        assert v["gpu.present"].status == Status.PASS and v["nvidia.smi"].status == Status.PASS


def test_the_table_alone_gives_the_gpus_and_the_arch_from_the_name():
    # No --query-gpu output at all: the H100 table gives 8 GPUs, their memory, the driver and CUDA version.
    facts = _table_only("nvidia-smi/h100-sxm-8gpu-driver565.57.01-default.txt")
    v = verdicts(facts, "gpu.present", "gpu.arch", "nvidia.driver_cuda")
    assert v["gpu.present"].status == Status.PASS and "8 NVIDIA GPU" in v["gpu.present"].summary
    assert v["gpu.arch"].status == Status.PASS and v["gpu.arch"].data["archs"] == ["sm_90"]
    assert v["nvidia.driver_cuda"].status == Status.PASS and "12.7" in v["nvidia.driver_cuda"].summary


def test_an_unnamed_arch_is_not_known_not_a_question_mark():
    # nvidia-smi cut the name ("NVIDIA GeForce ..."): neither the table nor torch says the compute capability.
    facts = _table_only("nvidia-smi/h100-sxm-8gpu-driver565.57.01-default.txt")
    facts.commands = {"nvidia-smi": ran("nvidia-smi", stdout=project_fixture(
        "pastes/nvidia_smi/default_GTX680_470.256.02_cuda11.4_oldstyle_thamada-gls.txt"))}
    r = verdicts(facts, "gpu.arch")["gpu.arch"]
    assert r.status == Status.SKIP and r.summary.startswith("not known: the arch of GPU 0 (NVIDIA GeForce ...)")
    assert "?" not in r.summary.replace("...", "")
    # torch's device capability names it (a GTX 680 is Kepler, compute capability 3.0: no longer supported).
    facts.probes["torch"]["devices"] = [{"capability": [3, 0]}]
    r = verdicts(facts, "gpu.arch")["gpu.arch"]
    assert r.status == Status.FAIL and "sm_30" in r.summary and "no longer supported" in r.summary
