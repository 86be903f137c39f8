"""`rocmcheck doctor --summary` and its way back: the block triage reads gives the same facts and verdicts, so the
block written again from what triage read is the same block, on recorded machines and on this one for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from machines import amd_machine

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.result import Status
from rocmcheck.triage import triage
from rocmcheck.triage.context import facts_for_checks
from rocmcheck.triage.judge import context_of
from rocmcheck.triage.known import Ledger
from rocmcheck.triage.readers import summary as fmt
from rocmcheck.triage.readers.paste import split_paste
from rocmcheck.triage.readers.summary import parse_summary
from rocmcheck.triage.summary import NO_FIX, render_summary

REPO = Path(__file__).resolve().parents[1]


def summary_of(facts) -> str:
    ctx = CheckContext(facts)
    return render_summary(facts, ctx, run_checks(select_checks(), ctx))


def again(text: str) -> tuple[str, object]:
    """The block triage reads back, written again from triage's facts and the verdicts it read. A pasted fix
    line is never taken as rocmcheck's: a verdict whose check cannot rebuild its fix from the pasted facts comes
    back with NO_FIX, so those fix lines are compared as NO_FIX on both sides."""
    t = triage([("summary", text)])
    p = t.pasted
    second = render_summary(p.facts, context_of(p, facts_for_checks(p, Ledger())), p.recorded)
    return second, t


def same_block(first: str, second: str) -> bool:
    """The same lines but for fix lines, and each fix line written again is one of the first's or NO_FIX (a fix
    shared by several verdicts is printed once, so verdicts that all come back with NO_FIX print fewer fix lines)."""
    no_fix = f"  {fmt.FIX_LABEL}{NO_FIX.line()}"

    def split(text: str) -> tuple[list[str], list[str]]:
        lines = text.splitlines()
        fixes = [line for line in lines if line.startswith(f"  {fmt.FIX_LABEL}")]
        return [line for line in lines if line not in fixes], fixes

    (a, a_fixes), (b, b_fixes) = split(first), split(second)
    return a == b and all(y == no_fix or y in a_fixes for y in b_fixes) and (bool(a_fixes) or not b_fixes)


def test_a_recorded_machine_round_trips():
    first = summary_of(amd_machine())
    second, t = again(first)
    assert same_block(first, second)
    lines = first.splitlines()
    assert lines[0].startswith("== rocmcheck summary 1 (rocmcheck ") and lines[-1] == fmt.FOOTER
    assert "gpu 7: gfx942 | AMD Instinct MI300X | 192.0 GiB" in lines
    assert any(line.startswith("torch: 2.5.1+rocm6.2 | hip 6.2.41133-dd7f95766 | cuda none | gpus 8 | archs ")
               for line in lines)


def test_a_machine_with_problems_round_trips_and_triage_names_them():
    facts = amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HF_TOKEN": "hf_" + "x1" * 17})
    first = summary_of(facts)
    assert "FAIL env.hsa_override: HSA_OVERRIDE_GFX_VERSION is set on an Instinct GPU" in first
    assert "hf_x1x1" not in first  # redacted
    second, t = again(first)
    assert same_block(first, second)
    top = t.findings[0]
    assert top.id == "env.hsa_override" and top.verdict.status is Status.FAIL
    assert top.quotes[0].text.startswith("FAIL env.hsa_override:")
    assert top.fix is not None and top.fix.text == "unset HSA_OVERRIDE_GFX_VERSION"


def test_the_summary_facts_feed_the_doctors_checks():
    t = triage([("summary", summary_of(amd_machine()))])
    by_id = {j.result.id: j.result for j in t.judged}
    assert by_id["torch.arch_list"].status is Status.PASS  # torch's archs and the GPUs, both from the block
    assert by_id["gpu.present"].status is Status.PASS


def test_the_splitter_finds_the_block_in_a_thread():
    block = summary_of(amd_machine())
    thread = ("I get a HIP error, here is what rocmcheck says:\n\n<details>\n\n```\n" + block + "```\n</details>\n\n"
              "> " + "\n> ".join(block.splitlines()) + "\n\nThanks!\n")
    paste = split_paste(thread)
    blocks = paste.of_kind("rocmcheck_summary")
    assert len(blocks) == 2 and all(parse_summary(b.text).complete for b in blocks)
    assert parse_summary(blocks[0].text) == parse_summary(blocks[1].text)


def test_doctor_summary_on_this_machine_round_trips():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--summary"], capture_output=True, text=True,
                          env=env, timeout=300, cwd=REPO)
    assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
    first = proc.stdout
    assert first.startswith("== rocmcheck summary 1 (") and first.endswith(fmt.FOOTER + "\n")
    assert "kernel: " in first and "python: " in first
    fixes = [line for line in first.splitlines() if line.startswith("  " + fmt.FIX_LABEL)]
    assert len(fixes) == len(set(line.split("  # ")[0] for line in fixes))  # a shared fix is printed once
    second, _ = again(first)
    assert same_block(first, second)
    refused = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--summary", "--json"],
                             capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert refused.returncode == 2 and "cannot be combined" in refused.stderr


def test_a_pasted_fix_line_is_never_offered_to_paste():
    """The fix lines of a pasted summary are a stranger's text: one of real words that runs code (`python -c`)
    comes back as a note; a check that judged the pasted facts itself shows the fix it built."""
    block = summary_of(amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}))
    hostile = block.replace(fmt.FOOTER, "FAIL probe.gemm: bf16 GEMM wrong\n"
                                         "  fix: python -c 'import os; os.system(\"touch PWNED\")'  # rerun\n"
                            + fmt.FOOTER)
    t = triage([("summary", hostile)])
    by_id = {r.id: r for r in t.pasted.recorded}
    assert by_id["probe.gemm"].fix == NO_FIX and "PWNED" in by_id["probe.gemm"].data["pasted_fix"]
    assert by_id["env.hsa_override"].fix.kind.value == "shell"  # rebuilt by the check, not read from the paste
    assert not [f for f in t.findings if f.fix is not None and f.fix.kind.value == "shell" and "PWNED" in f.fix.text]
