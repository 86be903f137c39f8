"""NCCL / RCCL logs, nccl-tests / rccl-tests output and the HIP runtime log, on real pastes."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.hip_log import parse_hip_log
from rocmcheck.triage.readers.nccl_log import parse_nccl_log, parse_nccl_tests
from rocmcheck.triage.readers.paste import split


def _block(relpath: str, kind: str) -> str:
    return split(project_fixture("pastes/" + relpath)).of_kind(kind)[0].text


def test_nccl_info_log():
    log = parse_nccl_log(_block("nccl_log/nccl-INFO-log_NCCL-2.20.5+cuda12.4_2xA100-docker_NVIDIA-nccl-1703_"
                                "excerpt.txt",
                                "nccl_log"))
    assert (log.version, log.rccl, log.cuda_driver_version) == ("2.20.5+cuda12.4", False, "12040")
    assert log.interfaces == ["eth0:172.21.0.2<0>"] and log.hosts == ["f9139b5956e9"] and log.info_lines == 3
    assert "No plugin found (libnccl-net.so)" in log.plugin


def test_dev_shm_too_small_three_releases():
    old = parse_nccl_log(_block("corpus/03-NVIDIA-nccl-342.paste.txt", "nccl_log"))
    assert old.warnings == ["Call to posix_fallocate failed: No space left on device",
                            "Error while creating shared memory segment nccl-shm-recv-250a7cc850ba9298-0-1-"
                            "3 (size 9637888)"]
    mid = parse_nccl_log(_block("nccl_log/nccl-shm-segment-error_failed-to-extend-dev-shm_nccl-tests-166_excerpt.txt",
                                "nccl_log"))
    assert "Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes" in mid.warnings and mid.devices == [3, 6, 4]
    ci = parse_nccl_log(_block("nccl_log/nccl-shm-No-space-left-on-device-28_CI-log-timestamps_pytorch-ci-infra-490_"
                               "excerpt.txt", "nccl_log"))
    assert ci.warnings[0].endswith("error: No space left on device (28)") and "Socket recv failed" in ci.warnings
    alone = parse_nccl_log(_block("corpus/07-hiyouga-EasyR1-228.paste.txt", "nccl_log"))
    assert alone.errors == ["Error while creating shared memory segment /dev/shm/nccl-UmqSM9 (size 7340384)"]


def test_rccl_warns_about_iommu():
    log = parse_nccl_log(_block("nccl_tests/rccl-tests_Missing-iommu-pt-WARN_2xMI100_kernel6.6.64_rccl-1454_"
                                "excerpt.txt",
                                "nccl_log"))
    assert log.rccl is True and log.kernel_version == "6.6.64-1" and log.rocr_version == "1.1"
    assert log.warnings == ['Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!']


def test_interface_list_and_ignored_setting():
    log = parse_nccl_log(_block("corpus/38-NVIDIA-nccl-697.paste.txt", "nccl_log"))
    assert len(log.interfaces) == 16 and log.interfaces[0] == "bond0:192.168.1.161<0>"
    assert "NET/Socket" in log.transports
    log = parse_nccl_log(_block("nccl_log/rccl-NCCL_MIN_NCHANNELS-ignored-less-than-8-GPUs_MI355X_rocm7.2.3_rocm-"
                                "systems-"
                                "11253_excerpt.txt", "nccl_log"))
    assert log.env["NCCL_MIN_NCHANNELS"].startswith("set by environment is ignored due to less than 8 GPUs")


def test_rccl_tests_that_hang():
    t = parse_nccl_tests(_block("corpus/15-ROCm-rccl-1129.paste.txt", "nccl_tests"))
    assert (t.version, t.threads, t.gpus) == ("develop:3f7f785", 1, 2)
    assert [d["bus"] for d in t.devices] == ["0000:2f:00.0", "0000:03:00.0"]
    assert t.devices[0]["name"] == "AMD Instinct MI100"
    assert t.rows == [] and not t.complete  # the table header, then nothing: the hang
    t = parse_nccl_tests(_block("nccl_tests/rccl-tests_Missing-iommu-pt-WARN_2xMI100_kernel6.6.64_rccl-1454_"
                                "excerpt.txt",
                                "nccl_tests"))
    assert [d["host"] for d in t.devices] == ["UVOSLinux", "UVOSLinux"]


def test_hip_log_missing_code_objects():
    log = parse_hip_log(_block("corpus/33-lamikr-rocm_sdk_builder-246.paste.txt", "hip_log"))
    assert log.errors == ["hipErrorNoBinaryForGpu"] and log.bundles_without_isa == ["/opt/rocm_sdk_612/lib/libmagma.so"]
    assert log.missing_gfx == ["gfx1101", "gfx1036"] and log.pids == [9111]


def test_hip_log_no_device_inside_a_python_session():
    [block] = split(project_fixture("pastes/corpus/45-ROCm-hip-3710.paste.txt")).of_kind("python_session")
    log = parse_hip_log(block.text)
    assert log.returned["hipGetDeviceCount"] == "hipErrorNoDevice" and log.errors == ["hipErrorNoDevice"]
