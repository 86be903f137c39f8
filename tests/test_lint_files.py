"""lint_file and `rocmcheck lint`: file kinds, the deepspeed: pointer, exit codes, and what happens
when DeepSpeed is missing, broken or hangs (real child processes, fake deepspeed modules on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lint_helpers import REPO, by_code, seed_deepspeed_config, write_json

from rocmcheck.errors import BadInput
from rocmcheck.lint import Severity, detect_kind, lint_file
from rocmcheck.lint.deepspeed_deep import run_deep_validation

SEED_YAML = """\
model_name_or_path: meta-llama/Meta-Llama-3-70B-Instruct
stage: sft
do_train: true
finetuning_type: lora
deepspeed: {ds}
dataset: alpaca_en_demo
template: llama3
output_dir: saves/x
per_device_train_batch_size: 12
gradient_accumulation_steps: 8
bf16: true
"""


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (full_env.get("PYTHONPATH"), str(REPO)) if p)
    return subprocess.run([sys.executable, "-m", "rocmcheck", "lint", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=120)


def test_detect_kind():
    assert detect_kind({"stage": "sft", "deepspeed": "x.json"}) == "llamafactory"
    assert detect_kind({"output_dir": "o", "per_device_train_batch_size": 2}) == "training_args"
    assert detect_kind({"zero_optimisation": {}}) == "deepspeed"  # recognised by its near-miss too
    assert detect_kind({"hello": 1}) is None


def test_llamafactory_yaml_lints_the_deepspeed_config_it_points_to(tmp_path, monkeypatch):
    ds = write_json(tmp_path / "zero3_offload.json", seed_deepspeed_config())
    yaml_file = tmp_path / "train.yaml"
    yaml_file.write_text(SEED_YAML.format(ds=ds))
    monkeypatch.chdir(tmp_path)
    messages = lint_file(yaml_file, deep=False)
    [typo] = by_code(messages, "lint.deepspeed.unknown_key")
    assert typo.file == str(ds) and typo.key_path == "zero_optimization.stage3_parition_grads"
    [missing] = by_code(messages, "lint.deepspeed.batch_missing")
    assert missing.fix.file == str(ds) and missing.fix.text.startswith('add "train_micro_batch_size_per_gpu": "auto"')


def test_training_values_resolve_auto_and_catch_mismatch(tmp_path):
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4,
              "train_batch_size": "auto", "bf16": {"enabled": "auto"}}
    ds = write_json(tmp_path / "ds.json", config)
    args = tmp_path / "args.json"
    write_json(args, {"output_dir": "o", "per_device_train_batch_size": 12, "gradient_accumulation_steps": 8,
                      "bf16": True, "deepspeed": str(ds)})
    [mismatch] = by_code(lint_file(args, deep=False), "lint.hf.mismatch")
    assert mismatch.key_path == "gradient_accumulation_steps" and "gradient_accumulation_steps=8" in mismatch.message


def test_deepspeed_path_relative_to_cwd_first_then_to_the_yaml(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    write_json(tmp_path / "cfg" / "ds.json", {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}})
    yaml_file = tmp_path / "cfg" / "train.yaml"
    yaml_file.write_text(SEED_YAML.format(ds="ds.json"))
    monkeypatch.chdir(tmp_path)  # LLaMA-Factory would not find ds.json from here
    [warn] = by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_relative")
    assert warn.severity is Severity.WARNING
    monkeypatch.chdir(tmp_path / "cfg")
    assert not by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_relative")
    yaml_file.write_text(SEED_YAML.format(ds="missing.json"))
    [err] = by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_missing")
    assert err.is_error


def test_training_file_with_bf16_and_fp16(tmp_path):
    args = write_json(tmp_path / "args.json", {"output_dir": "o", "bf16": True, "fp16": True})
    assert by_code(lint_file(args, deep=False), "lint.training.bf16_and_fp16")


@pytest.mark.parametrize("name, content, needle", [
    ("missing.json", None, "no such file"),
    ("bad.json", '{"zero_optimization": {"stage": 3,}}', "not valid JSON (line 1"),
    ("bad.yaml", "stage: sft\n  deepspeed: [", "not valid YAML"),
    ("dup.json", '{"bf16": {"enabled": true}, "bf16": {"enabled": false}}', 'key "bf16" appears twice'),
    ("list.json", "[1, 2]", "expected a mapping"),
    ("other.json", '{"hello": 1}', "not a DeepSpeed config"),
])
def test_unreadable_files_raise_input_error(tmp_path, name, content, needle):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace("[", r"\[")):
        lint_file(path, deep=False)


def test_cli_exit_codes_and_one_line_for_bad_files(tmp_path):
    seed = write_json(tmp_path / "seed.json", seed_deepspeed_config())
    clean = write_json(tmp_path / "clean.json", {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}})
    fake_ds = tmp_path / "no_ds"
    fake_ds.mkdir()
    (fake_ds / "deepspeed.py").write_text("raise ImportError('simulated: deepspeed not installed')\n")
    quick = {"PYTHONPATH": str(fake_ds)}  # keep these CLI runs fast: DeepSpeed "missing"
    bad = run_cli(str(tmp_path / "nope.json"), env=quick)  # a missing file is bad input: one line, exit 2
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "nope.json: no such file" in bad.stderr and "Verdict: NOT JUDGED" in bad.stdout
    assert run_cli(str(clean), env=quick).returncode == 0
    result = run_cli(str(seed), "--world-size", "8", env=quick)
    assert result.returncode == 1
    assert "zero_optimization.stage3_parition_grads: error [lint.deepspeed.unknown_key] for the HF Trainer:" \
        in result.stdout  # the seed has "auto" values: the HF Trainer, assumed and said
    assert "judged for the HF Trainer, assumed" in result.stdout
    as_json = json.loads(run_cli(str(seed), "--json", env=quick).stdout)
    assert as_json["errors"] == 2 and as_json["command"] == "lint" and as_json["schema_version"] == 3
    assert {r["status"] for r in as_json["results"]} == {"fail", "warn", "skip"}  # warn: its hard-coded bf16
    assert run_cli(str(seed), "--world-size", "0", env=quick).returncode == 2


def test_without_deepspeed_lint_still_runs_and_says_deep_validation_was_skipped(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("raise ImportError('No module named deepspeed (simulated)')\n")
    seed = write_json(tmp_path / "seed.json", seed_deepspeed_config())
    result = run_cli(str(seed), env={"PYTHONPATH": str(fake)})
    assert result.returncode == 1
    assert "validation by DeepSpeed's own config classes skipped: import deepspeed failed: ImportError" in result.stdout
    assert "stage3_parition_grads" in result.stdout  # rocmcheck's own checks still ran


def test_hung_deepspeed_becomes_a_skip_not_a_hang(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    result = run_deep_validation({"train_micro_batch_size_per_gpu": 1}, 1, timeout=3)
    assert not result.ran and "did not finish within 3 s" in result.skipped_reason


def test_crashing_deepspeed_becomes_a_skip(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("import os\nos.abort()\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    result = run_deep_validation({"train_micro_batch_size_per_gpu": 1}, 1, timeout=30)
    assert not result.ran and "crashed (killed by signal" in result.skipped_reason


# --- a refused file is never a pass ----------------------------------------------------------------------

def _lint_json(*args: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    proc = run_cli("--json", *args, env={"PYTHONPATH": str(_no_deepspeed())}, cwd=cwd)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _no_deepspeed() -> Path:
    """A folder whose deepspeed module fails to import: keeps the CLI runs fast (the deep check is skipped)."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"rocmcheck-no-deepspeed-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    (folder / "deepspeed.py").write_text("raise ImportError('simulated: deepspeed not installed')\n")
    return folder


