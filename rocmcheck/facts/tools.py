"""Where an external tool is: the one locator every command uses (doctor, monitor, the probes, build-env).

PATH first, then the bin/ folder of each place ROCm may be (ROCM_PATH, ROCM_HOME, /opt/rocm: rocm_roots'
candidate roots), because ROCm's installers put rocminfo, amd-smi and hipconfig there without touching PATH.
Pure of side effects: it only looks at the file system."""

from __future__ import annotations

import os
import shutil
from typing import Mapping

from rocmcheck.facts.rocm_roots import candidate_roots


def find_tool(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The path of the executable `name`, or None when it is neither on PATH nor under a ROCm root."""
    env = os.environ if env is None else env
    found = shutil.which(name, path=env.get("PATH"))
    if found:
        return found
    for root in candidate_roots(env):
        candidate = os.path.join(root, "bin", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
