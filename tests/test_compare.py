"""`rocmcheck compare` on real bundles: made here by `doctor --save-bundle` (this CPU box, and the same box with
an MI300X's recorded rocminfo / rocm-smi on PATH), copied per node, some edited to plant one known difference.
Each planted outlier must be named, and nothing else."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, read_fixture
from fakes import env_with_path, make_tool

from rocmcheck.compare.bundles import GPU_FACETS, METRICS, VERSION_FACETS
from rocmcheck.compare.judge import (
    AGREE_ID,
    CHECK_STATUS_ID,
    FACET_IDS,
    KERNEL_LOG_ID,
    METRIC_IDS,
    judge_metric,
    judge_statuses,
    judge_values,
)
from rocmcheck.errors import BadInput
from rocmcheck.fixes import FixKind, note
from rocmcheck.outliers import slow_nodes
from rocmcheck.safe.files import write_atomic

MI300X = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"
MI300X_SMI = "rocm-smi/mi300x-8gpu-rocm6.2.3-concise-ansi-literal.txt"
KERNEL_LOG_DIR = Path(__file__).parent / "fixtures" / "kernel-log"
# bf16 8192^3 GEMM on an H200 x2 in five runs and two sessions (benchmarks/RESULTS.md): the ordinary spread.
H200_GEMM_TFLOPS = [688.0, 694.0, 681.2, 690.5, 685.0]


def run_cli(*args: str, env=None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmcheck", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope="session")
def cpu_bundle(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("cpu") / "cpu.json"
    proc = run_cli("doctor", "--no-gpu-probes", "--no-train", "--save-bundle", str(path))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def amd_bundle(tmp_path_factory) -> dict:
    """This box with an MI300X's real rocminfo and rocm-smi outputs on PATH: an AMD node as far as the tools go."""
    read_fixture(MI300X)
    tmp = tmp_path_factory.mktemp("amd")
    make_tool(tmp / "bin", "rocminfo", stdout_file=FIXTURES_DIR / MI300X)
    make_tool(tmp / "bin", "rocm-smi", stdout_file=FIXTURES_DIR / MI300X_SMI)
    path = tmp / "amd.json"
    proc = run_cli("doctor", "--no-gpu-probes", "--no-train", "--save-bundle", str(path),
                   env=env_with_path(tmp / "bin"))
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(path.read_text())
    # What a node with the driver loaded records (this box has no amdgpu module).
    doc["facts"]["files"]["/sys/module/amdgpu/version"] = "6.8.5\n"
    doc["facts"]["present"]["/sys/module/amdgpu"] = True
    return doc


def as_node(doc: dict, host: str, *, gemm: float | None = None, collected_at: float | None = None) -> dict:
    node = copy.deepcopy(doc)
    node["facts"]["platform"]["node"] = host
    if collected_at is not None:
        node["facts"]["collected_at"] = collected_at
    if gemm is not None:  # the GEMM probe's recorded verdict, as judge_gemm_tflops writes it
        node["facts"]["recorded_results"].append(
            {"id": "probe.gemm_tflops", "area": "probe", "status": "pass", "evidence": [], "fix": None,
             "summary": f"bf16 GEMM 8192x8192x8192: {gemm} TFLOP/s", "data": {"tflops": gemm, "shape": [8192] * 3}})
    return node


