"""`rocmcheck build-env`: print the environment for building PyTorch, flash-attn and DeepSpeed from
source for given GPU archs (ROCm or CUDA), ready to source, load as dotenv, read as JSON or paste
into a Dockerfile."""

from __future__ import annotations

from pathlib import Path

import click

from rocmcheck.buildenv import FORMATS, TARGETS, build_env_for_host, render
from rocmcheck.commands.options import Command, OutputFile, alias, json_option
from rocmcheck.errors import BadInput
from rocmcheck.knowledge import arch_of_product


@click.command("build-env", cls=Command)
@click.option(
    "--arch", "archs", multiple=True, metavar="ARCH",
    help="GPU to build for: an arch (gfx942, gfx90a, sm_90) or a product (mi300x, h100), repeatable, or 'auto' "
         "for the GPUs here. Default: auto.",
)
@click.option("--target", type=click.Choice([*TARGETS, "all"]), default="all", show_default=True,
              help="What you are building.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="sh", show_default=True,
              help="sh (source/eval), dotenv, json, or dockerfile (ENV lines).")
@json_option("The same as --format json: one JSON document (docs/json-schema.md).")
@click.option("-o", "--out", "output", type=OutputFile(), default=None,
              help="Write to FILE instead of standard output (a new file; --force replaces one).")
@click.option("--force", is_flag=True, help="Replace an existing -o FILE.")
@alias("--output", "output", type=OutputFile())
@click.option("--triton-backend", is_flag=True,
              help="flash-attn on ROCm: build the Triton (aiter) backend instead of CK "
                   "(FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE).")
def build_env(archs: tuple[str, ...], target: str, fmt: str, as_json: bool, output: Path | None, force: bool,
              triton_backend: bool) -> None:
    """Environment variables for building PyTorch, flash-attn and DeepSpeed from source.

    \b
    Examples:
      eval "$(rocmcheck build-env --arch gfx942)"
      rocmcheck build-env --arch gfx942 --arch gfx90a --target flash-attn
      rocmcheck build-env --arch sm_90 --format dockerfile -o build.env.Dockerfile
    """
    # Product names (mi300x) become their arch; everything else goes to build-env's own arch validation.
    archs = tuple(arch_of_product(a) or a for a in archs)
    fmt = "json" if as_json else fmt
    from rocmcheck.safe.files import check_target, describe_write_error, write_atomic

    if output is not None:
        check_target(output, force=force)  # before the GPU detection, not after
    result = build_env_for_host(list(archs), target=target, triton_backend=triton_backend)
    text = render(result, fmt)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        write_atomic(output, text, force=force)
    except OSError as exc:  # the old file, if any, is unchanged
        raise BadInput(describe_write_error(output, exc)) from None
