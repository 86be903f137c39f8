"""A pasted Python session -> PythonSession: what torch said about itself and the GPU, run by run.

Written against tests/fixtures/pastes/python_session/: `python -c "import torch; print(torch.__version__)"`
one-liners after conda/user@host prompts, `AMD_LOG_LEVEL=7 python -c ...` with the HIP runtime's log lines
between the output lines, a REPL pasted with the shell prompt, the banner and `>>> ` prompts (where
`>>> torch.version.cuda` echoes nothing on ROCm, because the REPL does not echo None), an IPython session inside
`docker run ... ipython` (`In [2]: torch.cuda.is_available()` / `Out[2]: False`), and `python -c` runs that
end in a traceback ("RuntimeError: No HIP GPUs are available"). Values are read by the expression that printed
them: `torch.__version__`, `torch.cuda.is_available()`, `torch.cuda.device_count()`, `torch.version.hip`,
`torch.version.cuda`, `torch.cuda.get_device_name(...)`, `torch.cuda.get_arch_list()`,
`torch.cuda.get_device_properties(...)` (its name= and gcnArchName=). Never raises.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import as_bool, read_lines
from rocmcheck.triage.readers.shell import parse_command, split_prompt
from rocmcheck.triage.readers.traceback import Traceback, parse_traceback

MAX_RUNS = 100
MAX_OUTPUT_LINES = 500
_BANNER = re.compile(r"^(?:Python|IPython) (\d+\.\d+(?:\.\d+)?)\S*(?: |$)")
_VERSION_OUTPUT = re.compile(r"^Python (\d+\.\d+(?:\.\d+)?)\S*\s*$")
_REPL = re.compile(r"^>>> ?(.*)$")
_REPL_MORE = re.compile(r"^\.\.\. ?(.*)$")
_IPY_IN = re.compile(r"^In \[(\d+)\]: ?(.*)$")
_IPY_OUT = re.compile(r"^Out\[(\d+)\]: ?(.*)$")
_HIP_LOG = re.compile(r"^:\d:\S")
# The banner lines of the REPL and of IPython, which are not a program's output.
_BANNER_LINE = re.compile(r"^\[(?:GCC|Clang|MSC)[^\]]*\] on \w+|^Type \"(?:help|copyright)\"|^Type 'copyright'"
                          r"|^IPython \d"
                          r"|^\?\s+-> |^%quickref\s+-> |^help\s+-> |^object\?\s+-> ")
# Lines in a session that its program did not print as a value: c10's "[W AllocatorConfig.cpp:28] Warning: ...",
# Python warnings, and a person's "# -> ..." note.
_NOT_OUTPUT = re.compile(r"^\[[WEI] [\w./-]+\.(?:cpp|cc|h):\d+\]|^\S+\.py:\d+: \w*Warning:|^\s*warnings\.warn\(|^#")
_BARE_PYTHON = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?(?:python[\d.]*|ipython3?)\s+-c(?:\s|$)")
_PROPS_NAME = re.compile(r"name='([^']*)'")
_PROPS_ARCH = re.compile(r"gcnArchName='([^']*)'")
_GFX = re.compile(r"\bgfx[0-9a-f]+\b")


@dataclass
class PythonRun:
    """One `python -c` / `python` / `ipython` invocation (or a bare `>>>` session)."""

    command: str | None = None  # the shell command, prompt removed
    env: dict[str, str] = field(default_factory=dict)  # AMD_LOG_LEVEL=7, HIP_VISIBLE_DEVICES=1 before `python`
    statements: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)  # what it printed (HIP log lines and tracebacks aside)
    values: dict[str, str] = field(default_factory=dict)  # expression -> the text printed for it
    exception: Traceback | None = None


@dataclass
class PythonSession:
    runs: list[PythonRun] = field(default_factory=list)
    python_version: str | None = None
    torch_version: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    hip_version: str | None = None  # torch.version.hip; None when unknown or when it printed None
    hip_printed: bool = False  # torch.version.hip was shown (so hip_version None means "not a ROCm build")
    cuda_version: str | None = None  # torch.version.cuda
    cuda_printed: bool = False
    device_names: list[str] = field(default_factory=list)
    arch_list: list[str] = field(default_factory=list)  # torch.cuda.get_arch_list()
    gcn_arch: str | None = None  # "gfx942:sramecc+:xnack-" from get_device_properties

    @property
    def exception(self) -> Traceback | None:
        return next((r.exception for r in reversed(self.runs) if r.exception is not None), None)

    @property
    def found(self) -> bool:
        return bool(self.runs)


def parse_python_session(text: Any) -> PythonSession:
    """Never raises. Each value comes from the last run that printed it. Written against
    tests/fixtures/pastes/python_session/python-c_torch2.1.0+cu118_is_available-True_conda-prompt_unfenced_
    robosense2025-track5-11.txt, repl_torch.version.hip-3.0.19493_conda-root_ROCm-pytorch-513_part2.txt,
    corpus/36-floydhub-dockerfiles-3.paste.txt (IPython) and corpus/50-Parsl-parsl-3858.paste.txt."""
    session = PythonSession()
    run: PythonRun | None = None
    pending: list[str] = []  # output of the statement being read (REPL) or of the run (-c)
    statement: str | None = None
    lines = read_lines(text)
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        split = split_prompt(line) if not line.startswith((">>>", "...", "In [", "Out[")) else None
        if split is None and _BARE_PYTHON.match(line):  # a `python -c` line pasted without its prompt
            split = ("", line)
        if split is not None:
            command = parse_command(split[1])
            if command.kind == "python_session" or command.tool.startswith(("python", "ipython", "py")):
                _end_statement(run, statement, pending)
                statement, pending = None, []
                if run is not None:
                    _finish(session, run)
                run, i = _start_run(command, lines, i)
                if len(session.runs) >= MAX_RUNS:
                    break
                continue
            _end_statement(run, statement, pending)
            statement, pending = None, []
            if run is not None:
                _finish(session, run)
            run = None
            continue
        m = _BANNER.match(line)
        if m and (run is None or not run.output):
            session.python_version = session.python_version or m.group(1)
            continue
        if _BANNER_LINE.match(line):
            continue
        m = _REPL.match(line) or _IPY_IN.match(line)
        if m:
            if run is None:
                run = PythonRun()
            _end_statement(run, statement, pending)
            code = m.group(m.lastindex)
            statement, pending = (code if code.strip() else None), []
            if statement:
                run.statements.append(statement[:1000])
            continue
        m = _REPL_MORE.match(line)
        if m and statement is not None:
            continue
        m = _IPY_OUT.match(line)
        if m and run is not None:
            pending.append(m.group(2))
            continue
        if run is None:
            run = PythonRun()
        if _HIP_LOG.match(line) or _NOT_OUTPUT.match(line) or not line:
            continue
        if len(pending) < MAX_OUTPUT_LINES:
            pending.append(line)
    _end_statement(run, statement, pending, last=True)
    if run is not None:
        _finish(session, run)
    return session


def _start_run(command: Any, lines: list[str], i: int) -> tuple[PythonRun, int]:
    """A new run from its command line; a `python -c "` whose code goes on over the next lines takes them."""
    run = PythonRun(command=command.text[:2000], env=dict(list(command.env.items())[:50]))
    m = re.search(r"(?:^|\s)-c\s+(.*)$", command.text)
    if m:
        code = m.group(1).strip()
        quote = code[:1] if code[:1] in "'\"" else ""
        if quote and code.count(quote) % 2 == 1:  # the code goes on over the next lines
            body = [code[1:]]
            while i < len(lines) and len(body) < 200:
                nxt = lines[i]
                i += 1
                if quote in nxt:
                    body.append(nxt.split(quote, 1)[0])
                    break
                body.append(nxt)
            run.statements.extend(_statements("\n".join(body)))
        elif command.args[:1] == ["-c"] and len(command.args) > 1:
            run.statements.extend(_statements(command.args[1]))
        else:
            run.statements.extend(_statements(code.strip(quote)))
    elif command.args[:1] in (["--version"], ["-V"]):
        run.statements.append("--version")
    return run, i


def _statements(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [s.strip() for s in re.split(r"[;\n]", code) if s.strip()][:200]
    out = []
    for node in tree.body[:200]:
        segment = ast.get_source_segment(code, node)
        if segment:
            out.append(segment)
    return out


def _end_statement(run: PythonRun | None, statement: str | None, pending: list[str], last: bool = False) -> None:
    """The output read so far belongs to the statement before it (REPL) or to the run (`python -c`)."""
    if run is None:
        return
    clean = _without_traceback(run, pending)
    run.output.extend(clean[: MAX_OUTPUT_LINES - len(run.output)])
    if statement is None:
        return
    args = _print_args(statement)
    if args is not None:
        if clean:  # one print() is one line; pprint's one value may take several
            _assign(run, statement, args, clean[0] if len(args) != 1 else "\n".join(clean))
        return
    expression = _expression(statement)
    if expression is None:
        return
    if clean:
        run.values[expression] = "\n".join(clean)  # the REPL echoes a value over as many lines as it takes
    elif not last:
        run.values[expression] = "None"  # the REPL echoes nothing for None


def _without_traceback(run: PythonRun, lines: list[str]) -> list[str]:
    for k, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)") or re.match(r"^(?:[\w.]+)?(?:Error|Exception):", line):
            run.exception = parse_traceback("\n".join(lines[k:]))
            return lines[:k]
    return lines


def _expression(statement: str) -> str | None:
    """The statement if the REPL would echo its value (an expression, not an import or an assignment)."""
    try:
        tree = ast.parse(statement.strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        return statement.strip()
    return None


def _print_args(statement: str) -> list[ast.expr] | None:
    """The arguments of a `print(...)` statement (or of `pprint.pp(...)` / `pprint.pprint(...)`, which print one
    value over as many lines as it takes); None for any other statement."""
    try:
        tree = ast.parse(statement.strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name == "print" or (name in ("pp", "pprint") and len(call.args) == 1):
        return list(call.args)
    return None


def _finish(session: PythonSession, run: PythonRun) -> None:
    """Match a `python -c` run's printed lines to its print() calls, then read the known expressions."""
    if run.command is not None and not run.values:
        prints = [(s, _print_args(s)) for s in run.statements]
        prints = [(s, a) for s, a in prints if a is not None]
        if "--version" in run.statements and run.output:
            m = _VERSION_OUTPUT.match(run.output[0])
            if m:
                session.python_version = m.group(1)
        for (statement, args), output in zip(prints, run.output):
            _assign(run, statement, args, output)
    session.runs.append(run)
    for expression, value in run.values.items():
        _read_value(session, expression, value)


