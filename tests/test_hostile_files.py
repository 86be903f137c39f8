"""Hostile files: FIFOs, devices, directories, huge and deeply nested files, YAML alias bombs, values JSON cannot
hold. Every loader (lint, plan, bundles, smoke-train --deepspeed) refuses them with one line and exit 2."""

from __future__ import annotations

import json
import os

import pytest
from hostile import billion_laughs, cli, one_line

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import MAX_CONFIG_BYTES, read_head, read_text_capped
from rocmcheck.safe.structured import load_file, parse_json, parse_yaml
from rocmcheck.safe.text import KEY_ECHO_CHARS

DEEP = 100_000


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "config.json"
    os.mkfifo(path)
    return path


# --- the capped reader ---------------------------------------------------------------------------------

def test_reader_refuses_a_fifo_without_blocking(fifo):
    with pytest.raises(BadInput, match="is a FIFO"):
        read_text_capped(fifo)


@pytest.mark.parametrize("path, words", [("/dev/zero", "is a character device"), ("/dev/null", "is a character device"),
                                         ("/", "is a directory"), ("/nonexistent/x.json", "no such file")])
def test_reader_refuses_what_is_not_a_regular_file(path, words):
    with pytest.raises(BadInput, match=words):
        read_text_capped(path)


def test_reader_caps_the_size_and_the_encoding(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    with pytest.raises(BadInput, match="more than a config file can be"):
        read_text_capped(big, what="config file")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(BadInput, match="not UTF-8"):
        read_text_capped(latin)


def test_read_head_of_system_files(tmp_path, fifo):
    """The reader of files rocmcheck picks itself (/proc, /sys, version files): the head, or None, never a wait."""
    assert read_head(fifo, 100) is None and read_head("/dev/zero", 100) is None and read_head("/", 100) is None
    assert read_head(tmp_path / "missing", 100) is None
    version = tmp_path / "version"
    version.write_bytes(b"6.2.3-119\n\xff")
    assert read_head(version, 5) == "6.2.3" and read_head(version, 100) == "6.2.3-119\n\ufffd"
    assert read_head("/proc/self/status", 4096).startswith("Name:")  # /proc reports size 0 and still reads


def test_reader_refuses_an_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    secret = tmp_path / "x.json"
    secret.write_text("{}")
    secret.chmod(0)
    with pytest.raises(BadInput, match="cannot be read"):
        read_text_capped(secret)


# --- the limited loader --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("[" * DEEP + "]" * DEEP, "nested more than"),
    ('{"a": ' + "1" * 5000 + "}", "more than 4300 digits"),
    ('{"a": ' + "9" * 100 + "}", "too large"),
    ('{"a": 1e400}', "not a finite number"),
    ('{"a": NaN}', "not a finite number"),
    ("{not json", "not valid JSON"),
])
def test_json_limits(text, words):
    with pytest.raises(BadInput, match=words):
        parse_json(text)


