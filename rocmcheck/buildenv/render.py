"""BuildEnv -> text in one of four formats. Every value is checked and quoted for its format, and
every comment is kept on comment lines, so nothing in the output can run as a command."""

from __future__ import annotations

import json
import re
import shlex
import textwrap

from rocmcheck import __version__
from rocmcheck.buildenv.env import BuildEnv

FORMATS = ("sh", "dotenv", "json", "dockerfile")
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Values that need no quoting in a dotenv file (and are plain in any format). Single inner spaces are fine:
# `docker run --env-file` takes the rest of the line as it is, python-dotenv strips only the ends.
_PLAIN = re.compile(r"(?:[A-Za-z0-9_./:;+=,@%-]+(?: [A-Za-z0-9_./:;+=,@%-]+)*)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def render(build: BuildEnv, fmt: str) -> str:
    for var in build.variables:
        _check(var.name, var.value)
    if fmt == "json":
        from rocmcheck.report.json_report import envelope

        payload = {k: v for k, v in build.to_dict().items() if k != "schema"}
        return json.dumps(envelope("build-env", [], **payload), indent=2) + "\n"
    if fmt == "sh":
        line = lambda name, value: f"export {name}={shlex.quote(value)}"  # noqa: E731
        usage = ["Use it:  source FILE   or   eval \"$(rocmcheck build-env ...)\""]
    elif fmt == "dotenv":
        line = lambda name, value: f"{name}={_dotenv_value(value)}"  # noqa: E731
        usage = ["Use it:  docker run --env-file FILE ...   or any dotenv loader"]
    elif fmt == "dockerfile":
        line = lambda name, value: f'ENV {name}="{_dockerfile_value(value)}"'  # noqa: E731
        usage = [
            "Paste after FROM in your Dockerfile, then RUN the build commands below.",
            f"MAX_JOBS was sized for the machine this ran on ({build.jobs.cores} cores): re-run build-env there if "
            "the image builds elsewhere.",
        ]
    else:
        raise ValueError(f"unknown format {fmt!r}")

    out: list[str] = []
    out += _comment(
        f"rocmcheck {__version__} build-env: {', '.join(build.archs)} ({build.vendor}); "
        f"targets: {' '.join(build.targets)}"
        + ("; flash-attn Triton backend" if build.triton_backend else "")
    )
    for text in usage:
        out += _comment(text)
    for note in build.notes:
        out += _comment("NOTE: " + note)
    out.append("")
    for var in build.variables:
        if var.why:
            out += _comment(var.why)
        out.append(line(var.name, var.value))
    if build.commands:
        out.append("")
        out += _comment("Build commands:")
        prefix = "RUN " if fmt == "dockerfile" else ""
        for cmd in build.commands:
            indented = cmd.startswith("  ")
            out += _comment(("  " + prefix + cmd.strip()) if indented else cmd, wrap=False)
    if build.pitfalls:
        out.append("")
        out += _comment("Pitfalls:")
        for pitfall in build.pitfalls:
            out += _comment("- " + pitfall, indent="    ")
    return "\n".join(out) + "\n"


def _check(name: str, value: str) -> None:
    """Defence in depth: archs and paths were validated upstream; refuse anything that slipped through."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"refusing to print variable name {name!r}")
    if _CONTROL.search(value) or any(c in value for c in "'\"`$\\"):
        raise ValueError(f"refusing to print {name}: value has quotes, '$', backslashes or control characters")


def _comment(text: str, indent: str = "  ", wrap: bool = True) -> list[str]:
    text = _CONTROL.sub(" ", text)
    lines = textwrap.wrap(text, width=100, subsequent_indent=indent, break_on_hyphens=False,
                          break_long_words=False) if wrap else [text]
    return ["# " + ln if ln else "#" for ln in lines or [""]]


def _dotenv_value(value: str) -> str:
    # Plain values stay unquoted: `docker run --env-file` takes quotes literally.
    return value if _PLAIN.fullmatch(value) else f"'{value}'"


def _dockerfile_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
