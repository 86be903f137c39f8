"""Files a run leaves in --out: metrics.jsonl (one row per step), report.json, loss_memory.png and checkpoint/.

Nothing a person owns is lost: an existing folder with files in it is used only with --force (and then only these
names are replaced), every file goes through rocmcheck's one writer (rocmcheck/safe/files.py: atomic, never
through a symbolic link), and the checkpoint is saved into a fresh folder and renamed into place, so transformers'
save_pretrained (which deletes weight shards it did not write) never runs in a folder that holds someone's files.
The plot's text is literal (a `$` in a folder name is not matplotlib mathtext), and a plot that cannot be drawn
is a note in place of the file, never a lost report."""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rocmcheck.monitor.step_memory import GiB, MiB
from rocmcheck.result import CheckResult, worst
from rocmcheck.safe.files import write_atomic
from rocmcheck.safe.scratch_folders import scratch_folder
from rocmcheck.train import reference

OUTPUT_NAMES = ("metrics.jsonl", "report.json", "loss_memory.png", "checkpoint", "adapter")


def out_dir_problem(out: Path, force: bool) -> str | None:
    """Why --out cannot be used (one line), or None. An existing folder must be empty unless force."""
    out = Path(out)
    found = _nearest_existing(out)
    if isinstance(found, str):
        return found
    if found.is_symlink() and not found.exists():
        return f"--out {out}: {found} is a symbolic link to nothing (a loop, or a missing target)"
    if found != out and not found.is_dir():
        return f"--out {out}: {found} is not a directory"
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
    if not os.access(found, os.W_OK | os.X_OK):
        return f"--out {out}: {found} is not writable"
    return None


def _nearest_existing(path: Path) -> Path | str:
    """`path` or its nearest ancestor that exists as a directory entry (a symbolic link counts, resolving or not);
    a one-line problem when one cannot be looked at (a loop of links on the way, no permission)."""
    current = path
    while True:
        try:
            os.lstat(current)
            return current
        except (FileNotFoundError, NotADirectoryError):
            if current == current.parent:
                return current
            current = current.parent
        except OSError as exc:
            return f"--out {path}: {current}: {exc.strerror or exc}"


@contextmanager
def checkpoint_folder(out: Path | None, name: str = "checkpoint") -> Iterator[Path]:
    """A new, empty folder to save the checkpoint (or LoRA adapter) into: inside --out, so the final rename stays
    on one file system; without --out, rocmcheck's own temporary folder. Removed on the way out; publish_checkpoint
    moves it first."""
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        parent = Path(out)
    else:
        parent = None
    with scratch_folder("checkpoint", parent, hidden=True) as tmp:
        yield tmp / name


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