def _assign(run: PythonRun, statement: str, args: list[ast.expr], output: str) -> None:
    values = [a for a in args if not (isinstance(a, ast.Constant) and isinstance(a.value, str))]
    rest = output
    for a in args:  # literal labels ("cuda:") are removed from the printed line
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.strip():
            rest = rest.replace(a.value.strip(), " ", 1)
    if len(values) == 1:
        run.values[ast.unparse(values[0])] = rest.strip()
        return
    tokens = rest.split()
    if len(tokens) == len(values):
        for a, token in zip(values, tokens):
            run.values[ast.unparse(a)] = token


def _read_value(session: PythonSession, expression: str, value: str) -> None:
    e = re.sub(r"\s+", "", expression)
    whole = value.strip()
    v = whole.split("\n", 1)[0].strip()
    if e == "torch.__version__":
        session.torch_version = v.strip("'\"") or None
    elif e.startswith("torch.cuda.is_available("):
        session.cuda_available = as_bool(v)
    elif e.startswith("torch.cuda.device_count("):
        session.device_count = int(v) if v.isdigit() and len(v) < 6 else None
    elif e == "torch.version.hip":
        session.hip_printed = True
        session.hip_version = None if v in ("None", "") else v.strip("'\"")
    elif e == "torch.version.cuda":
        session.cuda_printed = True
        session.cuda_version = None if v in ("None", "") else v.strip("'\"")
    elif e.startswith("torch.cuda.get_device_name("):
        name = v.strip("'\"")
        if name and name not in session.device_names:
            session.device_names.append(name)
    elif e.startswith("torch.cuda.get_arch_list("):
        try:
            parsed = ast.literal_eval(whole[:20_000])
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            parsed = _GFX.findall(whole) or re.findall(r"sm_\d+", whole)
        if isinstance(parsed, (list, tuple)):
            session.arch_list = [str(p) for p in parsed][:100]
    elif e.startswith("torch.cuda.get_device_properties("):
        name, arch = _PROPS_NAME.search(whole), _PROPS_ARCH.search(whole)
        if e.endswith(".gcnArchName"):
            session.gcn_arch = v.strip("'\"") or None
        else:
            if name and name.group(1) not in session.device_names:
                session.device_names.append(name.group(1))
            if arch:
                session.gcn_arch = arch.group(1)

