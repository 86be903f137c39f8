"""`rocmcheck probe`: listing, bad names (exit 2, valid names listed), JSON output, exit codes."""

import json

import pytest
from click.testing import CliRunner

from rocmcheck.commands.probe import probe
from rocmcheck.probes import PROBE_NAMES


def run(*args):
    return CliRunner().invoke(probe, list(args))


def test_list_names_every_probe():
    result = run("--list")
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines()] == list(PROBE_NAMES)


@pytest.mark.parametrize("args", [("gemm",), ()])
def test_unknown_or_missing_name_is_a_usage_error_listing_valid_names(args):
    result = run(*args)
    assert result.exit_code == 2
    assert "gemm_tflops" in result.output and "all" in result.output
    assert "Traceback" not in result.output


def test_bad_timeout_is_a_usage_error():
    assert run("memory", "--timeout", "0").exit_code == 2


def test_json_output_of_one_probe():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = run("memory", "--json")
    assert result.exit_code == 0  # a skip is not a failure
    payload = json.loads(result.output)
    assert payload["schema_version"] == 2 and payload["command"] == "probe"
    [only] = payload["results"]
    assert only["id"] == "probe.memory" and only["status"] == "skip" and "no GPU" in only["summary"]