@pytest.mark.parametrize("name, content, code", [
    ("missing.json", None, "lint.file.unreadable"),
    ("broken.json", '{"train_batch_size": ', "lint.file.unreadable"),
    ("dup.yaml", "stage: sft\nzero_optimization: {stage: 2, stage: 3}\n", "lint.file.unreadable"),
])
def test_a_file_that_cannot_be_read_is_bad_input_after_the_others_are_shown(tmp_path, name, content, code):
    from jsonschema import Draft202012Validator

    from rocmcheck.report.json_report import schema

    refused = tmp_path / name
    if content is not None:
        refused.write_text(content)
    clean = write_json(tmp_path / "clean.json", {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}})
    rc, alone, stderr = _lint_json(str(refused))
    assert (rc, alone["verdict"]) == (2, "not_judged") and stderr.count("\n") == 1, (rc, alone["verdict"], stderr)
    assert [(r["id"], r["status"]) for r in alone["results"]] == [(code, "skip")]
    assert alone["bad_input"] == [str(refused)] and stderr.startswith(f"rocmcheck lint: error: {refused}")
    rc, both, _ = _lint_json(str(refused), str(clean))  # the bad file first: the clean one is still judged
    assert (rc, both["verdict"]) == (2, "fail")  # never a pass beside a file that could not be read
    assert {(r["id"], r["status"]) for r in both["results"]} >= {(code, "fail"), ("lint.file.clean", "pass")}
    [failed] = [r for r in both["results"] if r["id"] == code]
    assert failed["fix"]["kind"] == "note" and failed["data"]["file"] == str(refused)
    rc, judged, _ = _lint_json(str(clean))
    assert (rc, judged["verdict"]) == (0, "pass") and judged["unreadable"] == [] and judged["bad_input"] == []
    for doc in (alone, both, judged):
        Draft202012Validator(schema()).validate(doc)


