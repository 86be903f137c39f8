"""The Python whose stack the doctor judges. rocmcheck may be installed on its own (`uv tool install`, `pipx
install`): its own interpreter then has no torch, and the person's training environment is another one. That one
is named with `--python PATH`, or found: an active virtualenv (VIRTUAL_ENV) or conda environment (CONDA_PREFIX)
whose prefix is not rocmcheck's own.

The stack probes then run in that interpreter without rocmcheck installed there: the child's PYTHONPATH is a
scratch folder holding only a link to this rocmcheck package (never the whole of rocmcheck's site-packages, whose
packages would hide the person's own), and a second folder of links to rocmcheck's own dependencies that the child
appends to the end of its path (FALLBACK_ENV), so a package of the person's environment always comes first.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from rocmcheck.errors import BadInput
from rocmcheck.safe.text import excerpt

# The environment variables that name an active environment, in the order they are believed (a virtualenv made
# inside a conda environment is the one in use).
ACTIVE_ENV_VARS = ("VIRTUAL_ENV", "CONDA_PREFIX")
# The child appends this folder to the end of sys.path: rocmcheck's own dependencies, after the person's packages.
FALLBACK_ENV = "ROCMCHECK_FALLBACK_PATH"
# What the probes that run in the person's interpreter import beyond the standard library.
DEPENDENCIES = ("packaging",)


# rocmcheck's own code runs in the judged interpreter (the probe child), so it needs what rocmcheck needs
# (pyproject.toml's requires-python).
MIN_VERSION = (3, 11)
VERSION_TIMEOUT_S = 20.0
_ASK_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


@dataclass(frozen=True)
class TargetPython:
    executable: str
    source: str  # "--python", "VIRTUAL_ENV" or "CONDA_PREFIX"
    version: str = ""

    def describe(self) -> str:
        return {"--python": "--python", "VIRTUAL_ENV": "the active virtualenv",
                "CONDA_PREFIX": "the active conda environment"}.get(self.source, self.source)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def python_version(executable: str) -> tuple[int, ...] | None:
    """The interpreter's version, asked of it; None when it gives no answer (not a Python, broken)."""
    from rocmcheck.runner import run_command

    result = run_command([executable, "-c", _ASK_VERSION], timeout=VERSION_TIMEOUT_S)
    text = result.stdout.strip() if result.ok else ""
    parts = text.split(".")
    return tuple(int(p) for p in parts) if len(parts) == 3 and all(p.isdigit() for p in parts) else None


def find_target(explicit: str | None, env: Mapping[str, str] | None = None) -> tuple[TargetPython | None, str]:
    """(the interpreter to judge, or None for rocmcheck's own; a note for the header when an active environment
    was passed over). An explicit path that is no executable file, or no Python rocmcheck can run in, is bad
    input; an active environment's Python older than MIN_VERSION is passed over, saying so."""
    env = os.environ if env is None else env
    if explicit is not None:
        path = Path(explicit).expanduser()
        if path.is_dir() and _executable(path / "bin" / "python"):  # an environment's folder
            path = path / "bin" / "python"
        if not _executable(path):
            raise BadInput(f"--python {excerpt(explicit)}: not an executable Python interpreter")
        if os.path.abspath(path) == os.path.abspath(sys.executable):
            return None, ""
        target, why = _usable(str(os.path.abspath(path)), "--python")
        if target is None:
            raise BadInput(f"--python {excerpt(explicit)}: {why}")
        return target, ""
    own = os.path.realpath(sys.prefix)
    for var in ACTIVE_ENV_VARS:
        prefix = env.get(var)
        if not prefix:
            continue
        python = Path(prefix) / "bin" / "python"
        if os.path.realpath(prefix) == own:
            return None, ""  # rocmcheck runs in the active environment itself
        if _executable(python):
            target, why = _usable(str(python), var)
            if target is None:
                return None, f"{var}={prefix} passed over: {why}; judged rocmcheck's own Python (--python PATH)"
            return target, ""
    return None, ""


def _usable(executable: str, source: str) -> tuple[TargetPython | None, str]:
    version = python_version(executable)
    if version is None:
        return None, "it did not answer as a Python interpreter"
    text = ".".join(map(str, version))
    if version[:2] < MIN_VERSION:
        return None, f"Python {text}, and rocmcheck's probes need {'.'.join(map(str, MIN_VERSION))} or newer"
    return TargetPython(executable, source, text), ""


def _module_dir(name: str) -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return str(Path(spec.origin).parent) if spec.submodule_search_locations else spec.origin


def shim(folder: Path, package_dir: str) -> dict[str, str]:
    """Fill `folder` with a link to this rocmcheck package and, under deps/, links to its dependencies; the
    variables that point a child at them (PYTHONPATH: only rocmcheck; FALLBACK_ENV: the dependencies)."""
    (folder / "rocmcheck").symlink_to(package_dir, target_is_directory=True)
    deps = folder / "deps"
    deps.mkdir()
    for name in DEPENDENCIES:
        where = _module_dir(name)
        if where is not None:
            (deps / Path(where).name).symlink_to(where)
    return {"PYTHONPATH": str(folder), FALLBACK_ENV: str(deps)}


@contextlib.contextmanager
def child_env_in(python: str | None) -> Iterator[dict[str, str] | None]:
    """The environment for a rocmcheck child run by `python`, another environment's interpreter where rocmcheck
    need not be installed (the shim's links, in a scratch folder kept while the block runs); None for rocmcheck's
    own interpreter (run_child's default then). The stack probes and the doctor's fine-tune start their children
    with it."""
    if python is None:
        yield None
        return
    from rocmcheck.child import PACKAGE_ROOT, child_env
    from rocmcheck.safe.scratch_folders import scratch_folder

    with scratch_folder("python") as folder:
        env = child_env()
        paths = shim(folder, os.path.join(PACKAGE_ROOT, "rocmcheck"))
        env[FALLBACK_ENV] = paths[FALLBACK_ENV]
        env["PYTHONPATH"] = os.pathsep.join([paths["PYTHONPATH"]] + ([os.environ["PYTHONPATH"]]
                                                                     if os.environ.get("PYTHONPATH") else []))
        yield env


def use_fallback_path(env: Mapping[str, str] | None = None) -> None:
    """In the child: rocmcheck's own dependencies at the end of sys.path, after the person's packages."""
    folder = (os.environ if env is None else env).get(FALLBACK_ENV)
    if folder and folder not in sys.path:
        sys.path.append(folder)
