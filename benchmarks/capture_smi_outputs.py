"""Record real GPU tool outputs for tests/fixtures and show what rocmcheck's parsers read from them.

Run on a GPU machine (one call):  python benchmarks/capture_smi_outputs.py
Each tool found on PATH is run through rocmcheck's runner (argv, timeout); its stdout is written verbatim to
$OUT/fixtures/<tool>/<gpu>-<what>.txt (or ./capture-out/ when $OUT is unset) with a .source note beside it,
then parsed. The useful ones are reviewed and copied into tests/fixtures with their .source. On a machine with
none of the tools (a CPU box) every row says "not on PATH" and the script exits 0.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.facts.collect import NVIDIA_QUERY_FIELDS  # noqa: E402
from rocmcheck.facts.parsers.hipconfig import parse_hipconfig  # noqa: E402
from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_table  # noqa: E402
from rocmcheck.facts.parsers.rocminfo import parse_rocminfo  # noqa: E402
from rocmcheck.facts.parsers.smi import (  # noqa: E402
    parse_amd_smi_list,
    parse_amd_smi_static_json,
    parse_amd_smi_version,
    parse_rocm_smi,
    parse_rocm_smi_json,
    parse_rocm_smi_meminfo,
    parse_rocm_smi_productname,
)
from rocmcheck.runner import run_command  # noqa: E402


@dataclass
class Capture:
    tool: str
    args: list[str]
    what: str  # file-name part: "query-index-name-...-csv-noheader-nounits"
    parse: Callable[[str], Any]


CAPTURES = [
    Capture("nvidia-smi", [f"--query-gpu={','.join(NVIDIA_QUERY_FIELDS)}", "--format=csv,noheader,nounits"],
            "query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits",
            lambda t: parse_nvidia_smi_csv(t, NVIDIA_QUERY_FIELDS)),
    Capture("nvidia-smi", [], "default", parse_nvidia_smi_table),
    Capture("nvidia-smi", ["--query-gpu=name,pci.device_id", "--format=csv,noheader"],
            "query-name-pci-device-id-csv-noheader", lambda t: parse_nvidia_smi_csv(t, ["name", "pci.device_id"])),
    Capture("rocminfo", [], "rocminfo", parse_rocminfo),
    Capture("rocm-smi", [], "concise", parse_rocm_smi),
    Capture("rocm-smi", ["--showproductname"], "showproductname", parse_rocm_smi_productname),
    Capture("rocm-smi", ["--showmeminfo", "vram"], "showmeminfo-vram", parse_rocm_smi_meminfo),
    Capture("rocm-smi", ["--showproductname", "--showmeminfo", "vram", "--json"], "showproductname-meminfo-json",
            parse_rocm_smi_json),
    Capture("amd-smi", ["version"], "version", parse_amd_smi_version),
    Capture("amd-smi", ["list"], "list", parse_amd_smi_list),
    Capture("amd-smi", ["static", "--json"], "static-json", parse_amd_smi_static_json),
    Capture("hipconfig", ["--full"], "full", parse_hipconfig),
]


def summarize(parsed: Any) -> str:
    """One line of what the parser read: GPU count, names, memory, versions."""
    if hasattr(parsed, "agents"):  # RocminfoReport
        gpus = parsed.gpus
        return (f"{len(gpus)} GPU agents {sorted({g.name for g in gpus})} "
                f"mem={[g.memory_bytes for g in gpus][:2]} error={parsed.error_kind}")
    if hasattr(parsed, "gpus"):  # SmiReport
        names = sorted({g.product_name for g in parsed.gpus if g.product_name})
        mem = [g.vram_total_bytes for g in parsed.gpus][:2]
        return (f"{len(parsed.gpus)} GPUs {names} total={mem} driver={parsed.driver_version} "
                f"cuda={parsed.cuda_version} cap={[g.compute_cap for g in parsed.gpus][:1]}")
    if hasattr(parsed, "hip_version"):
        return f"hip={parsed.hip_version} platform={parsed.platform} rocm_path={parsed.rocm_path}"
    return repr(parsed)[:120]


def gpu_slug(name: str | None) -> str:
    """"h200" from "NVIDIA H200", "mi300x" from "AMD Instinct MI300X"; "gpu" when unknown."""
    if not name:
        return "gpu"
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w and w.upper() not in {"NVIDIA", "AMD", "INSTINCT"}]
    return "-".join(words[:3]).lower() or "gpu"


def main() -> int:
    out_root = Path(os.environ.get("OUT") or "capture-out") / "fixtures"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    slug = "gpu"
    rows = []
    for cap in CAPTURES:
        exe = shutil.which(cap.tool)
        if exe is None:
            rows.append((cap.tool, " ".join(cap.args) or "(none)", "not on PATH", ""))
            continue
        res = run_command([exe, *cap.args], timeout=60)
        if not res.ok:
            rows.append((cap.tool, " ".join(cap.args) or "(none)", res.describe_failure(), ""))
            continue
        parsed = cap.parse(res.stdout)
        if slug == "gpu" and getattr(parsed, "gpus", None):
            first = parsed.gpus[0]
            slug = gpu_slug(getattr(first, "product_name", None) or getattr(first, "marketing_name", None))
        path = out_root / cap.tool / f"{slug}-{cap.what}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(res.stdout.encode("utf-8"))
        path.with_name(path.name + ".source").write_text(
            f"source: recorded by benchmarks/capture_smi_outputs.py on a lent machine, {stamp}\n"
            f"description: `{cap.tool} {' '.join(cap.args)}` stdout, verbatim\n"
            "status: complete\n", encoding="utf-8")
        rows.append((cap.tool, " ".join(cap.args) or "(none)", f"{res.duration_s:.2f} s -> {path}", summarize(parsed)))

    widths = [max(len(str(r[i])) for r in rows + [("tool", "args", "result", "parsed")]) for i in range(3)]
    print(f"{'tool':<{widths[0]}}  {'args':<{widths[1]}}  {'result':<{widths[2]}}  parsed")
    for tool, args, result, parsed in rows:
        print(f"{tool:<{widths[0]}}  {args:<{widths[1]}}  {result:<{widths[2]}}  {parsed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
