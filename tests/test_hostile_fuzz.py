"""Property-based fuzzing (hypothesis) of every parser, the loaders, the sanitiser, the redactor, the option types
and the bundle loader: no exception escapes, and the documented outcome holds. Example counts are bounded so the
whole file runs in seconds."""

from __future__ import annotations

import copy
import inspect
import json
import math
import pkgutil
from importlib import import_module

import click
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machines import amd_machine

import rocmcheck.facts.parsers as parsers_pkg
from rocmcheck.commands.options import BoundedInt, FiniteFloat
from rocmcheck.errors import BadInput
from rocmcheck.facts.redact import redact_tree, redact_value
from rocmcheck.safe.structured import check_plain_data, parse_json, parse_yaml
from rocmcheck.safe.text import clean

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=int(__import__("os").environ.get("FUZZ_BUNDLE_EXAMPLES", 40)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Text that looks like tool output: lines of keys, values, numbers, separators, escapes and odd bytes.
TOKENS = st.sampled_from(["Name:", "Marketing Name:", "gfx942", "GPU", "Agent 1", "*******", "  ", "\n", "\t", ":",
                          "|", ",", "MiB", "0x", "N/A", "[OKAY]", "\x1b[31m", "\x1b]52;c;x\x07", "\r", "{", "}",
                          '"', "[", "]", "=", "-", "12345", "-1", "1e309", "nan", "\x00", "é", "GPU[0]", "card0"])
TOOLISH = st.one_of(st.text(max_size=400), st.lists(TOKENS, max_size=80).map("".join))


def _parsers():
    for info in pkgutil.iter_modules(parsers_pkg.__path__):
        module = import_module(f"{parsers_pkg.__name__}.{info.name}")
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("parse_") and func.__module__ == module.__name__:
                yield f"{info.name}.{name}", func


PARSERS = dict(_parsers())


def test_every_parser_is_fuzzed():
    assert len(PARSERS) >= 15, sorted(PARSERS)  # a parser added later is picked up, not forgotten


@pytest.mark.parametrize("name", sorted(PARSERS))
@FAST
@given(text=TOOLISH)
def test_parsers_never_raise(name, text):
    func = PARSERS[name]
    params = inspect.signature(func).parameters
    if len(params) == 2:  # parse_nvidia_smi_csv(text, fields)
        func(text, ["index", "name", "memory.total", "compute_cap"])
    else:
        func(text)


JSONISH = st.lists(st.sampled_from(['{', '}', '[', ']', '"a"', '"b"', ':', ',', '1', '-0', '1e400', 'NaN', 'true',
                                    'null', '"\\u0000"', ' ', '9' * 50, '"\\ud800"']), max_size=60).map("".join)
YAMLISH = st.lists(st.sampled_from(["a:", " ", "\n", "- ", "&x ", "*x", "<<: ", "!!set ", "!!binary ", "2024-01-01",
                                    "? ", "[", "]", "{", "}", ",", "1", "0x", "f" * 40, ".inf", "~", "'q'",
                                    "!!python/name:os.system", "  ", "b: ", "---", "..."]), max_size=60).map("".join)


@FAST
@given(text=st.one_of(JSONISH, st.text(max_size=200)))
def test_parse_json_returns_plain_data_or_one_line(text):
    try:
        data = parse_json(text)
    except BadInput as exc:
        assert "\n" not in str(exc)
        return
    check_plain_data(data)


@FAST
@given(text=st.one_of(YAMLISH, st.text(max_size=200)))
def test_parse_yaml_returns_plain_data_or_refuses(text):
    try:
        data = parse_yaml(text)
    except BadInput as exc:
        assert "\n" not in str(exc)
        return
    except yaml.YAMLError:
        return  # the callers word it with its line (describe_yaml_error)
    check_plain_data(data)
    json.dumps(data)


@FAST
@given(text=st.one_of(YAMLISH, JSONISH, st.text(max_size=200)), suffix=st.sampled_from([".json", ".yaml"]))
def test_lint_loader_only_raises_lint_input_error(tmp_path_factory, text, suffix):
    from rocmcheck.errors import BadInput
    from rocmcheck.lint.loading import load_mapping

    path = tmp_path_factory.mktemp("lint") / f"c{suffix}"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    try:
        assert isinstance(load_mapping(path), dict)
    except BadInput as exc:
        assert "\n" not in str(exc)


@FAST
@given(text=st.text(max_size=300))
def test_clean_leaves_no_control_character_and_is_idempotent(text):
    out = clean(text)
    assert clean(out) == out
    assert not any(ord(c) < 32 and c not in "\t\n" or 0x7F <= ord(c) <= 0x9F for c in out)


@FAST
@given(text=st.one_of(TOOLISH, st.text(max_size=300)))
def test_redact_value_never_raises_and_is_stable(text):
    out = redact_value(text)
    assert redact_value(out) == out


@FAST
@given(value=st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30)),
                          lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                  st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                          max_leaves=30))
def test_redact_tree_keeps_the_shape(value):
    out = redact_tree(value)
    if isinstance(value, dict):
        assert isinstance(out, dict) and len(out) <= len(value)
    elif isinstance(value, list):
        assert isinstance(out, list) and len(out) == len(value)


@FAST
@given(raw=st.one_of(st.text(max_size=80), st.floats().map(repr), st.integers().map(str)))
def test_finite_float_type(raw):
    kind = FiniteFloat(0.0, 1e6, low_open=True)
    try:
        value = kind.convert(raw, None, None)
    except click.BadParameter as exc:
        assert "\n" not in exc.format_message()
        return
    assert math.isfinite(value) and 0.0 < value <= 1e6


