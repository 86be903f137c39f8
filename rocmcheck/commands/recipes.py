"""`rocmcheck recipes list|show NAME|write NAME DIR`: the bundled DeepSpeed / LLaMA-Factory configs."""

from __future__ import annotations

from pathlib import Path

import click

from rocmcheck.commands.options import complete_recipes, json_option
from rocmcheck.errors import BadInput
from rocmcheck.safe.text import excerpt

# A written file's path is echoed whole (a long folder is real), but on one line: a newline in it is `\n`.
MAX_PATH_ECHO = 4096


def _get(name: str):
    from rocmcheck.recipes import all_recipes

    catalog = all_recipes()
    if name not in catalog:
        raise BadInput(f"unknown recipe '{excerpt(name)}'; valid names: {', '.join(catalog)}")
    return catalog[name]


@click.group("recipes")
def recipes() -> None:
    """DeepSpeed and LLaMA-Factory configs that work on MI300X (and H100/H200)."""


def _echo_json(command: str, results: list, **payload) -> None:
    """The envelope. list and show are listings, not verdicts: their results are empty (verdict "not_judged",
    exit 0); write carries lint's verdicts on the files it wrote."""
    from rocmcheck.report.json_report import dumps, envelope

    click.echo(dumps(envelope(command, results, **payload)))


@recipes.command("list")
@json_option()
def list_recipes(as_json: bool) -> None:
    """Name, kind and purpose of each recipe."""
    from rocmcheck.recipes import all_recipes

    catalog = all_recipes()
    if as_json:
        _echo_json("recipes list", [], recipes=[{"name": r.name, "kind": r.kind, "summary": r.summary}
                                            for r in catalog.values()])
        return
    width = max(len(n) for n in catalog)
    for recipe in catalog.values():
        click.echo(f"{recipe.name:<{width}}  {recipe.kind:<12}  {recipe.summary}")


@recipes.command("show")
@click.argument("name", shell_complete=complete_recipes)
@json_option()
def show(name: str, as_json: bool) -> None:
    """Print a recipe."""
    recipe = _get(name)
    if as_json:
        _echo_json("recipes show", [], recipe={"name": recipe.name, "kind": recipe.kind, "summary": recipe.summary,
                                           "text": recipe.text})
        return
    click.echo(recipe.text, nl=False)


@recipes.command("write")
@click.argument("name", shell_complete=complete_recipes)
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite files that already exist (a symbolic link there is replaced "
                                            "itself, never written through).")
@json_option("Print one JSON document (docs/json-schema.md): the recipe's name, the files written and lint's "
             "verdicts on them.")
def write(name: str, directory: Path, force: bool, as_json: bool) -> None:
    """Write recipe NAME into DIRECTORY (a LLaMA-Factory YAML comes with its DeepSpeed config), then lint what was
    written. Exit 0: written and lint-clean; 1: lint found an error; 2: nothing written."""
    from rocmcheck.lint.run import LintRun
    from rocmcheck.recipes import write_recipe
    from rocmcheck.result import exit_code

    recipe = _get(name)
    try:
        written = write_recipe(recipe, directory, force=force)
    except OSError as exc:  # nothing half-written is left behind
        raise BadInput(f"cannot write into {excerpt(directory)}: {exc.strerror or exc}") from None
    # What was written is judged as `rocmcheck lint` judges it (rocmcheck's own rules; no child processes), so
    # the verdict and the exit code come from the one rule (rocmcheck.result.exit_code) like every command's.
    run = LintRun(options={"deep": False, "check_paths": False})  # written here, run from LLaMA-Factory's folder
    run.lint_all([str(path) for path in written])  # together: the DeepSpeed config is judged through its YAML
    results = run.results()
    if as_json:
        _echo_json("recipes write", results, recipe=recipe.name, files=[str(path) for path in written])
    else:
        for path in written:
            click.echo(f"wrote {excerpt(path, limit=MAX_PATH_ECHO)}")
        for message in run.messages:
            if message.severity.value != "info":
                click.echo(message.render())
    raise SystemExit(exit_code(results))
