"""The catalogue's signatures, searched in every line of the pastes, with what each matched line's surroundings
say: the library the failing frame (or the .so, or a C++ "File:" path on the line) is in, and what the pastes show
as a whole (a container, an AMD or NVIDIA stack, WSL, the variables they set). A message that a terminal, a log
viewer or the person wrapped onto the next line ("killed by signal: Bus" / "error.") is found across the break:
a line is also searched joined with the next one, and a match counts there only when it spans the two. The signs
the readers found (rocmcheck/triage/signs.py) are hits of the signatures that name them.

One pass over the lines; a line (or a joined pair) is searched with a signature's regular expression only when it
holds one of the signature's literals (a substring test), so the time is linear in the paste and the number of
signatures."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.known import ALL
from rocmcheck.triage.catalogue import Catalogue, Rule, Signature
from rocmcheck.triage.pasted import Pasted, PasteInput, Quote
from rocmcheck.triage.platform import Platform, decide
from rocmcheck.triage.readers.paste import Block

MAX_HITS_PER_SIGNATURE = 5  # quotes kept per signature: the same error printed by every rank says nothing more
MAX_LINE_SEARCH = 4096  # the part of a line searched (signatures sit at a line's start, or near it)
# Which library a path belongs to, first match wins (the failing frame's file, an ImportError's .so, a C++ "File:").
LIBRARY_PATHS = (("flash_attn", "flash_attn"), ("bitsandbytes", "bitsandbytes"), ("deepspeed", "deepspeed"),
                 ("torch_extensions", "deepspeed"), ("/torch/", "torch"), ("libtorch", "torch"), ("libc10", "torch"),
                 ("site-packages/torch", "torch"))
_PATH = re.compile(r"(?:^|[\s\"'(:])(/[\w.+-]+(?:/[\w.+-]+)+|[\w.+-]+\.so(?:\.\d+)*)")
_FILE_LINE = re.compile(r"\bFile: (\S+)")
# The loader's "<name>: cannot open shared object file" names a library that was not found, not the library that
# failed: a line of it says nothing of the library (the failing frame does).
_LOADER_NOT_FOUND = re.compile(r"(?:^|(?<=[\s'\"(]))[\w.+-]+\.so(?:\.\d+)*: cannot open shared object file")
# A shell prompt of a container: docker names a container's host after the first 12 hex digits of its id.
_CONTAINER_PROMPT = re.compile(r"\b[\w.-]+@[0-9a-f]{12}:")
_AMD = re.compile(r"\b(?:ROCm|rocm\d|HIP error|hipError\w*|gfx[0-9a-f]{3,4}|Radeon|Instinct|amdgpu)\b")
_NVIDIA = re.compile(r"\b(?:NVIDIA|nvidia-smi|GeForce|Tesla|Quadro|cudaError\w*|\+cu\d{3})\b")
# WSL as the kernel names it, as its tools print it, and as people write it ("ROCm 6.2 on wsl ubuntu 24.04").
_WSL = re.compile(r"\bwsl2?\b|microsoft-standard|/dev/dxg\b", re.IGNORECASE)
# Blocks whose words are not evidence: a rocmcheck summary's verdicts quote error texts ("expect
# 'hipErrorNoBinaryForGpu'"); its facts and verdicts are read as such.
FACTS_ONLY = ("rocmcheck_summary",)
_AMD_KINDS = ("rocminfo", "rocm_smi", "amd_smi", "hipconfig", "hip_log")
_NVIDIA_KINDS = ("nvidia_smi", "nvcc")


@dataclass
class Hit:
    signature: Signature
    quote: Quote
    library: str  # "torch" | a package ("flash_attn") | "other" (a library that is not torch) | "none" (not shown)
    kind: str  # the kind of block the line is in


@dataclass
class Scene:
    """What the pastes show as a whole."""

    flags: set[str] = field(default_factory=set)  # "container", "amd", "nvidia", "wsl", "windows", "macos"
    env: set[str] = field(default_factory=set)  # the variables the pastes set
    matched: set[str] = field(default_factory=set)  # the signatures found anywhere
    platform: Platform = field(default_factory=lambda: Platform(None, ""))  # the paste's own platform


def find(pasted: Pasted, cat: Catalogue) -> tuple[list[Hit], Scene]:
    hits: list[Hit] = []
    scene = _scene(pasted)
    counts: dict[str, int] = {}
    searched = [sig for sig in cat.signatures if sig.regex is not None]
    index = _LiteralIndex(searched)
    for inp, block in pasted.blocks():
        if block.kind in FACTS_ONLY:
            continue
        frame_library = _frame_library(pasted.read.get(id(block)))
        lines = block.text.splitlines()
        candidates = _candidates(lines, index)
        for i, line in enumerate(lines):
            maybe = candidates.get(i)
            if maybe is None:
                _flags(scene, line)
                continue
            part = line[:MAX_LINE_SEARCH]
            low = part.lower()
            head = part.rstrip()
            tail = lines[i + 1][:MAX_LINE_SEARCH].strip() if i + 1 < len(lines) else ""
            joined = f"{head} {tail}" if head and tail else ""
            joined_low = joined.lower()
            for n, sig in enumerate(searched):
                if n not in maybe or counts.get(sig.id, 0) >= MAX_HITS_PER_SIGNATURE:
                    continue
                m = sig.regex.search(part) if any(lit in low for lit in sig.literals) else None  # type: ignore[union-attr]
                text = m.group(0) if m else ""
                if m is None and joined and any(lit in joined_low for lit in sig.literals):
                    w = sig.regex.search(joined)  # type: ignore[union-attr]
                    if w is not None and w.start() < len(head) < w.end():  # the message runs over the break
                        m, text = w, joined[w.start():len(head)]
                if m is None:
                    continue
                counts[sig.id] = counts.get(sig.id, 0) + 1
                library = _line_library(lines[i:i + 3]) or frame_library or "none"
                hits.append(Hit(sig, _quote(inp, block, text, sig), library, block.kind))
                scene.matched.add(sig.id)
            _flags(scene, line)
    by_sign: dict[str, list[Signature]] = {}
    for sig in cat.signatures:
        if sig.fact is not None:
            by_sign.setdefault(sig.fact, []).append(sig)
    for name, quote in pasted.signs:
        for sig in by_sign.get(name, ()):
            if counts.get(sig.id, 0) < MAX_HITS_PER_SIGNATURE:
                counts[sig.id] = counts.get(sig.id, 0) + 1
                hits.append(Hit(sig, quote, "none", "sign"))
                scene.matched.add(sig.id)
    return hits, scene


class _LiteralIndex:
    """Which signatures (by their place in `searched`) a word found in a line can concern: a whole literal in the
    line itself or in the next line (find() also searches the line joined with the next), and a word of a literal
    with a space in it (such a literal may run over the break)."""

    def __init__(self, searched: list[Signature]) -> None:
        self.whole: dict[str, set[int]] = {}
        self.part: dict[str, set[int]] = {}
        for n, sig in enumerate(searched):
            for lit in sig.literals:
                self.whole.setdefault(lit, set()).add(n)
                if " " in lit:
                    for word in lit.split():
                        self.part.setdefault(word, set()).add(n)
        self.words = sorted(set(self.whole) | set(self.part))


def _candidates(lines: list[str], index: _LiteralIndex) -> dict[int, set[int]]:
    """For each line where a signature can match as find() looks (its literal in the line, or in the line and the
    next joined by a space), the signatures that can: a superset, each still checked by find() itself. Found with
    one str.find pass per word over the block's lowered lines, so the lines without any literal (most of a big
    paste) and the signatures without one in reach skip the per-signature checks."""
    lows = [line[:MAX_LINE_SEARCH].lower() for line in lines]
    text = "\n".join(lows)
    starts, pos = [], 0
    for low in lows:
        starts.append(pos)
        pos += len(low) + 1
    out: dict[int, set[int]] = {}
    for word in index.words:
        whole, part = index.whole.get(word, ()), index.part.get(word, ())
        at = text.find(word)
        while at >= 0:
            line = bisect.bisect_right(starts, at) - 1
            here = out.setdefault(line, set())
            here.update(whole)
            here.update(part)
            if whole and line > 0:
                out.setdefault(line - 1, set()).update(whole)
            at = text.find(word, starts[line + 1] if line + 1 < len(starts) else len(text))
    return out


def holds(rule: Rule, hit: Hit, scene: Scene) -> bool:
    """Every condition of the rule holds for this hit in these pastes."""
    when = rule.when
    libraries = when.get("library")
    if libraries is not None:
        lib = hit.library
        named = lib in libraries or ("other" in libraries and lib not in ("torch", "none"))
        if not named:
            return False
    if any(flag not in scene.flags for flag in when.get("paste", ())):
        return False
    if any(flag in scene.flags for flag in when.get("not_paste", ())):
        return False
    if when.get("env") and not scene.env & set(when["env"]):
        return False
    if any(sid not in scene.matched for sid in when.get("with", ())):
        return False
    return True


def _quote(inp: PasteInput, block: Block, matched: str, sig: Signature) -> Quote:
    quote = inp.quote(block, matched)
    if matched in quote.text:
        return quote
    return inp.quote(block, pattern=sig.regex) if sig.regex is not None else quote


def library_of_path(text: str) -> str | None:
    low = text.lower()
    for needle, library in LIBRARY_PATHS:
        if needle in low:
            return library
    return None


def _line_library(lines: list[str]) -> str | None:
    """The library the line (or the C++ "File:" line after it) names by a path, "other" for a path of another."""
    for j, line in enumerate(lines):
        m = _FILE_LINE.search(line) if j else None
        text = m.group(1) if m else (_LOADER_NOT_FOUND.sub("", line) if j == 0 else "")
        if not text:
            continue
        found = library_of_path(text)
        if found:
            return found
        if (m or j == 0) and _PATH.search(text) and (".so" in text or "/src/" in text or m):
            return "other"
    return None


def _frame_library(result: Any) -> str | None:
    """The failing frame's library of a traceback (or of a Python session's exception); the .so of an
    ImportError first."""
    from rocmcheck.triage.readers.python_session import PythonSession
    from rocmcheck.triage.readers.traceback import Traceback

    tracebacks: list[Traceback] = []
    if isinstance(result, Traceback):
        tracebacks = [result]
    elif isinstance(result, PythonSession):
        tracebacks = [run.exception for run in result.runs if run.exception is not None]
    for tb in tracebacks:
        if tb.shared_object:
            found = library_of_path(tb.shared_object)
            return found or "other"
        frame = tb.failing_frame
        if frame is not None:
            if frame.library:
                return "torch" if frame.library == "torch" else frame.library
            found = library_of_path(frame.file)
            if found:
                return found
    return None


def _scene(pasted: Pasted) -> Scene:
    scene = Scene()
    f = pasted.facts
    env_known = f.known.get("env")
    scene.env = set(f.env) if env_known == ALL or isinstance(env_known, list) else set()
    if f.present.get("/.dockerenv") or f.present.get("/run/.containerenv"):
        scene.flags.add("container")
    torch = f.probes.get("torch") or {}
    if torch.get("hip"):
        scene.flags.add("amd")
    elif torch.get("cuda"):
        scene.flags.add("nvidia")
    for g in pasted.gpus:
        if g.vendor in ("amd", "nvidia"):
            scene.flags.add(g.vendor)
    for _, block in pasted.blocks():
        if block.kind in _AMD_KINDS:
            scene.flags.add("amd")
        elif block.kind in _NVIDIA_KINDS:
            scene.flags.add("nvidia")
        elif block.kind == "docker_run":
            scene.flags.add("container")
    if "wsl" in (f.platform.get("kernel") or "").lower() or "microsoft" in (f.platform.get("kernel") or "").lower():
        scene.flags.add("wsl")
    lines = [line for _, block in pasted.blocks() if block.kind not in FACTS_ONLY for line in block.text.splitlines()]
    kernel = f.platform.get("kernel") or ""
    scene.platform = decide(([kernel] if kernel else []) + lines, torch.get("hip"), torch.get("cuda"))
    if scene.platform.name in ("windows", "macos"):
        scene.flags.add(scene.platform.name)
    return scene


def _flags(scene: Scene, line: str) -> None:
    if "container" not in scene.flags and "@" in line and _CONTAINER_PROMPT.search(line):
        scene.flags.add("container")
    if "amd" not in scene.flags and _AMD.search(line):
        scene.flags.add("amd")
    if "nvidia" not in scene.flags and _NVIDIA.search(line):
        scene.flags.add("nvidia")
    if "wsl" not in scene.flags and _WSL.search(line):
        scene.flags.add("wsl")
