"""Option defaults from a config file and the environment, fed to click as its `default_map`, so an option given
on the command line always wins. Highest first:

1. the command line (`--level 2`);
2. the environment: `ROCMCHECK_<COMMAND>_<OPTION>`, the long option's name in capitals with `-` as `_`
   (`ROCMCHECK_DOCTOR_LEVEL=2`, `ROCMCHECK_DOCTOR_NO_TRAIN=1`, `ROCMCHECK_DOCTOR_ARCH=mi300x`; an option given
   more than once takes a space-separated list);
3. the project: `rocmcheck.toml` in the working directory, else the `[tool.rocmcheck]` table of its
   `pyproject.toml`;
4. the user: `$XDG_CONFIG_HOME/rocmcheck/config.toml` (`~/.config/rocmcheck/config.toml` when it is unset).

A file holds one table per command, keyed by the long option names without dashes:

    [doctor]
    arch = ["mi300x"]
    level = 2
    skip = ["host.iommu"]
    fail-on = "warn"

A file that does not parse, a table for no command, or a key that is no option of its command is bad input: one
line naming the file, exit 2. Values are converted and checked by the option itself, as a flag's would be.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Callable

import click

from rocmcheck.errors import BadInput
from rocmcheck.safe.text import excerpt

ENV_PREFIX = "ROCMCHECK_"
USER_FILE = Path("rocmcheck") / "config.toml"
PROJECT_FILE = "rocmcheck.toml"
PYPROJECT = "pyproject.toml"
MAX_CONFIG_BYTES = 1 << 20  # a config of option defaults is a few hundred bytes


def user_config_path(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / USER_FILE


def _read_toml(path: Path) -> dict[str, Any] | None:
    """The file's tables, or None when there is no such file; BadInput when it cannot be read or parsed."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"config {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise BadInput(f"config {path}: over {MAX_CONFIG_BYTES} bytes, not a config file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"config {path}: not valid TOML ({exc})") from None


def project_config(cwd: Path) -> tuple[Path, dict[str, Any]] | None:
    own = _read_toml(cwd / PROJECT_FILE)
    if own is not None:
        return cwd / PROJECT_FILE, own
    pyproject = cwd / PYPROJECT
    try:
        if not pyproject.is_file() or b"rocmcheck" not in pyproject.read_bytes()[:MAX_CONFIG_BYTES]:
            return None  # most projects' pyproject.toml says nothing to rocmcheck: not even parsed
    except OSError:
        return None
    table = (_read_toml(pyproject) or {}).get("tool", {})
    table = table.get("rocmcheck") if isinstance(table, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise BadInput(f"config {pyproject}: [tool.rocmcheck] is not a table")
    return pyproject, table


def option_names(command: click.Command) -> dict[str, click.Option]:
    """A command's options by their long names without dashes ("no-train"), hidden aliases and --help left out."""
    names: dict[str, click.Option] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden or param.name in (None, "help"):
            continue
        for opt in param.opts:
            if opt.startswith("--"):
                names[opt[2:]] = param
    return names


def _value(command: click.Command, option: click.Option, value: Any, where: str) -> Any:
    """The value as the option takes it, checked now so a bad one names the file or variable it came from."""
    if isinstance(value, dict):
        raise BadInput(f"{where}: a table where a value belongs")
    if option.multiple and not isinstance(value, list):
        value = [value]
    if not option.multiple and isinstance(value, list):
        raise BadInput(f"{where}: a list, but the option takes one value")
    try:
        option.type_cast_value(click.Context(command), value)
    except click.BadParameter as exc:
        raise BadInput(f"{where}: {exc.format_message()}") from None
    return value


def _from_file(path: Path, tables: dict[str, Any], commands: Callable[[str], click.Command | None],
               names: list[str], into: dict[str, dict[str, Any]]) -> None:
    for name, table in tables.items():
        command = commands(name) if isinstance(name, str) else None
        if command is None:
            import difflib

            close = difflib.get_close_matches(str(name), names, n=1)
            raise BadInput(f"config {path}: [{excerpt(name)}] is not a rocmcheck command"
                           + (f"; did you mean [{close[0]}]?" if close else ""))
        if not isinstance(table, dict):
            raise BadInput(f"config {path}: {excerpt(name)} must be a table ([{excerpt(name)}])")
        options = option_names(command)
        for key, value in table.items():
            option = options.get(key)
            if option is None:
                raise BadInput(f"config {path}: [{name}] {excerpt(key)} is not an option of `rocmcheck {name}`")
            into.setdefault(name, {})[option.name] = _value(command, option, value, f"config {path}: [{name}] {key}")


def _from_env(env: dict[str, str], commands: Callable[[str], click.Command | None], names: list[str],
              into: dict[str, dict[str, Any]]) -> None:
    for name in names:
        prefix = ENV_PREFIX + name.upper().replace("-", "_") + "_"
        wanted = [k for k in env if k.startswith(prefix)]
        if not wanted:
            continue
        command = commands(name)
        if command is None:
            continue
        for key, option in option_names(command).items():
            value = env.get(prefix + key.upper().replace("-", "_"))
            if value is None or isinstance(option.type, click.types.UnprocessedParamType):
                continue
            variable = prefix + key.upper().replace("-", "_")
            value = value.split() if option.multiple else value
            into.setdefault(name, {})[option.name] = _value(command, option, value, variable)


def default_map(commands: Callable[[str], click.Command | None], names: list[str], *,
                env: dict[str, str] | None = None, cwd: Path | None = None) -> dict[str, dict[str, Any]]:
    """{command: {parameter: default}} from the user's file, the project's, then the environment, each over the
    one before. commands(name): the click command of that name, or None."""
    env = dict(os.environ) if env is None else env
    out: dict[str, dict[str, Any]] = {}
    user = user_config_path(env)
    tables = _read_toml(user)
    if tables is not None:
        _from_file(user, tables, commands, names, out)
    project = project_config(cwd or Path.cwd())
    if project is not None:
        _from_file(project[0], project[1], commands, names, out)
    _from_env(env, commands, names, out)
    return out
