"""The triage's answer as text for a terminal, and as Markdown ready to post as a reply beside the pasted text: the
likely causes, each with the pasted line that shows it, the fix, and what to paste next when the evidence is thin.
Every line printed is redacted (the pastes were redacted before they were read; this is the second guard) and
cleaned of control characters (rocmcheck.report.render.clean)."""

from __future__ import annotations

import re

from rocmcheck.facts.redact import redact_value
from rocmcheck.fixes import Fix, FixKind
from rocmcheck.report.render import clean
from rocmcheck.result import Status
from rocmcheck.triage import SHOWN, Triage
from rocmcheck.triage.pasted import QUOTE_CUT
from rocmcheck.triage.rank import Finding
from rocmcheck.triage.summary import NO_FIX, PASTED, PASTED_FIX

QUOTES_SHOWN = 3
SIMILAR_HEAD = ("Recorded threads with a similar paste (the cause each accepted and its fix, said as that thread's: "
                "not judged on this paste):")
OTHER_QUOTE_CHARS = 100  # the line shown beside a less likely cause in a reply
# What to ask for when a paste shows nothing rocmcheck can judge.
NEXT_PASTE = ("the output of `rocmcheck doctor --summary` (or of `python -m torch.utils.collect_env` and `rocminfo`), "
              "and the whole error with its traceback")


def _safe(text: str) -> str:
    return clean(redact_value(str(text)))


# ---- what came from a paste, as data -------------------------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
_MD_SPECIAL = re.compile(r"[\\`*_\[\]#|~]")
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;"}


