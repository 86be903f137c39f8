"""`rocmcheck doctor --summary`: a short, redacted block of the machine's facts and of the verdicts that failed or
warned, to paste into an issue (what collect_env and `accelerate env` give, plus the verdicts), and its way back:
triage reads the block (rocmcheck/triage/readers/summary.py, the labels written there) into the same facts.

The block is written from a CheckContext (the doctor's, or triage's on pasted facts), through the accessors that
know what is known, so a fact that was not collected is left out rather than written as absent; and what triage
reads back from a block writes the same block again (tests/test_triage_summary.py).
"""

from __future__ import annotations

import os
from typing import Any

from rocmcheck import __version__
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.torch_stack import compiled_archs
from rocmcheck.facts.collect import ENV_NAMES, PACKAGES, Facts
from rocmcheck.facts.known import NotKnown
from rocmcheck.facts.redact import mask_identity, redact_value
from rocmcheck.fixes import Fix, note, one_line
from rocmcheck.result import CheckResult, Status
from rocmcheck.triage.readers import summary as fmt

# Variables the block leaves out: long, and they name the person's own folders.
ENV_LEFT_OUT = ("PATH", "LD_LIBRARY_PATH")
SHOWN_STATUSES = (Status.FAIL, Status.WARN, Status.CRASH)
# The fix a verdict read back without one gets (a block edited by hand): the results of a triage carry a fix.
NO_FIX = note("rerun `rocmcheck doctor` on that machine for this verdict's fix")
# The data keys of a verdict read from a pasted block: its fix line as pasted, and that it came from a paste.
PASTED_FIX = "pasted_fix"
PASTED = "pasted"


def render_summary(facts: Facts, ctx: CheckContext | None, results: list[CheckResult]) -> str:
    """The block, every line redacted and then masked for a public thread (the home folder as `~`, the user name
    as <user>, IP addresses as <ip>: rocmcheck.facts.redact.mask_identity). ctx: the checks' context over these
    facts (its parsed views are reused)."""
    ctx = ctx if ctx is not None else CheckContext(facts)
    lines = [fmt.HEADER.format(version=fmt.SUMMARY_VERSION, tool=__version__)]
    lines += _os(ctx) + _one(fmt.KERNEL, lambda: ctx.platform_info("kernel"))
    lines += _one(fmt.PYTHON, lambda: ctx.platform_info("python"))
    rocm = known_or_none(lambda: ctx.rocm)
    if rocm is not None:
        lines.append(f"{fmt.ROCM}: {rocm.version or fmt.NONE}{fmt.SEP}{rocm.root}{fmt.SEP}{rocm.layout}")
    for i, (arch, name, memory) in enumerate(summary_gpus(ctx)):
        parts = [arch or fmt.NONE, name or fmt.NONE] + ([fmt.size_text(memory)] if memory else [])
        lines.append(f"gpu {i}: {fmt.SEP.join(parts)}")
    lines += _torch(ctx) + _packages(ctx) + _env(facts)
    if ctx.knows("limits", "shm_bytes"):
        shm = ctx.limit("shm_bytes")
        lines.append(f"{fmt.SHM}: {fmt.size_text(shm) if shm is not None else fmt.NONE}")
    container = known_or_none(lambda: ctx.in_container)
    if container is not None:
        lines.append(f"{fmt.CONTAINER}: {'yes' if container[0] else 'no'}")
    for fix, shown in _by_fix(results):  # a fix several verdicts share: printed once, below all of them
        lines += [f"{r.status.value.upper()} {r.id}: {one_line(r.summary)}" for r in shown]
        lines.append(f"  {fmt.FIX_LABEL}{fix.line()}")
    lines.append(fmt.FOOTER)
    home, user = _identity()
    return "\n".join(lines[:1] + [mask_identity(redact_value(line), home, user) for line in lines[1:]]) + "\n"


def _identity() -> tuple[str | None, str | None]:
    """This machine's home folder and user name, which the public block masks (rocmcheck.facts.redact)."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    home = os.path.expanduser("~")
    return (home if home != "~" else None), user


def _by_fix(results: list[CheckResult]) -> list[tuple[Fix, list[CheckResult]]]:
    """The verdicts shown, grouped by their fix's command (its comment aside), in the order they came."""
    groups: dict[tuple[str, str, str], tuple[Fix, list[CheckResult]]] = {}
    for r in results:
        if r.status in SHOWN_STATUSES:
            fix = r.fix or NO_FIX
            groups.setdefault((fix.kind.value, fix.file, fix.text), (fix, []))[1].append(r)
    return list(groups.values())


def summary_gpus(ctx: CheckContext) -> list[tuple[str | None, str | None, int | None]]:
    """(arch, name, memory) of each GPU: the GPU views; on pasted facts, a summary's own GPU list first (it names
    GPUs whose arch no view would take)."""
    pasted = [g for g in getattr(ctx, "pasted_gpus", []) if g.origin == "rocmcheck_summary"]
    if pasted:
        return [(g.arch, g.name, g.memory_bytes) for g in pasted]
    gpus = known_or_none(lambda: ctx.gpus) or []
    return [(g.arch, g.name, g.memory_bytes) for g in gpus]


def _one(label: str, read: Any) -> list[str]:
    v = known_or_none(read)
    return [f"{label}: {v}"] if v else []


