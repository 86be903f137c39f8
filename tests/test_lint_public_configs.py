"""Real configs (tests/fixtures/public-configs, README there): every working one, from accelerate, trl,
alignment-handbook, LLaMA-Factory, axolotl, DeepSpeed, Megatron-DeepSpeed, DeepSpeedExamples and transformers, lints
with no error for the consumer its README row names, and every verdict names that consumer; every failing one is
caught at its key at fault, for its consumer. Then the rules behind a few of them, one by one."""

from __future__ import annotations

import json
import os
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from lint_helpers import REPO, by_code
from packaging.version import Version

from rocmcheck.fixes import FixKind
from rocmcheck.lint import Severity, lint_file, owners
from rocmcheck.lint import deepspeed as lint_deepspeed
from rocmcheck.lint.consumers import CONSUMERS, DEEPSPEED, for_named
from rocmcheck.lint.files import detect_kind
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.run import LintRun
from rocmcheck.result import Status

FIXTURES = REPO / "tests" / "fixtures" / "public-configs"
WORKING = sorted(p.name for p in (FIXTURES / "working").iterdir())
FAILING = sorted(p.name for p in (FIXTURES / "failing").iterdir())
NOT_JUDGED = sorted(p.name for p in (FIXTURES / "not-judged").iterdir())
# DeepSeek-R1's config.json quantization_config: FP8 weights in 128 x 128 blocks (the checkpoint of
# hiyouga/LlamaFactory#6898).
DEEPSEEK_R1_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                   "weight_block_size": [128, 128]}


# Failing fixtures that lint rightly warns about instead of failing.
CAUGHT_AS_WARNING = {
    # FP8 weights with ZeRO-3: refused by LLaMA-Factory 0.9.3 and older (the thread's), dequantized by 0.9.4 and
    # newer; judged against the table's 0.9.5, the release that will run is not known.
    "llamafactory-6898-ptq-zero3.yaml",
    # fails only if the optimizer given to deepspeed.initialize is not DeepSpeed's CPU Adam/Lion: not in the file.
    "lmflow-693-client-optimizer-offload.json",
}


# Working files that need a newer release than the oldest supported one: file -> (package, the first release that
# reads them, the key). On an older release (.ci/lint_matrix.sh's oldest edge) lint must refuse that key instead.
NEEDS_NEWER = {
    "trl-alst_ulysses_4gpu.yaml": ("accelerate", "1.10.0", "parallelism_config"),  # ParallelismConfig: 1.10.0
    "trl-context_parallel_2gpu.yaml": ("accelerate", "1.10.0", "parallelism_config"),
}


# Failing files that fail only from a release on: file -> (package, the first release that refuses them). Under an
# older release (.ci/lint_matrix.sh's oldest edge) they work, and lint warns at the key instead.
FAILS_FROM = {
    "accelerate-peft-deepspeed_xpu_config.yaml": ("accelerate", "1.13.0"),  # ipex_config: huggingface/accelerate#3883
}


def errors(messages):
    return [m.render() for m in messages if m.severity is Severity.ERROR]


def readme_rows(section: str) -> dict[str, list[str]]:
    """The README table of working/ or failing/: first cell (the file, or "a + b") -> the other cells."""
    text = (FIXTURES / "README.md").read_text(encoding="utf-8")
    part = text.split(f"## {section}/", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] not in ("file", "") and not cells[0].startswith("---"):
            rows[cells[0].removeprefix(f"{section}/")] = cells[1:]
    return rows


WORKING_ROWS = readme_rows("working")
FAILING_ROWS = readme_rows("failing")
NOT_JUDGED_ROWS = readme_rows("not-judged")


def failing_row(name: str) -> list[str]:
    return next(cells for first, cells in FAILING_ROWS.items() if name in [f.strip() for f in first.split("+")])


def test_readme_lists_every_fixture_with_its_source_and_consumer():
    for name in WORKING:
        repository, path, commit, consumer = WORKING_ROWS[name]
        assert "/" in repository and path and len(commit) == 40 and consumer in CONSUMERS, name
    for name in FAILING:
        source, consumer, key = failing_row(name)[:3]
        assert source and consumer in CONSUMERS and key, name
    for name in NOT_JUDGED:
        repository, path, commit, owner = NOT_JUDGED_ROWS[name]
        assert "/" in repository and path and len(commit) == 40 and owner in owners.NOT_JUDGED, name
    assert len(WORKING) >= 70 and len(FAILING) >= 15 and len(NOT_JUDGED) >= 8
    assert {"accelerate", "trl", "alignment", "llamafactory", "axolotl", "deepspeed", "megatron", "deepspeedexamples",
            "transformers"} == {name.split("-", 1)[0] for name in WORKING}


