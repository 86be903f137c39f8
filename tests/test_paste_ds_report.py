"""parse_ds_report on ds_report outputs: ROCm and CUDA containers, an unfenced excerpt, DeepSpeed 0.6's forms."""

from __future__ import annotations

from conftest import project_fixture, read_fixture

from rocmcheck.triage.readers.ds_report import parse_ds_report
from rocmcheck.triage.readers.paste import split
from rocmcheck.units import GIB

D = "pastes/ds_report/"


def _reports(text: str):
    return [parse_ds_report(b.text) for b in split(text).of_kind("ds_report")]


def test_rocm_container():
    [r] = _reports(project_fixture(D + "ds_report_rocm6.0_torch2.3.1_deepspeed0.14.0_Singularity-LUMI-container_"
                                       "complete.txt"))
    assert r.accelerator == "cuda" and r.ninja_ok is True and len(r.ops) == 19
    assert (r.ops["fused_adam"].installed, r.ops["fused_adam"].compatible) == (False, True)
    assert (r.ops["sparse_attn"].installed, r.ops["sparse_attn"].compatible) == (False, False)
    assert r.ops["stochastic_transformer"].compatible is True  # its name leaves a single dot before the status
    assert "sparse_attn is not compatible with ROCM" in r.warnings
    assert r.torch_install_path == "/opt/conda/envs/conda_container_env/lib/python3.11/site-packages/torch"
    assert (r.torch_version, r.deepspeed_version) == ("2.3.1+rocm6.0", "0.14.0")
    assert r.torch_hip_version == "6.0.32830-d62f6a171"
    assert r.torch_cuda_version is None and r.nvcc_version is None and r.nvcc_text == "None"
    assert r.compiled_with == {"torch": "0.0", "hip": "0.0"}
    assert r.shm_size_text == "500.00 GB" and r.shm_size_bytes == 500 * GIB
    assert r.sections == ["ops", "environment"]


def test_cuda_container_with_linker_errors_between_ops():
    text = project_fixture(D + "ds_report_cuda12.8_torch2.7.0_deepspeed0.17.2_cotainr-container_ld-error-"
                               "interleaved_complete.txt")
    [r] = _reports(text)
    assert r.torch_version == "2.7.0+cu128" and r.torch_cuda_version == "12.8" and r.torch_hip_version is None
    assert r.nvcc_version == "12.8" and r.deepspeed_info == "0.17.2, unknown, unknown"
    assert r.ops["gds"].compatible is False and r.ops["dc"].compatible is True
    assert "collect2: error: ld returned 1 exit status" in r.other_lines
    assert r.shm_size_bytes == int(15.25 * GIB)
    assert any("untested triton version (3.3.0)" in w for w in r.warnings)


def test_unfenced_excerpt_cut_in_the_op_table():
    [r] = _reports(project_fixture(D + "ds_report_MI200_unfenced_DeepSpeed-5100_excerpt.txt"))
    assert list(r.ops) == ["async_io", "fused_adam", "cpu_adam"] and r.sections == ["ops"]
    assert r.torch_version is None and r.deepspeed_version is None  # the environment part is not in the paste


def test_deepspeed_0_6_fail_and_wheel_forms():
    before, after = _reports(project_fixture(D + "env-info-section_rocm5.1_torch1.10_deepspeed0.6.2_before-after_"
                                                 "DeepSpeed-pr1906.txt"))
    assert before.nvcc_version is None and before.nvcc_text.startswith("[FAIL] cannot find CUDA_HOME")
    assert before.compiled_with == {"torch": "1.10", "cuda": "0.0", "hip": "5.1"}
    assert after.compiled_with == {"torch": "1.10", "hip": "5.1"} and after.deepspeed_version == "0.6.2+ef17c89"
    assert before.ops == {} and before.torch_hip_version == "5.1.20531-cacfa990"


def test_public_mi300x_excerpt():
    r = parse_ds_report(read_fixture("ds_report/mi300x-8gpu-tensorwave-deepspeed-issue6725-truncated.txt"))
    assert r.accelerator == "cuda" and r.ops["cpu_adam"].installed is True and r.ops["async_io"].compatible is False


def test_ds_report_that_crashes_importing_deepspeed_is_that_and_nothing_else():
    # DeepSpeed#3386: ds_report's `from deepspeed.env_report import cli_main` runs deepspeed/__init__.py, whose
    # `import torch` raises; the report is never printed.
    t = "pastes/traceback/ds_report_crash-at-import-deepspeed_"
    r = parse_ds_report(project_fixture(t + "torch-OSError-libcublas_DeepSpeed-3386_excerpt.txt"))
    assert r.import_failed and r.found and r.import_failed_in == "torch"
    assert r.import_error.startswith("OSError: ") and "libcublas.so.11" in r.import_error
    assert (r.ops, r.env, r.sections, r.deepspeed_version, r.accelerator) == ({}, {}, [], None, None)
    # DeepSpeed#7028: the accelerator lines deepspeed printed while importing, then the crash, cut before its error.
    r = parse_ds_report(project_fixture(t + "triton-3.2.0-CPU-node_DeepSpeed-7028_excerpt.txt"))
    assert r.import_failed and r.import_error is None and r.accelerator is None


def test_a_ds_report_crash_in_a_paste_says_deepspeed_fails_to_import():
    from rocmcheck.triage.pasted import read_pastes

    text = project_fixture("pastes/traceback/ds_report_crash-at-import-deepspeed_torch-OSError-libcublas_DeepSpeed-"
                           "3386_excerpt.txt")
    pasted = read_pastes([("paste", text)])
    ds = pasted.facts.probes["deepspeed"]
    assert ds["installed"] is True and ds["import_error"].startswith("OSError: ")
    assert "version" not in ds and "accelerator" not in ds
