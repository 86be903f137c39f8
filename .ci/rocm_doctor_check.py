"""doctor's verdicts inside the Debian ROCm root (see .ci/rocm.sh), judged against what is true there.

True there: ROCm is installed in /usr (the distribution layout) with HIP's version; the amdgpu driver is not
loaded (no GPU); torch is not installed. So rocm.install passes with that version, driver.amdgpu fails
naming the tools' own "not loaded" lines, and every other failing check must be one whose reason is true
there (no driver, no /dev/kfd, no GPU, no torch). The replay of the saved bundle gives the same verdicts.

usage: rocm_doctor_check.py DOCTOR_JSON REPLAY_JSON BUNDLE_JSON DOCTOR_RC REPLAY_RC
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

# Failing checks whose reason is true in this root, and the words their summary must carry.
TRUE_FAILURES = {
    "driver.amdgpu": "amdgpu kernel driver is not loaded",
    "devices.kfd": "/dev/kfd is missing",
    "devices.render": "no /dev/dri/renderD",
    "gpu.rocminfo": "ROCk module is NOT loaded",
    "gpu.present": "no AMD GPU visible",
    "torch.installed": "PyTorch is not installed",
}


def main(doctor_path: str, replay_path: str, bundle_path: str, doctor_rc: str, replay_rc: str) -> int:
    problems: list[str] = []
    doctor = json.load(open(doctor_path))
    replay = json.load(open(replay_path))
    results = {r["id"]: r for r in doctor["results"]}
    no_driver = os.environ.get("ROCMCHECK_CI_NO_DRIVER", "1") == "1"

    # HIP's version as the root's own hipconfig prints it: "6.4.43484-9999" -> ROCm "6.4".
    hip = subprocess.run(["hipconfig", "--version"], capture_output=True, text=True).stdout.strip()
    release = ".".join(hip.split(".")[:2])
    install = results["rocm.install"]
    print(f"rocm.install: {install['status']}: {install['summary']}")
    if install["status"] != "pass" or f"ROCm {release}" not in install["summary"] or "/usr" not in install["summary"] \
            or "distro" not in install["summary"]:
        problems.append(f"rocm.install should pass with ROCm {release} in /usr (distro layout): {install}")
    if results["rocm.hip"]["status"] != "pass":
        problems.append(f"rocm.hip: {results['rocm.hip']}")

    if no_driver:
        driver = results["driver.amdgpu"]
        evidence = "\n".join(driver["evidence"])
        print(f"driver.amdgpu: {driver['status']}: {driver['summary']}")
        for line in evidence.splitlines():
            print(f"    {line}")
        if driver["status"] != "fail":
            problems.append(f"driver.amdgpu should fail (no amdgpu here): {driver}")
        for said in ("rocminfo: ROCk module is NOT loaded",
                     "rocm-smi: Driver not initialized (amdgpu not found in modules)",
                     "amd-smi: Drivers not loaded"):
            if said not in evidence:
                problems.append(f"driver.amdgpu evidence lacks {said!r}")
        bundle = json.load(open(bundle_path))
        binding = bundle["facts"]["probes"].get("amdsmi") or {}
        print(f"amdsmi binding fact: {binding}")
        if binding.get("installed") and not binding.get("driver_not_loaded"):
            problems.append(f"the amdsmi binding's failure is not recorded as driver_not_loaded: {binding}")
        if binding.get("driver_not_loaded") and "amdsmi (Python)" not in evidence:
            problems.append("driver.amdgpu evidence lacks the amdsmi binding's error")
        for rid, r in results.items():
            if r["status"] == "crash":
                problems.append(f"{rid} crashed: {r['summary']}")
            elif r["status"] == "fail" and rid not in TRUE_FAILURES:
                problems.append(f"{rid} fails for a reason that is not true here: {r['summary']}")
            elif r["status"] == "fail" and TRUE_FAILURES[rid] not in r["summary"]:
                problems.append(f"{rid} fails, but not for the reason true here ({TRUE_FAILURES[rid]!r}): "
                                f"{r['summary']}")
        if doctor_rc != "1":
            problems.append(f"doctor exited {doctor_rc}, expected 1 (checks fail: no driver, no GPU)")

    text = json.dumps(doctor)
    if "\\u001b" in text or re.search(r"\[\d+(;\d+)*m", text):
        problems.append("a colour code reached doctor's report")

    def verdicts(report: dict) -> list[tuple[str, str, str, list[str]]]:
        return [(r["id"], r["status"], r["summary"], r["evidence"]) for r in report["results"]]

    if verdicts(replay) != verdicts(doctor):
        changed = [a for a, b in zip(verdicts(doctor), verdicts(replay)) if a != b]
        problems.append(f"the bundle replay gave other verdicts: {changed[:3]}")
    if replay_rc != doctor_rc:
        problems.append(f"replay exited {replay_rc}, doctor {doctor_rc}")
    print(f"verdicts: {doctor['counts']}; replay identical: {verdicts(replay) == verdicts(doctor)}")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
