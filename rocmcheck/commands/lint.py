"""`rocmcheck lint FILE...`: DeepSpeed configs, LLaMA-Factory YAML, accelerate configs and TrainingArguments files,
each judged for its consumer."""

from __future__ import annotations

import click

from rocmcheck.commands.options import MAX_BATCH, MAX_GPUS, MAX_HIDDEN_SIZE, BoundedInt, Command, alias, json_option

# rocmcheck.lint.consumers.CONSUMER_IDS, written out so that `rocmcheck --help` imports nothing of lint
# (tests/test_lint_consumers.py checks the two agree).
CONSUMER_CHOICES = ("deepspeed", "hf-trainer", "accelerate", "llamafactory-train", "llamafactory-eval",
                    "llamafactory-export", "llamafactory-chat", "trl", "axolotl")


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
@click.option("--consumer", type=click.Choice(CONSUMER_CHOICES), default=None,
              help="What reads the files: deepspeed (deepspeed.initialize), hf-trainer, accelerate (accelerate "
                   "launch), llamafactory-train|eval|export|chat, trl (a TRL recipe), axolotl. Default: the one "
                   "the files imply (said when assumed).")
@click.option("--script", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="The training script a TrainingArguments file or a TRL recipe is for: its own arguments "
                   "(dataclass fields, argparse options, read from its source, never run) are then the only other "
                   "keys allowed.")
@json_option()
def lint(files: tuple[str, ...], world_size: int | None, micro_batch: int | None, grad_accum: int | None,
         hidden_size: int | None, consumer: str | None, script: str | None, as_json: bool) -> None:
    """Check DeepSpeed JSON configs, LLaMA-Factory YAML, accelerate configs and TrainingArguments files (and the
    DeepSpeed config they point to), and TRL recipes and axolotl configs where TRL or axolotl is installed, each for
    the program that reads it. Exit 0: no errors; 1: errors; 2: a file
    that cannot be read (after the others are shown), or bad options; 3: no file could be judged."""
    from rocmcheck.lint.consumers import named
    from rocmcheck.lint.deepspeed_deep import one_lint_run
    from rocmcheck.lint.messages import Severity
    from rocmcheck.lint.run import LintRun
    from rocmcheck.report import render
    from rocmcheck.report.progress import Progress
    from rocmcheck.result import EXIT_BAD_INPUT, exit_code
    from rocmcheck.safe.text import excerpt

    options = dict(world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum, hidden_size=hidden_size)
    if script is not None:  # read before anything is linted: an unreadable script is bad input (exit 2)
        from pathlib import Path

        from rocmcheck.lint.script_args import script_keys

        options["script"] = (Path(script).name, frozenset(script_keys(Path(script))))
    run = LintRun(options=options, consumer=named(consumer))
    # A DeepSpeed config is checked in a child that imports DeepSpeed (seconds): a wait worth showing.
    con = render.console(stderr=True)
    with Progress(con, plain_after_s=2.0, prefix="lint ") as progress, one_lint_run():
        run.lint_all(list(files), on_file=lambda name: progress.begin(f"linting {excerpt(name)}"))
    results = run.results()
    errors, warnings = run.count(Severity.ERROR), run.count(Severity.WARNING)
    unreadable = [str(problem) for _, problem in run.refused]
    bad = {name for name, _ in run.bad_input}
    if as_json:
        from rocmcheck.report.json_report import dumps, envelope

        click.echo(dumps(envelope("lint", results, files=list(files), errors=errors, warnings=warnings,
                                  unreadable=unreadable, messages=[m.to_dict() for m in run.messages],
                                  consumers=run.consumers(), bad_input=sorted(bad))))
    else:
        out = render.console()
        for m in run.messages:  # file:line: key: severity [code]: text, the form editors and CI annotate
            out.print(render.clean(m.render()), markup=False, soft_wrap=True)
            for line in m.detail:
                out.print("    " + render.clean(line), markup=False, soft_wrap=True)
        out.print(render.verdict_line(results), soft_wrap=True)
        out.print(f"{errors} error(s), {warnings} warning(s) in {len(run.judged)} file(s)"
                  + (f"; {len(run.refused)} file(s) not judged" if run.refused else ""))
        out.file.flush()
        render.print_fixes(results, out.file)
    for name, problem in run.refused:  # one line each: bad input is an error, a kind lint does not judge a skip
        click.echo(f"rocmcheck lint: {'error' if name in bad else 'skipped'}: {problem}", err=True)
    raise SystemExit(EXIT_BAD_INPUT if bad else exit_code(results))
