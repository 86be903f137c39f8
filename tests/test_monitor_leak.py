"""The leak finder: the pure survivor/grouping logic on a snapshot structure as torch.cuda.memory._snapshot()
returns it (segments / device_traces of alloc and free events with innermost-first frames), and the real
watcher on CPU training loops that keep their loss (or outputs) across steps."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rocmcheck.fixes import FixKind
from rocmcheck.monitor.leak import (
    advice_fix,
    code_of,
    find_filling_line,
    group_by_stack,
    keep_instead,
    surviving_allocations,
)
from rocmcheck.units import MIB as MiB

TORCH = "/usr/lib/python3.11/site-packages/torch"


@pytest.fixture()
def user_code(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""\
        import torch

        class Block(torch.nn.Module):
            def forward(self, x):
                h = self.up(x)
                return self.down(torch.nn.functional.gelu(h))

        def train(model, loader, opt):
            losses = []
            for batch in loader:
                out = model(batch)
                loss = out.float().pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(loss)
    """))
    return str(path)


def _frames(user_code, *user_lines, inner=(f"{TORCH}/nn/modules/linear.py", 125, "forward")):
    frames = [{"filename": inner[0], "line": inner[1], "name": inner[2]}]
    frames += [{"filename": user_code, "line": n, "name": "forward" if n < 8 else "train"} for n in user_lines]
    frames.append({"filename": f"{TORCH}/nn/modules/module.py", "line": 1775, "name": "_call_impl"})
    return frames


def snapshot(user_code):
    """Two watched steps of a leaking loop, as the allocator history records them: each step allocates the
    up-projection (512 MiB, kept by the loss's graph) and a temporary (freed), and the loss; the step-1
    allocations stay alive through step 2. Addresses are reused the way the caching allocator reuses blocks."""
    up, tmp, loss = _frames(user_code, 5, 11), _frames(user_code, 6, 11), _frames(
        user_code, 12, inner=(f"{TORCH}/_tensor.py", 40, "wrapped"))
    step1 = [
        {"action": "alloc", "addr": 0x7F0000000000, "size": 512 * MiB, "stream": 0, "time_us": 1000, "frames": up},
        {"action": "alloc", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 1010, "frames": tmp},
        {"action": "alloc", "addr": 0x7F0030000000, "size": 512, "stream": 0, "time_us": 1020, "frames": loss},
        {"action": "free_requested", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 1030,
         "frames": tmp},
        {"action": "free_completed", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 1030,
         "frames": tmp},
    ]
    step2 = [
        {"action": "alloc", "addr": 0x7F0040000000, "size": 512 * MiB, "stream": 0, "time_us": 2000, "frames": up},
        {"action": "alloc", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 2010, "frames": tmp},
        {"action": "free_requested", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 2030,
         "frames": tmp},
        {"action": "free_completed", "addr": 0x7F0020000000, "size": 256 * MiB, "stream": 0, "time_us": 2030,
         "frames": tmp},
        {"action": "alloc", "addr": 0x7F0050000000, "size": 512, "stream": 0, "time_us": 2040, "frames": loss},
    ]
    segments = [{"device": 0, "address": 0x7F0000000000, "total_size": 2048 * MiB, "allocated_size": 1024 * MiB,
                 "active_size": 1024 * MiB, "requested_size": 1024 * MiB, "stream": 0, "segment_type": "large",
                 "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                 "blocks": [{"address": 0x7F0000000000, "size": 512 * MiB, "requested_size": 512 * MiB,
                             "state": "active_allocated", "frames": up}]}]
    return {"segments": segments, "device_traces": [step1 + step2]}, len(step1)


def test_survivors_by_trace_index_and_by_time(user_code):
    snap, mark = snapshot(user_code)
    trace = snap["device_traces"][0]
    by_index = surviving_allocations(trace, born_before_index=mark)
    by_time = surviving_allocations(trace, born_before_us=1030)
    assert sorted(e["size"] for e in by_index) == [512, 512 * MiB]
    assert by_index == by_time
    # the temporary freed and re-allocated at the same address is not a survivor
    assert all(e["addr"] != 0x7F0020000000 for e in by_index)


def test_groups_name_the_site_and_the_callers_line(user_code):
    snap, mark = snapshot(user_code)
    groups = group_by_stack(surviving_allocations(snap["device_traces"][0], mark))
    top = groups[0]
    assert top.total_bytes == 512 * MiB and top.count == 1
    assert top.site == "train.py:5 (`h = self.up(x)`)"
    assert "512.0 MiB each" in top.describe() and "train.py:5" in top.describe()
    assert groups[1].site == "train.py:12 (`loss = out.float().pow(2).mean()`)"


def test_filling_line_and_advice(user_code):
    lines = open(user_code).read().splitlines()
    assert find_filling_line(lines, 1, "losses") == (16, "losses.append(loss)")
    assert find_filling_line(lines, 1, "nothing") is None
    assert keep_instead("losses.append(loss)", 1, True).text == "keep `loss.item()` instead"
    assert keep_instead("cache[k] = out", 4096, True).text.startswith("keep `out.detach()`")
    fix = advice_fix(keep_instead("losses.append(loss)", 1, True), user_code, 16, "losses.append(loss)")
    assert fix.kind is FixKind.EDIT and fix.file == user_code
    assert fix.text == "line 16: `losses.append(loss)` -> `losses.append(loss.item())`"


