"""The model classes' import in a smoke-train (modeling.import_model_classes): what it keeps out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]


def test_model_classes_are_imported_without_scikit_learn(tmp_path):
    """transformers 5.17's generation/candidate_generator.py opens with these lines; a stand-in sklearn package
    on the path records whether it was imported."""
    fake = tmp_path / "site"
    (fake / "sklearn").mkdir(parents=True)
    marker = tmp_path / "sklearn-imported"
    (fake / "sklearn" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (fake / "sklearn" / "metrics.py").write_text("def roc_curve(*a, **k):\n    return None\n")
    (fake / "candidate_generator_517.py").write_text(
        "from transformers.utils import is_sklearn_available\n\nif is_sklearn_available():\n"
        "    from sklearn.metrics import roc_curve\n")
    code = ("import transformers.utils as u\n"
            "from rocmcheck.train.modeling import sklearn_unseen\n"
            "assert u.is_sklearn_available()\n"
            "with sklearn_unseen():\n"
            "    import candidate_generator_517\n"
            "assert u.is_sklearn_available()\n"
            "print('roc_curve' in vars(candidate_generator_517))\n")
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False" and not marker.exists()
    proc = subprocess.run([sys.executable, "-c", "import candidate_generator_517"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0 and marker.exists(), proc.stderr  # the stand-in is found when nothing hides it
