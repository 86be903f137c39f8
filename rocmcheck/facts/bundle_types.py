"""The types a bundle's facts must have, checked when `doctor --bundle FILE` loads one: a hand-edited or damaged
bundle is refused with one line naming the field, instead of crashing a check later.

A spec is a type (or tuple of types), a Rule (a predicate with a name), a dict spec ({"key": spec, ...}; a key
written "+key" must be present; the key "*" is the spec of every other key; keys not named are free), or a
one-item list ([spec] for every item). Only what the checks read is
typed; anything else a newer rocmcheck adds passes."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from rocmcheck.facts.known import known_problem
from rocmcheck.safe.text import KEY_ECHO_CHARS, excerpt


class Rule(NamedTuple):
    ok: Callable[[Any], bool]
    name: str


NUM = (int, float)
OPT_STR = (str, type(None))
OPT_NUM = (int, float, type(None))
OPT_INT = (int, type(None))
SCALAR = (str, int, float, bool, type(None))

COMMAND = {"argv": [str], "returncode": OPT_INT, "stdout": str, "stderr": str, "timed_out": bool,
           "not_found": bool, "error": OPT_STR, "duration_s": NUM, "timeout_s": OPT_NUM, "interpreter_missing": bool}

FIX = Rule(lambda v: v is None or isinstance(v, str) or (isinstance(v, dict) and all(
    isinstance(v.get(k), (str, type(None))) for k in ("kind", "text", "why", "file"))),
    "null, a string or {kind, text, why, file} of strings")

_TORCH = {"version": OPT_STR, "hip": OPT_STR, "cuda": OPT_STR, "git_version": OPT_STR, "arch_flags": [str],
          "cuda_available": bool, "device_count": int, "arch_list": [str], "cuda_error": OPT_STR,
          # facts/torch_devices.py's description; total_memory and multi_processor_count in older bundles
          "devices": [{"index": int, "name": OPT_STR, "arch": OPT_STR, "gcn_arch": OPT_STR,
                       "capability": Rule(lambda v: isinstance(v, list) and len(v) == 2 and all(
                           type(x) is int for x in v), "a [major, minor] pair"), "total_bytes": OPT_INT,
                       "total_memory": OPT_INT, "multi_processor_count": OPT_INT}]}
_INSTALLED = {"installed": bool, "version": OPT_STR, "error": OPT_STR, "import_error": OPT_STR}
_FLASH_ATTN = {**_INSTALLED, "extension": bool, "extension_error": OPT_STR,
               "triton_amd_enable": (bool, str, type(None)),
               "func_import": bool, "func_error": OPT_STR}
_DEEPSPEED = {**_INSTALLED, "torch_info": {"*": SCALAR}, "installed_ops": {"*": SCALAR},
              "compatible_ops_at_install": {"*": SCALAR}, "accelerator": OPT_STR,
              "ops": {"*": {"known": bool, "compatible": bool, "installed": bool, "error": OPT_STR}},
              "jit": {"*": bool}}
_NVML = {**_INSTALLED, "driver_version": OPT_STR, "cuda_version": OPT_STR,
         "gpus": [{"+index": int, "name": OPT_STR, "memory_total": OPT_INT, "memory_used": OPT_INT,
                   "compute_cap": OPT_STR, "uuid": OPT_STR}]}
_AMDSMI = {**_INSTALLED, "gpus": [{"+index": int, "name": OPT_STR, "gfx": OPT_STR, "memory_total": OPT_INT}]}
# facts/extensions.py: each library's code objects as LibraryCode.summary() records them.
_EXTENSIONS = {"zstandard": OPT_STR, "stopped": OPT_STR, "jit_cache": OPT_STR, "scanned": {"*": int},
               "libraries": [{"owner": str, "path": str, "size": int, "bytes_read": int, "sections": [str],
                              "problem": OPT_STR, "truncated": OPT_STR,
                              "groups": [{"targets": [str], "count": int, "relocatable": bool}],
                              "unread": [{"why": str, "count": int}], "stubs": int}],
               "torch_build": {"path": str, "version": OPT_STR, "hip": OPT_STR, "cuda": OPT_STR, "error": OPT_STR},
               "bitsandbytes": {"dir": str, "version": OPT_STR, "libraries": [str]}}

FACTS = {
    "schema": int, "collected_at": NUM,
    "platform": {"*": OPT_STR},
    "os_info": {"version_parts": {"*": OPT_STR}, "*": OPT_STR},
    "env": {"*": str},
    "files": {"*": OPT_STR},
    "present": {"*": bool},
    "devices": {"*": {"exists": bool, "readable": bool, "writable": bool, "mode": OPT_STR, "gid": OPT_INT,
                      "group": OPT_STR, "stat_error": OPT_STR}},
    "user": {"uid": OPT_INT, "name": OPT_STR, "groups": [str], "group_ids": {"*": OPT_INT}},
    "limits": {"*": OPT_NUM},
    "rocm_layout": {"roots": {"*": (dict, type(None))}, "versioned_dirs": [str]},
    "commands": {"*": COMMAND},
    "packages": {"*": OPT_STR},
    "torch_requires": [str],
    "probes": {"torch": _TORCH, "flash_attn": _FLASH_ATTN, "deepspeed": _DEEPSPEED, "nvml": _NVML,
               "amdsmi": _AMDSMI, "*": dict},
    "probe_runs": {"*": COMMAND},
    "deadline_hit": [str],
    "extensions": _EXTENSIONS,
    # facts/host_config.py's and facts/infiniband.py's parts of node_health
    "node_health": {"modprobe_amdgpu": {"*": str}, "rocm_repos": {"*": str}, "amdgpu_params": {"*": str},
                    "pcie_acs": {"bridges": {"*": OPT_INT}, "gpus": {"*": [str]}, "readable": bool},
                    "infiniband": {"present": bool, "hcas": {"*": {"ports": {"*": dict}}}}},
    "known": Rule(lambda v: known_problem(v) is None, 'an object of group -> "all" or a list of key names'),
    # A recorded fix is {kind, text, why, file} (JSON schema 3) or, in older bundles, one string: Fix.from_dict
    # reads both, and turns one that no longer passes as a shell line into a note.
    "recorded_results": [{"id": str, "status": str, "summary": str, "evidence": [str], "fix": FIX,
                          "area": OPT_STR, "data": dict}],
}
_ROOT = {"realpath": OPT_STR, "info_version": OPT_STR, "therock_cores": {"*": OPT_STR}, "has_rocminfo": bool}


def _name(spec: Any) -> str:
    if isinstance(spec, Rule):
        return spec.name
    if isinstance(spec, dict):
        return "an object"
    if isinstance(spec, list):
        return "a list"
    types = spec if isinstance(spec, tuple) else (spec,)
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "a string", type(None): "null",
             dict: "an object", list: "a list"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _ok(value: Any, types: Any) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def type_problem(value: Any, spec: Any = None, where: str = "facts") -> str | None:
    """Where the value first breaks the spec (FACTS by default), as one line; None when it fits."""
    stack: list[tuple[Any, Any, str]] = [(value, FACTS if spec is None else spec, where)]
    while stack:
        node, node_spec, path = stack.pop()
        if isinstance(node_spec, dict):
            if not isinstance(node, dict):
                return f"{path} should be {_name(node_spec)}, not {_describe(node)}"
            for key in node_spec:
                if key.startswith("+") and key[1:] not in node:
                    return f"{path} lacks {key[1:]!r}"
            for key, child in node.items():
                child_spec = node_spec.get(key, node_spec.get("+" + key, node_spec.get("*")))
                if child_spec is not None:
                    stack.append((child, child_spec, f"{path}.{excerpt(key, KEY_ECHO_CHARS)}"))
        elif isinstance(node_spec, list):
            if not isinstance(node, list):
                return f"{path} should be a list, not {_describe(node)}"
            stack.extend((child, node_spec[0], f"{path}[{i}]") for i, child in enumerate(node))
        elif isinstance(node_spec, Rule):
            if not node_spec.ok(node):
                return f"{path} should be {node_spec.name}, not {_describe(node)}"
        elif not _ok(node, node_spec):
            return f"{path} should be {_name(node_spec)}, not {_describe(node)}"
    roots = value.get("rocm_layout", {}).get("roots", {}) if spec is None and isinstance(value, dict) else {}
    for root, entry in roots.items() if isinstance(roots, dict) else ():
        if entry is not None:
            problem = type_problem(entry, _ROOT, f"facts.rocm_layout.roots.{excerpt(root, KEY_ECHO_CHARS)}")
            if problem:
                return problem
    return None


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    text = repr(value)
    kind = {bool: "true/false", int: "a number", float: "a number", str: "a string", dict: "an object",
            list: "a list"}.get(type(value), type(value).__name__)
    return f"{kind} ({text[:30]}{'...' if len(text) > 30 else ''})"
