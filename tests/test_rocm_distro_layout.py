"""ROCm as Debian packages it (everything in /usr, no driver): the project's own recorded outputs
(tests/fixtures/debian-sid-rocm, see its README) through the parsers, the ROCm-location rule and the checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from machines import amd_machine

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.parsers._text import clean_lines, strip_ansi
from rocmcheck.facts.parsers.hipconfig import parse_hipconfig
from rocmcheck.facts.parsers.rocminfo import parse_rocminfo
from rocmcheck.facts.parsers.smi import parse_rocm_smi, smi_driver_error
from rocmcheck.facts.rocm_location import find_rocm, locate_rocm, observe_layout, rocm_installs
from rocmcheck.result import Status
from rocmcheck.runner import CommandResult

FIXTURES = Path(__file__).parent / "fixtures" / "debian-sid-rocm"


def out(name: str) -> str:
    return (FIXTURES / f"{name}.stdout.txt").read_bytes().decode("utf-8")


def err(name: str) -> str:
    return (FIXTURES / f"{name}.stderr.txt").read_bytes().decode("utf-8")


def command(name: str) -> CommandResult:
    recorded = {c["name"]: c for c in json.loads((FIXTURES / "commands.json").read_text())}[name]
    return CommandResult(argv=recorded["argv"], returncode=recorded["rc"], stdout=out(name), stderr=err(name))


def layout() -> dict:
    return json.loads((FIXTURES / "rocm-layout.json").read_text())


# ---- parsers on the recorded outputs ----------------------------------------------------------------

def test_rocminfo_not_loaded_in_red_is_the_driver_state_without_colour_codes():
    text = out("rocminfo")
    assert "\x1b[31m" in text  # the recording really is coloured
    report = parse_rocminfo(text)
    assert report.kfd_module_loaded is False and report.error_kind == "driver_not_loaded"
    assert report.error == "ROCk module is NOT loaded, possibly no GPU devices"
    assert not report.agents


def test_strip_ansi_is_the_one_helper():
    assert strip_ansi(out("rocminfo").strip()) == "ROCk module is NOT loaded, possibly no GPU devices"
    assert clean_lines(out("rocminfo")) == ["ROCk module is NOT loaded, possibly no GPU devices"]


def test_rocm_smi_and_amd_smi_say_the_driver_is_missing_on_stderr():
    for name in ("rocm-smi", "rocm-smi-json", "rocm-smi-showdriverversion"):
        assert out(name) == "" and command(name).returncode == 0  # rocm-smi exits 0 all the same
        assert smi_driver_error(err(name)) == "Driver not initialized (amdgpu not found in modules)"
    for name in ("amd-smi-version", "amd-smi-static-json", "amd-smi-list"):
        assert command(name).returncode == 255
        assert smi_driver_error(err(name)) == ("Drivers not loaded (amdgpu, amd_hsmp, ionic, bnxt_en drivers not "
                                               "found in modules)")
    report = parse_rocm_smi(out("rocm-smi") + err("rocm-smi"))
    assert report.gpus == [] and report.error.startswith("ERROR:root:Driver not initialized")
    assert smi_driver_error(out("hipconfig-full")) is None


def test_hipconfig_distro_paths_and_version():
    full = parse_hipconfig(out("hipconfig-full"))
    assert (full.hip_version, full.hip_version_short) == ("6.4.43484-9999", "6.4")
    assert (full.hip_path, full.rocm_path, full.platform, full.runtime) == ("/usr", "/usr", "amd", "rocclr")
    assert full.clang_version == "Debian clang version 21.1.8 (14)"
    assert parse_hipconfig(out("hipconfig-version")).hip_version == "6.4.43484-9999"  # no trailing newline
    assert out("hipconfig-rocmpath") == "/usr"


# ---- the ROCm-location rule --------------------------------------------------------------------------

def test_the_rule_finds_rocm_in_usr_with_hips_version():
    found = locate_rocm(layout(), {}, "/usr", "6.4.43484-9999")
    assert (found.root, found.layout, found.found_by, found.version) == ("/usr", "distro", "hipconfig", "6.4")
    assert found.hip_version == "6.4.43484" and "hip_version.h" in found.version_source
    # without hipconfig (not installed, or an old bundle): still found, from the files in /usr
    found = locate_rocm(layout(), {}, None, None)
    assert (found.root, found.found_by, found.version) == ("/usr", "ROCm in /usr (distribution packages)", "6.4")
    assert [i.version for i in rocm_installs(layout())] == ["6.4"]


def test_the_version_falls_back_source_by_source():
    base = layout()["distro"]["/usr"]
    no_header = {**base, "hip_version_h": None}
    found = locate_rocm({"distro": {"/usr": no_header}}, {})
    assert found.version == "6.4" and "share/hip/version" in found.version_source
    runtime_only = {**no_header, "hip_version_file": None}
    found = locate_rocm({"distro": {"/usr": runtime_only}}, {}, "/usr", None)
    assert found.version == "6.4" and "libamdhip64.so.6.4.43484" in found.version_source
    found = locate_rocm({"distro": {"/usr": {**runtime_only, "hip_runtime": ["libamdhip64.so"]}}}, {}, "/usr",
                        "6.4.43484-9999")
    assert found.version == "6.4" and found.version_source == "HIP 6.4.43484-9999 (hipconfig)"
    rocm_core = "#define ROCM_VERSION_MAJOR 6\n#define ROCM_VERSION_MINOR 4\n#define ROCM_VERSION_PATCH 3\n"
    found = locate_rocm({"distro": {"/usr": {**base, "rocm_version_h": rocm_core}}}, {})
    assert found.version == "6.4.3" and "rocm_version.h" in found.version_source  # rocm-core beats HIP
    assert locate_rocm({"distro": {"/usr": {**runtime_only, "hip_runtime": [], "has_rocminfo": True}}}, {}) is None


def test_opt_rocm_still_wins_over_usr_and_rocm_path_over_both(tmp_path):
    legacy = {"realpath": "/opt/rocm-6.2.3", "info_version": "6.2.3-119\n", "therock_cores": {}}
    both = {**layout(), "roots": {"/opt/rocm": legacy}}
    assert locate_rocm(both, {}).root == "/opt/rocm"
    installs = rocm_installs(both)
    assert sorted(i.version for i in installs) == ["6.2.3", "6.4"]  # doctor warns about two releases
    custom = {**both, "roots": {**both["roots"], "/custom": {"therock_cores": {}}}}
    assert locate_rocm(custom, {"ROCM_PATH": "/custom"}).found_by == "ROCM_PATH"
    # hipconfig's HIP is not lent to a root hipconfig did not name
    assert locate_rocm(custom, {"ROCM_PATH": "/custom"}, "/usr", "6.4.43484").version is None


def test_a_fake_distro_tree_is_observed_like_the_real_one(tmp_path):
    (tmp_path / "usr/include/hip").mkdir(parents=True)
    (tmp_path / "usr/include/hip/hip_version.h").write_text(layout()["distro"]["/usr"]["hip_version_h"])
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (tmp_path / "usr/lib/x86_64-linux-gnu/libamdhip64.so.6.4.43484").write_text("")
    seen = observe_layout({}, tmp_path)
    assert seen["roots"] == {"/opt/rocm": None}
    assert seen["distro"]["/usr"]["hip_runtime"] == ["libamdhip64.so.6.4.43484"]
    assert seen["distro"]["/usr"]["realpath"] == "/usr"

    def no_hipconfig(argv, **kw):
        return CommandResult(argv=argv, returncode=None, error="not found")

    found = find_rocm({"PATH": "/nonexistent"}, tmp_path, no_hipconfig)
    assert (found.root, found.layout, found.version) == ("/usr", "distro", "6.4")


# ---- the checks on a machine like the recorded one ----------------------------------------------------

def debian_sid_facts():
    facts = amd_machine(rocm_layout=layout())
    facts.present["/sys/module/amdgpu"] = False
    facts.devices = {"/dev/kfd": {"exists": False}, "/dev/dri": {"exists": False}}
    facts.commands = {"rocminfo": command("rocminfo"), "hipconfig": command("hipconfig-full"),
                      "rocm-smi": command("rocm-smi"), "rocm-smi-json": command("rocm-smi-json"),
                      "amd-smi-version": command("amd-smi-version"), "amd-smi-static": command("amd-smi-static-json")}
    facts.probes = {"amdsmi": {"installed": True, "driver_not_loaded": True,
                               "error": "AmdSmiLibraryException: AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded "
                                        "(code 34)"}}
    return facts


def verdicts(facts, only):
    return {r.id: r for r in run_checks(select_checks(only=only), CheckContext(facts))}


def test_doctor_finds_distro_rocm_and_names_the_missing_driver():
    v = verdicts(debian_sid_facts(), ["rocm", "driver", "gpu.rocminfo"])
    assert v["rocm.install"].status == Status.PASS
    assert v["rocm.install"].summary == "ROCm 6.4 (/usr, distro layout)"
    assert any("driver not loaded (rocminfo: ROCk module is NOT loaded" in e for e in v["rocm.install"].evidence)
    assert v["driver.amdgpu"].status == Status.FAIL and "not loaded" in v["driver.amdgpu"].summary
    evidence = "\n".join(v["driver.amdgpu"].evidence)
    for said in ("rocminfo: ROCk module is NOT loaded",
                 "rocm-smi: Driver not initialized (amdgpu not found in modules)",
                 "amd-smi: Drivers not loaded", "amdsmi (Python): AmdSmiLibraryException"):
        assert said in evidence
    assert v["gpu.rocminfo"].evidence == ["ROCk module is NOT loaded, possibly no GPU devices"]  # no colour codes
    for result in v.values():
        assert "\x1b" not in json.dumps(result.to_dict())


def test_a_bundle_of_that_machine_gives_the_same_verdicts(tmp_path):
    from rocmcheck.facts.collect import Facts

    facts = debian_sid_facts()
    again = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    first, second = verdicts(facts, ["rocm", "driver", "gpu"]), verdicts(again, ["rocm", "driver", "gpu"])
    assert [(r.id, r.status, r.summary, r.evidence) for r in first.values()] == \
           [(r.id, r.status, r.summary, r.evidence) for r in second.values()]


@pytest.mark.parametrize("key", ["distro", "versioned"])
def test_an_older_bundle_without_the_new_keys_still_reads(key):
    old = {k: v for k, v in layout().items() if k != key}
    assert locate_rocm(old, {}, "/usr", "6.4.43484") is None if key == "distro" else locate_rocm(old, {}).root == "/usr"