def test_advice_for_a_view_is_a_copy_and_never_pastes_the_comment():
    line = "kept.append(out.logits[:, -1])  # LEAK: keeps the whole logits alive"
    advice = keep_instead(line, 4 * 32000, True, view=True)
    assert advice.instead == "out.logits[:, -1].detach().clone()" and "#" not in advice.text
    assert "LEAK" not in advice_fix(advice, "train.py", 88, line).text
    # Already detached: .detach() of a view keeps its base's storage, so the advice is the copy, not .detach().
    detached = keep_instead("kept.append(out.logits[:, -1].detach())", 4 * 32000, False, view=True, on_gpu=True)
    assert detached.instead == "out.logits[:, -1].detach().cpu()"
    # Without the line there is no expression to name: words, never `the tensor.detach()`.
    unknown = keep_instead("", 4096, True)
    assert "the tensor" not in unknown.text and advice_fix(unknown, None, None, "").kind is FixKind.NOTE
    assert code_of('name = "a # b"  # comment') == 'name = "a # b"'


def run_script(tmp_path, body: str) -> subprocess.CompletedProcess:
    path = tmp_path / "loop.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


LOOP = """
    import torch
    from rocmcheck.monitor.leak import leak_watch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    {setup}
    with leak_watch(opt, out_dir=".", **{kwargs}) as watch:
        for step in range(10):
            loss = torch.nn.functional.cross_entropy(model(torch.randn(64, 128)), torch.randint(0, 8, (64,)))
            loss.backward()
            opt.step()
            opt.zero_grad()
            {keep}
    r = watch.report.result() if watch.report else None
    print("RESULT", r.status.value if r else None, "|", r.summary if r else "", "|", r.fix.line() if r else "")
"""


def test_cpu_loop_that_keeps_the_loss_names_the_line(tmp_path):
    proc = run_script(tmp_path, LOOP.format(setup="losses = []", kwargs="{'always': True}", keep="losses.append(loss)"))
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    assert line.startswith("RESULT fail"), proc.stderr
    assert "loop.py:15 (`losses.append(loss)`)" in line and "list `losses`" in line
    assert "keep `loss.item()` instead" in line and "autograd graph" in line
    assert "[rocmcheck leak]" in proc.stderr


def test_cpu_loop_without_a_leak_finds_no_holder(tmp_path):
    proc = run_script(tmp_path, LOOP.format(setup="losses = []", kwargs="{'always': True}",
                                            keep="losses.append(loss.item())"))
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    assert line.startswith("RESULT warn"), proc.stderr
    assert "nothing born in one step survived" in line


def test_no_watch_while_the_baseline_stays_flat(tmp_path):
    proc = run_script(tmp_path, LOOP.format(setup="", kwargs="{}", keep="pass"))
    assert "RESULT None" in proc.stdout, proc.stderr


def test_trainer_callback_is_a_real_trainer_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    from rocmcheck.monitor.leak import LeakWatchCallback

    assert issubclass(LeakWatchCallback, transformers.TrainerCallback)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    cb = LeakWatchCallback(always=True, warmup=0)
    cb.on_train_begin(args, state, control)
    kept = []
    import torch

    w = torch.nn.Parameter(torch.randn(64, 64))
    for _ in range(4):
        loss = (w @ torch.randn(64, 64)).pow(2).mean()
        kept.append(loss)
        cb.on_step_end(args, state, control)
    cb.on_train_end(args, state, control)
    assert cb.watch.report is not None and cb.watch.report.holders
    assert cb.watch.report.holders[0].holder.startswith("list `kept`")


LOGITS_LOOP = """
    import torch
    from rocmcheck.monitor.leak import leak_watch

    torch.manual_seed(0)
    vocab, hidden, batch, seq = 4000, 64, 8, 256  # logits: 8 x 256 x 4000 fp32 = 31 MiB a step
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, hidden), torch.nn.Linear(hidden, vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kept = []
    with leak_watch(opt, out_dir=".") as watch:
        for step in range(12):
            tokens = torch.randint(0, vocab, (batch, seq))
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
            {keep}
            del logits, loss
    r = watch.report.result() if watch.report else None
    print("RESULT", r.status.value if r else None, "|", r.summary if r else "")
    if r is not None:
        import json
        print("FIX", json.dumps(r.fix.to_dict()))
"""


def _leak_run(tmp_path, keep: str) -> tuple[str, dict | None]:
    import json

    proc = run_script(tmp_path, LOGITS_LOOP.format(keep=keep))
    result = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))
    fix = next((json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("FIX ")), None)
    return result, fix


FIXED_LINE = "kept.append(logits[:, -1].detach().clone())"


@pytest.mark.parametrize("keep", ["kept.append(logits[:, -1])  # LEAK: the last position, for a metric",
                                  "kept.append(logits[:, -1].detach())  # LEAK: detached, still the whole logits"])
def test_a_kept_slice_of_the_logits_gets_an_edit_that_keeps_a_copy(tmp_path, keep):
    """A real leaking loop keeps the last position's logits: the slice (graph or not) holds the whole 31 MiB
    logits tensor of its step, and resident memory climbs by that much a step. The finder's fix is an edit of
    the loop's line (its code, not its comment) that keeps a copy."""
    result, fix = _leak_run(tmp_path, keep)
    assert result.startswith("RESULT fail") and "list `kept`" in result, result
    assert fix["kind"] == "edit" and fix["file"].endswith("loop.py")
    before, after = fix["text"].split(": ", 1)[1].split(" -> ")
    assert before == f"`{code_of(keep)}`" and "#" not in fix["text"] and "LEAK" not in fix["text"]
    assert after == f"`{FIXED_LINE}`"


def test_the_loop_with_that_edit_no_longer_leaks(tmp_path):
    result, _ = _leak_run(tmp_path, FIXED_LINE)
    assert result.startswith("RESULT None"), result  # the baseline no longer rises: nothing to watch