def write(folder: Path, docs: dict[str, dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    return folder


def compare_json(*paths: Path) -> tuple[dict, int]:
    proc = run_cli("compare", "--json", *map(str, paths))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), proc.returncode


def findings(doc: dict) -> dict[str, list[str]]:
    """{verdict id: the nodes it names}; a check that differs is `compare.check_status[<check id>]`."""
    return {f["id"] + (f"[{f['data']['check']}]" if f["id"] == "compare.check_status" else ""): f["data"]["nodes"]
            for f in doc["results"] if f["status"] != "pass"}


# ------------------------------------------------------------------------------------------ end to end

def test_identical_nodes_name_nothing(cpu_bundle, tmp_path):
    folder = write(tmp_path / "b", {f"node-{i}": as_node(cpu_bundle, f"node-{i}") for i in range(3)})
    doc, rc = compare_json(folder)
    assert rc == 0 and doc["comparison"] == "same" and doc["verdict"] == "pass"
    assert [(r["id"], r["status"]) for r in doc["results"]] == [("compare.nodes_agree", "pass")]
    assert [n["label"] for n in doc["nodes"]] == ["node-0", "node-1", "node-2"]
    # gpu.present fails on this CPU box: a problem of every node, reported as such, naming no node.
    assert "gpu.present" in {s["id"] for s in doc["shared_problems"]}


def test_planted_old_driver_and_slow_gemm_are_named_and_nothing_else(amd_bundle, tmp_path):
    nodes = {f"gpu-{i:03d}": as_node(amd_bundle, f"gpu-{i:03d}", gemm=H200_GEMM_TFLOPS[i]) for i in range(4)}
    nodes["gpu-001"]["facts"]["files"]["/sys/module/amdgpu/version"] = "6.7.0\n"  # an older driver
    nodes["gpu-004"] = as_node(amd_bundle, "gpu-004", gemm=round(690.0 * 0.8, 1))  # a GEMM 20 % slower
    doc, rc = compare_json(write(tmp_path / "b", nodes))
    assert rc == 1 and doc["comparison"] == "differ"
    assert findings(doc) == {"compare.driver": ["gpu-001"], "compare.gemm_tflops": ["gpu-004"]}
    by_id = {f["id"]: f for f in doc["results"]}
    assert "gpu-001 has amdgpu 6.7.0 where the other 4 nodes have amdgpu 6.8.5" in by_id["compare.driver"]["summary"]
    assert by_id["compare.driver"]["status"] == "fail" and by_id["compare.driver"]["fix"]
    assert "gpu-004 552.0 TFLOP/s (-20%)" in by_id["compare.gemm_tflops"]["summary"]
    assert doc["odd_nodes"] == ["gpu-001", "gpu-004"]
    # The table puts the two outlier rows first.
    assert [r["key"] for r in doc["table"][:2]] == ["driver", "gemm_tflops"]
    assert doc["table"][0]["cells"]["gpu-001"] == "amdgpu 6.7.0"
    # The human table names them too.
    proc = run_cli("compare", str(tmp_path / "b"))
    assert proc.returncode == 1
    assert "gpu-001 has amdgpu 6.7.0" in proc.stdout and "gpu-004" in proc.stdout


def test_kernel_log_faults_on_one_node_are_named(amd_bundle, tmp_path):
    nodes = {f"gpu-{i}": as_node(amd_bundle, f"gpu-{i}") for i in range(3)}
    journal = (KERNEL_LOG_DIR / "amdgpu-reset-journal-short-iso-precise.txt").read_text()
    nodes["gpu-2"]["facts"]["commands"]["kernel-log-journalctl"] = {
        "argv": ["journalctl", "-k", "-b"], "returncode": 0, "stdout": journal, "stderr": "", "timed_out": False,
        "not_found": False, "error": None, "duration_s": 0.1, "timeout_s": 20}
    doc, rc = compare_json(write(tmp_path / "b", nodes))
    assert list(findings(doc)) == ["compare.kernel_log"] and findings(doc)["compare.kernel_log"] == ["gpu-2"]
    # A GPU reset is a warning: the one exit rule says 0 for warnings (1 is for a failure).
    assert doc["results"][0]["status"] == "warn" and doc["verdict"] == "warn" and rc == 0
    assert doc["results"][0]["fix"]["kind"] == "shell"
    assert "gpu-2:" in doc["results"][0]["summary"] and "reset" in doc["results"][0]["summary"].lower()


def test_one_machine_over_time_says_what_changed(amd_bundle, tmp_path):
    before = as_node(amd_bundle, "gpu-007", gemm=688.0, collected_at=1_764_000_000.0)
    after = as_node(amd_bundle, "gpu-007", gemm=540.0, collected_at=1_764_600_000.0)
    after["facts"]["files"]["/sys/module/amdgpu/version"] = "6.7.0\n"
    # Given newest first: compare orders them by collection time.
    doc, rc = compare_json(write(tmp_path / "b", {"b-after": after, "a-before": before}) / "b-after.json",
                           tmp_path / "b" / "a-before.json")
    assert rc == 1 and doc["mode"] == "over_time"
    labels = [n["label"] for n in doc["nodes"]]
    assert labels == ["gpu-007@2025-11-24 16:00", "gpu-007@2025-12-01 14:40"]
    f = {x["id"]: x for x in doc["results"]}
    assert set(f) == {"compare.driver", "compare.gemm_tflops"}
    assert f["compare.driver"]["summary"].startswith(
        "GPU driver changed since gpu-007@2025-11-24 16:00: amdgpu 6.8.5 -> amdgpu 6.7.0")
    assert ("gpu-007@2025-12-01 14:40 540.0 TFLOP/s (-22%) against 688.0 TFLOP/s in gpu-007@2025-11-24 16:00"
            in f["compare.gemm_tflops"]["summary"])


def test_cpu_box_against_an_amd_node_names_the_real_differences(cpu_bundle, amd_bundle, tmp_path):
    folder = write(tmp_path / "b", {"cpu": as_node(cpu_bundle, "cpu-box"), "amd": as_node(amd_bundle, "mi300x-box")})
    doc, rc = compare_json(folder)
    found = findings(doc)
    assert rc == 1
    assert {"compare.gpu_count", "compare.gpu_model", "compare.driver",
            "compare.check_status[gpu.present]"} <= set(found)
    row = {r["key"]: r["cells"] for r in doc["table"]}
    assert row["gpu_count"] == {"mi300x-box": "8", "cpu-box": "0"}
    # Versions that are the same on both (same Python environment) are not named.
    assert not {"compare.torch", "compare.deepspeed", "compare.python"} & set(found)


def test_bad_input_is_one_line_and_exit_2(cpu_bundle, tmp_path):
    (tmp_path / "x.json").write_text("{\"not\": \"a bundle\"}")
    one = write(tmp_path / "one", {"a": cpu_bundle})
    for args in ([str(tmp_path / "x.json"), str(one / "a.json")], [str(one)], [str(tmp_path / "missing")]):
        proc = run_cli("compare", *args)
        assert proc.returncode == 2, (args, proc.stdout)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr


def test_per_node_doctor_one_bundle_per_node(tmp_path):
    """Under torchrun's variables: local rank 1 leaves at once, quietly; local rank 0 writes DIR/<host>.json with
    what it read from the launcher, and never replaces it without --force."""
    import os

    base = {**os.environ, "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
            "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
            "TORCHELASTIC_RUN_ID": "t1"}
    folder = tmp_path / "bundles-dir"
    args = ("doctor", "--no-gpu-probes", "--no-train", "--only", "os", "--bundle-dir", str(folder))
    quiet = run_cli(*args, env=base)
    assert (quiet.returncode, quiet.stdout, quiet.stderr, folder.exists()) == (0, "", "", False)
    lead = run_cli(*args, env={**base, "RANK": "0", "LOCAL_RANK": "0"})
    assert lead.returncode == 0, lead.stderr
    (bundle,) = folder.iterdir()
    doc = json.loads(bundle.read_text())
    assert bundle.name == f"{doc['facts']['platform']['node']}.json"
    assert doc["facts"]["launch"]["launcher"] == "torchrun" and doc["facts"]["launch"]["node_rank"] == 0
    assert "(node 0 of 1, torchrun): pass" in lead.stdout and str(bundle) in lead.stdout
    again = run_cli(*args, env={**base, "RANK": "0", "LOCAL_RANK": "0"})
    assert again.returncode == 2 and "use --force" in again.stderr and again.stderr.count("\n") == 1
    forced = run_cli(*args, "--force", env={**base, "RANK": "0", "LOCAL_RANK": "0"})
    assert forced.returncode == 0
    assert json.loads(bundle.read_text())["facts"]["collected_at"] > doc["facts"]["collected_at"]


SLOW_ROCMINFO = """#!/bin/sh
sleep 6
echo "ROCk module is NOT loaded, possibly no GPU devices"
exit 1
"""
RANK_WRAPPER = """import os, runpy, sys
if os.environ.get("RANK") == "1":  # this rank's node answers late: its doctor ends last
    os.environ["PATH"] = sys.argv.pop(1) + os.pathsep + os.environ["PATH"]
else:
    sys.argv.pop(1)
sys.argv = ["rocmcheck", "doctor", *sys.argv[1:]]
runpy.run_module("rocmcheck", run_name="__main__")
"""


def test_under_torchrun_a_rank_that_fails_first_waits_for_the_slower_ranks_bundle(tmp_path):
    """Real torchrun, 2 ranks standing in for 2 nodes: both fail (no GPU here), rank 1 six seconds later. torchrun
    ends every rank once one exits non-zero, so rank 0 waits for rank 1's bundle before it exits: both are
    written, and compare reads the two."""
    pytest.importorskip("torch")
    slow = tmp_path / "slowbin"
    slow.mkdir()
    (slow / "rocminfo").write_text(SLOW_ROCMINFO)
    (slow / "rocminfo").chmod(0o755)
    wrapper = tmp_path / "rank.py"
    wrapper.write_text(RANK_WRAPPER)
    folder = tmp_path / "bundles"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                           "--max-restarts", "0", str(wrapper), str(slow), "--node-per-rank", "--no-train",
                           "--no-gpu-probes", "--only", "gpu,os", "--bundle-dir", str(folder)],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and names[0].endswith("-rank0.json") and names[1].endswith("-rank1.json"), proc.stderr
    assert "waiting up to 180 s for the other 1 rank(s)' bundles" in proc.stderr
    assert proc.returncode == 1
    assert run_cli("compare", str(folder)).returncode in (0, 1)