def write_outputs(report_dict: dict[str, Any], out_dir: Path, force: bool = True) -> dict[str, str]:
    """Writes the files; returns {"metrics": path, "report": path, "plot": path or a note why not}. force: replace
    these names when they are there (--force; out_dir_problem refused a folder with files in it without it).
    OSError or BadInput (safe/files.py) when a file cannot be written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / "metrics.jsonl"
    write_atomic(metrics_path, "".join(json.dumps(row) + "\n" for row in report_dict.get("metrics", [])), force=force)
    report_path = out_dir / "report.json"
    write_atomic(report_path, json.dumps(report_dict, indent=1, default=str) + "\n", force=force)
    files = {"metrics": str(metrics_path), "report": str(report_path)}
    files["plot"] = plot_loss_memory(report_dict, out_dir / "loss_memory.png", force=force)
    return files


# What the leak verdict reads: memory right after each optimizer step (memory.detect_leak's baselines).
POST_STEP_KEY = "mem_allocated"


def _verdicts(report_dict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r.get("id", ""): r for r in report_dict.get("results", [])}


def _title(report_dict: dict[str, Any]) -> str:
    info = report_dict.get("info", {})
    dev = info.get("device", {})
    device = dev.get("name") or dev.get("device") or "device ?"
    if dev.get("arch"):
        device += f" ({dev['arch']})"
    ranks = info.get("world", {}).get("ranks")
    if ranks and ranks > 1:
        device += f" x{ranks} ranks"
    model = info.get("model", {}).get("path") or info.get("config", {}).get("model") or "model ?"
    model = Path(str(model)).name or str(model)
    overall = worst([CheckResult.from_dict(r) for r in report_dict.get("results", [])]).value.upper()
    return f"rocmcheck smoke-train: {device} | {model} | verdict {overall}"


def _panel_title(verdict: dict[str, Any] | None, check_id: str) -> str:
    if not verdict:
        return f"{check_id}: not judged"
    return f"{check_id}: {verdict.get('status', '?').upper()} - {verdict.get('summary', '')}"[:110]


def loss_memory_figure(report_dict: dict[str, Any]):
    """The matplotlib Figure of a run: the loss against the reference curve and the tolerance band that
    train.reference_curve judges, and memory with the post-step line that train.memory_leak reads drawn
    strongest, on an axis from zero. Legends sit right of the axes, clear of the data."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    from matplotlib.figure import Figure

    metrics = report_dict.get("metrics", [])
    info = report_dict.get("info", {})
    verdicts = _verdicts(report_dict)
    steps = [m["step"] for m in metrics]
    losses = [m["loss"] for m in metrics]
    fig = Figure(figsize=(11, 7), layout="constrained")
    ax_loss, ax_mem = fig.subplots(2, 1, sharex=True)
    fig.suptitle(_title(report_dict), fontsize=11, fontweight="bold", parse_math=False)

    ax_loss.plot(steps, losses, color="tab:blue", lw=1, alpha=0.6, label="loss, each step")
    ref = info.get("reference_curve") or {}
    if ref.get("loss"):
        window = ref.get("window", reference.WINDOW)
        rows = reference.band(ref["loss"], window)
        xs = [r[0] for r in rows] + [rows[-1][1] + 1]
        mean = [r[2] for r in rows] + [rows[-1][2]]
        tol = [r[3] for r in rows] + [rows[-1][3]]
        rec = ref.get("recorded_on", {})
        ax_loss.fill_between(xs, [m - t for m, t in zip(mean, tol)], [m + t for m, t in zip(mean, tol)], step="post",
                             color="tab:gray", alpha=0.25, lw=0, label=f"tolerance band ({reference.ABS_TOL:g} + "
                             f"{reference.REL_TOL:.0%} of the reference)")
        ax_loss.plot(range(len(ref["loss"])), ref["loss"], color="black", lw=1, ls="--",
                     label=f"reference curve ({ref.get('kind', '?')}: {rec.get('device', '?')})")
        run_means = reference.window_means(losses, window)
        ax_loss.step(xs[:len(run_means) + 1], run_means + run_means[-1:], where="post", color="tab:blue", lw=2.2,
                     label=f"this run, {window}-step means (judged)")
        out = [(r[0] + (r[1] - r[0]) / 2, m) for r, m in zip(rows, run_means) if abs(m - r[2]) > r[3]]
        if out:
            ax_loss.plot([o[0] for o in out], [o[1] for o in out], "x", color="tab:red", ms=10, mew=2.5,
                         label="window outside the band")
    elif ref.get("why_not"):
        ax_loss.plot([], [], " ", label=f"no reference curve: {ref['why_not']}"[:80])
    ax_loss.set_ylabel("loss")
    ax_loss.set_title(_panel_title(verdicts.get("train.reference_curve") or verdicts.get("train.loss_decrease")
                                   or verdicts.get("train.learns"), "train.reference_curve"
                                   if "train.reference_curve" in verdicts else "train.loss_decrease"
                                   if "train.loss_decrease" in verdicts else "train.learns"), fontsize=9, loc="left",
                      parse_math=False)
    ax_loss.grid(alpha=0.3)

    kind = info.get("memory_kind", "")
    top = max((m.get(k, 0) for m in metrics for k in (POST_STEP_KEY, "mem_reserved", "mem_peak")), default=0)
    unit, scale = ("GiB", GiB) if top >= 4 * GiB else ("MiB", MiB)
    for key, label, style in (("mem_peak", "peak", {"color": "tab:orange", "lw": 1, "ls": ":", "alpha": 0.8}),
                              ("mem_reserved", "reserved" if kind != "cpu-rss" else "before trim",
                               {"color": "tab:green", "lw": 1, "ls": "--", "alpha": 0.8}),
                              (POST_STEP_KEY, "after each step (train.memory_leak reads this)",
                               {"color": "tab:red", "lw": 2.8, "zorder": 5})):
        ax_mem.plot(steps, [m[key] / scale for m in metrics], label=label, **style)
    ax_mem.set_ylim(bottom=0, top=max(top / scale * 1.08, 1e-9))
    ax_mem.set_ylabel(f"memory {unit}" + (f" ({kind})" if kind else ""), parse_math=False)
    ax_mem.set_xlabel("step")
    ax_mem.set_title(_panel_title(verdicts.get("train.memory_leak"), "train.memory_leak"), fontsize=9, loc="left",
                     parse_math=False)
    ax_mem.grid(alpha=0.3)
    for ax in (ax_loss, ax_mem):
        legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        for text in legend.get_texts():  # labels carry data (a device name, a reason): literal text
            text.set_parse_math(False)
    return fig


def plot_loss_memory(report_dict: dict[str, Any], path: Path, force: bool = True) -> str:
    """The PNG path, or "skipped: <why>" (matplotlib is optional: pip install matplotlib). Drawn in memory and
    written by the one writer; a figure that cannot be drawn is a note, never an exception that loses the report.
    OSError or BadInput only when the file cannot be written."""
    if not report_dict.get("metrics"):
        return "skipped: no steps to plot"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "skipped: matplotlib is not installed (pip install matplotlib)"
    png = io.BytesIO()
    try:
        loss_memory_figure(report_dict).savefig(png, format="png", dpi=90)
    except Exception as exc:  # noqa: BLE001 - matplotlib raises its own errors on odd data; the report stands
        return f"skipped: the plot could not be drawn ({type(exc).__name__}: {str(exc).strip()[:160]})"
    write_atomic(path, png.getvalue(), force=force)
    return str(path)
