"""A site's own rules (doctor --knowledge) and a known-good node written as one (doctor --write-reference): the rule
files are checked field by field, feed driver.window, gpu.firmware, env.site_forbidden, rocm.site_versions and the
probes' floors, and a reference read back judges a worse node. Firmware from real `amd-smi firmware` outputs
(tests/fixtures/host-tools/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import project_fixture
from machines import amd_machine, ran, verdicts

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.errors import BadInput
from rocmcheck.facts.parsers.host_tools import parse_amd_smi_firmware
from rocmcheck.knowledge.site import load_site_rules
from rocmcheck.probes.catalog import gemm_tflops
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.rejudge import FLOOR_JUDGED
from rocmcheck.result import Status

MI300X_VF = "host-tools/amd-smi-firmware-mi300x-vf-26.2.0.txt"
MI355X = "host-tools/amd-smi-firmware-mi355x.txt"
RULES = {"rocmcheck_site_rules": 1, "source": "cluster team, qualified on gpu-017", "read": "2026-12-07",
         "driver": {"amdgpu_modules": ["6.8.5"]},
         "firmware": {"PLDM_BUNDLE": "01.25.03.12", "PM": ["00.85.129.03", "00.85.130.00"]},
         "rocm": "~=6.2.3", "torch": ">=2.5,<2.6",
         "forbidden_env": {"HSA_ENABLE_SDMA": "copies on compute queues slow CPU offload"},
         "products": {"MI300X": {"gemm_bf16_tflops": {"value": 600, "what": "0.9 x gpu-017"}}}}


def write_rules(folder, doc, name="site.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))
    return folder


def test_amd_smi_firmware_is_read_per_gpu_from_recorded_outputs():
    vf = parse_amd_smi_firmware(project_fixture(MI300X_VF))
    assert list(vf) == [0] and len(vf[0]) == 13
    assert (vf[0]["PLDM_BUNDLE"], vf[0]["PM"], vf[0]["CP_MEC1"]) == ("01.25.03.12", "00.85.129.03", "32959")
    eight = "\n".join(project_fixture(MI355X).replace("GPU: 0", f"GPU: {i}") for i in range(8))
    assert {g: fw["PLDM_BUNDLE"] for g, fw in parse_amd_smi_firmware(eight).items()} == {i: "01.25.17.07"
                                                                                         for i in range(8)}
    for junk in ("", "FW_VERSION: 1\nGPU: x\n", "\x00\xff" * 50, "FW_ID: PM\nFW_VERSION: N/A\n"):
        assert parse_amd_smi_firmware(junk) == {}


@pytest.mark.parametrize("edit, named", [
    ({"firmware": {"PLDM_BUNDLE": 1}}, "firmware.PLDM_BUNDLE: should be a non-empty string, not 1"),
    ({"products": {"MI300Y": {}}}, "products.MI300Y: is not a product"),
    ({"products": {"MI300X": {"gemm_tflops": {"value": 1}}}}, "products.MI300X.gemm_tflops: is not a measure"),
    ({"rocm": "6.4 or newer"}, "rocm: '6.4 or newer' is not a version range"),
    ({"rocmcheck_site_rules": 2}, "rocmcheck_site_rules: should be 1"),
    ({"forbiden_env": {}}, "forbiden_env: is not a site rule"),
])
def test_a_bad_rule_file_is_one_line_naming_the_file_and_the_field(tmp_path, edit, named):
    folder = write_rules(tmp_path / "site", {**RULES, **edit}, "b.json")
    (folder / "README.md").write_text("not a rule file: not read")
    with pytest.raises(BadInput) as exc:
        load_site_rules(folder)
    assert str(exc.value).startswith(f"--knowledge {folder / 'b.json'}: ") and named in str(exc.value)
    assert "\n" not in str(exc.value)


def test_links_into_proc_and_facts_set_twice_are_refused(tmp_path):
    folder = write_rules(tmp_path / "site", RULES)
    os.symlink("/proc/self/environ", folder / "env.json")
    with pytest.raises(BadInput, match="leads into /proc"):
        load_site_rules(folder)
    os.unlink(folder / "env.json")
    write_rules(folder, {**RULES, "driver": {"amdgpu_modules": "6.12.12"}, "firmware": {}}, "z.json")
    with pytest.raises(BadInput, match=r"driver.amdgpu_modules is set differently by .*site.json and .*z.json"):
        load_site_rules(folder)


def test_site_rules_feed_the_checks(tmp_path):
    rules = load_site_rules(write_rules(tmp_path / "site", RULES))
    fw = project_fixture(MI300X_VF)
    good = amd_machine(commands={**amd_machine().commands, "amd-smi-firmware": ran("amd-smi-firmware", stdout=fw)})
    ids = ("driver.window", "gpu.firmware", "env.site_forbidden", "rocm.site_versions")

    def judge(facts):
        return {r.id: r for r in run_checks(select_checks(only=ids), CheckContext(facts, site_rules=rules))}

    ok = judge(good)
    assert {i: r.status for i, r in ok.items()} == dict.fromkeys(ids, Status.PASS), ok
    assert "PLDM_BUNDLE, PM as the site expects" in ok["gpu.firmware"].summary
    assert "the site's expected driver" in ok["driver.window"].evidence[0]
    bad = amd_machine(commands={**good.commands, "amd-smi-firmware": ran("f", stdout=fw.replace("01.25.03.12",
                                                                                                  "01.24.00.01"))},
                      files={**good.files, "/sys/module/amdgpu/version": "6.12.12\n"},
                      env={"HSA_ENABLE_SDMA": "0"}, packages={"torch": "2.7.1+rocm6.4"},
                      probes={**good.probes, "torch": {**good.probes["torch"], "version": "2.7.1+rocm6.4"}})
    worse = judge(bad)
    assert {i: r.status for i, r in worse.items()} == dict.fromkeys(ids, Status.WARN), worse
    assert "site.json" in worse["gpu.firmware"].summary and "01.24.00.01" in worse["gpu.firmware"].summary
    assert worse["env.site_forbidden"].fix.text == "unset HSA_ENABLE_SDMA"
    assert "torch 2.7.1+rocm6.4 is outside the site's range >=2.5,<2.6" in worse["rocm.site_versions"].summary
    # Without rules: the firmware is shown and not judged (not known is not absent), the site checks skip.
    plain = verdicts(bad, *ids)
    assert plain["gpu.firmware"].status == Status.PASS and "not judged" in plain["gpu.firmware"].summary
    assert plain["env.site_forbidden"].status == plain["rocm.site_versions"].status == Status.SKIP


def test_mixed_pldm_bundles_on_one_node_warn():
    fw = project_fixture(MI355X)
    mixed = fw + fw.replace("GPU: 0", "GPU: 1").replace("01.25.17.07", "01.25.03.12")
    r = verdicts(amd_machine(commands={"amd-smi-firmware": ran("f", stdout=mixed)}), "gpu.firmware")["gpu.firmware"]
    assert r.status == Status.WARN and "2 different PLDM bundles (01.25.17.07, 01.25.03.12)" in r.summary


def mi300x(rules=None) -> DeviceContext:
    return DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8, site_rules=rules)


def test_a_site_floor_takes_amds_place_in_the_probe_judge(tmp_path):
    data = {"tflops": 580.0, "shape": [8192, 8192, 8192]}
    amd = gemm_tflops.judge(data, mi300x())  # 580 >= 0.9 x AMD's RVS target 552
    assert amd.status == Status.PASS and "AMD's RVS target 552" in amd.summary
    rules = load_site_rules(write_rules(tmp_path / "site", RULES))
    site = gemm_tflops.judge(data, mi300x(rules))  # below the site's 600, which passes only at the floor itself
    assert site.status == Status.WARN and "the site's floor 600 for MI300X" in site.summary
    assert any("site.json" in line for line in site.evidence)


def doctor(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def bundle(tmp_path, name, facts, recorded=()):
    facts.recorded_results = list(recorded)
    path = tmp_path / name
    path.write_text(json.dumps({"rocmcheck_bundle": 1, "facts": facts.to_dict()}))
    return path


def test_a_reference_written_from_a_good_node_judges_a_worse_one(tmp_path):
    fw = project_fixture(MI300X_VF)
    good = amd_machine(commands={**amd_machine().commands, "amd-smi-firmware": ran("f", stdout=fw)})
    gemm = {"id": "probe.gemm_tflops", "area": "probe", "status": "pass", "summary": "bf16 GEMM", "evidence": [],
            "fix": None, "data": {"tflops": 700.0, "shape": [8192, 8192, 8192]}}
    reference = tmp_path / "ref.json"
    wrote = doctor("--bundle", str(bundle(tmp_path, "good.json", good, [gemm])), "--only", "driver,gpu,rocm,probe",
                   "--write-reference", str(reference))
    assert wrote.returncode == 0, wrote.stderr
    assert "Reference written to" in wrote.stderr and "MI300X floors (gemm_bf16_tflops)" in wrote.stderr
    doc = json.loads(reference.read_text())
    assert doc["driver"] == {"amdgpu_modules": ["6.8.5"]} and doc["rocm"] == "~=6.2.3"
    assert doc["firmware"] == {"PLDM_BUNDLE": "01.25.03.12", "PM": "00.85.129.03"}
    assert doc["products"]["MI300X"]["gemm_bf16_tflops"]["value"] == 630.0  # 0.9 x 700
    again = doctor("--bundle", str(tmp_path / "good.json"), "--only", "gpu", "--write-reference", str(reference))
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"Error: not overwriting {reference}: it exists (add --force to replace it)"]

    worse = amd_machine(commands={**good.commands, "amd-smi-firmware": ran("f", stdout=fw.replace("00.85.129.03",
                                                                                                  "00.85.120.00"))},
                        files={**good.files, "/sys/module/amdgpu/version": "6.3.6\n"})
    env = {**os.environ, "ROCMCHECK_DOCTOR_KNOWLEDGE": str(reference)}  # the config default, as a variable
    for facts, status in ((good, "pass"), (worse, "warn")):
        report = json.loads(doctor("--bundle", str(bundle(tmp_path, "node.json", facts)), "--only",
                                   "driver.window,gpu.firmware", "--json", env=env).stdout)
        assert {r["id"]: r["status"] for r in report["results"]} == dict.fromkeys(
            ("driver.window", "gpu.firmware"), status), report
    # The floor read back from the reference: a GPU 10% under the reference node's rate is below it.
    rules = load_site_rules(reference)
    assert gemm_tflops.judge({"tflops": 640.0, "shape": [8192] * 3}, mi300x(rules)).status == Status.PASS
    assert gemm_tflops.judge({"tflops": 600.0, "shape": [8192] * 3}, mi300x(rules)).status == Status.WARN


def test_a_bad_knowledge_folder_is_exit_2_before_anything_runs(tmp_path):
    folder = write_rules(tmp_path / "site", {**RULES, "read": ""})
    proc = doctor("--knowledge", str(folder), "--no-gpu-probes", "--no-train")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"Error: --knowledge {folder / 'site.json'}: read: should be a non-empty string, not ''"]


def test_debians_amd_smi_without_a_driver_leaves_the_firmware_not_judged(tmp_path):
    """Debian's amd-smi 10.1 in a root with no amdgpu (tests/fixtures/debian-sid-rocm): exit 255, one stderr line."""
    failed = ran("amd-smi-firmware", stdout=project_fixture("debian-sid-rocm/amd-smi-firmware.stdout.txt"),
                 returncode=255, stderr=project_fixture("debian-sid-rocm/amd-smi-firmware.stderr.txt"))
    assert parse_amd_smi_firmware(failed.stdout + failed.stderr) == {}
    rules = load_site_rules(write_rules(tmp_path / "site", RULES))
    ctx = CheckContext(amd_machine(commands={"amd-smi-firmware": failed}), site_rules=rules)
    (r,) = run_checks(select_checks(only=("gpu.firmware",)), ctx)
    assert r.status == Status.SKIP and r.summary.startswith("amd-smi firmware: ") and "Drivers not loaded" in r.summary