def code_span(text: str) -> str:
    """text as one Markdown code span, whatever backticks it holds: inside it a mention, a link or HTML is text."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def fence(lines: list[str], info: str = "text") -> list[str]:
    """lines as a fenced block no line of them can close: the fence is longer than any run of backticks."""
    longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark + info, *lines, mark]


def md_escape(text: str) -> str:
    """Text for a Markdown paragraph with no markup left: emphasis, links, headings and code marks
    backslash-escaped, and &, <, > and @ as entities (no raw HTML, no @-mention)."""
    out = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), text)
    return "".join(_MD_ENTITIES.get(c, c) for c in out)


def from_paste(f: Finding) -> bool:
    """Whether the finding is a verdict a pasted summary reports (its words are the paste's, not rocmcheck's)."""
    return f.cause is None and f.verdict is not None and bool(f.verdict.data.get(PASTED))


def pasted_fix(f: Finding) -> str | None:
    """The fix line a pasted summary gave for this verdict, when rocmcheck has no fix of its own for it."""
    v = f.verdict
    if v is None or not v.data.get(PASTED_FIX) or (f.fix is not None and f.fix != NO_FIX):
        return None
    return str(v.data[PASTED_FIX])


def _short(text: str, limit: int = OTHER_QUOTE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + QUOTE_CUT


def _fix_text(fix: Fix) -> str:
    if fix.kind is FixKind.EDIT:
        return f"in {fix.file}: {fix.text}" + (f" ({fix.why})" if fix.why else "")
    return fix.line()


def text_lines(t: Triage, *, show_all: bool = False, verbose: bool = False) -> list[str]:
    shown = t.findings if show_all else t.findings[:SHOWN]
    kinds = [b.kind for inp in t.pasted.inputs for b in inp.paste if b.kind != "text"]
    head = (f"rocmcheck triage — {len(t.pasted.inputs)} paste{'s' if len(t.pasted.inputs) != 1 else ''}"
            + (f" ({', '.join(dict.fromkeys(kinds))})" if kinds else " (no tool output recognised)"))
    out = [head, ""]
    if not shown:
        judged_any = any(j.result.status in (Status.PASS, Status.WARN, Status.FAIL) for j in t.judged)
        out += ["No known cause found in the paste." if judged_any else
                "Nothing in the paste could be judged: no error text or tool output rocmcheck knows.",
                f"Paste next: {NEXT_PASTE}", ""]
    for i, f in enumerate(shown, 1):
        out += _finding_lines(i, f)
    rest = len(t.findings) - len(shown)
    if rest > 0:
        out.append(f"{rest} less likely cause{'s' if rest != 1 else ''} (--all shows them)")
    out += similar_lines(t)
    judged = [j.result for j in t.judged]
    counts = {s: sum(1 for r in judged if r.status is s) for s in Status}
    not_in = sum(1 for r in judged if r.status is Status.SKIP and r.data.get("not_known"))
    out.append(f"Checks on the pasted facts: {counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
               f"{counts[Status.FAIL]} fail, {not_in} not in the paste" + ("" if verbose else " (-v lists them)"))
    if verbose:
        out += [f"  {r.status.value:<5} {r.id:<24} {r.summary}" for r in judged]
    return [_safe(line) for line in out]


def similar_lines(t: Triage) -> list[str]:
    """The recorded threads most like the paste: each thread's own accepted cause and fix, said as that thread's."""
    if not t.similar:
        return []
    out = [SIMILAR_HEAD, ""]
    for s in t.similar:
        th = s.thread
        out += [f"- {th.title} ({th.url}; {th.platform} there; shares: {', '.join(s.shared)})",
                f"  cause there: {th.cause}", f"  fix there: {th.fix}", ""]
    return out


def _similar_markdown(t: Triage) -> list[str]:
    if not t.similar:
        return []
    # The URL in a code span: a reply posted with a live link to another repository's issue would add a
    # cross-reference to that timeline.
    return [md_escape(SIMILAR_HEAD), "", *[f"- {md_escape(s.thread.title)} ({code_span(s.thread.url)}): "
                                           f"{md_escape(s.thread.cause)} Fix there: {md_escape(s.thread.fix)}"
                                           for s in t.similar], ""]


def _finding_lines(i: int, f: Finding) -> list[str]:
    title = f"the paste says: {code_span(f.title)}" if from_paste(f) else f.title
    out = [f"{i}. {title}  [{f.id}, {f.status.value}]"]
    if f.cause is not None:
        out.append(f"   {f.text}")
    if f.quotes:
        out.append("   the paste shows:")
        out += [f"     {q.source}:{q.line}: {q.text}" for q in f.quotes[:QUOTES_SHOWN]]
    if f.fix is not None:
        label = "paste" if f.fix.kind is FixKind.SHELL else "fix"
        out.append(f"   {label}: {_fix_text(f.fix)}")
    said = pasted_fix(f)
    if said is not None:
        out.append(f"   the paste says its fix is (not rocmcheck's advice): {code_span(said)}")
    if f.undecided:
        out.append(f"   the doctor's check {f.cause.check if f.cause else f.id}: {f.undecided}")
    if f.ask is not None:
        out.append(f"   to be sure, paste the output of: {_fix_text(f.ask)}" if f.ask.kind is FixKind.SHELL
                   else f"   to be sure, paste {f.ask.text}")
    out.append("")
    return out


def markdown(t: Triage) -> str:
    """A short reply for the thread: the cause, the line, the fix as a code block, what to paste next."""
    if not t.findings:
        lines = ["rocmcheck triage found no known cause in this paste.", "", f"Please paste {NEXT_PASTE}.", ""]
        return "\n".join(_safe(line) for line in lines + _similar_markdown(t)) + "\n"
    top = t.findings[0]
    if from_paste(top):
        lines = [f"**Likely cause, as the paste reports it:** {code_span(top.title)} ({code_span(top.id)})", ""]
    else:
        lines = [f"**Likely cause: {md_escape(top.title)}** ({code_span(top.id)})", ""]
    if top.cause is not None:
        lines += [md_escape(top.text), ""]
    if top.quotes:
        lines += ["The paste shows:", "", *fence([q.text for q in top.quotes[:QUOTES_SHOWN]]), ""]
    if top.fix is not None:
        if top.fix.kind is FixKind.SHELL:
            lines += ["Fix:", "", *fence([top.fix.line()], "sh"), ""]
        else:
            lines += [f"Fix: {md_escape(_fix_text(top.fix))}", ""]
    said = pasted_fix(top)
    if said is not None:
        lines += ["The paste says its fix is (quoted, not rocmcheck's advice):", "", *fence([said]), ""]
    asks = t.asks()
    if asks:
        lines.append("To confirm, please paste the output of:")
        lines.append("")
        shell = [fix.line() for fix, _ in asks if fix.kind is FixKind.SHELL]
        if shell:
            lines += ["```sh", *shell, "```"]
        lines += [f"- {fix.text}" for fix, _ in asks if fix.kind is not FixKind.SHELL]
        lines.append("")
    lines += _similar_markdown(t)
    others = t.findings[1:SHOWN]
    if others:
        lines.append("Other possible causes:")
        lines += [f"- {code_span(f.title) if from_paste(f) else md_escape(f.title)} ({code_span(f.id)})"
                  + (f": {code_span(_short(f.quotes[0].text))}" if f.quotes else "") for f in others]
        lines.append("")
    lines.append("<sub>rocmcheck triage</sub>")
    return "\n".join(_safe(line) for line in lines) + "\n"
