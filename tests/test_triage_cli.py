"""`rocmcheck triage` from the real CLI in real subprocesses: files and stdin in any mix, the three outputs (text,
--json in the one envelope, --markdown), the exit rule, secrets never echoed, and every unreadable input one line
and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import PROJECT_FIXTURES_DIR, read_fixture

from rocmcheck.report.json_report import schema
from rocmcheck.triage.inputs import MAX_PASTE_BYTES

REPO = Path(__file__).resolve().parents[1]
CORPUS = PROJECT_FIXTURES_DIR / "pastes" / "corpus"
INVALID_DEVICE_FUNCTION = CORPUS / "19-pytorch-pytorch-132570.paste.txt"
NO_HIP_GPUS = CORPUS / "50-Parsl-parsl-3858.paste.txt"
ARCH_LIST_REPL = (PROJECT_FIXTURES_DIR / "pastes/python_session"
                  / "repl_pprint-get_arch_list-multiline_torch2.7.1+rocm6.3_uv-14086.txt")


def run(*args: str, stdin: str | bytes | None = None, ok=(0, 1, 3)) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "triage", *args], input=data, capture_output=True,
                          env=env, timeout=120, cwd=REPO)
    assert proc.returncode in ok, proc.stderr.decode()[-2000:]
    return proc


def test_a_thread_paste_names_its_cause_the_line_and_the_fix():
    proc = run(str(INVALID_DEVICE_FUNCTION))
    out = proc.stdout.decode()
    assert proc.returncode == 1  # a cause found is a failed verdict
    assert "1. torch has no kernels for this GPU's arch  [torch.arch_list, fail]" in out
    assert "RuntimeError: HIP error: invalid device function" in out
    assert "paste: pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm" in out


def test_stdin_and_files_in_any_order_give_the_same_causes():
    text = NO_HIP_GPUS.read_text(encoding="utf-8")
    alone = json.loads(run("--json", "-", stdin=text).stdout)
    mixed = json.loads(run("--json", str(INVALID_DEVICE_FUNCTION), "-", stdin=text).stdout)
    reversed_ = json.loads(run("--json", "-", str(INVALID_DEVICE_FUNCTION), stdin=text).stdout)
    ids = {c["id"] for c in alone["causes"]}
    assert "env.visible_devices" in ids
    assert {c["id"] for c in mixed["causes"]} == {c["id"] for c in reversed_["causes"]} >= ids | {"torch.arch_list"}
    assert [p["name"] for p in mixed["pastes"]] == [str(INVALID_DEVICE_FUNCTION), "stdin"]


def test_json_is_the_one_envelope_and_validates():
    doc = json.loads(run("--json", str(INVALID_DEVICE_FUNCTION)).stdout)
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["command"] == "triage" and doc["verdict"] == "fail"
    first = doc["causes"][0]
    assert first["id"] == "torch.arch_list" and first["rank"] == 1 and first["check"] == "torch.arch_list"
    assert first["quotes"][0]["text"] == "RuntimeError: HIP error: invalid device function"
    assert first["quotes"][0]["line"] == 3 and first["sources"]
    assert doc["ask"] and all(a["fix"]["text"] for a in doc["ask"])  # the evidence is thin: what to paste next
    result = next(r for r in doc["results"] if r["id"] == "torch.arch_list")
    assert result["status"] == "fail" and result["data"]["rank"] == 1


def test_markdown_is_a_reply_ready_to_post():
    out = run("--markdown", str(INVALID_DEVICE_FUNCTION)).stdout.decode()
    assert out.startswith("**Likely cause: torch has no kernels for this GPU's arch** (`torch.arch_list`)")
    assert "The paste shows:\n\n```text\nRuntimeError: HIP error: invalid device function\n```" in out
    assert "```sh\npip install --force-reinstall torch --index-url" in out
    assert "To confirm, please paste the output of:" in out and "Other possible causes:" in out


def test_exit_codes_follow_the_one_rule():
    assert run(str(INVALID_DEVICE_FUNCTION)).returncode == 1
    healthy = run(str(ARCH_LIST_REPL), str(PROJECT_FIXTURES_DIR / "public/rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"))
    assert healthy.returncode == 0 and b"No known cause found" in healthy.stdout
    prose = run("-", stdin="I tried everything and it still does not work, any idea?\n")
    assert prose.returncode == 3 and b"Nothing in the paste could be judged" in prose.stdout


def test_secrets_in_a_paste_are_never_echoed():
    token, password, aws = "hf_" + "Ab3" * 12, "s3cr3tPassw0rd", "AKIA" + "Q" * 16
    paste = (f"export HF_TOKEN={token}\n"
             f"pip install --index-url https://user:{password}@pypi.example.com/simple torch\n"
             f"AWS_ACCESS_KEY_ID={aws} python train.py\n"
             "RuntimeError: HIP error: invalid device function\n")
    for flag in ((), ("--json",), ("--markdown",), ("-v", "--all")):
        out = run(*flag, "-", stdin=paste).stdout.decode()
        assert token not in out and password not in out and aws not in out, flag
        assert "invalid device function" in out


@pytest.mark.parametrize("make,why", [
    (lambda d: d / "missing.txt", "no such file"),
    (lambda d: d, "is a directory"),
    (lambda d: _write(d / "empty.txt", b""), "is empty"),
    (lambda d: _write(d / "blank.txt", b"\n  \n\t\n"), "is empty"),
    (lambda d: _write(d / "bin.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "binary"),
    (lambda d: _write(d / "latin.txt", bytes(range(128, 256)) * 40), "not UTF-8"),
    (lambda d: _sparse(d / "huge.txt", MAX_PASTE_BYTES + 1), "more than a paste can be"),
    (lambda d: _fifo(d / "fifo"), "FIFO"),
])
def test_an_unreadable_paste_is_one_line_and_exit_2(tmp_path, make, why):
    path = make(tmp_path)
    proc = run(str(path), ok=(2,))
    err = proc.stderr.decode()
    assert proc.stdout == b"" and err.count("\n") == 1 and why in err and "Traceback" not in err, err


def test_stdin_is_read_bounded_and_an_empty_one_is_refused():
    assert b"more than a paste can be" in run("-", stdin=b"x" * (MAX_PASTE_BYTES + 1), ok=(2,)).stderr
    assert b"stdin: is empty" in run("-", stdin=b"", ok=(2,)).stderr
    assert b"more than once" in run("-", "-", stdin=b"x", ok=(2,)).stderr
    assert b"FILE..." in run(ok=(2,)).stderr
    assert b"cannot be combined" in run("--json", "--markdown", str(INVALID_DEVICE_FUNCTION), ok=(2,)).stderr


def test_a_public_rocminfo_error_output_is_judged_by_the_doctors_own_check():
    proc = run("--json", "-", stdin=read_fixture("rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt"))
    doc = json.loads(proc.stdout)
    assert doc["causes"][0]["id"] == "devices.kfd"
    rocminfo = next(r for r in doc["results"] if r["id"] == "gpu.rocminfo")
    assert rocminfo["status"] == "fail" and "Permission denied" in rocminfo["summary"]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path