def lay_out(name: str, folder: str, root: Path, monkeypatch) -> tuple[Path, dict, list[str]]:
    """(the folder to run from, lint options, the files to lint): each repository's own layout, under root."""
    src = FIXTURES / folder / name
    (root / "examples" / "deepspeed").mkdir(parents=True, exist_ok=True)
    for path in (FIXTURES / "working").glob("llamafactory-ds_*.json"):  # LLaMA-Factory's examples/deepspeed
        shutil.copy(path, root / "examples" / "deepspeed" / path.name.removeprefix("llamafactory-"))
    data = root / "data"  # LLaMA-Factory's data/: its dataset_info.json, and the files it names (empty here)
    data.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "llamafactory-dataset_info.json", data / "dataset_info.json")
    info = json.loads((data / "dataset_info.json").read_text(encoding="utf-8"))
    for entry in info.values():
        if "file_name" in entry and not (data / entry["file_name"]).exists():
            (data / entry["file_name"]).parent.mkdir(parents=True, exist_ok=True)
            (data / entry["file_name"]).touch()
    options: dict = {"hidden_size": 4096}  # the models are not on this machine
    cwd, target = root, root / name
    if name == "accelerate-config_yaml_templates-deepspeed.yaml":  # accelerate's examples/ folder
        templates = root / "examples" / "deepspeed_config_templates"
        templates.mkdir(exist_ok=True)
        shutil.copy(FIXTURES / "working" / "accelerate-zero_stage1_config.json", templates / "zero_stage1_config.json")
        cwd = root / "examples" / "config_yaml_templates"
        cwd.mkdir(exist_ok=True)
        target = cwd / name
    shutil.copy(src, target)
    files = [str(target)]

    if name.startswith("accelerate-936-"):  # the YAML, without the thread's `[...]` elision lines (removed as its
        excerpt = FIXTURES / "failing" / "accelerate-936-config-file-plus-inline.excerpt.yaml"  # reader would), and
        lines = excerpt.read_text(encoding="utf-8").splitlines(keepends=True)  # the ds_config.json it names
        target = root / excerpt.name
        target.write_text("".join(line for line in lines if line.strip() != "[...]"), encoding="utf-8")
        shutil.copy(FIXTURES / "failing" / "accelerate-936-ds_config.json", root / "ds_config.json")
        files = [str(target)]
    if name == "llamafactory-7703-qwen2vl_lora_sft.yaml":  # the thread's run: the example in its place, started
        cwd = root / "elsewhere"  # from a folder without LLaMA-Factory's data/ (maintainer: `cd .../LLaMA-Factory/`)
        cwd.mkdir(exist_ok=True)
        target = root / "examples" / "train_lora" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, target)
        files = [str(target)]
    if name == "llamafactory-201-accelerate-inline-gas.yaml":
        options["grad_accum"] = 2  # the thread's --gradient_accumulation_steps 2
    if name == "apps-deepspeed_config.json":  # the thread's --batch-size-per-replica=2 --grad-acc-steps=8, 8 GPUs
        options.update(micro_batch=2, grad_accum=8, world_size=8)
    if name == "apps-9-mismatch.json":
        shutil.copy(FIXTURES / "failing" / "apps-9-training-args.json", root / "apps-9-training-args.json")
        options["world_size"] = 8
        files = [str(root / "apps-9-training-args.json")]
    if name == "apps-9-training-args.json":
        shutil.copy(FIXTURES / "failing" / "apps-9-mismatch.json", root / "apps-9-mismatch.json")
        options["world_size"] = 8
    if name == "llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml":  # the thread's stack: transformers 4.44.2, DS 0.15.0
        monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version("4.44.2"))
        monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version("0.15.0"))
    if name == "llamafactory-6898-ptq-zero3.yaml":  # the model's config.json, where model_name_or_path points
        model = root / "DeepSeek-R1"
        model.mkdir(exist_ok=True)
        (model / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"],
                                                       "hidden_size": 7168,
                                                       "quantization_config": DEEPSEEK_R1_FP8}))
        text = src.read_text(encoding="utf-8").replace("/pretrained_models/deepseek/DeepSeek-R1/", str(model))
        target.write_text(text, encoding="utf-8")
    return cwd, options, files


def run_lint(files: list[str], consumer_id: str, options: dict, deep: bool) -> LintRun:
    run = LintRun(options={"deep": deep, **options}, consumer=CONSUMERS[consumer_id])
    run.lint_all(files)
    return run


