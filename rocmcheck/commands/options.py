"""Option types for every command: numbers must be finite and within sane bounds, so `--deadline nan`,
`--timeout inf`, `--gpu-memory 1e300` or a 400-digit --seq-len are one line and exit 2, never a silent minute of
work or a traceback. Each bound is far above anything real and says why in a comment where it is used."""

from __future__ import annotations

import math
from typing import Any

import click

# Whole numbers longer than this are refused before int() is asked to convert them (int() of a long string is
# quadratic, and Python refuses past 4300 digits with a ValueError of its own).
MAX_INT_DIGITS = 30


def _fmt(x: float) -> str:
    return f"{x:g}"


class FiniteFloat(click.ParamType):
    """A float in [low, high] (ends open when asked), never nan or ±inf."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False, unit: str = "") -> None:
        self.low, self.high, self.low_open, self.high_open, self.unit = low, high, low_open, high_open, unit

    def _range(self) -> str:
        lo = "" if self.low is None else f"{_fmt(self.low)}{'<' if self.low_open else '<='}"
        hi = "" if self.high is None else f"{'<' if self.high_open else '<='}{_fmt(self.high)}"
        return f"{lo}x{hi}"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:  # noqa: ARG002
        return self.unit.upper() or "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number", param, ctx)
        if isinstance(value, str) and len(value) > 64:
            self.fail(f"{value[:20]!r}... ({len(value)} characters) is not a number of sane length", param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{str(value)[:40]!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{str(value)[:40]!r} is not a finite number", param, ctx)
        too_low = self.low is not None and (number <= self.low if self.low_open else number < self.low)
        too_high = self.high is not None and (number >= self.high if self.high_open else number > self.high)
        if too_low or too_high:
            self.fail(f"{str(value)[:40]} is not in the range {self._range()}", param, ctx)
        return number

    def __repr__(self) -> str:
        return f"FiniteFloat({self._range()})"


class BoundedInt(click.ParamType):
    """A whole number in [low, high]; long digit strings are refused before conversion."""

    name = "integer"

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def _range(self) -> str:
        return f"{'' if self.low is None else f'{self.low}<='}x{'' if self.high is None else f'<={self.high}'}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if isinstance(value, int):
            number = value
        else:
            text = str(value).strip().replace("_", "")
            digits = text.lstrip("+-")
            if len(digits) > MAX_INT_DIGITS and digits.isdigit():
                self.fail(f"{text[:20]}... ({len(digits)} digits) is not in the range {self._range()}", param, ctx)
            try:
                number = int(text, 10)
            except ValueError:
                self.fail(f"{str(value)[:40]!r} is not a whole number", param, ctx)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            self.fail(f"{number} is not in the range {self._range()}", param, ctx)
        return number

    def __repr__(self) -> str:
        return f"BoundedInt({self._range()})"


# Shared bounds, far above anything real.
MAX_SEQ_LEN = 1 << 22  # 4M tokens: the longest context windows of 2025 models are 1M-10M
MAX_BATCH = 1 << 16  # micro-batch, gradient accumulation, start batch
MAX_GPUS = 1 << 17  # data-parallel GPUs: the largest clusters have ~100k
MAX_SECONDS = 7 * 24 * 3600.0  # a week: any time limit above it is a mistake
MAX_GPU_MEMORY_GIB = 1 << 14  # 16 TiB per GPU; the largest today hold 288 GB
