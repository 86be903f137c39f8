"""Kernel-log parsing and the health.kernel_log check, on real published log excerpts (tests/fixtures/kernel-log)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import env_with_path, make_tool
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import amd_machine, verdicts

from rocmcheck.facts.health import collect_kernel_log
from rocmcheck.facts.parsers.kernel_log import parse_kernel_log, split_line
from rocmcheck.result import Status
from rocmcheck.runner import CommandResult

LOGS = Path(__file__).parent / "fixtures" / "kernel-log"
DMESG_RESTRICTED = "dmesg: read kernel buffer failed: Operation not permitted\n"  # kernel.dmesg_restrict=1


def log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def by_pattern(name: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in parse_kernel_log(log(name)):
        out.setdefault(f.pattern_id, []).append(f)
    return out


def test_every_fixture_is_listed_with_a_source():
    readme = (LOGS / "README.md").read_text()
    for path in LOGS.glob("*.txt"):
        assert f"`{path.name}`" in readme


def test_gfxhub_page_faults_count_and_name_the_process():
    (fault,) = by_pattern("amdgpu-gfxhub-page-fault-dmesg.txt")["amdgpu_page_fault"]
    assert fault.count == 2 and fault.device == "0000:c4:00.0" and fault.severity == "warn"
    assert fault.processes == ["python3 (pid 3370)", "python3 (pid 4616)"]
    assert fault.first.uptime_s == pytest.approx(67.058794)
    (journal,) = by_pattern("amdgpu-gfxhub-page-fault-journal-short.txt")["amdgpu_page_fault"]
    assert journal.device == "0000:0b:00.0" and journal.first.time_text == "Jan 09 18:55:45"


def test_runtime_memory_access_fault_names_the_node():
    (fault,) = by_pattern("rocm-runtime-memory-access-fault-stderr.txt")["hsa_memory_access_fault"]
    assert fault.device == "GPU node-1"


def test_ring_timeout_then_successful_reset_is_a_warning_not_a_failed_reset():
    found = by_pattern("amdgpu-ring-timeout-reset-dmesg.txt")
    assert found["amdgpu_ring_timeout"][0].processes == ["cosmic-comp (pid 2288)"]
    assert "amdgpu_reset" in found and "amdgpu_reset_failed" not in found  # "Ring ... reset failed" != GPU reset failed
    old = by_pattern("amdgpu-sdma-timeout-reset-syslog.txt")
    assert old["amdgpu_ring_timeout"][0].first.uptime_s == pytest.approx(2237.944235)
    assert old["amdgpu_reset"][0].device == "0000:0a:00.0"


def test_zone_qualified_times_become_epochs():
    (reset,) = by_pattern("amdgpu-reset-journal-short-iso-precise.txt")["amdgpu_reset"]
    assert reset.first.epoch == pytest.approx(1723943971.352108)
    (oom,) = by_pattern("oom-killer-dmesg-iso.txt")["oom_killer"]
    assert oom.first.epoch == pytest.approx(1714395341.6797) and oom.processes == ["perl (pid 1440763)"]


def test_ras_uncorrectable_fails_and_aca_records_each_gpu():
    found = by_pattern("mi300x-ras-uncorrectable-aca-dmesg.txt")
    assert [f.device for f in found["amdgpu_ras_uncorrectable"]] == ["0000:1c:00.0"]
    assert found["amdgpu_ras_uncorrectable"][0].severity == "fail"
    assert sorted(f.device for f in found["amdgpu_aca"]) == ["0000:42:00.0", "0000:55:00.0"]
    mi50 = by_pattern("mi50-ras-uncorrectable-dmesg-ctime.txt")
    assert mi50["amdgpu_ras_uncorrectable"][0].first.time_text == "Sat Jan  7 14:25:56 2023"


def test_ras_correctable_is_only_noted():
    (ce,) = by_pattern("amdgpu-ras-correctable-node-scraper-test.txt")["amdgpu_ras_correctable"]
    assert ce.severity == "note" and ce.device == "0000:c1:00.0"


def test_init_failures_and_aer_severities():
    assert by_pattern("mi210-amdgpu-init-failed-dmesg.txt")["amdgpu_init_failed"][0].device == "0000:83:00.0"
    mixed = by_pattern("aer-corrected-and-amdgpu-init-failed-dmesg.txt")
    assert {f.severity for f in mixed["pcie_aer_corrected"]} == {"note"}
    assert any(f.device == "0000:03:00.0" for f in mixed["amdgpu_init_failed"])
    (fatal,) = by_pattern("aer-uncorrected-fatal-nvidia-dmesg-reltime.txt")["pcie_aer_fatal"]
    assert fatal.severity == "fail" and fatal.device == "0000:00:03.0" and fatal.first.time_text is None
    (nonfatal,) = by_pattern("aer-uncorrectable-nonfatal-journal.txt")["pcie_aer_nonfatal"]
    assert nonfatal.severity == "warn"


def test_nvidia_xids_take_their_meaning_from_the_catalog():
    xids = {(f.xid, f.device): f for f in parse_kernel_log(log("nvidia-xid-13-109-dmesg-ctime.txt"))}
    assert xids[(13, "0000:cb:00")].count == 3 and xids[(13, "0000:cb:00")].severity == "warn"
    assert xids[(109, "0000:cb:00")].processes == ["pt_main_thread"]
    assert {f.severity for f in parse_kernel_log(log("nvidia-xid-45-after-nvlink-xid-journal.txt"))} == {"note"}
    (x79,) = parse_kernel_log(log("nvidia-xid-79-fallen-off-bus.txt"))
    assert x79.xid == 79 and x79.severity == "fail" and "fallen off the bus" in x79.meaning
    (bus,) = parse_kernel_log(log("nvidia-fallen-off-bus-no-xid-dmesg.txt"))
    assert bus.pattern_id == "nvidia_fallen_off_bus" and bus.severity == "fail"


def test_texts_without_a_real_published_excerpt_still_match_their_source_text():
    # amdgpu_ras.c and AMD node-scraper print these; no user-published log with them was found.
    found = parse_kernel_log("amdgpu 0000:c1:00.0: amdgpu: socket: 0, die: 0 2 deferred hardware errors detected in "
                             "total in umc block\nGPU detected ECC Fatal Error.")
    assert [(f.pattern_id, f.severity) for f in found] == [("amdgpu_ras_deferred", "fail"),
                                                           ("amdgpu_ecc_fatal", "fail")]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_the_parser_never_raises(text):
    assert isinstance(parse_kernel_log(text), list)
    split_line(text)


# ---------------------------------------------------------------------------------------------- the check

def with_log(name: str | None, *, uptime: float = 20_000.0, collected_at: float | None = None, **cmds) -> dict:
    commands = dict(cmds)
    if name is not None:
        commands["kernel-log-dmesg"] = CommandResult(argv=["dmesg"], returncode=0, stdout=log(name), timeout_s=20)
    return {"commands": commands, "node_health": {"uptime_s": uptime},
            "collected_at": collected_at if collected_at is not None else 1723943971.352108 + 600}


def test_check_fails_on_uncorrectable_ras_and_names_gpu_and_next_step():
    facts = amd_machine(**with_log("mi300x-ras-uncorrectable-aca-dmesg.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.FAIL and "0000:1c:00.0" in r.summary and "RMA" in r.fix.line()
    assert any("uncorrectable" in e and "since boot" in e for e in r.evidence)  # 13850 s after a 20000 s old boot


def test_check_says_how_recent_a_zone_stamped_reset_is():
    facts = amd_machine(**with_log("amdgpu-reset-journal-short-iso-precise.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.WARN and "in the last hour (10 min ago)" in r.evidence[0]


def test_check_passes_on_notes_only_and_on_a_clean_log():
    facts = amd_machine(**with_log("amdgpu-ras-correctable-node-scraper-test.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.PASS and "correctable" in r.evidence[0]
    clean = CommandResult(argv=["journalctl"], returncode=0,
                          stdout="2026-11-30T13:24:16+00:00 h kernel: Linux version\n")
    r = verdicts(amd_machine(commands={"kernel-log-journalctl": clean}), "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.PASS and "journalctl" in r.summary


def test_unreadable_kernel_log_is_said_plainly():
    # journalctl without access to the system journal, and dmesg under kernel.dmesg_restrict=1 (their real texts).
    journal = CommandResult(argv=["journalctl"], returncode=0, stdout="-- No entries --\n",
                            stderr="No journal files were found.\n")
    dmesg = CommandResult(argv=["dmesg"], returncode=1, stderr=DMESG_RESTRICTED)
    facts = amd_machine(commands={"kernel-log-journalctl": journal, "kernel-log-dmesg": dmesg})
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.SKIP and "not readable" in r.summary and "sudo" in r.summary
    assert any("Operation not permitted" in e for e in r.evidence)


def test_live_doctor_reads_dmesg_when_journalctl_has_nothing_and_replays_it(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "journalctl", stdout="-- No entries --\n")
    make_tool(bin_dir, "dmesg", stdout_file=LOGS / "nvidia-xid-79-fallen-off-bus.txt")
    env = env_with_path(bin_dir)
    bundle = tmp_path / "b.json"
    cmd = [sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes", "--no-train", "--only", "health"]
    live = json.loads(subprocess.run(cmd + ["--save-bundle", str(bundle)], capture_output=True, text=True, env=env,
                                     timeout=180).stdout)
    replay = json.loads(subprocess.run(cmd[:4] + ["--bundle", str(bundle), "--json", "--only", "health"],
                                       capture_output=True, text=True, timeout=180).stdout)
    for doc in (live, replay):
        r = {x["id"]: x for x in doc["results"]}["health.kernel_log"]
        assert r["status"] == "fail" and "Xid 79" in r["summary"] and r["data"]["source"] == "dmesg"


def test_hung_journalctl_and_dmesg_cost_one_timeout_and_are_called_hung(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "journalctl", hang=True)
    make_tool(bin_dir, "dmesg", hang=True)
    start = time.monotonic()
    found = collect_kernel_log(2.0, env_with_path(bin_dir))
    elapsed = time.monotonic() - start
    assert elapsed < 3.5  # side by side: one 2 s limit, not two
    assert set(found) == {"kernel-log-journalctl", "kernel-log-dmesg"}
    assert all(r.timed_out and r.argv[0].startswith(str(bin_dir)) for r in found.values())
    r = verdicts(amd_machine(commands=found), "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.SKIP and "journalctl and dmesg hung" in r.summary
    assert "not readable" not in r.summary and "sudo" not in r.summary


def test_a_hung_journalctl_leaves_dmesg_its_time(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "journalctl", hang=True)
    make_tool(bin_dir, "dmesg", stdout_file=LOGS / "nvidia-xid-79-fallen-off-bus.txt")
    start = time.monotonic()
    found = collect_kernel_log(2.0, env_with_path(bin_dir))
    assert time.monotonic() - start < 3.5 and found["kernel-log-journalctl"].timed_out
    r = verdicts(amd_machine(commands=found), "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.FAIL and "Xid 79" in r.summary and r.data["source"] == "dmesg"


def test_one_hung_and_one_refused_reader_names_both():
    hung = CommandResult(argv=["/usr/bin/journalctl"], timed_out=True, timeout_s=20)
    dmesg = CommandResult(argv=["dmesg"], returncode=1, stderr=DMESG_RESTRICTED)
    r = verdicts(amd_machine(commands={"kernel-log-journalctl": hung, "kernel-log-dmesg": dmesg}),
                 "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.SKIP and "(journalctl hung)" in r.summary and "sudo" in r.summary
    assert any("did not finish within 20 s" in e for e in r.evidence)


def test_a_usable_journal_drops_the_dmesg_copy(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "journalctl", stdout="2026-11-30T13:24:16+00:00 h kernel: Linux version\n")
    make_tool(bin_dir, "dmesg", stdout="[    0.000000] Linux version\n")
    assert set(collect_kernel_log(5.0, env_with_path(bin_dir))) == {"kernel-log-journalctl"}


# ------------------------------------------------------------------------- what people paste (tests/fixtures/pastes)

PASTES = "pastes/kernel_log/"


def pasted(relpath: str) -> dict:
    """The facts of a machine whose kernel log is the pasted text (as `dmesg` would have printed it)."""
    from conftest import project_fixture

    out = with_log(None)
    out["commands"]["kernel-log-dmesg"] = CommandResult(argv=["dmesg"], returncode=0, stdout=project_fixture(relpath),
                                                        timeout_s=20)
    return out


def test_an_mi300_fault_block_pasted_without_its_header_is_a_page_fault_per_gpu():
    # sglang#10195: two MI300 GPUs' fault blocks interleaved, the "[gfxhub] page fault" line of neither pasted.
    facts = amd_machine(**pasted(PASTES + "mi300-fault-block_NO-gfxhub-header_dmesg-T_two-GPUs-interleaved_"
                                          "sglang-10195_excerpt.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.WARN and "page fault" in r.summary
    assert "0000:a6:00.0" in r.summary and "0000:06:00.0" in r.summary
    found = r.data["findings"]
    assert sorted((f["device"], f["count"]) for f in found) == [("0000:06:00.0", 1), ("0000:a6:00.0", 1)]


def test_a_fault_block_after_its_header_adds_to_the_header_finding():
    (fault,) = parse_kernel_log(log("amdgpu-gfxhub-page-fault-dmesg.txt"))  # header, STATUS, client ID ... lines
    assert fault.pattern_id == "amdgpu_page_fault" and fault.count == 2
    # Only the detail lines of a block (no header, no STATUS line) still count as one fault.
    lines = "\n".join(l for l in log("amdgpu-gfxhub-page-fault-dmesg.txt").splitlines()
                      if "Faulty UTCL2" in l or "PERMISSION_FAULTS" in l)
    (alone,) = parse_kernel_log(lines)
    assert alone.pattern_id == "amdgpu_fault_detail" and alone.severity == "warn"


def test_a_kernel_oops_in_the_kfd_fails_the_kernel_log():
    # ROCm/ROCm#1536: NULL pointer dereference in kfd_iommu_unbind_process [amdgpu], lines hard-wrapped.
    facts = amd_machine(**pasted(PASTES + "oops-null-deref-kfd_iommu_unbind_init_user_pages_MI50_el8_ROCm-1536.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.FAIL and "kernel oops in the amdgpu driver" in r.summary
    assert any("kfd_iommu_unbind_process" in e for e in r.evidence)
    assert "dkms status" in r.fix.line()


def test_mes_not_responding_is_its_own_finding_before_the_reset():
    # ROCm/ROCm#5724 (corpus 24): MES firmware 0x83 stops answering REMOVE_QUEUE, then the GPU is reset.
    facts = amd_machine(**pasted("pastes/corpus/24-ROCm-legacy-rocm-build-5724.paste.txt"))
    r = verdicts(facts, "health.kernel_log")["health.kernel_log"]
    assert r.status == Status.WARN and "MES firmware stopped responding" in r.summary
    mes = next(f for f in r.data["findings"] if f["pattern"] == "amdgpu_mes_no_response")
    assert mes["count"] == 2 and mes["device"] == "0000:c5:00.0"
    assert "5724" in r.fix.line() and "20251125" in r.fix.line()


def test_a_process_crashing_in_the_hip_runtime_is_read_from_the_kernels_line():
    from conftest import project_fixture

    from rocmcheck.triage.readers.paste import split_paste
    from rocmcheck.triage.readers.paste_read import read_block

    d = "pastes/kernel_log/"
    for name, processes, library in (
            ("segfault-in-libamdhip64.so_python3_syslog-kernel-prefix_Failed-to-pin-bo_sdnext-913_excerpt.txt",
             ["python3 (pid 40923)"], "libamdhip64.so["),
            ("general-protection-fault-in-libamdhip64.so.7.2.70201_traps_StrixHalo_Debian13_ROCm-6143_excerpt.txt",
             ["python (pid 3097)", "python (pid 3267)", "python (pid 3411)"], "libamdhip64.so.7.2.70201[")):
        [block] = [b for b in split_paste(project_fixture(d + name)) if b.kind == "kernel_log"]
        [finding] = read_block(block)
        assert (finding.pattern_id, finding.processes, finding.device) == ("rocm_runtime_crash", processes, None)
        assert library in finding.example and processes[0].split()[0] + "[" in finding.first.text
