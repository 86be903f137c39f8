"""One flag name per concept, shared by every command: `--gpus N` (how many GPUs), `--arch` (GPU kind: an arch or
a product name), `--attn` (attention: HF's names), `--json`, `-o/--out` (where to write). Older spellings stay as
hidden aliases (`--nproc`, `--world-size`, `--output`, `--save-bundle`, `--attn flash`), so scripts keep working.
Imports only click."""

from __future__ import annotations

from typing import Any, Callable

import click

from rocmcheck.commands.errors import BadInput

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
            except ValueError as exc:
                raise BadInput(f"{flag}: {exc}") from None
    return tuple(dict.fromkeys(out))
