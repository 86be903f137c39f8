"""Which lines of a list hold a literal: the lines lowered and joined once, each literal looked for with `str.find`
over the whole text (C speed), so that a regular expression runs only on the lines that can match it instead of on
every line. Pure; never raises.

A literal is lower-case. The text is lowered with `str.lower` and the few characters that Python's re.IGNORECASE
matches with an ASCII letter although their lower case differs (the dotless i, the long s, the Kelvin sign) are
folded to that letter, so that a case-insensitive pattern's literal is found wherever the pattern can match."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Iterable

# re.IGNORECASE's equivalences between an ASCII letter and another character (CPython's re/_casefix.py and
# _compile.py): U+0131 dotless i ~ i, U+017F long s ~ s, U+212A Kelvin sign ~ k (already lowered to k).
_FOLD = str.maketrans({"\u0131": "i", "\u017f": "s", "\u212a": "k"})


class LineIndex:
    """The lines (a list of str), lowered and joined by newlines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        joined = "\n".join(lines)
        low = joined.lower()
        lengths = map(len, lines)
        if len(low) != len(joined):  # a character whose lower case is longer (U+0130): where each line starts moves
            lows = [line.lower() for line in lines]
            low, lengths = "\n".join(lows), map(len, lows)
        self.low = low.translate(_FOLD) if "\u0131" in low or "\u017f" in low else low
        self.starts = [0, *accumulate(n + 1 for n in lengths)]  # line i starts at starts[i] of self.low

    def holding(self, literals: Iterable[str]) -> list[int]:
        """The indices of the lines that hold one of the literals, in order."""
        found: set[int] = set()
        low, starts = self.low, self.starts
        for lit in literals:
            at = low.find(lit)
            while at >= 0:
                i = bisect_right(starts, at) - 1
                found.add(i)
                at = low.find(lit, starts[i + 1])
        return sorted(found)

    def low_lines(self) -> list[str]:
        """Each line lowered (as found by holding())."""
        low, starts = self.low, self.starts
        if low.count("\n") == len(self.lines) - 1:
            return low.split("\n") if self.lines else []
        return [low[starts[i]:starts[i + 1] - 1] for i in range(len(self.lines))]  # a line held a newline

    def longer_than(self, chars: int) -> list[int]:
        """The indices of the lines longer than `chars` characters, in order."""
        if max(map(len, self.lines), default=0) <= chars:
            return []
        return [i for i, line in enumerate(self.lines) if len(line) > chars]
