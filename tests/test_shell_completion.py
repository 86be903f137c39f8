"""README's shell-completion lines, for real: click writes the completion scripts as bytes through the sanitising
stream (rocmcheck/safe/text.py), and each shell then completes `rocmcheck li<TAB>` with rocmcheck's own answer.
bash runs everywhere; zsh (driven through a pseudo-terminal with its zpty module, as a person types) and fish run
where they are installed (`apt-get install zsh fish`), and are skipped, saying so, where they are not. The scripts'
content is checked for all three either way."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocmcheck.safe.text import SanitizingStream

REPO = Path(__file__).resolve().parents[1]
SHELLS = ("bash", "zsh", "fish")


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """PATH with a `rocmcheck` that runs this checkout (the scripts call `rocmcheck` by name)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "rocmcheck"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m rocmcheck "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(REPO),
               HOME=str(tmp_path), ZDOTDIR=str(tmp_path))
    env.pop("XDG_CONFIG_HOME", None)  # fish reads ~/.config of this HOME, as README's line writes it
    return env


def _source(shell: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["rocmcheck"], capture_output=True, text=True, timeout=60,
                          env=dict(env, _ROCMCHECK_COMPLETE=f"{shell}_source"))


def test_the_stream_wrapper_takes_bytes_and_still_cleans_them():
    raw = io.StringIO()
    stream = SanitizingStream(raw)
    payload = b"ok \x1b]52;c;cm0gLXJmIH4K\x07\xff\n"
    assert stream.write(payload) == len(payload)  # every byte taken, as a binary stream counts them
    stream.writelines([b"a\n", "b\x1b[2J\n"])
    assert raw.getvalue() == "ok \ufffd\na\nb\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_each_completion_script_is_printed_whole(shell, env):
    proc = _source(shell, env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    script = proc.stdout
    assert "_ROCMCHECK_COMPLETE" in script and "_rocmcheck_completion" in script
    registers = {"bash": "complete -o nosort -F _rocmcheck_completion rocmcheck",
                 "zsh": "compdef _rocmcheck_completion rocmcheck",
                 "fish": 'complete --no-files --command rocmcheck --arguments "(_rocmcheck_completion)"'}
    assert registers[shell] in script


def test_bash_completes_commands_and_options(env):
    script = textwrap.dedent("""\
        set -e
        eval "$(_ROCMCHECK_COMPLETE=bash_source rocmcheck)"
        COMP_WORDS=(rocmcheck li); COMP_CWORD=1; COMPREPLY=()
        _rocmcheck_completion rocmcheck
        echo "commands: ${COMPREPLY[*]}"
        COMP_WORDS=(rocmcheck lint --gp); COMP_CWORD=2; COMPREPLY=()
        _rocmcheck_completion rocmcheck
        echo "options: ${COMPREPLY[*]}"
    """)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "commands: lint\n" in proc.stdout and "options: --gpus\n" in proc.stdout, proc.stdout


# zsh completes only inside its line editor: an interactive zsh in a pseudo-terminal (zpty) gets the README's
# eval line, then `rocmcheck li<TAB>`; Ctrl-A and `print -r -- GOT ` turn the completed line into output.
ZPTY = textwrap.dedent(r"""
    zmodload zsh/zpty
    zpty z 'zsh -f -i'
    zpty -w z 'bindkey -e; autoload -U compinit; compinit -u -D; eval "$(_ROCMCHECK_COMPLETE=zsh_source rocmcheck)"'
    zpty -w -n z $'rocmcheck li\t\x01print -r -- GOT \n'
    zpty -w -n z $'rocmcheck lint --gp\t\x01print -r -- GOT \n'
    zpty -w z 'exit'
    out=""
    integer i=0
    while (( i++ < 600 )); do
      zpty -r -t z chunk && out+=$chunk || sleep 0.1
      [[ $out == *"GOT rocmcheck lint --gpus"* ]] && break
    done
    zpty -d z
    print -r -- "$out"
""")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here (apt-get install zsh)")
def test_zsh_completes_commands_and_options_in_its_line_editor(env):
    proc = subprocess.run(["zsh", "-f", "-c", ZPTY], capture_output=True, env=env, timeout=120)
    out = proc.stdout.decode("utf-8", "replace")
    assert "GOT rocmcheck lint\r\n" in out or "GOT rocmcheck lint\n" in out, out[-2000:]
    assert "GOT rocmcheck lint --gpus" in out and "Traceback" not in out, out[-2000:]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed here (apt-get install fish)")
def test_fish_completes_commands_and_options(env, tmp_path):
    (tmp_path / ".config" / "fish" / "completions").mkdir(parents=True)
    readme = "_ROCMCHECK_COMPLETE=fish_source rocmcheck > ~/.config/fish/completions/rocmcheck.fish"
    written = subprocess.run(["bash", "-c", readme], capture_output=True, text=True, env=env, timeout=120)
    assert written.returncode == 0 and written.stderr == "", written.stderr[-2000:]
    # fish loads that file itself the first time it completes `rocmcheck`
    script = "complete -C 'rocmcheck li'; complete -C 'rocmcheck lint --gp'"
    proc = subprocess.run(["fish", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert lines == ["lint", "--gpus"], proc.stdout
