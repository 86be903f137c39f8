"""The go file: how the GPU stage releases a probe child it started ahead. The child imports torch and sets up
what it can, then waits until the file holds "go" (run) or "stop" (leave quietly); the parent writes the word
once, whole (say). GoFile is the parent's side: the file in a scratch folder of its own. No torch here."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rocmcheck.safe.scratch_folders import make_folder, remove_folder

POLL_S = 0.02  # how often a waiting child looks: a go is seen within this, a wait costs no CPU to speak of


def wait_for_go(go_file: str, timeout_s: float) -> str:
    """"go" or "stop" from the parent's go file; "stop" when it never comes within timeout_s."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with open(go_file, encoding="utf-8") as fh:
                return fh.read().strip() or "stop"
        except FileNotFoundError:
            time.sleep(POLL_S)
    return "stop"


def say(go_file: str, word: str) -> None:
    """Write "go" or "stop" whole: the waiting child never reads half a word."""
    tmp = go_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(word)
    os.replace(tmp, go_file)


class GoFile:
    """The parent's go file, in a scratch folder of its own (kind "go"): `path` goes in the child's request; tell
    writes the first word said and ignores any later one; remove takes the folder away once the child is done."""

    def __init__(self) -> None:
        self._folder: Path = make_folder("go")
        self.path = str(self._folder / "go")
        self.told = False

    def tell(self, word: str) -> None:
        if not self.told:
            self.told = True
            say(self.path, word)

    def remove(self) -> None:
        remove_folder(self._folder)
