"""A site's own rules (`rocmcheck doctor --knowledge DIR`): what this cluster expects of a node, in the schema of
the shipped tables, each fact naming the file it came from.

A rule file is JSON:

    {"rocmcheck_site_rules": 1,
     "source": "qualified on gpu-017 by the cluster team", "read": "2026-12-07",
     "driver": {"amdgpu_modules": ["6.12.12"]},
     "firmware": {"PLDM_BUNDLE": "01.25.03.12", "PM": ["00.85.129.03", "00.85.130.00"]},
     "rocm": "~=6.4.1", "torch": ">=2.7",
     "forbidden_env": {"HSA_ENABLE_SDMA": "turns the copy engines off: CPU offload runs on compute queues"},
     "products": {"MI300X": {"gemm_bf16_tflops": {"value": 600.0, "what": "0.9 x gpu-017's probe"}}}}

`products` is validation_floors.json's own shape (product -> measure -> value, what, source, read), so a site floor
takes the shipped floor's place for that product and measure. Versions and ranges are read with packaging. A file
is hostile input: read through the capped reader (a regular file, bounded), never executed, and every field is
checked before anything is used; the first problem is a BadInput naming the file and the field.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from rocmcheck import versions
from rocmcheck.errors import BadInput
from rocmcheck.knowledge import all_archs
from rocmcheck.knowledge.floors import FLOOR_KEYS, Floor
from rocmcheck.safe.structured import load_file
from rocmcheck.safe.text import KEY_ECHO_CHARS, excerpt

FORMAT_KEY = "rocmcheck_site_rules"
FORMAT_VERSION = 1
SUFFIX = ".json"
# A rule file holds a few dozen values; 1 MiB is far above any real one. A folder of more than 256 of them is a
# mistake (the wrong folder), not a site's rules.
MAX_RULE_FILE_BYTES = 1 << 20
MAX_RULE_FILES = 256
# Never read through a link into the kernel's own file systems: their files look regular and hold secrets.
REFUSED_ROOTS = ("/proc", "/sys", "/dev")
TOP_KEYS = ("rocmcheck_site_rules", "_about", "source", "read", "driver", "firmware", "rocm", "torch",
            "forbidden_env", "products")
MAX_TEXT = 500  # a version, a reason, a source: one line each


@dataclass(frozen=True)
class Rule:
    """One expected value and the file that set it."""

    values: tuple[str, ...]  # accepted versions (firmware, driver) or one specifier / reason
    file: str

    def cite(self) -> str:
        return f"site rule {self.file}"


@dataclass(frozen=True)
class SiteRules:
    files: tuple[str, ...] = ()
    amdgpu_modules: Rule | None = None  # accepted /sys/module/amdgpu/version values
    firmware: dict[str, Rule] = field(default_factory=dict)  # amd-smi FW_ID -> accepted FW_VERSIONs
    rocm: Rule | None = None  # values[0]: a packaging specifier ("~=6.4.1")
    torch: Rule | None = None
    forbidden_env: dict[str, Rule] = field(default_factory=dict)  # name -> values[0]: why
    floors: dict[tuple[str, str], Floor] = field(default_factory=dict)  # (product, measure) -> the site's floor

    def floor(self, product: str | None, key: str) -> Floor | None:
        return self.floors.get((product or "", key))


def _fail(where: str, path: tuple[str, ...], problem: str) -> BadInput:
    at = ".".join(excerpt(p, KEY_ECHO_CHARS) for p in path)
    return BadInput(f"--knowledge {where}: {at + ': ' if at else ''}{problem}")


def _shown(value: Any) -> str:
    """A value as a message quotes it: a string in quotes (an empty one shows as ''), anything else as written."""
    return repr(excerpt(value)) if isinstance(value, str) else excerpt(value)


def _text(value: Any, where: str, path: tuple[str, ...]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, path, f"should be a non-empty string, not {_shown(value)}")
    if len(value) > MAX_TEXT or "\n" in value:
        raise _fail(where, path, f"should be one line of at most {MAX_TEXT} characters")
    return value.strip()


def _texts(value: Any, where: str, path: tuple[str, ...]) -> tuple[str, ...]:
    """A string or a non-empty list of strings (the accepted versions)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise _fail(where, path, "should list at least one version")
    return tuple(_text(v, where, path) for v in items)


def _table(value: Any, where: str, path: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, path, f"should be an object, not {_shown(value)}")
    return value


def _specifier(value: Any, where: str, path: tuple[str, ...]) -> str:
    text = _text(value, where, path)
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise _fail(where, path, f"{_shown(text)} is not a version range (e.g. \"~=6.4.1\" or \">=2.7,<2.9\")") \
            from None
    return text


def _known_products() -> dict[str, str]:
    return {p.name.upper(): p.name for a in all_archs().values() for p in a.products}


