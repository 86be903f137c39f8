"""Files a run leaves in --out: metrics.jsonl (one row per step), report.json, loss_memory.png and checkpoint/.

Nothing a person owns is lost: an existing folder with files in it is used only with --force (and then only these
names are replaced), every file is written atomically, and the checkpoint is saved into a fresh folder and renamed
into place, so transformers' save_pretrained (which deletes weight shards it did not write) never runs in a
folder that holds someone's files."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rocmcheck.safe.files import write_atomic

from rocmcheck.train.memory import MiB

OUTPUT_NAMES = ("metrics.jsonl", "report.json", "loss_memory.png", "checkpoint", "adapter")


def out_dir_problem(out: Path, force: bool) -> str | None:
    """Why --out cannot be used (one line), or None. An existing folder must be empty unless force."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        return f"--out {out}: exists and is not a directory"
    if out.is_dir():
        try:
            entries = sorted(p.name for p in out.iterdir())
        except OSError as exc:
            return f"--out {out}: cannot be read: {exc.strerror or exc}"
        if entries and not force:
            shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
            return (f"--out {out}: the folder is not empty ({shown}); give a new or empty folder, or add --force to "
                    f"replace {', '.join(OUTPUT_NAMES)} there (other files are left alone)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: {existing} is not writable"
    return None


@contextmanager
def checkpoint_folder(out: Path | None, name: str = "checkpoint") -> Iterator[Path]:
    """A new, empty folder to save the checkpoint (or LoRA adapter) into (inside --out, so the final rename stays
    on one file system; a temporary folder without --out). Removed on the way out; publish_checkpoint moves it
    first."""
    parent = None
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        parent = str(out)
    with tempfile.TemporaryDirectory(prefix=".rocmcheck-checkpoint-", dir=parent) as tmp:
        yield Path(tmp) / name


def publish_checkpoint(saved: Path, out: Path) -> Path:
    """Move a freshly saved folder to out/<its name>. An old one there (only with --force) is renamed aside first
    and removed once the new one is in place."""
    dest = Path(out) / saved.name
    old = None
    if dest.exists() or dest.is_symlink():
        old = dest.with_name(f".{saved.name}-old-{os.getpid()}")
        os.replace(dest, old)
    os.replace(saved, dest)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    return dest


def write_outputs(report_dict: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Writes the files; returns {"metrics": path, "report": path, "plot": path or a note why not}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / "metrics.jsonl"
    write_atomic(metrics_path, "".join(json.dumps(row) + "\n" for row in report_dict.get("metrics", [])), force=True)
    report_path = out_dir / "report.json"
    write_atomic(report_path, json.dumps(report_dict, indent=1, default=str) + "\n", force=True)
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
