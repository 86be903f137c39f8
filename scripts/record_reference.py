"""Record this machine's reference loss curve of the default smoke-train next to the bundled model.

    python scripts/record_reference.py                    # kind from the device: cpu, cuda or rocm
    python scripts/record_reference.py --kind cpu --out /tmp/reference_curves.json

Runs the default smoke-train (no profiled step) and stores its per-step loss under the device kind,
with the settings key the comparison requires (rocmcheck/train/reference.py) and where it was recorded.
The file is merged: curves of other kinds already in it stay.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig  # noqa: E402
from rocmcheck.train.reference import FILE_NAME  # noqa: E402


def record_reference(model_dir: Path, kind: str | None = None, out_file: Path | None = None) -> Path:
    import torch

    from rocmcheck.train.run import run_smoke_train

    cfg = TrainConfig(model=Path(model_dir), profile=False)
    report = run_smoke_train(cfg)
    problems = [f"{r.id}: {r.summary}" for r in report.results if r.status.is_problem]
    if problems or len(report.metrics) != cfg.steps:
        raise SystemExit("the default run did not finish cleanly; no curve recorded:\n" + "\n".join(problems))
    kind = kind or report.info["device"]["kind"]
    out_file = Path(out_file) if out_file else Path(model_dir) / FILE_NAME
    data = json.loads(out_file.read_text(encoding="utf-8")) if out_file.is_file() else {"schema": 1, "curves": {}}
    data["curves"][kind] = {
        "key": cfg.reference_key(),
        "loss": [round(m["loss"], 5) for m in report.metrics],
        "accuracy": report.info.get("accuracy"),
        "recorded_on": {"device": report.info["device"]["name"], "torch": torch.__version__,
                        "threads": torch.get_num_threads(), "machine": platform.machine()},
    }
    out_file.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return out_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=BUNDLED_MODEL)
    ap.add_argument("--kind", choices=["cpu", "cuda", "rocm"], default=None, help="default: this run's device kind")
    ap.add_argument("--out", type=Path, default=None, help=f"default: MODEL/{FILE_NAME}")
    args = ap.parse_args()
    print(record_reference(args.model, args.kind, args.out))


if __name__ == "__main__":
    main()
