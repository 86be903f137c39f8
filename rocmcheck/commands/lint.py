"""`rocmcheck lint FILE...`: DeepSpeed configs, LLaMA-Factory YAML and TrainingArguments files."""

from __future__ import annotations

import click

from rocmcheck.commands.options import MAX_BATCH, MAX_GPUS, MAX_HIDDEN_SIZE, BoundedInt, Command, alias, json_option


@click.command("lint", cls=Command)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True, path_type=str))
@click.option("--gpus", "world_size", type=BoundedInt(1, MAX_GPUS), default=None,
              help="Data-parallel GPUs (all nodes) the run will use; checks train_batch_size against it.")
@alias("--world-size", "world_size", type=BoundedInt(1, MAX_GPUS))
@click.option("--micro-batch", type=BoundedInt(1, MAX_BATCH), default=None,
              help="Per-GPU batch for a bare DeepSpeed config with \"auto\" batch values.")
@click.option("--grad-accum", type=BoundedInt(1, MAX_BATCH), default=None,
              help="Gradient accumulation steps for a bare DeepSpeed config with \"auto\" values.")
@click.option("--hidden-size", type=BoundedInt(1, MAX_HIDDEN_SIZE), default=None,
              help="The model's hidden size, for \"auto\" values derived from it (default: the model's config.json "
                   "when model_name_or_path is on this machine).")
@json_option()
def lint(files: tuple[str, ...], world_size: int | None, micro_batch: int | None, grad_accum: int | None,
         hidden_size: int | None, as_json: bool) -> None:
    """Check DeepSpeed JSON configs, LLaMA-Factory YAML and TrainingArguments files (and the
    DeepSpeed config they point to). Exit 0: no errors; 1: errors; 2: a file could not be read."""
    from rocmcheck.errors import BadInput
    from rocmcheck.lint import Severity, lint_file
    from rocmcheck.lint.deepspeed_deep import one_lint_run
    from rocmcheck.report import render
    from rocmcheck.report.progress import Progress

    messages, unreadable = [], []
    # A DeepSpeed config is checked in a child that imports DeepSpeed (seconds): a wait worth showing.
    con = render.console(stderr=True)
    with Progress(con, plain_after_s=2.0, prefix="lint ") as progress, one_lint_run():
        for name in files:
            progress.begin(f"linting {name}")
            try:
                messages.extend(lint_file(name, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                                          hidden_size=hidden_size))
            except BadInput as exc:
                unreadable.append(str(exc))
    errors = sum(m.severity is Severity.ERROR for m in messages)
    warnings = sum(m.severity is Severity.WARNING for m in messages)
    results = [m.to_check_result() for m in messages]
    if as_json:
        from rocmcheck.report.json_report import dumps, envelope

        click.echo(dumps(envelope("lint", results, files=list(files), errors=errors, warnings=warnings,
                                  unreadable=unreadable, messages=[m.to_dict() for m in messages])))
    else:
        out = render.console()
        for m in messages:  # file:line: severity code: text, the form editors and CI annotate
            out.print(render.clean(m.render()), markup=False, soft_wrap=True)
            for line in m.detail:
                out.print("    " + render.clean(line), markup=False, soft_wrap=True)
        if len(files) > len(unreadable):
            out.print(render.verdict_line(results))
            out.print(f"{errors} error(s), {warnings} warning(s) in {len(files) - len(unreadable)} file(s)")
            out.file.flush()
            render.print_fixes(results, out.file, heading="Fixes (edits to the files named above):")
    for line in unreadable:
        click.echo(f"rocmcheck lint: error: {line}", err=True)
    raise SystemExit(2 if unreadable else 1 if errors else 0)