# ------------------------------------------------------------------------------------------ pure judges

def test_slow_nodes_uses_median_and_mad():
    assert slow_nodes({"a": 100, "b": 98, "c": 75}, 0.10) == (["c"], 98)
    # Spread evenly: nobody stands out, although c is 11 % under the median.
    assert slow_nodes({"a": 100, "b": 90, "c": 80}, 0.10)[0] == []
    # All but one identical (MAD 0): the relative limit alone decides.
    assert slow_nodes({"a": 50, "b": 50, "c": 50, "d": 44}, 0.10)[0] == ["d"]
    assert slow_nodes({"a": 50, "b": 50, "c": 50, "d": 46}, 0.10)[0] == []
    assert slow_nodes({"a": 100, "b": 70}, 0.10) == (["b"], 100)
    assert slow_nodes({"a": 100}, 0.10)[0] == []


def test_metric_judge_names_only_the_slow_side():
    fast = judge_metric("gemm_tflops", "bf16 GEMM", "TFLOP/s", {"a": 680.0, "b": 690.0, "c": 900.0},
                        "probe.gemm_tflops")
    assert fast is None  # a faster node is not a problem
    slow = judge_metric("allreduce_busbw", "all-reduce", "GB/s", {"a": 279.5, "b": 260.8, "c": 140.0},
                        "probe.collective")
    assert slow is not None and slow.data["nodes"] == ["c"] and slow.fix.text == "rocmcheck probe collective --json"
    assert slow.id == "compare.allreduce_busbw"


