"""What triage reads, however it comes: a closed stdin, CR-only and CRLF line ends, UTF-16 and UTF-32 with a
byte-order mark, NUL bytes, and more than all the pastes together may hold: each read, or refused in one line
with exit 2, never a traceback. And a name holding a control character is printed escaped (`recipes write`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmcheck.errors import BadInput
from rocmcheck.triage import triage
from rocmcheck.triage.inputs import MAX_TOTAL_BYTES, read_inputs
from rocmcheck.units import MIB

REPO = Path(__file__).resolve().parents[1]
SIGNATURE_LINE = "RuntimeError: HIP error: invalid device function"
LINES = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', SIGNATURE_LINE,
         "export HSA_OVERRIDE_GFX_VERSION=11.0.0"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _causes(path: Path) -> list[str]:
    return [f.id for f in triage(read_inputs([str(path)])).findings]


@pytest.mark.parametrize("encode", [
    lambda t: t.replace("\n", "\r").encode(),  # CR-only: old Mac files, a log saved with bare CRs
    lambda t: t.replace("\n", "\r\n").encode(),
    lambda t: t.encode("utf-16"),  # with its byte-order mark, as PowerShell's > writes
    lambda t: t.encode("utf-32"),
    lambda t: b"\xef\xbb\xbf" + t.encode(),
], ids=["cr", "crlf", "utf16", "utf32", "utf8-bom"])
def test_line_ends_and_encodings_read_as_lines(tmp_path, encode):
    path = tmp_path / "paste.txt"
    path.write_bytes(encode("\n".join(LINES) + "\n"))
    (name, text), = read_inputs([str(path)])
    assert text.splitlines() == LINES
    assert "torch.arch_list" in _causes(path)


@pytest.mark.parametrize("data, why", [
    ("\n".join(LINES).encode("utf-16-le"), "UTF-16 text without a byte-order mark"),
    (b"RuntimeError\x00: x\n", r"a binary file \(a NUL byte at offset 12\)"),
])
def test_nul_bytes_are_refused_in_one_line(tmp_path, data, why):
    path = tmp_path / "paste.txt"
    path.write_bytes(data)
    with pytest.raises(BadInput, match=why):
        read_inputs([str(path)])


def test_a_closed_stdin_is_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "triage", "-"], capture_output=False,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=REPO, timeout=120,
                          preexec_fn=lambda: os.close(0))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines() == ["Error: stdin is closed: nothing to read (give the paste as a file, or pipe "
                                        "it in)"]


def test_the_pastes_are_bounded_together(tmp_path, capsys):
    """Three pastes of 5 MiB each (each under the cap of one paste): the second is read to what is left of the
    total, the third not at all, and one line says so."""
    line = (SIGNATURE_LINE + "\n").encode()
    names = []
    for i in range(3):
        path = tmp_path / f"p{i}.txt"
        path.write_bytes(line * (5 * MIB // len(line)))
        names.append(str(path))
    read = read_inputs(names)
    assert sum(len(text.encode()) for _, text in read) <= MAX_TOTAL_BYTES
    assert len(read) == 2 and len(read[1][1]) < len(read[0][1])
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and f"more than {MAX_TOTAL_BYTES // MIB} MiB together" in said[0]
    assert "p1.txt read to its first" in said[0] and "1 more not read" in said[0]


def test_recipes_write_prints_a_folder_with_a_newline_escaped(tmp_path):
    folder = tmp_path / "rw5\nFAIL x"
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "recipes", "write", "zero2", str(folder)],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=180)
    wrote = [line for line in proc.stdout.splitlines() if line.startswith("wrote ")]
    assert wrote and all("rw5\\nFAIL x" in line for line in wrote), proc.stdout
    assert not any(line.startswith("FAIL x") for line in proc.stdout.splitlines())