@dataclass
class _Parsed:
    amdgpu_modules: tuple[str, ...] | None = None
    firmware: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rocm: str | None = None
    torch: str | None = None
    forbidden_env: dict[str, str] = field(default_factory=dict)
    floors: dict[tuple[str, str], tuple[float, str, str]] = field(default_factory=dict)  # value, what, source


def parse_rules(doc: Any, where: str) -> _Parsed:
    """Check one file's document field by field; BadInput naming `where` and the field at the first problem."""
    top = _table(doc, where, ())
    if top.get(FORMAT_KEY) != FORMAT_VERSION:
        raise _fail(where, (FORMAT_KEY,), f"should be {FORMAT_VERSION} (a site rule file starts with "
                                          f"\"{FORMAT_KEY}\": {FORMAT_VERSION})")
    for key in top:
        if key not in TOP_KEYS:
            raise _fail(where, (key,), f"is not a site rule (known: {', '.join(TOP_KEYS[2:])})")
    source = _text(top.get("source"), where, ("source",))
    read = _text(top.get("read"), where, ("read",))
    out = _Parsed()
    if "driver" in top:
        driver = _table(top["driver"], where, ("driver",))
        for key in driver:
            if key not in ("amdgpu_modules", "why"):
                raise _fail(where, ("driver", key), "is not a driver rule (amdgpu_modules, why)")
        if "amdgpu_modules" in driver:
            modules = _texts(driver["amdgpu_modules"], where, ("driver", "amdgpu_modules"))
            for m in modules:
                if versions.parse(m) is None:
                    raise _fail(where, ("driver", "amdgpu_modules"), f"{_shown(m)} is not a module version "
                                                                     "(/sys/module/amdgpu/version, e.g. 6.12.12)")
            out.amdgpu_modules = modules
    for fw_id, accepted in _table(top.get("firmware", {}), where, ("firmware",)).items():
        out.firmware[_text(fw_id, where, ("firmware",)).upper()] = _texts(accepted, where, ("firmware", fw_id))
    if "rocm" in top:
        out.rocm = _specifier(top["rocm"], where, ("rocm",))
    if "torch" in top:
        out.torch = _specifier(top["torch"], where, ("torch",))
    for name, why in _table(top.get("forbidden_env", {}), where, ("forbidden_env",)).items():
        if not name or not all(c.isalnum() or c == "_" for c in name) or name[0].isdigit():
            raise _fail(where, ("forbidden_env", name), "is not an environment variable name")
        out.forbidden_env[name] = _text(why, where, ("forbidden_env", name))
    products = _known_products()
    for product, measures in _table(top.get("products", {}), where, ("products",)).items():
        name = products.get(str(product).upper())
        if name is None:
            raise _fail(where, ("products", product), "is not a product rocmcheck knows (knowledge/gpus.json: "
                                                      "MI300X, MI325X, H100, ...)")
        for key, entry in _table(measures, where, ("products", product)).items():
            if key not in FLOOR_KEYS:
                raise _fail(where, ("products", product, key), f"is not a measure (known: {', '.join(FLOOR_KEYS)})")
            entry = _table(entry, where, ("products", product, key))
            value = entry.get("value")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise _fail(where, ("products", product, key, "value"), f"should be a number above 0, not "
                                                                        f"{_shown(value)}")
            what = _text(entry.get("what", f"the site's floor ({source}, {read})"), where,
                         ("products", product, key, "what"))
            out.floors[(name, key)] = (float(value), what, where)
    return out


def _rule_files(path: Path) -> list[Path]:
    """The rule files a --knowledge path names: the file itself, or a folder's *.json (hidden files, such as a
    writer's temporary file, and other names left out), sorted by name."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BadInput(f"--knowledge {excerpt(path)}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        return [path]
    try:
        names = sorted(e.name for e in os.scandir(path) if e.name.endswith(SUFFIX) and not e.name.startswith("."))
    except OSError as exc:
        raise BadInput(f"--knowledge {excerpt(path)}: cannot list it: {exc.strerror or exc}") from None
    if len(names) > MAX_RULE_FILES:
        raise BadInput(f"--knowledge {excerpt(path)}: {len(names)} rule files (at most {MAX_RULE_FILES}): is it the "
                       "right folder?")
    return [path / n for n in names]


def _refused_link(path: Path) -> str | None:
    """Where a link leads when that is inside /proc, /sys or /dev, else None."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    return real if any(real == r or real.startswith(r + "/") for r in REFUSED_ROOTS) else None


def load_site_rules(path: str | os.PathLike) -> SiteRules:
    """The rules of a --knowledge folder (or one file). BadInput, one line naming the file and the field, for the
    first file that cannot be read or is not a valid rule file, and for two files that set one fact differently."""
    files = _rule_files(Path(path))
    parsed: list[tuple[str, _Parsed]] = []
    for file in files:
        where = excerpt(file)
        inside = _refused_link(file)
        if inside is not None:
            raise BadInput(f"--knowledge {where}: leads into {excerpt(inside)}, not a rule file")
        try:
            doc = load_file(file, limit=MAX_RULE_FILE_BYTES, what="site rule file", fmt="json")
        except BadInput as exc:
            raise BadInput(f"--knowledge {exc}") from None
        parsed.append((where, parse_rules(doc, where)))  # the file as verdicts name it: one line, sanitised
    return _merge(parsed)