def test_a_replayed_probe_rate_is_judged_again_against_the_sites_floor(tmp_path):
    """A bundle recorded without site rules: its GEMM verdict (the judge's own, 580 TFLOP/s on the recorded MI300X,
    passing AMD's RVS target) is judged again on replay with a site floor of 600; without --knowledge it stands."""
    recorded = gemm_tflops.judge({"tflops": 580.0, "shape": [8192, 8192, 8192]}, mi300x()).to_dict()
    recorded["data"]["seconds"] = 12.5
    replay = bundle(tmp_path, "node.json", amd_machine(), [recorded])
    site = write_rules(tmp_path / "site", RULES)

    def gemm(*args):
        proc = doctor("--bundle", str(replay), "--only", "probe", "--json", *args)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        return next(r for r in json.loads(proc.stdout)["results"] if r["id"] == "probe.gemm_tflops")

    assert gemm() == recorded  # shown as recorded
    again = gemm("--knowledge", str(site))
    assert again["status"] == "warn" and "the site's floor 600 for MI300X" in again["summary"]
    assert again["data"]["seconds"] == 12.5 and again["data"]["rejudged"] is True
    assert f"recorded on the machine: pass: {recorded['summary']}" in again["evidence"]
    # Recorded data the judge cannot read (no shape): the recorded verdict stands, saying why.
    del recorded["data"]["shape"]
    bundle(tmp_path, "node.json", amd_machine(), [recorded])
    kept = gemm("--knowledge", str(site))
    assert kept["status"] == "pass" and "the recorded measurements are incomplete" in kept["evidence"][-1]