def test_values_judge_majority_and_split():
    r = judge_values("rocm", "ROCm", {"a": "6.2.3", "b": "6.2.3", "c": "6.1.0"})
    assert r is not None and r.data["nodes"] == ["c"] and r.status.value == "fail"
    split = judge_values("torch", "torch", {"a": "2.5.1", "b": "2.6.0"})
    assert split is not None and split.data["nodes"] == ["a", "b"] and "differs" in split.summary
    assert judge_values("python", "Python", {"a": "3.11.7", "b": "3.11.7"}) is None
    missing = judge_values("flash_attn", "flash-attn", {"a": "2.7.4", "b": "2.7.4", "c": None})
    assert missing is not None and "c has none where" in missing.summary and missing.data["nodes"] == ["c"]


def test_status_judge_ignores_absent_checks_and_names_the_worse_node():
    assert judge_statuses("x.y", {"a": "pass", "b": None}, {}, {}) is None
    fix = note("add iommu=pt")
    r = judge_statuses("host.iommu", {"a": "pass", "b": "fail", "c": "pass"}, {"b": "iommu=pt missing"}, {"b": fix})
    assert r is not None and r.data["nodes"] == ["b"] and r.fix is fix and "iommu=pt missing" in r.summary
    assert r.id == "compare.check_status" and r.data["check"] == "host.iommu" and "host.iommu" in r.summary
    # Without a recorded fix: the doctor on that node, the check's id a quoted word of the line.
    r = judge_statuses("host.iommu", {"a": "pass", "b": "fail"}, {}, {})
    assert r.fix.kind is FixKind.SHELL and r.fix.text == "rocmcheck doctor --only host.iommu -v"
    # Over time, getting better is not a finding.
    assert judge_statuses("host.iommu", {"old": "fail", "new": "pass"}, {}, {}, over_time=True) is None


