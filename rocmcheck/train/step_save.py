"""train.reload's scratch checkpoint of a model checked by its files (over saved_weights.FULL_RELOAD_MAX_BYTES),
saved while the last steps run instead of after them.

What the check proves is that save_pretrained, on this stack and into this folder, writes the model it was handed:
the files must hold the host copies bit for bit and the model's config. Which step's weights those are does not
change that (Trainer saves at its `save_steps` as the run goes on, too), so once the host buffers are ready (their
pages faulted in by saved_weights.HostBuffers while the model loads) the weights after that step are copied to
them, and save_pretrained writes them in a background thread while the remaining steps train. The write is one
core copying into the page cache or /dev/shm with the GIL let go (safetensors writes from the buffers' pointers),
and a GPU run's steps wait on the device, so the two overlap. A 7B in fp32 on fresh H200 VMs: the write took
14.8-18.5 s, and the run waited 7.8-11.4 s for it with the save begun after step 1, against 21.3 s after its 30
steps; its steps beside the write took a median 0.26-0.30 s (RESULTS.md section 18).

Only a scratch checkpoint is saved this way: a checkpoint asked for with --out holds the weights after the last
step, so it is saved after the steps, as is a model whose buffers are not ready before the last step. The step
is in the verdict's data and in info.reload.saved_after_step.
Imports torch.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import torch

from rocmcheck.train import saved_weights
from rocmcheck.train.outputs import checkpoint_folder


class SaveDuringSteps:
    """after_step(step) is called by the training loop after each finished step; the first call at which the host
    buffers are ready (or there are none to wait for) and at least one step is still to come copies the model's
    weights to the host and starts their save (saved_weights.BackgroundSave) into a new scratch checkpoint folder.
    A save that could not start keeps its exception in `error`, for the reload check to judge as it judges a save
    that fails after the steps. When no save started, take_buffers() hands the buffers to the check after the
    steps. close() lets everything go when the run ends before its reload check takes the save."""

    def __init__(self, model: torch.nn.Module, nbytes: int, steps: int | None,
                 buffers: saved_weights.HostBuffers | None) -> None:
        """steps: the run's steps; None when the save waits for them all (a checkpoint asked for with --out), so
        this only holds the buffers made ahead."""
        self.model, self.nbytes, self.steps = model, nbytes, steps
        self._buffers = buffers
        self.folder = contextlib.ExitStack()  # the scratch checkpoint folder, once made
        self.save_dir: Path | None = None
        self.saving: saved_weights.BackgroundSave | None = None
        self.error: Exception | None = None
        self.info: dict[str, Any] = {}  # host_copy_s, saved_in, saved_after_step: merged into info.reload
        self._declined = False  # the state dict cannot be copied one to one: saved after the steps, as before

    @property
    def started(self) -> bool:
        return self.saving is not None or self.error is not None

    @torch.no_grad()
    def after_step(self, step: int) -> None:
        """`step`: the 0-based index of the step just finished (its optimizer update done and waited for)."""
        if self.started or self._declined or self.steps is None or step + 1 >= self.steps:
            return
        if self._buffers is not None and not self._buffers.ready:
            return
        t0 = time.perf_counter()
        copies = None
        try:
            copies = saved_weights.host_copies(self.model.state_dict(), self._buffers)
            self._buffers = None  # taken by the copies (or let go, when there are none)
            if copies is None:
                self._declined = True
                return
            self.info["host_copy_s"] = round(time.perf_counter() - t0, 3)
            # Made after the copies, so whether the checkpoint fits in memory counts the memory they take.
            self.save_dir = self.folder.enter_context(checkpoint_folder(None, size_bytes=self.nbytes))
            self.info["saved_in"] = str(self.save_dir.parent.parent)  # /dev/shm or the temporary folder
            self.info["saved_after_step"] = step + 1
            self.saving = saved_weights.BackgroundSave(self.model, self.save_dir, copies)
        except Exception as exc:  # noqa: BLE001 - judged by the reload check (_Run._save_failed), like a late save
            self.error = exc
            self.folder.close()
            if copies is not None:
                copies.release()

    def take_buffers(self) -> saved_weights.HostBuffers | None:
        """The buffers made ahead, when no save started: the reload check after the steps fills them."""
        buffers, self._buffers = self._buffers, None
        return buffers

    def close(self, wait: bool = True) -> None:
        """Let the save, its folder and the buffers go. wait: let a write in progress finish first, so nothing writes
        into the folder after it is removed; without it (the run is being interrupted) the folder goes at once,
        anything the writing thread makes after that is swept as a folder of a process that is gone, and buffers
        still being faulted in are dropped without waiting (their thread ends on its own)."""
        saving, self.saving = self.saving, None
        try:
            if saving is not None and wait:
                saving.release()
        finally:
            self.folder.close()
            buffers, self._buffers = self._buffers, None
            if buffers is not None and wait:
                buffers.release()
