"""Regenerate rocmcheck/knowledge/rocm_releases.json, validation_floors.json, rccl_settings.json and
known_issues.json from AMD's published files.

The inputs are the snapshots in scripts/knowledge_sources/ (their origins and commits: its README.md). Run from the
repository root:

    python scripts/make_knowledge.py           # write the tables
    python scripts/make_knowledge.py --check   # exit 1 when a shipped table differs from what the sources give

tests/test_knowledge_tables.py runs the same comparison in CI.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCES_DIR = ROOT / "scripts" / "knowledge_sources"
KNOWLEDGE_DIR = ROOT / "rocmcheck" / "knowledge"
READ_ON = "2026-12-07"

ROCM_ROCM = "https://github.com/ROCm/ROCm/blob/e396b4898f459db094bfd60b876f419f77eb9f09/docs/compatibility/"
LEGACY = "https://github.com/ROCm/legacy-rocm-build/blob/"
RVS = "https://github.com/ROCm/ROCmValidationSuite/blob/"
# Compatibility matrices, oldest first: a release already read from an earlier file keeps that file's row.
MATRICES = [
    ("rocm/historical-6.0_ROCm-ROCm_e396b489.csv", ROCM_ROCM + "compatibility-matrix-historical-6.0.csv"),
    ("rocm/matrix-7.0.0_legacy-rocm-build.rst",
     LEGACY + "develop/docs/compatibility/compatibility-matrix.rst (revision published with ROCm 7.0.0)"),
    ("rocm/matrix-7.2.4_legacy-rocm-build_fff7efbd.rst",
     LEGACY + "fff7efbd0c870e1bfba278faa91d517996b7a33a/docs/compatibility/compatibility-matrix.rst"),
]
# Kernel tables: the file, its URL, the release series the page was published for.
KERNEL_TABLES = [
    ("rocm/kernels-6.2_ROCm-ROCm_0a237dfd.rst",
     "https://github.com/ROCm/ROCm/blob/0a237dfd42c8927e7e46a8ef1ec5ca1d606117ca/docs/compatibility/"
     "compatibility-matrix.rst", ["6.2"]),
    ("rocm/kernels-6.3_ROCm-ROCm_e396b489.rst", ROCM_ROCM + "compatibility-matrix.rst", ["6.3"]),
    ("rocm/matrix-7.0.0_legacy-rocm-build.rst",
     LEGACY + "develop/docs/compatibility/compatibility-matrix.rst (revision published with ROCm 7.0.0)",
     ["7.0", "6.4"]),
]
AMDGPU_MODULES = "rocm/amdgpu-modules.csv"
VALIDATION_PAGE = ("rocm/prerequisite-system-validation_be7f0e50.rst",
                   LEGACY + "be7f0e50f90432a098ce2fa29d5724ce698aed63/docs/how-to/rocm-for-ai/system-setup/"
                   "prerequisite-system-validation.rst")
# Of the page's mpirun -x settings, the ones that are AMD's choice rather than the example site's names.
VALIDATION_RUN_SETTINGS = ("NCCL_MIN_NCHANNELS",)
RVS_LATEST = RVS + "21584e1485df2895d2b8c1407b491bf1e0a074a7/rvs/conf/"
RVS_CONFS = {  # product -> (snapshot, URL of the file read)
    "MI300X": ("rvs/MI300X-gst_single.conf", RVS_LATEST + "MI300X/gst_single.conf"),
    "MI325X": ("rvs/MI325X-gst_single.conf", RVS_LATEST + "MI325X/gst_single.conf"),
    "MI300A": ("rvs/MI300A-gst_single.conf",
               RVS + "38991769cd18af53d25950bfa268ff64579901f2/rvs/conf/MI300A/gst_single.conf"),
    "MI350X": ("rvs/MI350X-gst_single.conf", RVS_LATEST + "MI350X/gst_single.conf"),
    "MI355X": ("rvs/MI355X-gst_single.conf", RVS_LATEST + "MI355X/gst_single.conf"),
    "MI250X": ("rvs/MI250X-gst_single.conf",
               RVS + "41c29091f0388998026ac26bbbc53e6ece0eb7da/rvs/conf/MI250X/gst_single.conf"),
    "MI210": ("rvs/MI210-gst_single.conf", RVS_LATEST + "MI210/gst_single.conf"),
}
TRANSFERBENCH = ("transferbench/HealthCheck.hpp",
                 "https://github.com/ROCm/TransferBench/blob/168cdc167770c73ab2818798b19fa0f463359611/"
                 "src/client/Presets/HealthCheck.hpp")
# TransferBench's preset detects 8 x gfx942 with 304 compute units: MI300X and MI325X (both 304 CUs).
TRANSFERBENCH_PRODUCTS = {"Config_08_GFX0942_304": ["MI300X", "MI325X"]}

OS_NAMES = [("Oracle Linux", "ol"), ("Azure Linux", "azurelinux"), ("Rocky Linux", "rocky"), ("Ubuntu", "ubuntu"),
            ("RHEL", "rhel"), ("SLES", "sles"), ("CentOS", "centos"), ("Debian", "debian")]
KERNEL_OS_NAMES = [("Ubuntu", "ubuntu"), ("RHEL", "rhel"), ("SUSE", "sles"), ("Rocky", "rocky"),
                   ("Oracle", "ol"), ("Debian", "debian"), ("Azure", "azurelinux"), ("CentOS", "centos")]
# The 7.0.0 page prints SLES 15 SP7's kernel 6.4.0-150700.51 as "6.40-150700.51".
KERNEL_CORRECTIONS = {"6.40-150700.51": "6.4"}
_FOOTNOTE = re.compile(r"\[#[^\]]*\]_")


def _clean(cell: str) -> str:
    return " ".join(_FOOTNOTE.sub("", cell).replace("|br|", "").split())


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header (release columns) and the body rows of a compatibility matrix (.csv, or the csv-table in .rst)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        return [c.strip() for c in rows[0][1:]], rows[1:]
    header_m = re.search(r':header: "ROCm Version", (.*)', text)
    assert header_m, f"{path}: no ROCm Version header"
    header = [h.strip().strip('"') for h in header_m.group(1).split(",")]
    body_lines = []
    started = False
    for line in text[header_m.end():].splitlines():
        if line.strip().startswith(":stub-columns"):
            started = True
            continue
        if started and line.strip() and not line.startswith("      "):
            break
        if started and line.strip():
            body_lines.append(line.strip())
    rows = list(csv.reader(io.StringIO("\n".join(body_lines))))
    return header, rows


def _releases_of(column: str) -> list[str]:
    return [r.strip() for r in column.split("/") if r.strip()]


def _os_versions(cell: str) -> tuple[str, list[str]] | None:
    text = _clean(cell)
    for name, os_id in OS_NAMES:
        if text.startswith(name):
            rest = text[len(name):]
            versions = []
            for part in rest.split(","):
                part = part.strip()
                if os_id == "sles":
                    m = re.match(r"(?:(\d+) )?SP(\d+)", part)
                    if m:
                        versions.append(f"{m.group(1) or '15'}.{m.group(2)}")
                    continue
                m = re.match(r"(\d+(?:\.\d+)?)", part)
                if m:
                    versions.append(m.group(1))
            return os_id, versions
    return None


def _list(cell: str) -> list[str]:
    return [p.strip() for p in _clean(cell).split(",") if p.strip() and p.strip() != "N/A"]


def read_matrix(path: Path, url: str) -> dict[str, dict[str, Any]]:
    header, rows = _csv_rows(path)
    out: dict[str, dict[str, Any]] = {}
    columns = [_releases_of(h) for h in header]
    section = None
    for row in rows:
        if not row:
            continue
        stub, cells = row[0].strip(), row[1:]
        if stub:
            section = ("os" if "Operating systems" in stub else "gpu" if "LLVM target" in stub
                       else "pytorch" if "PyTorch" in stub
                       else "tested_userspace" if "Tested user space" in stub
                       else "drivers" if ("KMD versions" in stub or "AMD GPU Driver" in stub) else None)
        elif cells and cells[0].strip().startswith(".."):
            section = None
            continue
        if section is None:
            continue
        for releases, cell in zip(columns, cells):
            if not cell.strip():
                continue
            for release in releases:
                row_out = out.setdefault(release, {"os": {}, "gpu_targets": [], "source": url, "read": READ_ON})
                if section == "os":
                    parsed = _os_versions(cell)
                    if parsed:
                        row_out["os"].setdefault(parsed[0], []).extend(
                            v for v in parsed[1] if v not in row_out["os"].get(parsed[0], []))
                elif section == "gpu":
                    target = _clean(cell).split()[0]
                    if target not in row_out["gpu_targets"]:
                        row_out["gpu_targets"].append(target)
                elif section == "pytorch":
                    row_out["pytorch"] = _list(cell)
                elif section == "tested_userspace":
                    row_out["driver_tested_userspace"] = _list(cell)
                elif section == "drivers":
                    row_out["supported_drivers"] = _list(cell)
        if stub and section in ("pytorch", "tested_userspace", "drivers"):
            section = None
    for row_out in out.values():
        for os_id, versions in row_out["os"].items():
            if os_id == "ubuntu":  # the point release (24.04.2) is an installer image: os-release says 24.04
                row_out["os"][os_id] = sorted({".".join(v.split(".")[:2]) for v in versions}, reverse=True)
    return out


def read_kernels(path: Path) -> dict[str, list[str]]:
    text = path.read_text(encoding="utf-8")
    start = text.index(".. _OS-kernel-versions:")
    table = text[start:]
    table = table[table.index(":stub-columns"):]
    lines = [line.strip() for line in table.splitlines()[1:]]
    body = []
    for line in lines:
        if line.startswith(".."):
            break
        body.append(line)
    out: dict[str, list[str]] = {}
    os_id = None
    for row in csv.reader(io.StringIO("\n".join(body)), skipinitialspace=True):
        if len(row) < 3 or not row[1].strip():
            continue
        if row[0].strip():
            name = row[0].strip().lstrip("`")
            os_id = next((i for n, i in KERNEL_OS_NAMES if name.startswith(n) or f"({n}" in name), None)
        if os_id is None:
            continue
        version = row[1].strip()
        m = re.match(r"(\d+)(?: SP(\d+)|\.(\d+))?", version)
        if not m:
            continue
        if os_id == "sles":
            version = f"{m.group(1)}.{m.group(2)}"
        elif os_id == "ubuntu":
            version = f"{m.group(1)}.{m.group(3)}"
        kernels = out.setdefault(f"{os_id} {version}", [])
        for token in row[2].split(","):
            token = token.strip()
            series = KERNEL_CORRECTIONS.get(token)
            if series is None:
                km = re.match(r"(\d+)\.(\d+)", token)
                series = f"{km.group(1)}.{km.group(2)}" if km else None
            if series and series not in kernels:
                kernels.append(series)
    return out


def read_amdgpu_modules(path: Path) -> list[dict[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        module, driver, rocm, url = (p.strip() for p in line.split(",", 3))
        rows.append({"module_version": module, "driver_release": driver, "rocm_release": rocm, "source": url,
                     "read": READ_ON})
    return rows


def read_rvs_bf16(path: Path) -> list[dict[str, Any]]:
    """The bf16 GEMM actions of an RVS gst configuration: name, target (TFLOP/s), sizes, init."""
    actions = []
    for block in re.split(r"\n(?=- name:)", path.read_text(encoding="utf-8")):
        fields = dict(re.findall(r"^\s*-?\s*(\w+):\s*(\S+)", block, re.M))
        if fields.get("data_type") != "bf16_r" or "target_stress" not in fields:
            continue
        actions.append({"name": fields["name"], "target_tflops": int(fields["target_stress"]) / 1000,
                        "m": int(fields["matrix_size_a"]), "n": int(fields["matrix_size_b"]),
                        "k": int(fields["matrix_size_c"]), "init": fields.get("matrix_init")})
    return actions


def read_transferbench(path: Path) -> dict[str, dict[str, float]]:
    text = path.read_text(encoding="utf-8")
    sfactor = float(re.search(r"#define SFACTOR ([\d.]+)", text).group(1))
    configs = {}
    for name, body in re.findall(r"TestConfig (\w+) = \{(.*?)\};", text, re.S):
        fields = dict(re.findall(r"\.(\w+)\s*=\s*([^,{}\n]+|\{[^}]*\})", body))
        hbm = [float(x) for x in fields["hbmLimit"].strip("{} ").split(",")]
        configs[name] = {"sfactor": sfactor, "h2d": float(fields["unidirHostToDeviceCopyLimit"]),
                         "d2h": float(fields["unidirDeviceToHostCopyLimit"]),
                         "bidir": float(fields["bidirDmaCopyLimit"]),
                         "a2a": float(fields["a2aCopyLimit"]), "hbm_read": hbm[0], "hbm_write": hbm[1],
                         "hbm_copy": hbm[2], "hbm_add": hbm[3]}
    return configs


def build_releases() -> dict[str, Any]:
    releases: dict[str, dict[str, Any]] = {}
    for name, url in MATRICES:
        for release, row in read_matrix(SOURCES_DIR / name, url).items():
            releases.setdefault(release, row)
    kernels = []
    for name, url, series in KERNEL_TABLES:
        kernels.append({"series": series, "kernels": read_kernels(SOURCES_DIR / name), "source": url, "read": READ_ON})

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    return {
        "_about": ("What each ROCm release supports, from AMD's compatibility matrices: OS versions (os-release ID -> "
                   "VERSION_ID), GPU targets, the PyTorch versions AMD ships, and the driver window (ROCm <= 6.3: the "
                   "user spaces tested with that release's driver; >= 6.4: the drivers that release's user space "
                   "supports). kernels: the kernel series each OS version runs, per release series. amdgpu_modules: "
                   "the amdgpu module version of an AMD driver release. Generated by scripts/make_knowledge.py "
                   "from scripts/knowledge_sources/: do not edit by hand."),
        "releases": {r: releases[r] for r in sorted(releases, key=key, reverse=True)},
        "kernels": kernels,
        "amdgpu_modules": read_amdgpu_modules(SOURCES_DIR / AMDGPU_MODULES),
    }


def build_rccl_settings() -> dict[str, Any]:
    """The variables AMD's validation page sets for RCCL: `export NAME=VALUE` under its `# why` comment in the
    training image's block, and the chosen -x settings of its multi-node rccl-tests run."""
    name, url = VALIDATION_PAGE
    text = (SOURCES_DIR / name).read_text(encoding="utf-8")
    settings: dict[str, dict[str, str]] = {}
    why = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# "):
            why = line[2:]
            continue
        m = re.match(r"export (\w+)=(\S+)$", line)
        if m:
            settings[m.group(1)] = {"value": m.group(2), "why": why, "where": "set in AMD's training Docker image",
                                    "source": url, "read": READ_ON}
            why = ""
            continue
        m = re.match(r"-x (\w+)=(\S+)", line)
        if m and m.group(1) in VALIDATION_RUN_SETTINGS:
            settings.setdefault(m.group(1), {"value": m.group(2), "why": "", "source": url, "read": READ_ON,
                                             "where": "set for AMD's 4 x 8 MI300X multi-node rccl-tests run"})
    return {
        "_about": ("The RCCL / torch.distributed variables AMD's system validation page sets, with the page's own "
                   "reason. Generated by scripts/make_knowledge.py from scripts/knowledge_sources/: do not edit by "
                   "hand."),
        "settings": settings,
    }


