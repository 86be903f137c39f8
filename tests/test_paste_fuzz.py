"""Every paste reader and the splitter never raise: on arbitrary text, binary garbage, real pastes cut at any point,
real lines shuffled together, and huge lines. `split` is the splitter without its last-resort guard, so a fault
shows here instead of being swallowed."""

from __future__ import annotations

import time

from conftest import PROJECT_FIXTURES_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmcheck.triage.readers.collect_env import parse_collect_env
from rocmcheck.triage.readers.docker_run import parse_docker_run
from rocmcheck.triage.readers.ds_report import parse_ds_report
from rocmcheck.triage.readers.env_reports import parse_env_report
from rocmcheck.triage.readers.hip_log import parse_hip_log
from rocmcheck.triage.readers.nccl_log import parse_nccl_log, parse_nccl_tests
from rocmcheck.triage.readers.packages import (
    parse_conda_list,
    parse_packages,
    parse_pip_freeze,
    parse_pip_install,
    parse_pip_list,
)
from rocmcheck.triage.readers.paste import KINDS, Block, split
from rocmcheck.triage.readers.paste_read import READERS, read_block
from rocmcheck.triage.readers.python_session import parse_python_session
from rocmcheck.triage.readers.shell import bare_command, parse_command, split_prompt
from rocmcheck.triage.readers.system_info import (
    parse_dkms_status,
    parse_lsb_release,
    parse_nvcc,
    parse_os_release,
    parse_uname,
)
from rocmcheck.triage.readers.traceback import parse_traceback

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.data_too_large])
READERS_UNDER_TEST = [parse_collect_env, parse_ds_report, parse_pip_list, parse_pip_freeze, parse_conda_list,
                      parse_packages, parse_pip_install, parse_env_report, parse_uname, parse_os_release,
                      parse_lsb_release, parse_nvcc, parse_dkms_status, parse_docker_run, parse_python_session,
                      parse_traceback, parse_nccl_log, parse_nccl_tests, parse_hip_log]
_PASTES = sorted(p for p in (PROJECT_FIXTURES_DIR / "pastes").rglob("*.txt") if not p.name.endswith(".source"))
TEXTS = [p.read_bytes().decode("utf-8") for p in _PASTES]
LINES = sorted({line for text in TEXTS for line in text.splitlines()})
# Characters the splitter gives meaning to, so that random text hits its rules and not only plain words.
_NOISE = st.lists(st.sampled_from(list("`~>$#[](){}|+-=*_:;.,'\"\\/ \t\r\n\x1b\x00\x7f^<!%") +
                                   ["\u2502", "\u00d7", "\u276f", "x", "A", "0", "NCCL", "HSA", ">>> ", "```",
                                    "GPU[0]", "torch==", "- `", "File \"", "Error: ", "$ ", "python -c \"", "\\\n"]),
                  max_size=200).map("".join)


def _everything(text) -> None:
    for reader in READERS_UNDER_TEST:
        reader(text)
    for block in split(text):
        assert block.kind in KINDS and block.first_line <= block.last_line
        READERS.get(block.kind, lambda b: None)(block)


@FUZZ
@given(st.one_of(st.text(max_size=3000), _NOISE, st.binary(max_size=2000)))
def test_arbitrary_text_and_bytes(text):
    _everything(text)


@FUZZ
@given(st.sampled_from(TEXTS), st.integers(min_value=0, max_value=40_000), st.integers(min_value=0, max_value=40_000))
def test_real_pastes_cut_anywhere(text, start, length):
    _everything(text[start:start + length])


@FUZZ
@given(st.lists(st.sampled_from(LINES), max_size=120), st.lists(_NOISE, max_size=5))
def test_real_lines_shuffled_with_noise(lines, noise):
    _everything("\n".join(lines + noise))


def test_command_helpers_on_real_lines():
    for line in LINES:
        split_prompt(line)
        bare_command(line)
        parse_command(line)


def test_huge_lines_are_read_in_bounded_time():
    for text in ("x" * 2_000_000, "ROCk module is loaded " * 100_000, "(" * 500_000, "- `" * 300_000,
                 '"' * 400_000, "docker run " + "-v a:b " * 100_000, ">>> " * 300_000, "[" * 500_000 + "\n{" * 1000):
        start = time.process_time()
        _everything(text)
        assert time.process_time() - start < 20, text[:40]


def test_read_block_of_every_kind_on_odd_text():
    for kind in KINDS:
        for text in ("", "\x00\xff", "N/A", "{", "GPU: 0\n    ASIC:", "x" * 100_000):
            read_block(Block(kind=kind, text=text, first_line=1, last_line=1))
