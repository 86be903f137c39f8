"""What `rocmcheck probe` reads about the machine before the stage (rocmcheck/probes/host.py): the system tools'
GPU names and memory through the facts parsers, on real recorded outputs printed by fake tools on PATH; the ROCm
release from a laid-out install; /proc's kernel command line and NUMA setting; and "not known" when nothing is
there."""

from conftest import read_fixture

from rocmcheck.facts.parsers.smi import parse_amd_smi_static_json, parse_rocm_smi_json
from rocmcheck.probes.host import read_host_facts, read_smi
from rocmcheck.units import MIB
from tests.fakes import env_with_path, make_tool

RX7900_JSON = "rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt"
H200_CSV = "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"
TOOLS = ("amd-smi", "rocm-smi", "nvidia-smi")


def fixture(rel: str) -> str:
    return read_fixture(rel)


def test_rocm_smi_json_total_vram_through_the_facts_parser():
    [gpu] = parse_rocm_smi_json(fixture(RX7900_JSON)).gpus
    assert gpu.vram_total_bytes == 21458059264 and gpu.product_name == "Radeon RX 7900 XT"


def test_not_json_gives_nothing():
    assert parse_rocm_smi_json(fixture("rocm-smi/mi300x-spx-rocm6.3.3-showmeminfo-vram.txt")).gpus == []
    assert parse_amd_smi_static_json("Segmentation fault").gpus == []


def _tools(tmp_path, **outputs):
    """Fake amd-smi, rocm-smi and nvidia-smi: those named print their fixture, the others fail (so a real tool on
    this machine is never reached)."""
    bin_dir = tmp_path / "bin"
    for tool in TOOLS:
        rel = outputs.get(tool.replace("-", "_"))
        if rel is None:
            make_tool(bin_dir, tool, stdout="", exit_code=1)
        else:
            make_tool(bin_dir, tool, stdout=fixture(rel))
    env = env_with_path(bin_dir)
    for var in ("ROCM_PATH", "ROCM_HOME"):
        env.pop(var, None)
    return env


def test_rocm_smi_names_and_memory_when_amd_smi_gives_nothing(tmp_path):
    report = read_smi(_tools(tmp_path, rocm_smi=RX7900_JSON))
    assert report is not None and report.tool == "rocm-smi"
    assert [(g.product_name, g.vram_total_bytes) for g in report.gpus] == [("Radeon RX 7900 XT", 21458059264)]


def test_nvidia_smi_query_of_two_h200(tmp_path):
    facts = read_host_facts(_tools(tmp_path, nvidia_smi=H200_CSV), root=str(tmp_path))
    assert facts.gpu_names == ["NVIDIA H200", "NVIDIA H200"]
    assert facts.smi_memory_bytes == [143771 * MIB, 143771 * MIB]


def test_rocm_release_and_proc_files_from_the_machine(tmp_path):
    (tmp_path / "opt/rocm/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm/.info/version").write_text("6.3.3-94\n")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")
    (tmp_path / "proc/sys/kernel/numa_balancing").write_text("1\n")
    facts = read_host_facts(_tools(tmp_path), root=str(tmp_path))
    assert facts.rocm_version == "6.3.3"
    assert facts.kernel_cmdline.split() == ["BOOT_IMAGE=/vmlinuz", "ro", "quiet"]
    assert facts.numa_balancing.strip() == "1"


def test_nothing_there_is_not_known(tmp_path):
    facts = read_host_facts(_tools(tmp_path), root=str(tmp_path))
    assert (facts.gpu_names, facts.smi_memory_bytes, facts.rocm_version) == (None, None, None)
    assert (facts.kernel_cmdline, facts.numa_balancing) == (None, None)
    assert read_host_facts(_tools(tmp_path, rocm_smi=RX7900_JSON), smi=False, root=str(tmp_path)).gpu_names is None