def build_floors() -> dict[str, Any]:
    products: dict[str, dict[str, Any]] = {}
    for product, (name, url) in RVS_CONFS.items():
        actions = read_rvs_bf16(SOURCES_DIR / name)
        if not actions:
            continue
        low = min(actions, key=lambda a: a["target_tflops"])
        products.setdefault(product, {})["gemm_bf16_tflops"] = {
            "value": low["target_tflops"],
            "what": (f"RVS gst target of {low['name']} (hipBLASLt bf16 {low['m']}x{low['n']}x{low['k']}, "
                     f"{low['init']} init): the lowest of the product's bf16 actions"),
            "source": url, "read": READ_ON}
    tb_name, tb_url = TRANSFERBENCH
    for config, limits in read_transferbench(SOURCES_DIR / tb_name).items():
        for product in TRANSFERBENCH_PRODUCTS.get(config, []):
            scale = limits["sfactor"]
            row = products.setdefault(product, {})
            for key, field, what in (
                    ("hbm_read_gbps", "hbm_read", "HBM read"), ("hbm_copy_gbps", "hbm_copy", "HBM copy (bytes once)"),
                    ("host_to_device_gbps", "h2d", "host to device DMA copy from the closest NUMA node"),
                    ("device_to_host_gbps", "d2h", "device to host DMA copy to the closest NUMA node"),
                    ("bidirectional_gbps", "bidir", "host<->device both ways at once"),
                    ("xgmi_pair_gbps", "a2a", "one GPU pair's copy in the all-to-all over XGMI")):
                row[key] = {"value": round(limits[field] * scale, 2),
                            "what": f"TransferBench healthcheck ({config}): {what}, {limits[field]:g} x {scale:g}",
                            "source": tb_url, "read": READ_ON}
    return {
        "_about": ("Per product, the floors AMD's own validation fails a GPU below: RVS gst bf16 GEMM targets "
                   "(TFLOP/s) and TransferBench healthcheck limits (GB/s, already scaled by its SFACTOR). Generated "
                   "by scripts/make_knowledge.py from scripts/knowledge_sources/: do not edit by hand."),
        "products": {p: products[p] for p in sorted(products)},
    }