def expected_label(consumer_id: str, path: Path) -> str:
    return for_named(CONSUMERS[consumer_id], detect_kind(load_mapping(path)), str(path)).consumer.label


def deep_for(name: str) -> bool:
    """accelerate configs are judged by accelerate's own code (one child for all of them: accelerated_root); the
    rest by rocmcheck's own rules and tables (DeepSpeed's classes are exercised in tests/test_lint_deepspeed.py)."""
    accelerate_yaml = name.endswith(".yaml") and name.startswith(("accelerate", "trl", "alignment", "llamafactory-201",
                                                                   "llamafactory-accelerate"))
    return accelerate_yaml or name.startswith("accelerate-936-")  # the JSON is judged through its accelerate YAML


ACCELERATE_FIXTURES = [("working", n) for n in WORKING if deep_for(n)] + [("failing", n) for n in FAILING
                                                                           if deep_for(n)]


@pytest.fixture(scope="module")
def accelerated_root(tmp_path_factory):
    """One layout for every accelerate config, asked of accelerate's own code in one child (importing it takes
    seconds); the tests then find the answers for these very files."""
    from rocmcheck.lint.accelerate_config import check_with_accelerate, working_directory

    root = tmp_path_factory.mktemp("accelerate") / "repo"
    items = []
    home = Path.cwd()
    with pytest.MonkeyPatch.context() as mp:
        for folder, name in ACCELERATE_FIXTURES:
            cwd, _, files = lay_out(name, folder, root, mp)
            os.chdir(cwd)
            try:
                items += [(Path(f), load_mapping(Path(f)), working_directory(load_mapping(Path(f)), Path(f)))
                          for f in files]
            finally:
                os.chdir(home)
    check_with_accelerate(items)
    return root


def root_for(name: str, tmp_path: Path, request) -> Path:
    return request.getfixturevalue("accelerated_root") if deep_for(name) else tmp_path / "repo"



@pytest.mark.parametrize("name", WORKING)
def test_working_public_config_passes_for_its_consumer(name, tmp_path, monkeypatch, request):
    consumer_id = WORKING_ROWS[name][3]
    cwd, options, files = lay_out(name, "working", root_for(name, tmp_path, request), monkeypatch)
    monkeypatch.chdir(cwd)
    run = run_lint(files, consumer_id, options, deep_for(name))
    label = expected_label(consumer_id, Path(files[0]))
    if name in NEEDS_NEWER and Version(metadata.version(NEEDS_NEWER[name][0])) < Version(NEEDS_NEWER[name][1]):
        assert [m for m in run.messages if m.is_error and m.key_path == NEEDS_NEWER[name][2]]
        return
    assert errors(run.messages) == [] and run.refused == []
    assert all(m.consumer for m in run.messages)
    [(_, _, choice)] = [j for j in run.judged if j[0] == files[0]]
    assert choice.consumer.label == label
    for m in run.messages:
        if m.file == files[0]:
            assert m.consumer == label and f" for {label}: " in m.render()
    clean = [r for r in run.results() if r.id == "lint.file.clean"]
    warned = [m for m in run.messages if m.severity is Severity.WARNING]
    assert (clean and label in clean[0].summary) or warned  # the verdict names the consumer


@pytest.mark.parametrize("name", [n for n in FAILING if n != "apps-9-training-args.json"])
def test_failing_public_config_is_caught_at_its_key(name, tmp_path, monkeypatch, request):
    _, consumer_id, key = failing_row(name)[:3]
    cwd, options, files = lay_out(name, "failing", root_for(name, tmp_path, request), monkeypatch)
    monkeypatch.chdir(cwd)
    run = run_lint(files, consumer_id, options, deep_for(name))
    caught = [m for m in run.messages if m.key_path == key and m.severity in (Severity.ERROR, Severity.WARNING)]
    assert caught, [m.render() for m in run.messages]
    assert all(m.consumer and f" for {m.consumer}: " in m.render() for m in caught)
    works_here = name in FAILS_FROM and Version(metadata.version(FAILS_FROM[name][0])) < Version(FAILS_FROM[name][1])
    if name not in CAUGHT_AS_WARNING and not works_here:
        assert any(m.is_error for m in caught)
        assert any(r.status is Status.FAIL for r in run.results())


