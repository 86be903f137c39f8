"""A private bytecode cache for rocmcheck's own processes, where Python would otherwise compile every import again.

An image that sets PYTHONDONTWRITEBYTECODE=1 (many containers do) and ships torch without `__pycache__` makes every
process compile torch, torch._dynamo, transformers and their dependencies from source: on one H200 a default
smoke-train took 22.1 s instead of 11.6-12.9 s and the doctor 34.5 s instead of 18.6-28 s (benchmarks/RESULTS.md,
section 18). Python can keep compiled bytecode in a folder of its own instead (sys.pycache_prefix, which
PYTHONPYCACHEPREFIX sets for a child): it then reads and writes `.pyc` files only there, never next to the sources.

`use_private_cache` turns that on for the rocmcheck process and the children it starts (the doctor's stack child,
its probe children and smoke-train child, smoke-train's ranks), and only when all of these hold:
- Python does not write bytecode (PYTHONDONTWRITEBYTECODE or -B) and the person set no PYTHONPYCACHEPREFIX;
- torch's compiled bytecode is not where Python looks for it (so every process would compile torch);
- ROCMCHECK_BYTECODE_CACHE is not "0" (the way to turn it off), and the cache folder can be written.
ROCMCHECK_BYTECODE_CACHE=1 uses the cache even where torch's bytecode is installed (then ignored): what
benchmarks/bench_time_to_verdict.py measures a machine without bytecode with.
The folder is $XDG_CACHE_HOME/rocmcheck/pycache, else ~/.cache/rocmcheck/pycache; nothing is ever written into
site-packages. Python checks each `.pyc` against its source's size and modification time, so an upgraded package is
compiled again, once. Deleting the folder is always safe.

The doctor's `torch.bytecode` check speaks of the person's own processes, which do not use this cache: a child
reads the person's settings through `persons_settings` and `persons_bytecode_path`, not through its own.

A first run on such a machine would still compile everything it imports one file at a time, so the CLI fills the
cache ahead with every core (rocmcheck/bytecode_prefill.py) when it holds no torch yet (`cold`): once per machine,
and again whenever torch is upgraded.
"""

from __future__ import annotations

import importlib.util
import os
import sys

SWITCH_ENV = "ROCMCHECK_BYTECODE_CACHE"  # "0" turns the private cache off; "1" uses it even where torch has bytecode
# Set (to the cache folder) in the environment of every child once rocmcheck turned its cache on: the person's own
# settings were then PYTHONDONTWRITEBYTECODE=1 and no PYTHONPYCACHEPREFIX, whatever the child's own flags say.
MARKER_ENV = "ROCMCHECK_PRIVATE_PYCACHE"


def cache_folder(env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rocmcheck", "pycache")


def _source_of(package: str) -> str | None:
    """The package's __init__.py, found without importing it; None when it is not a source package here."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return spec.origin


def why_not(env: dict[str, str] | None = None, package: str = "torch") -> str | None:
    """Why the private cache stays off here (one phrase), or None when it should be used."""
    env = os.environ if env is None else env
    if env.get(SWITCH_ENV) == "0":
        return f"{SWITCH_ENV}=0"
    if sys.pycache_prefix or env.get("PYTHONPYCACHEPREFIX"):
        return "PYTHONPYCACHEPREFIX is set: Python already keeps bytecode where the person chose"
    if not (sys.flags.dont_write_bytecode or env.get("PYTHONDONTWRITEBYTECODE")):
        return "Python writes bytecode next to the sources itself"
    if env.get(SWITCH_ENV) == "1":
        return None  # on whatever is installed: measures a machine whose packages have no bytecode
    source = _source_of(package)
    if source is None:
        return f"{package} is not installed as source here"
    if os.path.isfile(importlib.util.cache_from_source(source)):
        return f"{package}'s compiled bytecode is installed (pip writes it)"
    return None


def use_private_cache(env: dict[str, str] | None = None) -> str | None:
    """Turn the private cache on for this process and its children when `why_not` finds no reason against it;
    the folder, or None when it stays off. Changes sys.pycache_prefix, sys.dont_write_bytecode and the environment
    (`env`, default os.environ) that children inherit."""
    env = os.environ if env is None else env
    if env.get(MARKER_ENV) and sys.pycache_prefix == env[MARKER_ENV]:
        return env[MARKER_ENV]  # already on (a child of a rocmcheck that turned it on)
    if why_not(env) is not None:
        return None
    folder = cache_folder(env)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    sys.pycache_prefix = folder
    sys.dont_write_bytecode = False
    env["PYTHONPYCACHEPREFIX"] = folder
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env[MARKER_ENV] = folder
    return folder


def private_cache_on() -> bool:
    marker = os.environ.get(MARKER_ENV)
    return bool(marker) and sys.pycache_prefix == marker


def persons_settings() -> tuple[bool, str | None]:
    """(PYTHONDONTWRITEBYTECODE in effect, PYTHONPYCACHEPREFIX) as the person's own Python processes have them."""
    if private_cache_on():
        return True, None
    return bool(sys.flags.dont_write_bytecode or sys.dont_write_bytecode), sys.pycache_prefix


def persons_bytecode_path(source: str) -> str:
    """Where the person's own Python looks for the compiled bytecode of `source` (importlib.util.cache_from_source
    with their settings, not rocmcheck's private cache)."""
    if not private_cache_on():
        return importlib.util.cache_from_source(source)
    head, tail = os.path.split(source)
    base = tail.rpartition(".")[0] or tail
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(head, "__pycache__", f"{base}.{sys.implementation.cache_tag}{opt}.pyc")


def cold() -> bool:
    """Whether the private cache is on and holds no bytecode of torch yet (a first run, or torch was upgraded)."""
    source = _source_of("torch")
    return private_cache_on() and source is not None and not os.path.isfile(importlib.util.cache_from_source(source))