@FAST
@given(raw=st.one_of(st.text(max_size=80), st.integers().map(str), st.integers(min_value=10 ** 20).map(str)))
def test_bounded_int_type(raw):
    kind = BoundedInt(1, 1 << 16)
    try:
        value = kind.convert(raw, None, None)
    except click.BadParameter as exc:
        assert "\n" not in exc.format_message()
        return
    assert 1 <= value <= 1 << 16


# --- damaged bundles: refused by the loader, or every check still gives a verdict ------------------------

def _bundle_doc() -> dict:
    facts = amd_machine()
    facts.probes["deepspeed"] = {"installed": True, "version": "0.19.8", "torch_info": {"version": "2.5"},
                                 "ops": {"fused_adam": {"known": True, "compatible": True, "installed": False}},
                                 "jit": {"ninja": True, "hipcc": True}, "accelerator": "cuda"}
    facts.probes["amdsmi"] = {"installed": True, "gpus": [{"index": 0, "name": "MI300X", "gfx": "gfx942",
                                                          "memory_total": 192 << 30}]}
    facts.deadline_hit = ["rocm-smi"]
    facts.recorded_results = [{"id": "probe.memory", "area": "probe", "status": "pass", "summary": "ok",
                               "evidence": ["x"], "fix": None, "data": {}}]
    return {"rocmcheck_bundle": 1, "tool_version": "0", "facts": json.loads(json.dumps(facts.to_dict()))}


BASE = _bundle_doc()


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _paths(child, prefix + (i,))


PATHS = [p for p in _paths(BASE["facts"]) if p]
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=8),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@SLOW
@given(path=st.sampled_from(PATHS), junk=JUNK)
def test_a_damaged_bundle_is_refused_or_checked_without_a_crash(tmp_path_factory, path, junk):
    from rocmcheck.checks import run_checks, select_checks
    from rocmcheck.checks.context import CheckContext
    from rocmcheck.doctor import DoctorRun, load_bundle
    from rocmcheck.errors import BadInput
    from rocmcheck.result import Status

    doc = copy.deepcopy(BASE)
    node = doc["facts"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = junk
    bundle = tmp_path_factory.mktemp("bundle") / "b.json"
    bundle.write_text(json.dumps(doc))
    try:
        facts = load_bundle(bundle)
    except BadInput as exc:
        assert "\n" not in str(exc)
        return
    ctx = CheckContext(facts)
    results = run_checks(select_checks(), ctx)
    crashed = [(r.id, r.summary) for r in results if r.status is Status.CRASH]
    assert not crashed, (path, junk, crashed)
    DoctorRun(facts, results, context=ctx).machine_summary()


# --- lint: a key given twice in any YAML mapping, block or flow, is refused -----------------------------------

KEY = st.from_regex(r"k[a-z0-9_]{0,8}", fullmatch=True)  # never a YAML 1.1 bool or null word


def _yaml_key(key: str, quoted: bool) -> str:
    return f'"{key}"' if quoted else key


@FAST
@given(keys=st.lists(KEY, min_size=1, max_size=6, unique=True), which=st.integers(0, 5), flow=st.booleans(),
       nested=st.booleans(), quotes=st.lists(st.booleans(), min_size=7, max_size=7), doubled=st.booleans())
def test_lint_refuses_a_yaml_key_given_twice_in_block_and_flow_mappings(tmp_path_factory, keys, which, flow, nested,
                                                                         quotes, doubled):
    from rocmcheck.lint.loading import load_mapping

    names = keys + ([keys[which % len(keys)]] if doubled else [])
    pairs = [f"{_yaml_key(k, q)}: {i}" for i, (k, q) in enumerate(zip(names, quotes))]
    if flow:
        body = "{" + ", ".join(pairs) + "}"
        text = f"stage: sft\nzero_optimization: {body}\n" if nested else body + "\n"
    else:
        text = "stage: sft\nzero_optimization:\n" + "".join(f"  {p}\n" for p in pairs) if nested \
            else "".join(f"{p}\n" for p in pairs)
    path = tmp_path_factory.mktemp("dup") / "t.yaml"
    path.write_text(text)
    if doubled:
        with pytest.raises(BadInput, match="appears twice") as info:
            load_mapping(path)
        assert "\n" not in str(info.value)
    else:
        data = load_mapping(path)
        inner = data["zero_optimization"] if nested else data
        assert list(inner) == names


# --- the one helper for echoing user data in messages ----------------------------------------------------------

@FAST
@given(text=st.text(max_size=500), limit=st.integers(1, 300))
def test_excerpt_is_one_line_and_bounded(text, limit):
    from rocmcheck.safe.text import excerpt

    out = excerpt(text, limit)
    assert "\n" not in out and "\r" not in out and clean(out) == out
    assert len(out) <= 6 * limit + 40  # an escape is at most 6 characters (\u202e), then the count left out
    if len(text) <= limit and clean(text) == text and "\n" not in text and "\t" not in text:
        assert out == text


@FAST
@given(file=st.text(max_size=80), key=st.text(max_size=300), value=st.text(max_size=300))
def test_a_lint_message_renders_on_one_line_whatever_the_names(file, key, value):
    from rocmcheck.lint.messages import LintMessage, Severity, key_edit
    from rocmcheck.report.render import other_fix_lines

    m = LintMessage(Severity.ERROR, "lint.deepspeed.unknown_key", file, key, f"unknown key {value}",
                    did_you_mean=value or None, fix=key_edit(file, key, "delete it"))
    assert "\n" not in m.render() and clean(m.render()) == m.render()
    [line] = other_fix_lines([m.to_check_result()], m.fix.kind)
    assert "\n" not in line
