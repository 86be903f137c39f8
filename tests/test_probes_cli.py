"""`rocmcheck probe`: listing (text and the JSON envelope), bad names (exit 2, valid names listed), JSON output,
and the exit rule: nothing judged (no torch, no GPU) is NOT JUDGED and exit 3, never a pass."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from rocmcheck.cli import cli
from rocmcheck.probes import PROBE_IDS, PROBE_NAMES
from rocmcheck.report.json_report import schema
from rocmcheck.result import EXIT_NOT_JUDGED

REPO = Path(__file__).resolve().parents[1]


def run(*args):
    return CliRunner().invoke(cli, ["probe", *args])


def run_cli(*args, env=None) -> subprocess.CompletedProcess:
    """The real CLI in a real process (rocmcheck.cli.main: bad input as one line and exit 2)."""
    return subprocess.run([sys.executable, "-m", "rocmcheck", "probe", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=REPO)


def validate(doc: dict) -> None:
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)


def _torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_list_names_every_probe():
    result = run("--list")
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines()] == list(PROBE_NAMES)


def test_list_json_is_the_envelope():
    result = run("--list", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    validate(doc)
    assert doc["command"] == "probe list" and doc["results"] == []
    assert [p["id"] for p in doc["probes"]] == list(PROBE_IDS)
    deepspeed = next(p for p in doc["probes"] if p["name"] == "deepspeed_ops")
    assert deepspeed["build_timeout_s"] > deepspeed["timeout_s"]
    assert next(p for p in doc["probes"] if p["name"] == "collective")["own_child"] is True


@pytest.mark.parametrize("args", [("gemm",), ()])
def test_unknown_or_missing_name_is_a_usage_error_listing_valid_names(args):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "gemm_tflops" in proc.stderr and "all" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_bad_timeout_is_a_usage_error():
    assert run("memory", "--timeout", "0").exit_code == 2


def test_json_output_of_one_probe_without_a_gpu_is_not_judged():
    if _torch_has_gpu():
        pytest.skip("this machine has a GPU")
    result = run("memory", "--json")
    assert result.exit_code == EXIT_NOT_JUDGED  # a skip is not a failure, and not a pass either
    payload = json.loads(result.stdout)
    validate(payload)
    assert payload["schema_version"] == 3 and payload["command"] == "probe" and payload["probe"] == "memory"
    assert payload["verdict"] == "not_judged"
    [only] = payload["results"]
    assert only["id"] == "probe.memory" and only["status"] == "skip" and "no GPU" in only["summary"]


def test_without_torch_nothing_is_judged(tmp_path):
    """The real CLI in a real process, with a torch that cannot be imported: the probe child says so, every probe
    skips, and the command ends NOT JUDGED with exit 3."""
    stub = tmp_path / "torch"
    stub.mkdir()
    (stub / "__init__.py").write_text('raise ImportError("No module named torch (hidden by the test)")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = run_cli("gemm_numerics", env=env)
    assert proc.returncode == EXIT_NOT_JUDGED, proc.stderr[-2000:]
    assert "NOT JUDGED" in proc.stdout and "Verdict: PASS" not in proc.stdout
    assert "torch cannot be imported" in proc.stdout


# `rocmcheck probe` in a real process whose probe child is the stand-in of tests/probe_fakes, reporting an MI300X and a
# planted bf16 GEMM rate: 580 TFLOP/s passes AMD's RVS target (552, at 0.9 x) and is below a site's floor of 600.
STAND_IN = ("import functools, sys; import rocmcheck.probes.stage as stage; "
            "stage.run_stage = functools.partial(stage.run_stage, main_child='tests.probe_fakes.fake_probe_child'); "
            "from rocmcheck.cli import main; sys.argv[0] = 'rocmcheck'; main()")
SITE_FLOOR = {"rocmcheck_site_rules": 1, "source": "cluster team, qualified on gpu-017", "read": "2026-12-07",
              "products": {"MI300X": {"gemm_bf16_tflops": {"value": 600, "what": "0.9 x gpu-017"}}}}


def test_the_probe_judges_against_a_sites_floor(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "floors.json").write_text(json.dumps(SITE_FLOOR))
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "ROCMCHECK_FAKE": "measured:gemm_tflops", "ROCMCHECK_FAKE_HIP": "6.4.1",
           "ROCMCHECK_FAKE_DATA": json.dumps({"tflops": 580.0, "shape": [8192, 8192, 8192]})}

    def gemm(*args, **more):
        proc = subprocess.run([sys.executable, "-c", STAND_IN, "probe", "gemm_tflops", "--json", *args],
                              capture_output=True, text=True, env={**env, **more}, timeout=120, cwd=tmp_path)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        (result,) = json.loads(proc.stdout)["results"]
        return result

    amds = gemm()
    assert amds["status"] == "pass" and "AMD's RVS target 552" in amds["summary"]
    for sited in (gemm("--knowledge", str(site)), gemm(ROCMCHECK_PROBE_KNOWLEDGE=str(site))):
        assert sited["status"] == "warn" and "the site's floor 600 for MI300X" in sited["summary"], sited
        assert any("floors.json" in line for line in sited["evidence"])
    bad = subprocess.run([sys.executable, "-m", "rocmcheck", "probe", "gemm_tflops", "--knowledge",
                          str(tmp_path / "none.json")], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "none.json" in bad.stderr
