"""A `docker run` (or `podman run`, `nvidia-docker run`) command line -> DockerRun: the options that decide
whether a GPU is reachable inside the container, the image and the command it runs.

Written against the command lines in tests/fixtures/pastes/docker_run/ (the vLLM ROCm container started with
`--device /dev/kfd --device /dev/dri --group-add=video --ipc=host --security-opt seccomp=unconfined`, one
option per line with backslash continuations; `--device="/dev/kfd" --device="/dev/dri/renderD128"` quoted;
`sudo docker run -t -i floydhub/pytorch:latest-gpu-py3 ipython` with no GPU option at all). The command may be
split over lines with `\\`, wrapped in inline code, preceded by a prompt, or sit inside a sentence; the first
`docker run` in the text is read. Never raises.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.parsers._text import to_text

# `docker run` options that take a value (the next word, or after "="). Every other option is a flag. From
# `docker run --help` (Docker 24-27) and `podman run --help`.
_VALUE_OPTIONS = {
    "--add-host", "--annotation", "-a", "--attach", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-period", "--cpu-quota", "--cpu-rt-period",
    "--cpu-rt-runtime", "-c", "--cpu-shares", "--cpus", "--cpuset-cpus", "--cpuset-mems", "--detach-keys",
    "--device", "--device-cgroup-rule", "--device-read-bps", "--device-read-iops", "--device-write-bps",
    "--device-write-iops", "--dns", "--dns-option", "--dns-search", "--domainname", "--entrypoint", "-e", "--env",
    "--env-file", "--expose", "--gpus", "--group-add", "--health-cmd", "--health-interval", "--health-retries",
    "--health-start-period", "--health-timeout", "-h", "--hostname", "--ip", "--ip6", "--ipc", "--isolation",
    "--kernel-memory", "-l", "--label", "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt",
    "--mac-address", "-m", "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount",
    "--name", "--network", "--net", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform",
    "-p", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal",
    "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "--ulimit", "-u", "--user", "--userns", "--uts",
    "-v", "--volume", "--volume-driver", "--volumes-from", "-w", "--workdir", "--hooks-dir", "--device-cgroup",
}
_FLAG_LETTERS_WITH_VALUE = set("aceh lmpuvw".replace(" ", ""))
_DOCKER_ERROR = re.compile(r"docker: (?:Error response from daemon|unknown server OS|invalid reference format)[^\n]*")
_RUN = re.compile(r"(?:^|[\s`$#>;&|(])((?:sudo\s+(?:-\S+\s+)*)?(?:docker|podman|nvidia-docker)(?:\s+container)?"
                  r"\s+run)\b")


@dataclass
class DockerRun:
    found: bool = False  # the text holds a `docker run` command
    runtime: str | None = None  # "docker" | "podman" | "nvidia-docker"
    devices: list[str] = field(default_factory=list)  # --device values as given: "/dev/kfd", "/dev/dri/renderD128"
    gpus: str | None = None  # --gpus value ("all", '"device=0,1"')
    group_add: list[str] = field(default_factory=list)  # "video", "render", "44"
    ipc: str | None = None  # "host"
    shm_size: str | None = None  # "16G", "8g"
    security_opt: list[str] = field(default_factory=list)  # "seccomp=unconfined"
    privileged: bool = False
    cap_add: list[str] = field(default_factory=list)  # "SYS_PTRACE"
    network: str | None = None
    runtime_option: str | None = None  # --runtime value ("nvidia")
    volumes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # -e NAME=value (value "" when only NAME is given)
    user: str | None = None
    image: str | None = None
    command: list[str] = field(default_factory=list)  # what the container runs, after the image
    options: list[tuple[str, str | None]] = field(default_factory=list)  # every option in order, as given
    text: str = ""  # the command line as read (continuations joined)
    errors: list[str] = field(default_factory=list)  # docker's own refusals ("docker: Error response from daemon: ...")

    @property
    def device_paths(self) -> list[str]:
        """The host side of each --device ("/dev/kfd" from "/dev/kfd:/dev/kfd:rwm")."""
        return [d.split(":", 1)[0] for d in self.devices]


def _command_text(text: str) -> str | None:
    """The first `docker run` command in the text, its backslash-continued lines joined into one."""
    lines = to_text(text).splitlines()
    for i, raw in enumerate(lines[:20000]):
        m = _RUN.search(raw)
        if not m:
            continue
        parts = [raw[m.start(1):]]
        j = i
        while parts[-1].rstrip().endswith("\\") and j + 1 < len(lines) and len(parts) < 200:
            parts[-1] = parts[-1].rstrip()[:-1]
            j += 1
            parts.append(lines[j])
        joined = " ".join(p.strip() for p in parts)
        return joined.strip().strip("`").strip()[:8192]
    return None


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:  # an unbalanced quote
        return [t.strip("'\"") for t in text.split()]


def parse_docker_run(text: Any) -> DockerRun:
    """Never raises. `found` is False when the text holds no `docker run`. Written against
    tests/fixtures/pastes/docker_run/docker-run_rocm_unfenced-multiline_privileged_vllm-rocm_vllm-7207.txt,
    docker-run_rocm_StrixHalo_device-space-form_env-vars_bash-c_ROCm-5444.txt (and the rest of that folder) and
    corpus/41-ROCm-ROCm-docker-36.paste.txt."""
    run = DockerRun()
    raw = to_text(text)
    for m in _DOCKER_ERROR.finditer(raw[:1_000_000]):
        if len(run.errors) < 20 and m.group(0).strip() not in run.errors:
            run.errors.append(m.group(0).strip()[:500])
    command = _command_text(raw)
    if command is None:
        return run
    run.found, run.text = True, command
    tokens = _tokens(command)
    i = 0
    while i < len(tokens) and tokens[i] != "run":
        if tokens[i] in ("docker", "podman", "nvidia-docker"):
            run.runtime = tokens[i]
        i += 1
    i += 1
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            i += 1
            break
        if not token.startswith("-") or token == "-":
            break
        name, eq, value = token.partition("=")
        if eq:
            run.options.append((name, value))
            i += 1
        elif name in _VALUE_OPTIONS:
            value = tokens[i + 1] if i + 1 < len(tokens) else None
            run.options.append((name, value))
            i += 2
        elif not name.startswith("--") and len(name) > 2 and name[-1] in _FLAG_LETTERS_WITH_VALUE and \
                all(c.isalpha() for c in name[1:]):
            # "-it" is two flags; "-itv" would end in an option that takes the next word
            for letter in name[1:-1]:
                run.options.append((f"-{letter}", None))
            value = tokens[i + 1] if i + 1 < len(tokens) else None
            run.options.append((f"-{name[-1]}", value))
            i += 2
        elif not name.startswith("--") and len(name) > 2:
            for letter in name[1:]:
                run.options.append((f"-{letter}", None))
            i += 1
        else:
            run.options.append((name, None))
            i += 1
    if i < len(tokens):
        run.image = tokens[i]
        run.command = [t for t in tokens[i + 1:] if t not in ("\\",)][:200]
    for name, value in run.options:
        _apply(run, name, value)
    return run


def _apply(run: DockerRun, name: str, value: str | None) -> None:
    value = value.strip().strip("'\"") if isinstance(value, str) else value
    if name == "--device" and value:
        run.devices.append(value)
    elif name == "--gpus":
        run.gpus = value
    elif name == "--group-add" and value:
        run.group_add.append(value)
    elif name == "--ipc":
        run.ipc = value
    elif name == "--shm-size":
        run.shm_size = value
    elif name == "--security-opt" and value:
        run.security_opt.append(value)
    elif name == "--privileged":
        run.privileged = value is None or value.lower() != "false"
    elif name == "--cap-add" and value:
        run.cap_add.append(value)
    elif name in ("--network", "--net"):
        run.network = value
    elif name == "--runtime":
        run.runtime_option = value
    elif name in ("-v", "--volume") and value:
        run.volumes.append(value)
    elif name in ("-e", "--env") and value:
        key, _, val = value.partition("=")
        run.env[key] = val
    elif name in ("-u", "--user"):
        run.user = value
