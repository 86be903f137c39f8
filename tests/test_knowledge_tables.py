"""The shipped knowledge tables equal what scripts/make_knowledge.py makes from the source snapshots it reads
(scripts/knowledge_sources/, AMD's own files), and every row names its source and the date it was read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocmcheck.knowledge import load

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_tables_equal_the_generator_output():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_knowledge.py"), "--check"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_every_row_has_a_source_and_a_date():
    releases = load("rocm_releases.json")
    rows = list(releases["releases"].values()) + releases["kernels"] + releases["amdgpu_modules"]
    floors = load("validation_floors.json")["products"]
    rows += [floor for product in floors.values() for floor in product.values()]
    rows += list(load("rccl_settings.json")["settings"].values())
    assert rows
    for row in rows:
        assert row["source"].startswith("https://"), row
        assert row["read"] == "2026-12-07", row
    issues = load("known_issues.json")["issues"]
    assert issues
    for row in issues:
        assert row["sources"] and all(s.startswith("https://github.com/ROCm/") for s in row["sources"]), row
        assert row["quotes"] and row["read"] == "2026-12-07", row


def test_the_tables_hold_what_amd_publishes():
    """Values read off AMD's files by hand: the generator must agree with them."""
    releases = load("rocm_releases.json")["releases"]
    assert releases["6.4.3"]["os"]["ubuntu"] == ["24.04", "22.04"]
    assert releases["7.0.0"]["supported_drivers"][0] == "30.10"
    assert "gfx950" in releases["7.0.0"]["gpu_targets"] and "gfx950" not in releases["6.4.3"]["gpu_targets"]
    assert releases["6.0.0"]["pytorch"] == ["2.1", "2.0", "1.13"]
    floors = load("validation_floors.json")["products"]
    assert floors["MI300X"]["hbm_read_gbps"]["value"] == round(4980 * 0.97, 2)
    assert floors["MI300X"]["xgmi_pair_gbps"]["value"] == round(45 * 0.97, 2)
    assert floors["MI355X"]["gemm_bf16_tflops"]["value"] == 956.0
    rccl = load("rccl_settings.json")["settings"]
    assert rccl["RCCL_MSCCL_ENABLE"]["value"] == "0" and "corruption" in rccl["RCCL_MSCCL_ENABLE"]["why"]
    assert rccl["NCCL_MIN_NCHANNELS"]["value"] == "40"


def test_the_wheel_platforms_table_equals_its_pypi_snapshots():
    """rocmcheck/knowledge/wheel_platforms.json is what scripts/make_wheel_platforms.py makes from the PyPI snapshots
    kept in scripts/knowledge_sources/pypi/ (no network here), and holds what the owners publish."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_wheel_platforms.py"), "--check"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    packages = load("wheel_platforms.json")["packages"]
    for name, row in packages.items():
        assert row["source"] == f"https://pypi.org/pypi/{name}/json" and row["read"] == "2026-12-07", name
    # Read off PyPI's file lists by hand: triton and sglang ship Linux wheels only and no source; uvloop ships Linux
    # and macOS wheels and a source whose classifiers name POSIX and macOS, never Windows; torch ships all three.
    assert (packages["triton"]["wheels"], packages["triton"]["sdist"]) == (["linux"], False)
    assert packages["sglang"]["wheels"] == ["linux"]
    assert packages["uvloop"]["wheels"] == ["linux", "macos"] and "windows" not in packages["uvloop"]["classifiers"]
    assert packages["torch"]["wheels"] == ["linux", "macos", "windows"]