@pytest.mark.parametrize("name", WORKING)
def test_working_configs_need_no_consumer_named(name, tmp_path, monkeypatch):
    """Without --consumer, every working file is still accepted: the consumer lint chooses (or assumes, and says so)
    never turns a valid file into a failure."""
    cwd, options, files = lay_out(name, "working", tmp_path / "repo", monkeypatch)
    monkeypatch.chdir(cwd)
    run = LintRun(options={"deep": False, **options})
    run.lint_all(files)
    assert errors(run.messages) == [] and run.refused == [] and all(m.consumer for m in run.messages)
    [(_, _, choice)] = run.judged
    assumed = by_code(run.messages, "lint.file.consumer_assumed")
    assert bool(assumed) == choice.assumed and (not assumed or choice.consumer.label in assumed[0].message)


@pytest.mark.parametrize("name", NOT_JUDGED)
def test_a_config_of_another_program_is_skipped_with_its_owner_named(name):
    """axolotl, TRL, ms-swift, torchtune and LLaMA-Factory v1 files share keys with the kinds lint judges
    (output_dir, learning_rate, dataset, lora_rank): each is named and skipped, never judged by another parser."""
    owner = NOT_JUDGED_ROWS[name][3]
    run = LintRun(options={"deep": False})
    run.lint_all([str(FIXTURES / "not-judged" / name)])
    assert run.messages == [] and run.judged == [] and run.bad_input == []
    [result] = run.results()
    assert result.id == "lint.file.not_judged" and result.status is Status.SKIP and result.data["owner"] == owner
    assert f"{owners.NOT_JUDGED[owner]}: not judged" in result.summary


def test_nvme_partial_offload_is_caught():
    messages = lint_file(FIXTURES / "failing" / "deepspeed-4872-nvme-ratio.json", deep=False)
    [err] = by_code(messages, "lint.deepspeed.partial_offload_nvme")
    assert err.is_error and err.key_path == "zero_optimization.offload_optimizer.ratio" and err.line == 18
    assert err.fix.kind is FixKind.EDIT and '"device": "cpu"' in err.fix.text and err.fix.file == err.file


def test_torch_scheduler_under_zero_is_caught():
    [err] = by_code(lint_file(FIXTURES / "failing" / "deepspeed-3492-torch-scheduler.json", deep=False),
                    "lint.deepspeed.torch_scheduler")
    assert err.is_error and "is not an Optimizer" in err.message and err.line == 5


def test_unprefixed_zero3_auto_is_caught_with_the_stage3_name():
    messages = lint_file(FIXTURES / "failing" / "unprefixed-auto-zero3.json", deep=False)
    found = {m.key_path: m for m in by_code(messages, "lint.deepspeed.auto_unprefixed")}
    assert set(found) == {"zero_optimization.prefetch_bucket_size", "zero_optimization.param_persistence_threshold"}
    assert found["zero_optimization.prefetch_bucket_size"].did_you_mean == "stage3_prefetch_bucket_size"
    assert "not found in kwargs" in found["zero_optimization.prefetch_bucket_size"].message
    assert not by_code(messages, "lint.deepspeed.auto_unfilled")  # reduce_bucket_size "auto" is filled


def test_client_optimizer_offload_is_caught():
    [warn] = by_code(lint_file(FIXTURES / "failing" / "lmflow-693-client-optimizer-offload.json", deep=False),
                     "lint.deepspeed.client_optimizer_offload")
    assert warn.severity is Severity.WARNING and "client provided optimizer" in warn.message


