"""The catalogue's signatures, searched in every line of the pastes, with what each matched line's surroundings
say: the library the failing frame (or the .so, or a C++ "File:" path on the line) is in, and what the pastes show
as a whole (a container, an AMD or NVIDIA stack, WSL, the variables they set). A message that a terminal, a log
viewer or the person wrapped onto the next line ("killed by signal: Bus" / "error.") is found across the break:
a line is also searched joined with the next one, and a match counts there only when it spans the two. The signs
the readers found (rocmcheck/triage/signs.py) are hits of the signatures that name them.

The lines of all the pastes are lowered and joined once (rocmcheck/triage/lines.py); each literal is looked for
there with str.find, and a line (or a joined pair) is searched with a signature's regular expression only when it
holds one of the signature's literals, so the time is linear in the paste and the number of signatures, and the
lines that hold no literal (most of a big paste) cost no Python step of their own. The platform and the scene's
flags are found the same way."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from rocmcheck.facts.known import ALL
from rocmcheck.triage.catalogue import Catalogue, Rule, Signature
from rocmcheck.triage.lines import LineIndex
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
# Each flag's pattern and its literals (lower-case; every match holds one).
_FLAG_PATTERNS = (("container", _CONTAINER_PROMPT, ("@",)),
                  ("amd", _AMD, ("rocm", "hip", "gfx", "radeon", "instinct", "amdgpu")),
                  ("nvidia", _NVIDIA, ("nvidia", "geforce", "tesla", "quadro", "cudaerror", "+cu")),
                  ("wsl", _WSL, ("wsl", "microsoft-standard", "/dev/dxg")))
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
    blocks = [(inp, block, block.text.splitlines()) for inp, block in pasted.blocks() if block.kind not in FACTS_ONLY]
    kernel = pasted.facts.platform.get("kernel") or ""
    head = [kernel] if kernel else []  # the kernel's name is evidence of the platform, not a line to search
    lines = head + [line for _, _, block_lines in blocks for line in block_lines]
    index = LineIndex(lines)
    scene = _scene(pasted, index)
    _flags(scene, index, len(head))
    counts: dict[str, int] = {}
    searched = [sig for sig in cat.signatures if sig.regex is not None]
    candidates = _candidates(index, _LiteralIndex(searched))
    firsts = [len(head)]  # the index (in `lines`) of each block's first line
    for _, _, block_lines in blocks:
        firsts.append(firsts[-1] + len(block_lines))
    frame_libraries: dict[int, str | None] = {}
    for at in sorted(candidates):
        b = bisect.bisect_right(firsts, at) - 1
        if b < 0 or b >= len(blocks):
            continue
        inp, block, block_lines = blocks[b]
        i = at - firsts[b]
        maybe = candidates[at]
        line = block_lines[i]
        part = line[:MAX_LINE_SEARCH]
        low = part.lower()
        head_ = part.rstrip()
        tail = block_lines[i + 1][:MAX_LINE_SEARCH].strip() if i + 1 < len(block_lines) else ""
        joined = f"{head_} {tail}" if head_ and tail else ""
        joined_low = joined.lower()
        for n in sorted(maybe):
            sig = searched[n]
            if counts.get(sig.id, 0) >= MAX_HITS_PER_SIGNATURE:
                continue
            m = sig.regex.search(part) if any(lit in low for lit in sig.literals) else None  # type: ignore[union-attr]
            text = m.group(0) if m else ""
            if m is None and joined and any(lit in joined_low for lit in sig.literals):
                w = sig.regex.search(joined)  # type: ignore[union-attr]
                if w is not None and w.start() < len(head_) < w.end():  # the message runs over the break
                    m, text = w, joined[w.start():len(head_)]
            if m is None:
                continue
            counts[sig.id] = counts.get(sig.id, 0) + 1
            if b not in frame_libraries:
                frame_libraries[b] = _frame_library(pasted.read.get(id(block)))
            library = _line_library(block_lines[i:i + 3]) or frame_libraries[b] or "none"
            hits.append(Hit(sig, _quote(inp, block, text, sig), library, block.kind))
            scene.matched.add(sig.id)
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
    """Which signatures (by their place in `searched`) each literal concerns; the literals with a space in them (such a
    literal may run over a line break, where find() searches a line joined with the next)."""

    def __init__(self, searched: list[Signature]) -> None:
        self.whole: dict[str, set[int]] = {}
        for n, sig in enumerate(searched):
            for lit in sig.literals:
                self.whole.setdefault(lit, set()).add(n)
        self.words = sorted(self.whole)
        self.spaced = [lit for lit in self.words if " " in lit]


def _candidates(index: LineIndex, literals: _LiteralIndex) -> dict[int, set[int]]:
    """For each line where a signature can match as find() looks (its literal in the line, in the next line, or
    running from the line over the break into the next, the two joined by a space), the signatures that can: a
    superset, each still checked by find() itself. Found with str.find over the whole lowered text (and, for the
    literals with a space, over the lines stripped and joined by spaces as find() joins two), so the lines without
    any literal (most of a big paste) and the signatures without one in reach skip the per-signature checks."""
    out: dict[int, set[int]] = {}
    for lit in literals.words:
        sigs = literals.whole[lit]
        for line in index.holding((lit,)):
            out.setdefault(line, set()).update(sigs)
            if line > 0:
                out.setdefault(line - 1, set()).update(sigs)
    if not literals.spaced:
        return out
    stripped = [line.strip() for line in index.low_lines()]
    flat = " ".join(stripped)
    ends = list(accumulate(len(line) + 1 for line in stripped))  # line i of `flat` ends (its space) at ends[i] - 1
    for lit in literals.spaced:
        at = flat.find(lit)
        while at >= 0:
            line = bisect.bisect_right(ends, at)
            if at + len(lit) > ends[line] - 1:  # it runs over the end of the line into the next
                out.setdefault(line, set()).update(literals.whole[lit])
            at = flat.find(lit, at + 1)
    for line in index.longer_than(MAX_LINE_SEARCH):  # find() joins such a line's first part: it may run over there
        out.setdefault(line, set()).update(n for lit in literals.spaced for n in literals.whole[lit])
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
    if any(sid in scene.matched for sid in when.get("without", ())):
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


def _scene(pasted: Pasted, index: LineIndex) -> Scene:
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
    scene.platform = decide((), torch.get("hip"), torch.get("cuda"), index=index)
    if scene.platform.name in ("windows", "macos"):
        scene.flags.add(scene.platform.name)
    return scene


def _flags(scene: Scene, index: LineIndex, first: int) -> None:
    """The flags a line of the pastes shows (from line `first` of the index on), each searched only in the lines
    holding one of its pattern's literals."""
    for flag, pattern, literals in _FLAG_PATTERNS:
        if flag in scene.flags:
            continue
        for i in index.holding(literals):
            if i >= first and pattern.search(index.lines[i]):
                scene.flags.add(flag)
                break