ROCM_NOTES = "rocm/release-notes-{}.md"
RCCL_CHANGELOG_63 = "rccl/CHANGELOG_ROCm-rccl_0cbce2a7.md"
RCCL_CHANGELOG_70 = "rccl/CHANGELOG-excerpt_ROCm-rccl_cb829d62.md"
# Known issues read from AMD's release notes and changelogs. Each row names the snapshots it rests on and the
# sentences of each that state it (`quotes`, compared with runs of whitespace as one space): the script refuses a row
# whose sentence its snapshot does not hold, so a row changes only with its source. `affected` is a packaging
# specifier of the releases the sources name (a known issue listed in one release and resolved in a later one: from
# the first up to, not including, the fixing release); `range_basis` says how the range follows from the sentences.
# Left out: known issues of tools a fine-tuning run does not use (ROCm 6.3.0-6.3.1's TransferBench packages, profiler
# packaging, MIVisionX, rocDecode): a row warns everyone on its releases, so it must matter to the run.
KNOWN_ISSUES: list[dict[str, Any]] = [
    {"id": "rocm-6.2-mi300a-host-bandwidth", "package": "rocm", "affected": ">=6.2.0,<6.3.0",
     "when": {"archs": ["gfx942"], "products": ["MI300A"]}, "severity": "warn",
     "what": "MI300A bandwidth in gang and non-gang modes is limited to about 45 GB/s (expected: ~60 GB/s non-gang, "
             "~90 GB/s gang)",
     "fix": {"upgrade": "6.3.0"},
     "range_basis": "a known issue of ROCm 6.2.0; resolved in 6.3.0",
     "quotes": {"6.2.0_ROCm-ROCm_c2e03669": ["Both gang and non-gang performance are observed to be limited at "
                                            "45GB/s."],
                "6.3.0_ROCm-ROCm_059c2cd9": ["Previously, both gang and non-gang performance were observed to be "
                                            "limited at 45 GB/s."]}},
    {"id": "rocm-6.2.0-hip-ipc-close-leak", "package": "rocm", "affected": ">=6.2.0,<6.2.1", "when": {},
     "severity": "warn",
     "what": "hipIpcCloseMemHandle leaks memory (GPU tensors shared between processes)",
     "fix": {"upgrade": "6.2.1"},
     "range_basis": "resolved in HIP 6.2.1; the notes describe changes since 6.2.0 and do not say since when, so "
                    "only 6.2.0 is judged",
     "quotes": {"6.2.1_ROCm-ROCm_a866cc83": ["Memory leak in `hipIpcCloseMemHandle`"]}},
    {"id": "rocm-6.2.1-mi300x-ue-recovery", "package": "rocm", "affected": ">=6.2.1,<6.2.2",
     "when": {"archs": ["gfx942"], "products": ["MI300X"]}, "severity": "warn",
     "what": "after an uncorrectable error the MI300X GPU reset may not complete: the node needs a reboot and the "
             "error may not be logged",
     "fix": {"upgrade": "6.2.2"},
     "range_basis": "a known issue of ROCm 6.2.1; fixed in 6.2.2",
     "quotes": {"6.2.1_ROCm-ROCm_a866cc83": ["GPU recovery resets triggered by uncorrectable errors (UE) might not "
                                            "complete successfully"],
                "6.2.2_ROCm-ROCm_516b6c8e": ["### Fixed Instinct MI300X error recovery failure"]}},
    {"id": "rocm-6.3.0-mi300-conv-wgrad", "package": "rocm", "affected": ">=6.3.0,<6.3.1",
     "when": {"archs": ["gfx942"]}, "severity": "warn",
     "what": "backward-weights convolution is slow for some FP16/FP32 shapes on MI300 series (MIOpen)",
     "fix": {"upgrade": "6.3.1", "env": {"MIOPEN_FIND_MODE": "3", "MIOPEN_FIND_ENFORCE": "3"}},
     "range_basis": "a known issue of ROCm 6.3.0; resolved in 6.3.1",
     "quotes": {"6.3.0_ROCm-ROCm_059c2cd9": ["A performance issue affects certain tensor shapes during backward "
                                            "weights convolution", "export MIOPEN_FIND_MODE=3",
                                            "export MIOPEN_FIND_ENFORCE=3"],
                "6.3.1_ROCm-ROCm_82d7903e": ["Fixed a performance issue affecting certain tensor shapes during "
                                            "backward weights convolution"]}},
    {"id": "rccl-6.2-kernel-6.8-no-gpu-nic-dma", "package": "rocm", "affected": "<6.3.0",
     "when": {"kernel": ">=6.8", "roce": True}, "severity": "warn",
     "what": "on Linux 6.8 or newer, RCCL's GPU<->NIC DMA (GPUDirect RDMA) is disabled: multi-node collectives "
             "over RoCE are slower",
     "fix": {"upgrade": "6.3.0"},
     "range_basis": "RCCL's 6.2.1 known issue (reproduced on 6.2.0 and 6.2.1; older RCCL versions also impacted); "
                    "RCCL for ROCm 6.3.0 enabled GDRDMA for Linux kernel 6.4.0+",
     "quotes": {RCCL_CHANGELOG_63: ["Direct Memory Access (DMA) transfers between the GPU and NIC are disabled and "
                                    "impacts multi-node RCCL performance.", "affects other systems with RoCE networks "
                                    "using Linux 6.8.0 or newer.", "Older RCCL versions are also impacted.",
                                    "Enabled GDRDMA for Linux kernel 6.4.0+"]}},
    {"id": "rccl-6.4-mscclinit-commsplit-segfault", "package": "rocm", "affected": ">=6.4.1,<7.0.0", "when": {},
     "severity": "warn",
     "what": "splitting a communicator (ncclCommSplit, torch.distributed new_group) can segfault in MSCCL's "
             "initialization on some GPU configurations",
     "fix": {"upgrade": "7.0.0", "env": {"RCCL_MSCCL_ENABLE": "0"}},
     "range_basis": "a known issue of RCCL for ROCm 6.4.1; fixed in RCCL for ROCm 7.0.0",
     "quotes": {RCCL_CHANGELOG_70: ["MSCCL initialization can cause a segmentation fault.",
                                    "The recommended workaround is to disable MSCCL with `export "
                                    "RCCL_MSCCL_ENABLE=0`.", "Fixed the known issue \"When splitting a communicator"]}},
]


