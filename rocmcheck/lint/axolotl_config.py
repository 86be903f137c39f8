"""lint_axolotl_config: an axolotl config judged by the installed axolotl's own config schema (its pydantic models,
axolotl.utils.schemas.config.AxolotlInputConfig with the plugins' arguments), in a child process
(rocmcheck.lint.axolotl_child: importing axolotl imports torch).

axolotl's schema ignores keys it does not define (pydantic's default), so a misspelt key is a setting silently not
applied: one close to a key of the schema is an error with a "did you mean"; the others are listed in one note. Every
error the schema's types and validators raise is an error at its key, in axolotl's words.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from rocmcheck.child import child_env, run_child
from rocmcheck.fixes import note
from rocmcheck.lint import known_keys
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.safe.text import excerpt

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
CHILD_TIMEOUT_S = 180.0  # importing axolotl's schema (transformers, torch) took 20-60 s on a loaded 2-core CPU box
AXOLOTL_PYTHON_ENV = "ROCMCHECK_AXOLOTL_PYTHON"


def axolotl_python() -> str | None:
    """ROCMCHECK_AXOLOTL_PYTHON (a Python of the environment that will train, with axolotl), else this Python if it
    can import axolotl."""
    explicit = os.environ.get(AXOLOTL_PYTHON_ENV)
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("axolotl") else None


@functools.lru_cache(maxsize=64)
def _ask_cached(config_json: str, python: str) -> tuple[str, str]:
    run = run_child("rocmcheck.lint.axolotl_child", {"config": json.loads(config_json)}, CHILD_TIMEOUT_S,
                    env=child_env(), python=python)
    payload = run.last("axolotl")
    if payload is None:
        return "", f"the axolotl check process gave no answer: {run.command.describe_failure()}"
    if "skipped" in payload:
        return "", str(payload["skipped"])
    return json.dumps(payload), ""


def ask_axolotl(data: dict) -> tuple[dict[str, Any] | None, str]:
    python = axolotl_python()
    if python is None:
        return None, "axolotl is not installed in this Python (set ROCMCHECK_AXOLOTL_PYTHON to a Python that has it)"
    text, why = _ask_cached(json.dumps(data, sort_keys=True, default=str), python)
    return (json.loads(text), "") if text else (None, why)


def lint_axolotl_config(data: dict, path: Path, *, label: str) -> list[LintMessage]:
    file = str(path)

    def msg(severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, file, key_path, message, consumer=label, **kw)

    payload, why = ask_axolotl(data)
    if payload is None:
        return [msg(W, "lint.axolotl.not_asked", "", f"not judged: axolotl's own schema could not be asked: "
                    f"{excerpt(why)}", fix=note("install axolotl where the config will run, or point "
                                                "ROCMCHECK_AXOLOTL_PYTHON at that Python"))]
    version = str(payload.get("axolotl_version"))
    schema = f"axolotl {version}'s config schema"
    keys = set(payload.get("keys") or [])
    out: list[LintMessage] = []
    others = []
    errors = [e for e in payload.get("errors") or [] if isinstance(e, dict)]
    for key in (str(k) for k in payload.get("unread") or []):
        guess = known_keys.closest(key, keys - set(data))
        if guess:
            required = [e for e in errors if e.get("type") == "missing" and e.get("key_path") == guess]
            fate = (f"axolotl stops: '{guess}' is required ({required[0].get('message')})" if required else
                    "axolotl ignores such a key without a word: the setting is not applied")
            errors = [e for e in errors if not any(e is r for r in required)]  # one finding: the rename fixes both
            out.append(msg(E, "lint.axolotl.unknown_key", key, f"unknown key: {schema} does not define it; {fate}",
                           did_you_mean=guess, fix=key_edit(file, key, f'rename it to "{guess}"')))
        else:
            others.append(key)
    if others:
        out.append(msg(I, "lint.axolotl.other_keys", "", f"keys {schema} does not define, which axolotl ignores: "
                       f"{excerpt(', '.join(others), 600)}"))
    for failed in payload.get("plugins_failed") or []:
        out.append(msg(I, "lint.axolotl.plugin_not_loaded", "plugins", f"a plugin's arguments were not checked: "
                       f"{excerpt(str(failed))}"))
    for error in errors:
        key, words = str(error.get("key_path") or ""), str(error.get("message") or "")
        kind = f" [{error.get('type')}]" if error.get("type") else ""
        out.append(msg(E, "lint.axolotl.rejected", key, f"axolotl stops: {excerpt(words)}",
                       detail=[f"axolotl {version}: {words}{kind}"],
                       fix=key_edit(file, key, "change it as axolotl's message says") if key
                       else note("change the file as axolotl's message says")))
    return out
