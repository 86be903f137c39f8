"""The leak finder follows a step's memory to the Python name that holds it: a running value that chains every
step's autograd graph (`total = total + loss`, `total += loss` in a closure, an attribute a module sets in its
forward), a container of views; the line that last assigned it, and the advice for its kind. Real training
loops on CPU with real torch, each in its own interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from rocmcheck.monitor.leak import _assigned_expr, _self_referencing, graph_advice

SCRIPT = """
    import sys
    import torch
    from rocmcheck.monitor.leak import leak_watch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down, self.seen = torch.nn.Linear(32, 256), torch.nn.Linear(256, 4), None

        def forward(self, x, keep=False):
            h = torch.relu(self.up(x))
            if keep:
                self.seen = h.sum() if self.seen is None else self.seen + h.sum()
            return self.down(h)

    def batch():
        return torch.randn(16, 32), torch.randint(0, 4, (16,))

    def make_step(model, opt):
        total = torch.zeros(())
        def step(x, y):
            nonlocal total
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += loss
        return step

    def keeps_views(model, opt):
        cache = {}
        for i in range(8):
            x, y = batch()
            out = model(x)
            torch.nn.functional.cross_entropy(out, y).backward()
            opt.step()
            opt.zero_grad()
            cache[i] = out[:, -1]

    def global_step(model, opt):
        global total
        loss = torch.nn.functional.cross_entropy(model(batch()[0]), batch()[1])
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = total + loss

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    variant = sys.argv[1]
    total = 0
    with leak_watch(opt, out_dir=".", always=True) as watch:
        if variant == "closure":
            step = make_step(model, opt)
            for i in range(8):
                step(*batch())
        elif variant == "views":
            keeps_views(model, opt)
        elif variant == "global":
            for i in range(8):
                global_step(model, opt)
        else:
            for i in range(8):
                x, y = batch()
                loss = torch.nn.functional.cross_entropy(model(x, keep=variant == "attribute"), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                {running}
    r = watch.report.result()
    print("RESULT", r.status.value, "|", r.summary, "|", r.fix.line())
"""

RUNNING = "total = total + loss  # the running loss, kept as a tensor"


def lineno(code: str) -> int:
    """The line of the script that holds `code`."""
    lines = textwrap.dedent(SCRIPT).splitlines()
    return next(i for i, text in enumerate(lines, 1) if code in text)


def run(tmp_path, variant: str, running: str = RUNNING) -> str:
    path = tmp_path / "loop.py"
    path.write_text(textwrap.dedent(SCRIPT).replace("{running}", running))
    proc = subprocess.run([sys.executable, str(path), variant], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line is not None, proc.stderr
    return line


def test_a_running_loss_kept_as_a_tensor_is_named_with_its_line(tmp_path):
    line = run(tmp_path, "running")
    assert line.startswith("RESULT fail"), line
    assert "`total` (module __main__) holds an autograd graph that grows every step" in line
    at = lineno("{running}")
    assert f"last assigned at loop.py:{at} (`total = total + loss`)" in line
    assert f"line {at}: `total = total + loss` -> `total = total + loss.item()`" in line  # the edit, not the comment


def test_with_that_edit_no_name_holds_a_graph(tmp_path):
    line = run(tmp_path, "running", "total = total + loss.item()")
    assert line.startswith("RESULT warn") and "nothing born in one step survived" in line, line


def test_a_closure_variable_and_a_module_attribute(tmp_path):
    closure = run(tmp_path, "closure")
    assert "closure variable `total` of step()" in closure and "(`total += loss`)" in closure, closure
    assert "`total += loss.item()`" in closure
    attribute = run(tmp_path, "attribute", "pass")
    assert "`self.seen` of Net holds an autograd graph that grows" in attribute, attribute
    assert f"loop.py:{lineno('self.seen = h.sum()')}" in attribute and ").item()`" in attribute.split("|")[2]


def test_a_global_assigned_in_a_function_is_named_with_the_functions_line(tmp_path):
    line = run(tmp_path, "global", "pass")
    assert "`total` (module __main__) holds an autograd graph" in line, line
    assert f"loop.py:{lineno('total = total + loss')} (`total = total + loss`)" in line


def test_a_dict_of_views_gets_a_copy_or_a_clear(tmp_path):
    line = run(tmp_path, "views")
    assert "dict `cache` in keeps_views() holds" in line
    assert f"filled at loop.py:{lineno('cache[i] = out')} (`cache[i] = out[:, -1]`)" in line
    assert "`out[:, -1].detach().clone()`" in line and "clear `cache` after each step" in line, line


def test_the_expression_kept_and_the_advice_for_each_kind():
    assert _assigned_expr("total = total + loss", "total") == "loss"
    assert _assigned_expr("total += loss / accum", "total") == "loss / accum"
    assert _assigned_expr("self.last = out.logits[:, -1]", "last") == "out.logits[:, -1]"
    assert _self_referencing("self.total = self.total + x", "total") and not _self_referencing("x = y", "x")
    assert graph_advice("total += loss / accum", "total", 1, view=False, on_gpu=False, chained=True).instead == \
        "(loss / accum).item()"
    assert graph_advice("last = out[:, -1]", "last", 64, view=True, on_gpu=True, chained=False).instead == \
        "out[:, -1].detach().cpu()"
    assert graph_advice("h = a @ b", "h", 64, view=False, on_gpu=False, chained=False).instead == "(a @ b).detach()"


def test_a_kept_tuple_gets_advice_per_element_never_a_method_of_the_tuple():
    from rocmcheck.monitor.leak import advice_fix, keep_instead

    advice = keep_instead("history.append((loss, logits))", 1, True)
    assert advice.instead is None and "`(loss, logits)`" in advice.text and ".item()" in advice.text
    assert advice_fix(advice, "train.py", 21, "history.append((loss, logits))").kind.value == "note"
