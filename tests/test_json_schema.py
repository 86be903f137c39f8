"""Every command's --json output, from the real CLI in a real subprocess, validates against the JSON Schema shipped
in the package (rocmcheck/report/rocmcheck.schema.json), with the `jsonschema` library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from rocmcheck.report.json_report import schema

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, env_extra: dict[str, str] | None = None, ok=(0, 1)) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           **(env_extra or {})}
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=REPO)
    assert proc.returncode in ok, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def validate(doc: dict) -> None:
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)


def test_the_shipped_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(schema())


@pytest.mark.parametrize("args", [
    ("doctor", "--json", "--no-gpu-probes", "--no-train", "--only", "os,host,env,gpu"),
    ("lint", "--json", "rocmcheck/recipes_data/zero3-offload.json"),
    ("plan", "--json", "--model", "llama-3-8b", "--gpu", "mi300x", "--find-batch"),
    ("plan", "--json", "--model", "llama-3-70b", "--gpu", "mi300x"),
    ("build-env", "--json", "--arch", "mi300x"),
    ("build-env", "--format", "json", "--arch", "sm_90"),
    ("recipes", "list", "--json"),
    ("recipes", "show", "zero3-offload", "--json"),
])
def test_command_json_validates(args):
    doc = run(*args)
    validate(doc)
    assert doc["command"] == (" ".join(args[:2]) if args[0] == "recipes" else args[0])


def test_recipes_write_json_validates_and_names_the_files_written(tmp_path):
    doc = run("recipes", "write", "llama2-7b-full-sft", str(tmp_path / "configs"), "--json")
    validate(doc)
    assert doc["command"] == "recipes write" and doc["recipe"] == "llama2-7b-full-sft"
    assert doc["verdict"] == "pass" and [r["id"] for r in doc["results"] if r["status"] == "pass"] == \
        ["lint.file.clean"] * 2  # what was written, judged by lint
    written = sorted(Path(f).name for f in doc["files"])
    assert len(written) >= 2 and all(Path(f).is_file() for f in doc["files"])  # the YAML and its DeepSpeed config
    assert sorted(p.name for p in (tmp_path / "configs").iterdir()) == written
    # Again without --force: one line and exit 2, not a JSON document about files it did not write.
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "recipes", "write", "llama2-7b-full-sft",
                           str(tmp_path / "configs"), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "" and "not overwriting" in proc.stderr


def test_doctor_replaying_a_bundle_validates(tmp_path):
    bundle = tmp_path / "b.json"
    live = run("doctor", "--json", "--no-gpu-probes", "--no-train", "--only", "os,host", "--out", str(bundle))
    replay = run("doctor", "--json", "--bundle", str(bundle))
    validate(live)
    validate(replay)
    replayed = {r["id"]: r["status"] for r in replay["results"]}
    assert replay["source"] == "bundle" and all(replayed[r["id"]] == r["status"] for r in live["results"])


def test_compare_json_validates(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    run("doctor", "--json", "--no-gpu-probes", "--no-train", "--only", "os,host", "--out", str(first))
    run("doctor", "--json", "--no-gpu-probes", "--no-train", "--only", "os,host", "--out", str(second))
    doc = run("compare", "--json", str(first), str(second))
    validate(doc)
    assert doc["command"] == "compare" and doc["mode"] == "over_time"


def test_probe_json_validates():
    doc = run("probe", "gemm_numerics", "--json", "--timeout", "120", ok=(0, 1, 3))  # 3: no GPU, nothing judged
    validate(doc)
    assert doc["probe"] == "gemm_numerics" and doc["results"]


def test_smoke_train_json_validates():
    doc = run("smoke-train", "--json", "--steps", "10", "--no-profile", "--device", "cpu")
    validate(doc)
    assert doc["metrics"] and {r["id"] for r in doc["results"]} >= {"train.finite"}


def test_smoke_train_without_torch_is_one_json_document_and_exit_2(tmp_path):
    stub = tmp_path / "torch"
    stub.mkdir()
    (stub / "__init__.py").write_text('raise ImportError("No module named torch")\n')
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    doc = run("smoke-train", "--json", env_extra=env, ok=(2,))
    validate(doc)
    assert doc["verdict"] == "fail" and doc["results"][0]["id"] == "train.torch"
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train"], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "needs PyTorch" in proc.stderr


def _probe_doc(result: dict) -> dict:
    return {"schema_version": 3, "tool": "rocmcheck", "tool_version": "0", "command": "probe", "probe": "gemm",
            "verdict": "fail", "counts": {"pass": 0, "warn": 0, "fail": 1, "skip": 0, "crash": 0}, "results": [result]}


def test_a_document_missing_the_envelope_is_rejected():
    with pytest.raises(jsonschema.ValidationError):
        validate({"schema": 1, "results": []})
    result = {"id": "x.y", "area": "x", "status": "fail", "summary": "s", "evidence": [], "data": {},
              "fix": {"kind": "note", "text": "do it", "why": "", "file": ""}}
    validate(_probe_doc(result))  # the good one passes: each rejection below is for its own reason
    with pytest.raises(jsonschema.ValidationError):  # a failure without a fix
        validate(_probe_doc(dict(result, fix=None)))
    with pytest.raises(jsonschema.ValidationError):  # a fix as one string (schema 2)
        validate(_probe_doc(dict(result, fix="pip install x")))
    with pytest.raises(jsonschema.ValidationError):  # an edit that names no file
        validate(_probe_doc(dict(result, fix={"kind": "edit", "text": "x: delete it", "why": "", "file": ""})))
    with pytest.raises(jsonschema.ValidationError):  # an older schema version
        validate(dict(_probe_doc(result), schema_version=2))


def test_lint_json_of_files_it_cannot_judge_validates_and_is_never_a_pass(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": 1}')
    alone = run("lint", "--json", str(notes), str(tmp_path / "missing.yaml"), ok=(2,))  # missing: bad input
    validate(alone)
    assert alone["verdict"] == "not_judged" and len(alone["unreadable"]) == 2
    both = run("lint", "--json", "rocmcheck/recipes_data/zero2.json", str(tmp_path / "missing.yaml"), ok=(2,))
    validate(both)
    assert both["verdict"] == "fail" and {r["id"] for r in both["results"]} >= {"lint.file.unreadable"}
    skipped = run("lint", "--json", str(notes), ok=(3,))  # a kind lint does not judge: a skip, NOT JUDGED
    validate(skipped)
    assert skipped["verdict"] == "not_judged"


def test_lint_fixes_are_edits_of_the_file_named(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "stage3_parition": 1}}')
    doc = run("lint", "--json", str(config), ok=(1,))
    validate(doc)
    [typo] = [r for r in doc["results"] if r["id"] == "lint.deepspeed.unknown_key"]
    assert typo["fix"]["kind"] == "edit" and typo["fix"]["file"] == str(config)
    assert typo["fix"]["text"].startswith("zero_optimization.stage3_parition: ")
    [message] = [m for m in doc["messages"] if m["code"] == "lint.deepspeed.unknown_key"]
    assert message["fix"] == typo["fix"]
