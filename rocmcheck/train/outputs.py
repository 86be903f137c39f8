"""Files a run leaves in --out: metrics.jsonl (one row per step), report.json, and loss_memory.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocmcheck.train.memory import MiB


def write_outputs(report_dict: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Writes the files; returns {"metrics": path, "report": path, "plot": path or a note why not}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / "metrics.jsonl"
    with metrics_path.open("w", encoding="utf-8") as f:
        for row in report_dict.get("metrics", []):
            f.write(json.dumps(row) + "\n")
    report_path = out_dir / "report.json"
    report_path.write_text(json.dumps(report_dict, indent=1, default=str) + "\n", encoding="utf-8")
    files = {"metrics": str(metrics_path), "report": str(report_path)}
    files["plot"] = plot_loss_memory(report_dict.get("metrics", []), out_dir / "loss_memory.png",
                                     report_dict.get("info", {}).get("memory_kind", ""))
    return files


def plot_loss_memory(metrics: list[dict[str, Any]], path: Path, memory_kind: str = "") -> str:
    """The PNG path, or "skipped: <why>" (matplotlib is optional: pip install rocmcheck[plot])."""
    if not metrics:
        return "skipped: no steps to plot"
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        return "skipped: matplotlib is not installed (pip install matplotlib)"
    steps = [m["step"] for m in metrics]
    fig, (ax_loss, ax_mem) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax_loss.plot(steps, [m["loss"] for m in metrics], color="tab:blue")
    ax_loss.set_ylabel("loss")
    ax_loss.set_title("rocmcheck smoke-train")
    ax_loss.grid(alpha=0.3)
    for key, label in (("mem_allocated", "after step"), ("mem_reserved", "reserved"), ("mem_peak", "peak")):
        ax_mem.plot(steps, [m[key] / MiB for m in metrics], label=label)
    ax_mem.set_ylabel(f"memory MiB {memory_kind}".strip())
    ax_mem.set_xlabel("step")
    ax_mem.legend(loc="best")
    ax_mem.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return str(path)
