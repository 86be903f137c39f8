"""`rocmcheck triage FILE... | -`: what people paste into an issue thread -> the likely cause and the fix."""

from __future__ import annotations

import sys

import click

from rocmcheck.commands.options import Command, json_option, resolve_archs


@click.command("triage", cls=Command)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True, path_type=str))
@json_option()
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print a reply ready to post in the thread: the cause, the line, the fix, what to paste next.")
@click.option("--arch", "archs", multiple=True, metavar="ARCH",
              help="The GPU the paste comes from, when it does not say: an arch (gfx942) or a product (mi300x).")
@click.option("--all", "show_all", is_flag=True, help="Show every cause found, not only the likeliest three.")
@click.option("-v", "--verbose", is_flag=True, help="List every check's verdict on the pasted facts.")
def triage(files: tuple[str, ...], as_json: bool, as_markdown: bool, archs: tuple[str, ...], show_all: bool,
           verbose: bool) -> None:
    """Read pastes (collect_env, ds_report, rocminfo, tracebacks, docker run lines, logs: any mix, files or - for
    stdin) and name the likely causes, each with the pasted line that shows it and its fix. Secrets in the pastes
    are never shown. Exit 0: nothing failed (warnings only, or nothing wrong found); 1: a cause that fails found;
    2: a paste that cannot be read; 3: nothing could be judged."""
    from rocmcheck.errors import BadInput
    from rocmcheck.result import exit_code
    from rocmcheck.triage import triage as run_triage
    from rocmcheck.triage.inputs import read_inputs

    if as_json and as_markdown:
        raise BadInput("--json and --markdown cannot be combined")
    texts = read_inputs(files)
    t = run_triage(texts, resolve_archs(archs))
    results = t.results()
    if as_json:
        from rocmcheck.facts.redact import redact_tree
        from rocmcheck.report.json_report import dumps, envelope

        pastes = [{"name": inp.name, "lines": inp.paste.lines, "truncated": inp.paste.truncated,
                   "blocks": [b.kind for b in inp.paste if b.kind != "text"]} for inp in t.pasted.inputs]
        where = t.scene.platform
        platform = {"name": where.name, "evidence": where.evidence, "vendor": where.vendor}
        click.echo(dumps(envelope("triage", results, causes=t.causes_payload(), ask=t.ask_payload(),
                                  similar=t.similar_payload(), pastes=pastes, platform=redact_tree(platform))))
    elif as_markdown:
        from rocmcheck.triage.answer import markdown

        click.echo(markdown(t), nl=False)
    else:
        from rocmcheck.triage.answer import text_lines

        click.echo("\n".join(text_lines(t, show_all=show_all, verbose=verbose)))
    sys.exit(exit_code(results))