def test_hard_coded_values_contradicting_training_arguments_get_one_fix_each(tmp_path, monkeypatch):
    for name in ("apps-9-mismatch.json", "apps-9-training-args.json"):
        shutil.copy(FIXTURES / "failing" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    messages = lint_file(tmp_path / "apps-9-training-args.json", world_size=8, deep=False)
    mismatches = {m.key_path for m in by_code(messages, "lint.hf.mismatch")}
    assert mismatches == {"train_batch_size", "optimizer.params.lr", "scheduler.params.warmup_max_lr"}
    keyed = [(m.file, m.key_path) for m in messages if m.fix and m.severity is not Severity.INFO]
    assert len(keyed) == len(set(keyed))  # never two fixes for one key ("auto" and 128)
    [batch] = [m for m in messages if m.key_path == "train_batch_size"]
    assert batch.fix.text == 'train_batch_size: set it to "auto"' and batch.fix.file == batch.file
    assert "128" in batch.message and batch.consumer == "the HF Trainer"


def test_the_apps_file_is_fine_for_deepspeed_and_refused_by_the_hf_trainer():
    """The same file, two consumers: deepspeed.initialize takes its hard-coded values; the HF Trainer compares them
    with the run's (hendrycks/apps#9)."""
    path = FIXTURES / "failing" / "apps-deepspeed_config.json"
    alone = lint_file(path, deep=False, consumer=CONSUMERS["deepspeed"], world_size=8, micro_batch=2, grad_accum=8)
    assert errors(alone) == []
    trainer = lint_file(path, deep=False, consumer=CONSUMERS["hf-trainer"], world_size=8, micro_batch=2,
                        grad_accum=8)
    [batch] = by_code(trainer, "lint.hf.mismatch")
    assert batch.key_path == "train_batch_size" and "train_batch_size (calculated)=128" in batch.message
    assert "lint's command line" in batch.message


def test_warmup_steps_contradicting_the_deepspeed_scheduler(tmp_path, monkeypatch):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "scheduler": {"type": "WarmupLR", '
                                      '"params": {"warmup_num_steps": 500}}}')
    (tmp_path / "args.json").write_text('{"output_dir": "o", "warmup_steps": 20, "deepspeed": "ds.json"}')
    monkeypatch.chdir(tmp_path)
    [m] = by_code(lint_file(tmp_path / "args.json", deep=False), "lint.hf.mismatch")
    assert m.key_path == "scheduler.params.warmup_num_steps" and "warmup_steps=20" in m.message


@pytest.mark.parametrize("transformers, deepspeed, hidden, expect", [
    ("4.44.2", "0.15.0", 4096, "error"),    # the thread's stack: 15099494.4
    ("4.44.2", "0.14.4", 4096, None),       # pydantic v1 DeepSpeed coerced the float
    ("4.45.0", "0.15.0", 4096, None),       # transformers casts to int
    ("4.44.2", "0.15.0", None, "warning"),  # hidden size unknown: say what to pass
    ("4.44.2", "0.15.0", 5120, None),       # 0.9 x 5120^2 = 23592960.0: an integer, accepted
])
def test_float_prefetch_bucket_is_version_aware(transformers, deepspeed, hidden, expect, tmp_path, monkeypatch):
    monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version(transformers))
    monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version(deepspeed))
    name = "llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml"
    cwd, _, files = lay_out(name, "failing", tmp_path / "repo", monkeypatch)
    monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version(transformers))
    monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version(deepspeed))
    monkeypatch.chdir(cwd)
    found = by_code(lint_file(files[0], deep=False, hidden_size=hidden), "lint.deepspeed.prefetch_float")
    assert [m.severity.value for m in found] == ([expect] if expect else [])
    if expect == "error":
        assert "15099494.4" in found[0].message
        assert found[0].fix.text == "zero_optimization.stage3_prefetch_bucket_size: set it to 15099494"


def test_hidden_size_read_from_the_models_config_json(tmp_path, monkeypatch):
    monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version("4.44.2"))
    monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version("0.15.0"))
    root, _, _ = lay_out("llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml", "failing", tmp_path / "repo", monkeypatch)
    monkeypatch.chdir(root)
    model = root / "Meta-Llama-3-8B-Instruct"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}')
    text = (FIXTURES / "failing" / "llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml").read_text()
    (root / "train.yaml").write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", str(model)))
    [err] = by_code(lint_file(root / "train.yaml", deep=False), "lint.deepspeed.prefetch_float")
    assert err.is_error


def test_a_deepspeed_json_named_beside_the_yaml_that_points_at_it_is_judged_once_for_the_hf_trainer(
        tmp_path, monkeypatch):
    root, _, files = lay_out("llamafactory-qwen3_lora_sft_ds3.yaml", "working", tmp_path / "repo", monkeypatch)
    monkeypatch.chdir(root)
    ds = root / "examples" / "deepspeed" / "ds_z3_config.json"
    run = LintRun(options={"deep": False})
    run.lint_all([files[0], str(ds)])
    choices = {name: choice for name, _, choice in run.judged}
    assert choices[str(ds)].consumer.label == "the HF Trainer (llamafactory-cli train)"
    assert not choices[str(ds)].assumed and "points at it" in choices[str(ds)].why
    assert not by_code(run.messages, "lint.file.consumer_assumed")
    assert len([m for m in run.messages if m.file == str(ds)]) == len({id(m) for m in run.messages
                                                                       if m.file == str(ds)})  # linted once


def test_every_deepspeed_fixture_is_a_deepspeed_config():
    for folder in ("working", "failing"):
        for path in (FIXTURES / folder).glob("*.json"):
            data = load_mapping(path)
            assert detect_kind(data) in (DEEPSPEED, "training_args"), path.name