def test_bundle_is_written_whole_and_never_overwritten_without_force(tmp_path):
    target = tmp_path / "bundles-dir" / "node-1.json"
    target.parent.mkdir()
    write_atomic(target, json.dumps({"a": 1}))
    with pytest.raises(BadInput):
        write_atomic(target, json.dumps({"a": 2}))
    assert json.loads(target.read_text()) == {"a": 1}
    write_atomic(target, json.dumps({"a": 3}), force=True)
    assert json.loads(target.read_text()) == {"a": 3}
    assert [p.name for p in target.parent.iterdir()] == ["node-1.json"]  # no temporary file left behind


# ------------------------------------------------------------------------------------------ hostile bundles

def _paste_block(stdout: str) -> list[str]:
    """The lines under "Fixes (paste a line ...)": what a person pastes."""
    if "paste a line" not in stdout:
        return []
    block = stdout.split("paste a line", 1)[1].split("\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line.startswith(("Edit these files:", "What to do by hand:")):
            break
        if line.strip():
            lines.append(line)
    return lines


def test_host_names_and_versions_from_bundles_are_data_in_every_fix(cpu_bundle, tmp_path):
    """A newline in a host name must not start a command, a `;` in a version must not run one (the fix block is
    pasted into a shell): both stay inside one quoted word or a comment."""
    evil_host = "node3\ntouch PWNED_HOST #"
    evil_version = "2.5.1; touch PWNED_VALUE; #"
    nodes = {f"n{i}": as_node(cpu_bundle, host) for i, host in enumerate(["node1", "node2", evil_host])}
    for name in ("n0", "n1"):
        nodes[name]["facts"]["packages"]["torch"] = evil_version
        nodes[name]["facts"]["probes"]["torch"]["version"] = evil_version
    folder = write(tmp_path / "b", nodes)
    proc = run_cli("compare", str(folder))
    assert proc.returncode == 1, proc.stderr
    lines = _paste_block(proc.stdout)
    pip = [line for line in lines if line.startswith("pip install torch")]
    assert pip == ["pip install torch=='2.5.1; touch PWNED_VALUE; #'  # on node3 touch PWNED_HOST #: every node "
                   "must run the same torch build (or the same image)"]
    assert not [line for line in lines if line.lstrip().startswith("touch")]
    checked = subprocess.run(["bash", "-n"], input="\n".join(lines) + "\n", text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    doc, _ = compare_json(folder)
    assert all("\n" not in n["label"] for n in doc["nodes"])


def test_a_warning_alone_exits_0_and_a_failure_1(amd_bundle, tmp_path):
    nodes = {f"gpu-{i}": as_node(amd_bundle, f"gpu-{i}", gemm=H200_GEMM_TFLOPS[i]) for i in range(3)}
    nodes["gpu-3"] = as_node(amd_bundle, "gpu-3", gemm=round(690.0 * 0.8, 1))  # slower GEMM: a warning
    doc, rc = compare_json(write(tmp_path / "warn", nodes))
    assert list(findings(doc)) == ["compare.gemm_tflops"] and doc["verdict"] == "warn" and rc == 0
    nodes["gpu-1"]["facts"]["files"]["/sys/module/amdgpu/version"] = "6.7.0\n"  # another driver: a failure
    doc, rc = compare_json(write(tmp_path / "fail", nodes))
    assert doc["verdict"] == "fail" and rc == 1


def test_collection_times_no_clock_can_show_are_unknown(cpu_bundle, tmp_path):
    nodes = {f"t{i}": as_node(cpu_bundle, "gpu-007", collected_at=when)
             for i, when in enumerate([float("nan"), 1.0, -1e18])}
    proc = run_cli("compare", "--json", str(write(tmp_path / "b", nodes)))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mode"] == "over_time" and sorted(n["collected_at"] for n in doc["nodes"]) == [0.0, 0.0, 1.0]
    # Two unknown times cannot tell their bundles apart: their file names do.
    assert sorted(n["label"] for n in doc["nodes"]) == ["gpu-007:t0.json", "gpu-007:t2.json",
                                                        "gpu-007@1970-01-01 00:00"]


def test_facets_of_a_bundle_that_was_not_redacted_are_redacted(cpu_bundle, tmp_path):
    token = "hf_" + "Zq9" * 10
    nodes = {f"n{i}": as_node(cpu_bundle, f"n{i}") for i in range(3)}
    nodes["n2"]["facts"]["packages"]["transformers"] = f"4.0.0 token={token}"
    nodes["n2"]["facts"]["os_info"]["name"] = "Linux https://admin:s3cretpass@mirror.example.com/"
    folder = write(tmp_path / "b", nodes)
    for args in (("--json",), ("-v",)):
        proc = run_cli("compare", *args, str(folder))
        assert proc.returncode in (0, 1), proc.stderr
        assert token not in proc.stdout and "s3cretpass" not in proc.stdout
        assert "<redacted>" in proc.stdout and "mirror.example.com" in proc.stdout


def test_a_fifo_is_named_for_what_it_is(cpu_bundle, tmp_path):
    fifo = tmp_path / "node.json"
    os.mkfifo(fifo)
    one = write(tmp_path / "one", {"a": cpu_bundle})
    proc = run_cli("compare", str(fifo), str(one / "a.json"), timeout=60)
    assert proc.returncode == 2 and "FIFO" in proc.stderr and "no such file" not in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_verdict_ids_are_written_out_and_documented():
    docs = (Path(__file__).resolve().parents[1] / "docs" / "compare.md").read_text()
    assert set(FACET_IDS) == {key for key, _ in VERSION_FACETS + GPU_FACETS} and set(METRIC_IDS) == set(METRICS)
    for verdict_id in [*FACET_IDS.values(), *METRIC_IDS.values(), CHECK_STATUS_ID, KERNEL_LOG_ID, AGREE_ID]:
        assert f"`{verdict_id}`" in docs, verdict_id
