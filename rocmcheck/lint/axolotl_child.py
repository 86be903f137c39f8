"""Child process: an axolotl config checked by the installed axolotl's own config schema, without training anything.

Run as `python -m rocmcheck.lint.axolotl_child --request-file FILE`, the request being {"config": the YAML's
mapping}. Importing axolotl imports torch (seconds), so rocmcheck never does it in its own process. Answers one
"axolotl" event on rocmcheck/child.py's channel.

What runs, in axolotl's own code (axolotl/utils/config validate_config, without its machine half):
1. the plugins the file names (`plugins:`) registered with axolotl's PluginManager, and the schema merged with
   their arguments (axolotl.integrations.config.merge_input_args): `liger_rope` is the Liger plugin's key;
2. the file's keys against that schema's fields and aliases: axolotl's schema ignores a key it does not define
   (pydantic's default), so a misspelt key is a setting silently not applied; they are answered for the parent
   to judge;
3. AxolotlInputConfig.model_validate: the schema's types and its validators (ValidationMixin), every error pydantic
   lists, with the key each is at.
What is the training machine's is left out: validate_config's AxolotlConfigWCapabilities checks the GPUs'
capabilities (bf16, compute capability, GPU count), which this machine does not have.
"""

from __future__ import annotations

from typing import Any

from rocmcheck.child import leave, open_channel, read_request


def _schema(config: dict[str, Any]) -> tuple[Any, list[str]]:
    """AxolotlInputConfig merged with the arguments of the plugins the file names; the plugins that would not
    load."""
    from axolotl.utils.schemas.config import AxolotlInputConfig

    plugins = config.get("plugins") if isinstance(config.get("plugins"), list) else []
    if not plugins:
        return AxolotlInputConfig, []
    from axolotl.integrations.base import PluginManager
    from axolotl.integrations.config import merge_input_args

    manager = PluginManager.get_instance()
    failed = []
    for plugin in plugins:
        try:
            manager.register(str(plugin))
        except Exception as exc:  # a plugin whose own dependencies are missing here
            failed.append(f"{plugin}: {type(exc).__name__}: {exc}")
    _, merged = merge_input_args()
    return merged, failed


def _names(model: Any) -> set[str]:
    fields = model.model_fields
    return set(fields) | {f.alias for f in fields.values() if f.alias}


def check(config: dict[str, Any]) -> dict[str, Any]:
    from importlib import metadata

    from pydantic import ValidationError

    model, failed = _schema(config)
    names = _names(model)
    unread = [str(k) for k in config if str(k) not in names]
    errors: list[dict[str, Any]] = []
    try:
        model.model_validate(config)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = [str(part) for part in error.get("loc") or ()]
            errors.append({"key_path": ".".join(loc), "message": str(error.get("msg", "")),
                           "type": str(error.get("type", ""))})
    except Exception as exc:  # a validator raising outside pydantic's wrapping
        errors.append({"key_path": "", "message": f"{type(exc).__name__}: {exc}", "type": "exception"})
    return {"axolotl_version": metadata.version("axolotl"), "unread": unread, "errors": errors,
            "keys": sorted(names), "plugins_failed": failed}


def main(argv: list[str] | None = None) -> int:
    request = read_request(argv, prog="python -m rocmcheck.lint.axolotl_child")
    channel = open_channel()
    config = request.get("config") if isinstance(request.get("config"), dict) else {}
    try:
        result = check(config)
    except Exception as exc:  # not installed, or broken
        result = {"skipped": f"{type(exc).__name__}: {exc}"}
    channel.emit("axolotl", **result)
    return 0


if __name__ == "__main__":
    leave(main())