def test_a_file_of_no_kind_lint_judges_is_a_skip_and_alone_is_not_judged(tmp_path):
    notes = write_json(tmp_path / "notes.json", {"hello": 1})
    clean = write_json(tmp_path / "clean.json", {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}})
    rc, alone, stderr = _lint_json(str(notes))
    assert (rc, alone["verdict"]) == (3, "not_judged") and alone["bad_input"] == []
    assert [(r["id"], r["status"]) for r in alone["results"]] == [("lint.file.unknown_kind", "skip")]
    assert stderr.startswith("rocmcheck lint: skipped: ") and stderr.count("\n") == 1
    rc, both, _ = _lint_json(str(notes), str(clean))
    assert (rc, both["verdict"]) == (0, "pass")  # judged what it could; the skip says what it could not
    assert ("lint.file.unknown_kind", "skip") in {(r["id"], r["status"]) for r in both["results"]}


def test_text_output_of_a_missing_file_says_not_judged_and_exits_2(tmp_path):
    proc = run_cli(str(tmp_path / "nope.yaml"), env={"PYTHONPATH": str(_no_deepspeed())})
    assert proc.returncode == 2 and "Verdict: NOT JUDGED" in proc.stdout and "1 file(s) not judged" in proc.stdout
    assert proc.stderr.startswith("rocmcheck lint: error: ") and proc.stderr.count("\n") == 1


# --- fixes: an edit of the file named, quoted as its own syntax needs ----------------------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_the_absolute_deepspeed_suggestion_reads_back_as_the_path(tmp_path, monkeypatch, suffix):
    import yaml

    folder = tmp_path / "ds #1: x"
    folder.mkdir()
    ds = write_json(folder / "z.json", {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}})
    training = folder / f"train{suffix}"
    args = {"output_dir": "o", "per_device_train_batch_size": 1, "bf16": True, "deepspeed": "z.json"}
    training.write_text(yaml.safe_dump(args) if suffix == ".yaml" else json.dumps(args))
    monkeypatch.chdir(tmp_path)  # z.json exists only beside the training file
    [warn] = by_code(lint_file(training, deep=False), "lint.training.deepspeed_relative")
    assert warn.fix.kind.value == "edit" and warn.fix.file == str(training)
    line = warn.fix.text.removeprefix("change the line to ")
    parsed = yaml.safe_load(line) if suffix == ".yaml" else json.loads("{" + line + "}")
    assert parsed == {"deepspeed": str(ds.resolve())}


def test_every_fix_of_a_config_with_every_mistake_is_a_fix_object(tmp_path):
    from rocmcheck.fixes import Fix, FixKind

    config = {"train_batch_size": 7, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
              "zero_optimisation": {}, "bf16": {"enabled": True}, "fp16": {"enabled": True},
              "scheduler": {"type": "CosineAnnealingLR"},
              "zero_optimization": {"stage": 1, "stage3_parition_grads": True, "prefetch_bucket_size": "auto",
                                    "offload_param": {"device": "cpu", "pin_memory": False}}}
    path = write_json(tmp_path / "ds.json", config)
    messages = lint_file(path, world_size=2, deep=False)
    fixed = [m for m in messages if m.severity is not Severity.INFO]
    assert len(fixed) >= 7
    for m in fixed:
        assert isinstance(m.fix, Fix) and m.fix.kind is FixKind.EDIT, m.render()
        where, _, change = m.fix.text.partition(": ")  # the key path the edit is at, then the change
        names_a_key = bool(change) and where.split(".")[0] in config
        assert m.fix.file == str(path) and (names_a_key or m.fix.text.startswith("add ")), m.fix