def _merge(parsed: list[tuple[str, _Parsed]]) -> SiteRules:
    """One set of rules from every file; a fact two files set differently is a BadInput naming both."""
    setters: dict[str, tuple[Any, str]] = {}

    def put(fact: str, value: Any, file: str) -> None:
        if fact in setters and setters[fact][0] != value:
            raise BadInput(f"--knowledge: {fact} is set differently by {setters[fact][1]} and {file}")
        setters.setdefault(fact, (value, file))

    floors: dict[tuple[str, str], Floor] = {}
    for file, p in parsed:
        if p.amdgpu_modules is not None:
            put("driver.amdgpu_modules", p.amdgpu_modules, file)
        for fw_id, accepted in p.firmware.items():
            put(f"firmware.{fw_id}", accepted, file)
        for fact, value in (("rocm", p.rocm), ("torch", p.torch)):
            if value is not None:
                put(fact, (value,), file)
        for name, why in p.forbidden_env.items():
            put(f"forbidden_env.{name}", (why,), file)
        for (product, key), (value, what, where) in p.floors.items():
            put(f"products.{product}.{key}", value, file)
            floors.setdefault((product, key), Floor(product, key, value, what, where, site=True))

    def rule(fact: str) -> Rule | None:
        return Rule(*setters[fact]) if fact in setters else None

    def rules(prefix: str) -> dict[str, Rule]:
        return {f[len(prefix):]: Rule(*v) for f, v in setters.items() if f.startswith(prefix)}

    return SiteRules(files=tuple(f for f, _ in parsed), amdgpu_modules=rule("driver.amdgpu_modules"),
                     firmware=rules("firmware."), rocm=rule("rocm"), torch=rule("torch"),
                     forbidden_env=rules("forbidden_env."), floors=floors)


# `doctor --write-reference`: a known-good node's measured rate x this margin becomes the site's floor. The probes'
# run-to-run spread on one healthy node stays well inside 10%, so a node below 0.9 x the reference is slower than
# its peers, not unlucky.
REFERENCE_MARGIN = 0.9
# The firmware a reference records: the PLDM bundle and the power-management firmware it carries, both flashed on
# the board. The other IDs amd-smi lists (CP_MEC, RLC, SDMA, VCN, ...) are loaded by the amdgpu driver from
# /lib/firmware and change with every driver update, which the driver rule already covers.
REFERENCE_FIRMWARE_IDS = ("PLDM_BUNDLE", "PM")


def _range_from(version: str | None) -> str | None:
    """"6.4.1" -> "~=6.4.1" (this series, this patch or a later one); "2.7.1+rocm6.4" -> "~=2.7.1"; None without
    a version."""
    v = versions.parse(version)
    if v is None or len(v.release) < 2:
        return None
    if len(v.release) == 2:
        return f"=={v.release[0]}.{v.release[1]}.*"
    return "~=" + ".".join(str(n) for n in v.release[:3])


def reference_rules(*, source: str, read: str, amdgpu_module: str | None, firmware: dict[str, str],
                    rocm: str | None, torch: str | None, product: str | None, measured: dict[str, float],
                    margin: float = REFERENCE_MARGIN) -> dict[str, Any]:
    """A site rule file (the schema above) recording a known-good node: its driver, its PLDM bundle and power
    firmware, its ROCm and torch as ranges of their series, and each measured rate x margin as its product's floor.
    measured: {floor key: the rate in that key's unit}."""
    doc: dict[str, Any] = {FORMAT_KEY: FORMAT_VERSION,
                           "_about": f"Written by `rocmcheck doctor --write-reference` from a known-good node; floors "
                                     f"are {margin:g} x its measured rates. Edit freely; see docs/knowledge.md.",
                           "source": source, "read": read}
    if amdgpu_module and versions.parse(amdgpu_module) is not None:
        doc["driver"] = {"amdgpu_modules": [amdgpu_module.strip()]}
    kept = {k: v for k, v in firmware.items() if k in REFERENCE_FIRMWARE_IDS}
    if kept:
        doc["firmware"] = kept
    for key, value in (("rocm", _range_from(rocm)), ("torch", _range_from(torch))):
        if value:
            doc[key] = value
    floors = {k: {"value": round(v * margin, 2), "what": f"{margin:g} x {v:,.2f} measured by rocmcheck's probe on "
                                                         f"the reference node"}
              for k, v in measured.items() if k in FLOOR_KEYS and v > 0}
    if product and floors:
        doc["products"] = {product: floors}
    return doc