def _snapshot(key: str) -> tuple[str, str]:
    """(text, URL of the file read) of a snapshot: a release-notes key ("6.3.0_ROCm-ROCm_059c2cd9") or a path."""
    name = ROCM_NOTES.format(key) if "/" not in key else key
    text = (SOURCES_DIR / name).read_text(encoding="utf-8")
    m = re.match(r"<!-- (?:Excerpt of )?(https://\S+?),? ", text)
    assert m, f"{name}: no source URL in its first line"
    return text, m.group(1)


def build_known_issues() -> dict[str, Any]:
    rows = []
    for spec in KNOWN_ISSUES:
        sources = []
        for key, quotes in spec["quotes"].items():
            text, url = _snapshot(key)
            flat = " ".join(text.split())
            for quote in quotes:
                if " ".join(quote.split()) not in flat:
                    raise SystemExit(f"known issue {spec['id']}: {key} does not say {quote!r}")
            sources.append(url)
        row = {k: v for k, v in spec.items() if k != "quotes"}
        row["quotes"] = [q for quotes in spec["quotes"].values() for q in quotes]
        row["sources"] = sources
        row["basis"] = "owner file"
        row["read"] = READ_ON
        rows.append(row)
    return {
        "_about": ("Known regressions and known-bad versions, from AMD's release notes and RCCL's changelog: per "
                   "row the package (rocm: the ROCm release), the affected versions as a packaging specifier, the "
                   "machines it applies to (when: archs, products, kernel), what breaks, the fix (the release that "
                   "fixes it, a workaround variable), the sentences of the source that state it. Generated by "
                   "scripts/make_knowledge.py from scripts/knowledge_sources/: do not edit by hand; rows from issue "
                   "threads are in known_issues_threads.json."),
        "issues": rows,
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=False) + "\n"


TABLES = {"rocm_releases.json": build_releases, "validation_floors.json": build_floors,
          "rccl_settings.json": build_rccl_settings, "known_issues.json": build_known_issues}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped tables; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name, build in TABLES.items():
        text = render(build())
        path = KNOWLEDGE_DIR / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)} (run python scripts/make_knowledge.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
