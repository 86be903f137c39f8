"""The hardening replay (scripts/attack_replay.py) keeps holding: its fast subset, one attack per class (a pasted
fix that runs data, a secret that leaks, a reader that goes quadratic, a hostile input file, a planted output
link, a signal that leaves children, a bound past any real value, a wrong verdict, a forged summary speaking as
rocmcheck, an invisible character inside a token, a process left by a signal rocmcheck cannot catch), run as a
person runs it: the installed `rocmcheck` entry point on this checkout's code, in scratch folders, each attack
bounded in time and memory. About 40 s here; the whole script (both tables) is for a person and takes about 20
minutes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "attack_replay.py"


def _module():
    if "attack_replay" in sys.modules:
        return sys.modules["attack_replay"]
    spec = importlib.util.spec_from_file_location("attack_replay", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attack_replay"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)  # defines the tables; runs nothing
    return module


def test_the_fast_subset_has_one_attack_of_every_class_and_every_finding_is_replayed():
    replay = _module()
    fast = [a for a in replay.ATTACKS if a.fast]
    assert sorted({a.klass for a in fast}) == sorted(replay.CLASSES)
    assert len(fast) == len(replay.CLASSES)
    findings = {a.finding for a in replay.ATTACKS if a.table == "findings"}
    second = {f"S4-{n}" for n in range(3, 13)} - {"S4-9"}  # S4-1, S4-2, S4-9: the bytecode cache, since removed
    assert findings == {f"S3-{n}" for n in range(1, 31)} | second == set(replay.FINDINGS)
    fresh = [a for a in replay.ATTACKS if a.table == "fresh"]
    for klass in replay.CLASSES:  # at least three attacks of each class the findings did not try
        assert len([a for a in fresh if a.klass == klass]) >= 3, klass
    assert len({a.id for a in replay.ATTACKS}) == len(replay.ATTACKS)


def test_the_paste_sandbox_sees_a_command_that_came_from_data():
    """The detector the injection attacks rely on: an unquoted payload is seen, a quoted one is not, and nothing
    runs (an empty PATH; every command only logged). The sandbox runs as nobody, so its folder is made where
    nobody can reach it (the script's own scratch folder is made the same way)."""
    replay = _module()
    with tempfile.TemporaryDirectory(prefix="attack-replay-test-") as root:
        os.chmod(root, 0o755)
        box = replay.Box(Path(root), "sandbox")
        seen = box.paste("pip install torch==2.5.1; touch PWNED\necho $(PWNED_sub)\n").problems()
        assert any("touch PWNED" in p for p in seen) and any("PWNED_sub" in p for p in seen), seen
        assert box.paste("pip install 'torch==2.5.1; touch PWNED'\n").problems() == []
        assert not list(Path(root).rglob("PWNED*"))


def test_the_fast_attacks_hold():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--fast"], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line and not line.startswith("#")]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert len(lines) == len([a for a in _module().ATTACKS if a.fast])
    assert all(" held " in line for line in lines), lines
