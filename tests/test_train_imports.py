"""The model classes' import in a smoke-train (modeling.import_model_classes): what it keeps out."""

from __future__ import annotations

import importlib.util
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


SAVE_BOTH_WAYS = """
import sys
from pathlib import Path
import torch, transformers
import accelerate.utils.other as unwrapping
from rocmcheck.train.modeling import deepspeed_unseen
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
out = Path(sys.argv[2])
with deepspeed_unseen():
    assert not unwrapping.is_deepspeed_available()
    model.save_pretrained(out / "unseen")
print("deepspeed imported by the save:", "deepspeed" in sys.modules)
assert unwrapping.is_deepspeed_available()  # the real answer again after the block
model.save_pretrained(out / "seen")
print("deepspeed imported by the plain save:", "deepspeed" in sys.modules)
with deepspeed_unseen():
    print("inside, with deepspeed imported:", unwrapping.is_deepspeed_available())
"""


def test_save_pretrained_without_deepspeed_imported_writes_the_same_files(tmp_path):
    """The bundled model saved inside deepspeed_unseen (no deepspeed import) and outside it (accelerate imports
    deepspeed to test for a DeepSpeedEngine): byte-identical files. Once deepspeed is imported, the block changes
    nothing."""
    pytest.importorskip("accelerate")
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed is not installed: accelerate would not import it anyway")
    bundled = REPO / "rocmcheck" / "train" / "assets" / "tiny-llama"
    env = {**os.environ, "PYTHONPATH": str(REPO), "DS_ACCELERATOR": "cpu"}
    proc = subprocess.run([sys.executable, "-c", SAVE_BOTH_WAYS, str(bundled), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["deepspeed imported by the save: False",
                                        "deepspeed imported by the plain save: True",
                                        "inside, with deepspeed imported: True"]
    unseen, seen = sorted((tmp_path / "unseen").iterdir()), sorted((tmp_path / "seen").iterdir())
    assert [p.name for p in unseen] == [p.name for p in seen] and any(p.suffix == ".safetensors" for p in seen)
    for a, b in zip(unseen, seen):
        assert a.read_bytes() == b.read_bytes(), a.name
