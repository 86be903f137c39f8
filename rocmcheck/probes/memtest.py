"""Device-memory pattern test (probe.memory_pattern's runner), in the manner of memtest: fill most of the free
device memory with a pattern, then read all of it back and compare, on the GPU. Imports torch: runs inside the
probe child; rocmcheck/probes/catalog/memory_pattern.py judges what it returns.

Patterns, over 32-bit words numbered from 0 across every chunk (w = the word's number):
- walking ones: 1 << ((w + r) mod 32), each word one bit set, the bit walking along the addresses;
- address in address: w (its own number), and its complement on odd rounds, so every bit is 0 and 1 in turn;
- random: a hash of w and a seed (changed every round), so each round writes other values.
Every pattern is a function of the word's number, so the expected values are computed again block by block
when reading: nothing is stored beside the memory under test, and the temporaries stay bounded by one block.
All chunks are written before any is read, so each word sits in memory while the rest is written.
Rounds repeat until the duration is spent (at least one). Mismatches are counted on the GPU (one sync per
pass); when a pass finds any, a second read locates the first few."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from rocmcheck.units import GIB, MIB

PATTERNS = ("walking_ones", "address", "random")
CHUNK_BYTES = GIB  # one allocation; the test holds as many as fit
BLOCK_WORDS = 1 << 23  # 32 MiB of words per generated block; its int64 temporaries take about 8x that
# Left free besides the chunks: the blocks' temporaries, the allocator's slack and the CUDA/HIP context's growth.
RESERVE_BYTES = 2 * GIB
FREE_FRACTION = 0.90  # of the free memory after the reserve: the part the chunks take
MAX_LOCATED = 8  # mismatching words described one by one
SEED = 0x5EED
_M32 = 0xFFFFFFFF
# Multipliers below 2^31, so a 32-bit value times one stays below 2^63 (int64 never overflows).
_K1, _K2, _K3, _K4 = 0x2545F491, 0x1B873593, 0x2C1B3C6D, 0x297A2D39

Corrupt = Callable[[list[torch.Tensor]], None]


def pattern_words(pattern: str, first: int, count: int, round_no: int, device: torch.device) -> torch.Tensor:
    """The int32 values `pattern` puts in words first .. first+count-1 on round `round_no`."""
    w = torch.arange(first, first + count, device=device, dtype=torch.int64)
    if pattern == "walking_ones":
        x = torch.bitwise_left_shift(torch.ones_like(w), (w + round_no) % 32)
    elif pattern == "address":
        x = w & _M32
        if round_no % 2:
            x = x ^ _M32
    elif pattern == "random":
        x = ((w & _M32) * _K1 + ((w >> 32) + SEED + round_no) * _K2) & _M32
        x = x ^ (x >> 15)
        x = (x * _K3) & _M32
        x = x ^ (x >> 12)
        x = (x * _K4) & _M32
        x = x ^ (x >> 15)
    else:
        raise ValueError(f"unknown pattern {pattern!r}")
    return (x & _M32).to(torch.int32)


def _blocks(chunks: list[torch.Tensor], block: int):
    first = 0
    for chunk in chunks:
        for off in range(0, chunk.numel(), block):
            n = min(block, chunk.numel() - off)
            yield chunk, off, first + off, n
        first += chunk.numel()


def _write(chunks: list[torch.Tensor], pattern: str, round_no: int, block: int) -> None:
    for chunk, off, first, n in _blocks(chunks, block):
        chunk[off:off + n] = pattern_words(pattern, first, n, round_no, chunk.device)


def _count(chunks: list[torch.Tensor], pattern: str, round_no: int, block: int) -> int:
    total: torch.Tensor | None = None
    for chunk, off, first, n in _blocks(chunks, block):
        bad = (chunk[off:off + n] != pattern_words(pattern, first, n, round_no, chunk.device)).sum()
        total = bad if total is None else total + bad
    return int(total.item()) if total is not None else 0


def _locate(chunks: list[torch.Tensor], pattern: str, round_no: int, block: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for chunk, off, first, n in _blocks(chunks, block):
        want = pattern_words(pattern, first, n, round_no, chunk.device)
        got = chunk[off:off + n]
        where = torch.nonzero(got != want).flatten()[:MAX_LOCATED - len(found)].tolist()
        for i in where:
            e, g = int(want[i].item()) & _M32, int(got[i].item()) & _M32
            found.append({"pattern": pattern, "round": round_no, "word": first + i, "byte_offset": (first + i) * 4,
                          "expected": f"0x{e:08x}", "read": f"0x{g:08x}", "bits": bin(e ^ g).count("1")})
        if len(found) >= MAX_LOCATED:
            break
    return found


def allocate(device: torch.device, total_bytes: int, chunk_bytes: int = CHUNK_BYTES) -> tuple[list[torch.Tensor], str]:
    """Chunks of int32 words adding up to about total_bytes; (chunks, why it stopped short, or "")."""
    chunks: list[torch.Tensor] = []
    left = total_bytes
    while left >= 4:
        size = min(chunk_bytes, left) // 4
        try:
            chunks.append(torch.empty(size, dtype=torch.int32, device=device))
        except torch.OutOfMemoryError as exc:
            return chunks, f"allocation stopped at {sum(c.numel() for c in chunks) * 4 / GIB:.1f} GiB: " \
                           f"{str(exc).splitlines()[0][:160]}"
        left -= size * 4
    return chunks, ""


def bytes_to_test(free_bytes: int) -> int:
    """The bytes the test takes of `free_bytes`: most of it, less the reserve."""
    return max(0, int((free_bytes - RESERVE_BYTES) * FREE_FRACTION))


def pattern_test(device: torch.device, total_bytes: int, duration_s: float = 0.0, block_words: int = BLOCK_WORDS,
                 chunk_bytes: int = CHUNK_BYTES, corrupt: Corrupt | None = None,
                 note: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Write-then-read every pattern over total_bytes of device memory, round after round for duration_s (at least
    one round). corrupt(chunks), when given, runs between each write pass and its read (a test's planted fault)."""
    chunks, stopped = allocate(device, total_bytes, chunk_bytes)
    tested = sum(c.numel() for c in chunks) * 4
    per_pattern = {p: {"passes": 0, "mismatches": 0} for p in PATTERNS}
    located: list[dict[str, Any]] = []
    began = time.perf_counter()
    rounds = 0
    try:
        while chunks and (rounds == 0 or time.perf_counter() - began < duration_s):
            for pattern in PATTERNS:
                _write(chunks, pattern, rounds, block_words)
                if corrupt is not None:
                    corrupt(chunks)
                bad = _count(chunks, pattern, rounds, block_words)
                per_pattern[pattern]["passes"] += 1
                per_pattern[pattern]["mismatches"] += bad
                if bad and len(located) < MAX_LOCATED:
                    located += _locate(chunks, pattern, rounds, block_words)[:MAX_LOCATED - len(located)]
            rounds += 1
            note(f"round {rounds}: {tested / GIB:.1f} GiB, "
                 f"{sum(p['mismatches'] for p in per_pattern.values())} mismatches so far")
    finally:
        del chunks
    seconds = time.perf_counter() - began
    moved = 2 * tested * len(PATTERNS) * rounds  # bytes written plus bytes read back
    return {"bytes_tested": tested, "bytes_asked": total_bytes, "stopped_short": stopped or None, "rounds": rounds,
            "seconds": round(seconds, 3), "duration_s": duration_s, "patterns": per_pattern,
            "mismatches": sum(p["mismatches"] for p in per_pattern.values()), "first_mismatches": located,
            "gb_per_s": moved / seconds / 1e9 if seconds > 0 else None, "block_mib": block_words * 4 / MIB}
