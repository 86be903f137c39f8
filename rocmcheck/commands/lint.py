"""`rocmcheck lint FILE...`: DeepSpeed configs, LLaMA-Factory YAML and TrainingArguments files."""

from __future__ import annotations

import json

import click

from rocmcheck.commands.options import MAX_BATCH, MAX_GPUS, BoundedInt

LINT_SCHEMA = "rocmcheck.lint/1"


@click.command("lint")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True, path_type=str))
@click.option("--world-size", type=BoundedInt(1, MAX_GPUS), default=None,
              help="Data-parallel GPUs (all nodes) the run will use; checks train_batch_size against it.")
@click.option("--micro-batch", type=BoundedInt(1, MAX_BATCH), default=None,
              help="Per-GPU batch for a bare DeepSpeed config with \"auto\" batch values.")
@click.option("--grad-accum", type=BoundedInt(1, MAX_BATCH), default=None,
              help="Gradient accumulation steps for a bare DeepSpeed config with \"auto\" values.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
def lint(files: tuple[str, ...], world_size: int | None, micro_batch: int | None, grad_accum: int | None,
         as_json: bool) -> None:
    """Check DeepSpeed JSON configs, LLaMA-Factory YAML and TrainingArguments files (and the
    DeepSpeed config they point to). Exit 0: no errors; 1: errors; 2: a file could not be read."""
    from rocmcheck.lint import LintInputError, Severity, lint_file

    messages, unreadable = [], []
    for name in files:
        try:
            messages.extend(lint_file(name, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum))
        except LintInputError as exc:
            unreadable.append(str(exc))
    errors = sum(m.severity is Severity.ERROR for m in messages)
    warnings = sum(m.severity is Severity.WARNING for m in messages)
    if as_json:
        click.echo(json.dumps({
            "schema": LINT_SCHEMA,
            "files": list(files),
            "errors": errors,
            "warnings": warnings,
            "unreadable": unreadable,
            "messages": [m.to_dict() for m in messages],
            "results": [m.to_check_result().to_dict() for m in messages],
        }, indent=2))
    else:
        for m in messages:
            click.echo(m.render())
            if m.fix and m.severity is not Severity.INFO:
                click.echo(f"    fix: {m.fix}")
            for line in m.detail:
                click.echo(f"    {line}")
        if len(files) > len(unreadable):
            click.echo(f"{errors} error(s), {warnings} warning(s) in {len(files) - len(unreadable)} file(s)")
    for line in unreadable:
        click.echo(f"rocmcheck lint: error: {line}", err=True)
    raise SystemExit(2 if unreadable else 1 if errors else 0)