# --- hostile values inside files lint reads ------------------------------------------------------------------

LF_YAML = "model_name_or_path: {model}\nstage: sft\nfinetuning_type: lora\n{extra}"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep", "huge", "directory"])
def test_the_models_config_json_goes_through_the_capped_loader(tmp_path, kind):
    model = tmp_path / "mdl"
    model.mkdir()
    config = model / "config.json"
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "dev-zero":
        config.symlink_to("/dev/zero")
    elif kind == "deep":
        config.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge":
        with open(config, "wb") as fh:
            fh.truncate(64 << 20)  # sparse
    else:
        config.mkdir()
    training = tmp_path / "t.yaml"
    training.write_text(LF_YAML.format(model="mdl", extra=""))
    proc = run_cli(str(training), env={"PYTHONPATH": str(_no_deepspeed())}, cwd=tmp_path.parent)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "lint.training.model_config_unreadable" in proc.stdout and "config.json" in proc.stdout


def test_a_readable_config_json_gives_the_hidden_size(tmp_path):
    from rocmcheck.lint.files import model_config

    (tmp_path / "mdl").mkdir()
    (tmp_path / "mdl" / "config.json").write_text('{"text_config": {"hidden_size": 4096}}')
    found = model_config("mdl", tmp_path / "t.yaml")
    assert (found.hidden_size, found.problem) == (4096, None)
    assert model_config("~nosuchuser-rocmcheck/m", tmp_path / "t.yaml").hidden_size is None


@pytest.mark.parametrize("line", ["deepspeed: ~nosuchuser-rocmcheck/ds.json\n",
                                  "model_name_or_path: ~nosuchuser-rocmcheck/m\n"])
def test_a_home_folder_of_a_user_that_does_not_exist_is_a_message_not_a_traceback(tmp_path, line):
    training = tmp_path / "t.yaml"
    training.write_text("stage: sft\nfinetuning_type: lora\n" + line)
    proc = run_cli(str(training), env={"PYTHONPATH": str(_no_deepspeed())})
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if line.startswith("deepspeed"):
        assert "lint.training.deepspeed_missing" in proc.stdout and "no user 'nosuchuser-rocmcheck'" in proc.stdout


def test_plan_with_the_home_folder_of_a_user_that_does_not_exist_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "plan", "--model", "~nosuchuser-rocmcheck/config.json"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no user 'nosuchuser-rocmcheck'" in proc.stderr


def test_a_huge_key_is_echoed_capped_and_a_newline_in_a_file_name_stays_on_its_line(tmp_path):
    huge = "k" * 5_000_000
    name = tmp_path / "two\nlines.json"
    write_json(name, {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, huge: 1}})
    proc = run_cli(str(name), env={"PYTHONPATH": str(_no_deepspeed())})
    assert proc.returncode == 1 and len(proc.stdout) < 20_000, len(proc.stdout)
    messages = [ln for ln in proc.stdout.splitlines() if "[lint." in ln and ": " in ln]
    assert messages and all(ln.startswith(f"{tmp_path}/two\\nlines.json") or ln.startswith("- ") for ln in messages)
    assert f"({len('zero_optimization.' + huge) - 200} more characters)" in proc.stdout  # safe.text.excerpt
    doc = json.loads(run_cli("--json", str(name), env={"PYTHONPATH": str(_no_deepspeed())}).stdout)
    assert len(json.dumps(doc)) < 20_000


def test_an_inline_deepspeed_config_is_pointed_at_in_the_training_file(tmp_path):
    training = tmp_path / "args.yaml"
    training.write_text("output_dir: o\nper_device_train_batch_size: 2\ndeepspeed:\n"
                        "  train_micro_batch_size_per_gpu: 4\n"
                        "  zero_optimization:\n    stage: 2\n    stage3_parition_grads: true\n")
    messages = [m for m in lint_file(training, deep=False) if m.severity is not Severity.INFO]
    found = {m.key_path: (m.file, m.line, m.fix.file, m.fix.text) for m in messages}
    assert found == {
        "deepspeed.train_micro_batch_size_per_gpu": (str(training), 4, str(training),
                                                     'deepspeed.train_micro_batch_size_per_gpu: set it to "auto"'),
        "deepspeed.zero_optimization.stage3_parition_grads": (
            str(training), 7, str(training), "deepspeed.zero_optimization.stage3_parition_grads: delete it")}