# One measurement per probe judged against a floor (the child's data as the probes report it on an MI300X).
MEASURED = {
    "probe.gemm_tflops": {"tflops": 500.0, "shape": [8192, 8192, 8192]},
    "probe.copy_bandwidth": {"tb_per_s": 3.5, "bytes": 1 << 30},
    "probe.host_bandwidth": {"h2d_gb_per_s": 45.0, "d2h_gb_per_s": 52.0, "bytes": 1 << 28},
    "probe.p2p_matrix": {"gpus": 2, "links": {"kinds": {"0-1": "xgmi", "1-0": "xgmi"}},
                         "pairs": [{"src": s, "dst": 1 - s, "gbps": gbps, "latency_us": 5.0, "ok": True,
                                    "peer_access": True} for s, gbps in ((0, 40.0), (1, 48.0))]},
}


def test_each_floor_judged_verdict_holds_what_its_judge_reads():
    """A replay judges a recorded verdict again from its data alone: judged again without a site floor, each gives
    the verdict it was recorded with."""
    assert set(MEASURED) == set(FLOOR_JUDGED)
    for probe_id, (judge, _, inputs) in FLOOR_JUDGED.items():
        first = judge(MEASURED[probe_id], mi300x())
        again = judge(inputs(first.data), mi300x())
        assert (again.status, again.summary, again.evidence) == (first.status, first.summary, first.evidence), probe_id
