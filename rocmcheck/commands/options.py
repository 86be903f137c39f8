"""One flag name per concept, shared by every command: `--gpus N` (how many GPUs), `--arch` (GPU kind: an arch or
a product name), `--attn` (attention: HF's names), `--json`, `-o/--out` (where to write). Older spellings stay as
hidden aliases (`--nproc`, `--world-size`, `--output`, `--save-bundle`, `--attn flash`), so scripts keep working.
Option types reject non-finite and absurd numbers (FiniteFloat, BoundedInt): `--deadline nan`, `--timeout inf`
or a 400-digit --seq-len is one line and exit 2, and a value echoed in a message is cut (safe.text.excerpt).
Imports only click and rocmcheck's lowest layers."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import click

from rocmcheck.errors import BadInput
from rocmcheck.safe.text import MAX_ECHO_CHARS, excerpt

ALIAS_SUFFIX = "__alias"
# Attention implementations by Hugging Face's attn_implementation names; "flash" was plan's spelling.
ATTN_NAMES = ("sdpa", "flash_attention_2", "eager")
ATTN_ALIASES = {"flash": "flash_attention_2", "fa2": "flash_attention_2", "flash-attn": "flash_attention_2"}


class Command(click.Command):
    """Folds hidden alias options into their canonical parameter: `--nproc 2` arrives as gpus=2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        for name in [n for n in ctx.params if n.endswith(ALIAS_SUFFIX)]:
            value = ctx.params.pop(name)
            if value is not None and value != ():
                ctx.params[name[: -len(ALIAS_SUFFIX)]] = value
        return rest


class OutputFile(click.Path):
    """-o/--out FILE: a file path as a Path. A value ending in "/" names a folder (`--out newdir/`): refused here,
    where the slash is still there to see (a Path drops it, and the file `newdir` would be written)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.endswith(os.sep) and value.strip(os.sep):
            self.fail(f"{excerpt(value)} names a folder (it ends in {os.sep}); name the file to write", param, ctx)
        return super().convert(value, param, ctx)


def alias(flag: str, target: str, **kw: Any) -> Callable:
    """A hidden old spelling of option `target` (the Python parameter name)."""
    return click.option(flag, target + ALIAS_SUFFIX, hidden=True, default=None, **kw)


def json_option(help: str = "Print one JSON document (schema: docs/json-schema.md) instead of text.") -> Callable:
    return click.option("--json", "as_json", is_flag=True, help=help)


class AttnChoice(click.Choice):
    """sdpa | flash_attention_2 | eager; "flash" and friends are accepted and normalised."""

    def __init__(self) -> None:
        super().__init__(list(ATTN_NAMES))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            value = ATTN_ALIASES.get(value.strip().lower(), value)
            if value not in self.choices:  # click's own message would echo the whole value
                self.fail(f"'{excerpt(value)}' is not one of {', '.join(self.choices)}", param, ctx)
        return super().convert(value, param, ctx)


def resolve_archs(values: tuple[str, ...], flag: str = "--arch", keep: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Each value an arch or a product name (mi300x -> gfx942), comma-separated or repeated; words in `keep`
    ("auto") pass through. One line and exit 2 with a "did you mean" for anything unknown."""
    from rocmcheck.knowledge import resolve_arch

    out = []
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            if item in keep:
                out.append(item)
                continue
            try:
                out.append(resolve_arch(item))
            except ValueError as exc:  # its message names the value: at most what excerpt echoes of it
                if len(item) > MAX_ECHO_CHARS:
                    raise BadInput(f"{flag}: '{excerpt(item)}' is not a GPU arch or product name") from None
                raise BadInput(f"{flag}: {exc}") from None
    return tuple(dict.fromkeys(out))

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
MAX_HIDDEN_SIZE = 1 << 20  # a model's hidden size; the widest LLaMA-class models are 16-32k
MAX_GPU_MEMORY_GIB = 1 << 14  # 16 TiB per GPU; the largest today hold 288 GB


# ---- shell completion (click's shell_complete): the names a command takes, offered at TAB --------------------------

def _starting(names: Any, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def complete_recipes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from rocmcheck.recipes import all_recipes

    return _starting(all_recipes(), incomplete)


def complete_probes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from rocmcheck.probes.catalog import PROBE_NAMES

    return _starting(PROBE_NAMES, incomplete)


def complete_checks(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """--only/--skip: check ids, areas and probe ids; after a comma, the next name of the list."""
    from rocmcheck.checks import known_names
    from rocmcheck.probes.catalog import PROBE_IDS

    head, _, last = incomplete.rpartition(",")
    names = known_names() | set(PROBE_IDS) | {"probe", "train", "cluster"}
    return _starting({(head + "," if head else "") + n for n in names}, incomplete)