@pytest.mark.parametrize("text, words", [
    (billion_laughs(), "expands to more than"),
    ("a: &a [*a]", "recursive"),
    ("[" * DEEP, "nested more than"),
    ("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)), "nested more than"),
    ("a: " + "1" * 5000, "more than 4300 digits"),
    ("a: 0x" + "f" * 5000, "too large"),
    ("released: 2024-01-01", "a date is not a value JSON can hold"),
    ("at: 2024-01-01 10:00:00", "a date and time"),
    ("1: one", "key '1' at the top level is a number"),
    ("? !!null ''\n: x", "is null, not a string"),
    ("s: !!set {a, b}", "a set"),
    ("b: !!binary aGVsbG8=", "binary data"),
    ("x: .inf", "not a finite number"),
])
def test_yaml_limits(text, words):
    with pytest.raises(BadInput, match=words):
        parse_yaml(text)


@pytest.mark.parametrize("text, shown", [
    ('{"zero\\noptimization": {"stage": ' + "9" * 100 + "}}", "zero\\noptimization.stage: an integer of"),
    ('{"x\\u001b[2J": 1e400}', "x\\x1b[2J: inf is not a finite number"),
    ('{"' + "k" * 5000 + '": {"a": NaN}}', "k" * KEY_ECHO_CHARS + "... (4920 more characters).a: nan"),
])
def test_where_a_bad_value_sits_is_said_on_one_short_line(text, shown):
    with pytest.raises(BadInput) as info:
        parse_json(text)
    message = str(info.value)
    assert shown in message and "\n" not in message and "\x1b" not in message and len(message) < 300, message


def test_yaml_merge_keys_and_small_aliases_still_load():
    assert parse_yaml("base: &b {lr: 1}\nrun:\n  <<: *b\n  steps: 2") == {"base": {"lr": 1},
                                                                          "run": {"lr": 1, "steps": 2}}


def test_a_python_tag_is_not_executed(tmp_path):
    marker = tmp_path / "pwned"
    text = f"a: !!python/object/apply:os.system ['touch {marker}']"
    with pytest.raises(Exception) as info:
        parse_yaml(text)
    assert not marker.exists() and "ConstructorError" in type(info.value).__name__


def test_load_file_names_the_file(tmp_path):
    path = tmp_path / "ds.yaml"
    path.write_text(billion_laughs())
    with pytest.raises(BadInput, match=r"ds\.yaml: expands to more than"):
        load_file(path)


# --- every command's loader, end to end ----------------------------------------------------------------

def _hostile_files(tmp_path):
    files = {}
    files["laughs.yaml"] = billion_laughs()
    files["deep.json"] = "[" * DEEP + "]" * DEEP
    files["deep.yaml"] = "[" * DEEP + "]" * DEEP
    files["date.yaml"] = "stage: sft\nfinetuning_type: full\ndeepspeed: ds.json\nreleased: 2024-01-01\n"
    files["intkey.yaml"] = "stage: sft\n1: x\n"
    files["bigint.json"] = '{"train_batch_size": ' + "1" * 5000 + "}"
    out = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


@pytest.mark.parametrize("name", ["laughs.yaml", "deep.json", "deep.yaml", "date.yaml", "intkey.yaml", "bigint.json"])
def test_lint_refuses_hostile_files_with_one_line(tmp_path, name):
    path = _hostile_files(tmp_path)[name]
    proc = cli("lint", str(path), timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # refused: bad input, nothing judged
    assert "Verdict: NOT JUDGED" in proc.stdout
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("rocmcheck lint: error:")]
    assert len(errors) == 1 and str(path) in errors[0], proc.stderr[-1000:]


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "dir"])
def test_lint_and_doctor_bundle_and_plan_refuse_devices_fifos_and_folders(tmp_path, target, fifo):
    path = {"/dev/zero": "/dev/zero", "fifo": str(fifo), "dir": str(tmp_path)}[target]
    lint = cli("lint", path, timeout=60)
    assert lint.returncode == 2 and "not a config file" in lint.stderr, lint.stderr  # bad input
    line = one_line(cli("doctor", "--bundle", path, timeout=60))
    assert ("is a directory" if target == "dir" else "not a bundle") in line, line
    if target != "dir":  # a folder is a model folder to plan: it says it has no config.json
        assert "not a config.json" in one_line(cli("plan", "--model", path, timeout=60))


@pytest.mark.parametrize("name", ["deep.json", "bigint.json"])
def test_plan_and_bundles_refuse_deep_and_huge_json(tmp_path, name):
    path = _hostile_files(tmp_path)[name]
    assert str(path) in one_line(cli("plan", "--model", str(path), timeout=60))
    assert str(path) in one_line(cli("doctor", "--bundle", str(path), timeout=60))


def test_plan_refuses_absurd_model_shapes(tmp_path):
    shape = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
             "vocab_size": 32000}
    for key, value in (("hidden_size", "1e200"), ("vocab_size", str(10 ** 30)), ("num_hidden_layers", "true")):
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(shape)[:-1] + f', "{key}": {value}}}')
        line = one_line(cli("plan", "--model", str(path), timeout=60))
        assert key in line


def test_smoke_train_deepspeed_file_goes_through_the_same_loader(tmp_path, fifo):
    deep = _hostile_files(tmp_path)["deep.json"]
    for path, words in ((deep, "nested more than"), (fifo, "is a FIFO"), ("/dev/zero", "is a character device")):
        line = one_line(cli("smoke-train", "--device", "cpu", "--deepspeed", str(path), timeout=120))
        assert words in line and "--deepspeed" in line