def _os(ctx: CheckContext) -> list[str]:
    name, dist, version = (known_or_none(lambda k=k: ctx.os_field(k)) for k in ("name", "id", "version"))
    if not (name or dist or version):
        return []
    parts = [name or fmt.NONE] + ([f"id {dist}"] if dist else []) + ([f"version {version}"] if version else [])
    return [f"{fmt.OS}: {fmt.SEP.join(parts)}"]


def _has(d: dict[str, Any], key: str) -> bool:
    try:
        return key in d
    except NotKnown:
        return False


def _torch(ctx: CheckContext) -> list[str]:
    if not ctx.knows("probes", "torch"):
        return []
    t = ctx.probe("torch")
    if not t or not _has(t, "version") or not t.get("version"):
        return [f"{fmt.TORCH}: {fmt.NONE}"]
    parts = [str(t["version"])]
    for key, label in (("hip", "hip"), ("cuda", "cuda")):
        if _has(t, key):
            parts.append(f"{label} {t.get(key) or fmt.NONE}")
    if _has(t, "device_count") and t.get("device_count") is not None:
        parts.append(f"gpus {t['device_count']}")
    if _has(t, "arch_list") or _has(t, "arch_flags"):
        archs = compiled_archs({k: t.get(k) for k in ("arch_list", "arch_flags") if _has(t, k)})
        parts.append(f"archs {','.join(archs) or fmt.EMPTY}")
    return [f"{fmt.TORCH}: {fmt.SEP.join(parts)}"]


def _packages(ctx: CheckContext) -> list[str]:
    installed, missing = [], []
    for name in PACKAGES:
        if not ctx.knows("packages", name):
            continue
        version = ctx.package(name)
        if version:
            installed.append(f"{name} {version}")
        else:
            missing.append(name)
    return ([f"{fmt.PACKAGES}: {', '.join(installed)}"] if installed else []) + \
        ([f"{fmt.NOT_INSTALLED}: {', '.join(missing)}"] if missing else [])


def _env(facts: Facts) -> list[str]:
    if "env" not in facts.known:
        return []
    shown = sorted((k, v) for k, v in facts.env.items() if v is not None and k not in ENV_LEFT_OUT)
    if not shown:
        return [f"{fmt.ENV}: {fmt.NO_ENV}"]
    return [f"{fmt.ENV}: {k}={one_line(v)}" for k, v in shown]


# ---- reading a block back (triage) --------------------------------------------------------------------------

def facts_of_summary(builder: Any, inp: Any, block: Any, s: fmt.Summary) -> None:
    """A summary block's facts into the pasted facts (rocmcheck/triage/pasted.py's builder), its verdicts into the
    verdicts triage merges with its own."""
    from rocmcheck.facts.rocm_location import RocmLocation

    if not s.found:
        return
    p, q = builder.p, inp.quote
    if s.os_name or s.os_id or s.os_version:
        builder._os(s.os_id, s.os_version, s.os_name, None, None, q(block, f"{fmt.OS}: "))
    if s.kernel:
        builder.fact("platform", "kernel", s.kernel, q(block, f"{fmt.KERNEL}: "))
    if s.python:
        builder.fact("platform", "python", s.python, q(block, f"{fmt.PYTHON}: "))
    if s.rocm_root and p.rocm is None:
        version, root, layout = s.rocm_version, s.rocm_root, "legacy"
        if fmt.SEP in root:
            root, layout = root.split(fmt.SEP, 1)
        p.rocm = RocmLocation(root, layout, "the rocmcheck summary", version)
        p.where.setdefault("rocm_layout/roots", q(block, f"{fmt.ROCM}: "))
    for g in s.gpus:
        builder.gpu("rocmcheck_summary", None, g.name, g.arch, q(block, f"gpu {g.index}: "), g.memory_bytes)
    if s.torch_shown:
        _torch_facts(builder, s, q(block, f"{fmt.TORCH}: "))
    if s.packages:
        quote = q(block, f"{fmt.PACKAGES}: ")
        if all(name in s.packages for name in PACKAGES):
            builder.whole("packages", dict(s.packages), quote)
        else:
            for name, version in s.packages.items():
                builder.fact("packages", name, version, quote)
    if s.env_shown:
        for name, v in s.env.items():
            builder.env(name, v, q(block, f"{fmt.ENV}: {name}="))
        builder.known_absent("env", [n for n in ENV_NAMES if n not in ENV_LEFT_OUT])
    if s.shm_shown:
        builder.fact("limits", "shm_bytes", s.shm_bytes, q(block, f"{fmt.SHM}: "))
    if s.container is not None and p.container is None:
        p.container = s.container
        p.where.setdefault("present//.dockerenv", q(block, f"{fmt.CONTAINER}: "))
    for v in s.verdicts:
        # The block is plain text anyone can write: its fix line is never rocmcheck's advice. The verdict gets
        # rocmcheck's own word (NO_FIX, or the fix the check builds when it judges the pasted facts: triage());
        # the line as pasted is kept as data (PASTED_FIX), shown quoted under "the paste says".
        data = {PASTED_FIX: one_line(v.fix)} if v.fix else {}
        p.recorded.append(CheckResult(v.id, Status(v.status), v.summary, [], NO_FIX, data={**data, PASTED: True}))
        p.where.setdefault(f"recorded/{v.id}", q(block, v.line))


def _torch_facts(builder: Any, s: fmt.Summary, quote: Any) -> None:
    if s.torch is None:
        builder.fact("probes", "torch", None, quote)
        return
    builder.imported("torch", quote)
    for key, v in s.torch.items():
        builder.probe("torch", key, v, quote)

