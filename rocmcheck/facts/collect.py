"""Collect every fact the checks read, once, concurrently, within a deadline.

The result, `Facts`, is plain data: it is what `doctor --out` writes and `doctor --bundle` reads
back, so the checks give the same verdicts on another machine without touching it.
"""

from __future__ import annotations

import glob
import grp
import os
import platform
import pwd
import resource
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

from rocmcheck.child import ChildRun, run_child
from rocmcheck.facts.extensions import collect_extensions
from rocmcheck.facts.health import collect_kernel_log, node_health
from rocmcheck.facts.host_resources import meminfo_bytes
from rocmcheck.facts.known import ALL, Known, everything, known_of_bundle, known_problem
from rocmcheck.facts.launch import LAUNCH_VARIABLES
from rocmcheck.facts.python_env import child_env_in
from rocmcheck.facts.redact import redact_env
from rocmcheck.facts.rocm_location import add_root, observe_layout
from rocmcheck.facts.tools import find_tool
from rocmcheck.runner import CommandResult, run_command
from rocmcheck.safe.files import read_head

BUNDLE_SCHEMA = 1

# Each command: (key, argv, timeout). Run only when the tool exists; argv[0] may be resolved under ROCm.
NVIDIA_QUERY_FIELDS = ["index", "name", "memory.total", "memory.used", "driver_version", "compute_cap", "uuid"]

# Environment variables that decide how the stack behaves. Values of secret-looking names are redacted.
ENV_NAMES = (
    "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "CUDA_HOME", "CUDA_PATH",
    "HSA_OVERRIDE_GFX_VERSION", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL", "PYTORCH_ROCM_ARCH", "TORCH_CUDA_ARCH_LIST", "GPU_ARCHS",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE", "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL",
    "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "HSA_NO_SCRATCH_RECLAIM",
    "TORCH_BLAS_PREFER_HIPBLASLT", "TORCH_BLAS_PREFER_CUBLASLT", "MAX_JOBS", "DS_ACCELERATOR", "DS_BUILD_OPS",
    "PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME",
    "LD_LIBRARY_PATH", "PATH", "container", "BNB_CUDA_VERSION", "BNB_ROCM_VERSION",
    # Where the job runs: a Slurm allocation (and the GPUs it was given), a Kubernetes pod.
    "SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_GPUS", "SLURM_JOB_GRES",
    "KUBERNETES_SERVICE_HOST",
    "TORCH_NCCL_HIGH_PRIORITY", "GPU_MAX_HW_QUEUES", *LAUNCH_VARIABLES,
)
ENV_PREFIXES = ("NCCL_", "RCCL_", "HF_", "TRANSFORMERS_", "DS_BUILD_", "HSA_", "HIP_", "ROCM_")


def in_env_domain(name: str) -> bool:
    """Whether the collector records this variable (when set): a name outside is never known."""
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)

# Files the checks read. Missing ones are recorded as None, so a bundle says "absent", not "unknown".
FILES = (
    "/etc/os-release", "/proc/cmdline", "/proc/sys/kernel/numa_balancing", "/proc/version",
    "/sys/module/amdgpu/version", "/sys/module/amdgpu/initstate", "/proc/1/cgroup",
    "/opt/rocm/.info/version", "/proc/driver/nvidia/version", "/proc/self/status",
)
PRESENCE = ("/.dockerenv", "/run/.containerenv", "/sys/module/amdgpu", "/sys/module/nvidia", "/dev/shm",
            "/var/run/secrets/kubernetes.io")

PACKAGES = (
    "torch", "triton", "pytorch-triton-rocm", "triton-rocm", "pytorch-triton", "flash-attn", "flash_attn",
    "deepspeed", "transformers", "accelerate", "peft", "llamafactory", "rocm", "rocm-sdk", "rocm-sdk-core",
    "nvidia-ml-py", "amdsmi", "bitsandbytes", "safetensors", "tokenizers", "numpy",
)


@dataclass
class Facts:
    schema: int = BUNDLE_SCHEMA
    collected_at: float = 0.0
    platform: dict[str, Any] = field(default_factory=dict)
    os_info: dict[str, Any] = field(default_factory=dict)  # distro's view: id, version, codename, like
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | None] = field(default_factory=dict)
    present: dict[str, bool] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)  # /dev/kfd, /dev/dri/* -> access
    user: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    rocm_layout: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, CommandResult] = field(default_factory=dict)
    packages: dict[str, str | None] = field(default_factory=dict)
    torch_requires: list[str] = field(default_factory=list)
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)  # child-process JSON per probe
    probe_runs: dict[str, CommandResult] = field(default_factory=dict)  # how each child ended
    deadline_hit: list[str] = field(default_factory=list)
    recorded_results: list[dict[str, Any]] = field(default_factory=list)  # GPU/train stages, for bundles
    node_health: dict[str, Any] = field(default_factory=dict)  # sysfs PCIe/RAS, governors, uptime (facts/health.py)
    launch: dict[str, Any] = field(default_factory=dict)  # the launcher's node rank / world (compare/launch.py), or {}
    extensions: dict[str, Any] = field(default_factory=dict)  # GPU code in libraries (facts/extensions.py)
    # What these facts know (rocmcheck/facts/known.py): group -> "all" | [key, ...]; a group left out is not known.
    # Facts made in code without it claim every group, as a live collection of everything does.
    known: Known = field(default_factory=everything)

    def command(self, key: str) -> CommandResult | None:
        return self.commands.get(key)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["commands"] = {k: v.to_dict() for k, v in self.commands.items()}
        d["probe_runs"] = {k: v.to_dict() for k, v in self.probe_runs.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Facts":
        if not isinstance(d, dict) or d.get("schema") != BUNDLE_SCHEMA:
            raise ValueError(f"not a rocmcheck bundle of schema {BUNDLE_SCHEMA}")
        given = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        blank = cls()
        for key, value in given.items():  # a hand-edited or truncated bundle must fail here, not in a check
            want = type(getattr(blank, key))
            if not isinstance(value, (int, float) if want in (int, float) else want):
                raise ValueError(f"field {key!r} should be {want.__name__}, not {type(value).__name__}")
        for key in ("probes", "commands", "probe_runs", "devices"):
            bad = [k for k, v in given.get(key, {}).items() if not isinstance(v, dict)]
            if bad:
                raise ValueError(f"{key}[{bad[0]!r}] should be an object")
        if "known" in given and known_problem(given["known"]):
            raise ValueError(known_problem(given["known"]))
        given["known"] = known_of_bundle(d)  # a bundle without it: the groups it holds are known whole
        facts = cls(**given)
        facts.commands = {k: CommandResult.from_dict(v) for k, v in (d.get("commands") or {}).items()}
        facts.probe_runs = {k: CommandResult.from_dict(v) for k, v in (d.get("probe_runs") or {}).items()}
        return facts


def _read(path: str) -> str | None:
    return read_head(path, 200_000)


def _device_access(path: str) -> dict[str, Any]:
    info: dict[str, Any] = {"exists": os.path.exists(path)}
    if not info["exists"]:
        return info
    try:
        st = os.stat(path)
        info["mode"] = stat.filemode(st.st_mode)
        info["gid"] = st.st_gid
        try:
            info["group"] = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            info["group"] = None
    except OSError as exc:
        info["stat_error"] = str(exc)
    info["readable"] = os.access(path, os.R_OK)
    info["writable"] = os.access(path, os.W_OK)
    return info


def _user() -> dict[str, Any]:
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None  # containers often run a uid with no passwd entry
    groups = []
    for gid in os.getgroups():
        try:
            groups.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            groups.append(str(gid))
    known = {}
    for g in ("render", "video"):
        try:
            known[g] = grp.getgrnam(g).gr_gid
        except KeyError:
            known[g] = None
    return {"uid": uid, "name": name, "groups": sorted(set(groups)), "group_ids": known}


def _limits() -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    shm = None
    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_blocks * st.f_frsize
    except OSError:
        pass
    mem_total = meminfo_bytes(_read("/proc/meminfo"), "MemTotal")
    return {"memlock_soft": soft, "memlock_hard": hard, "unlimited": resource.RLIM_INFINITY,
            "shm_bytes": shm, "mem_total_bytes": mem_total, "cpu_count": os.cpu_count()}


def package_versions() -> tuple[dict[str, str | None], list[str]]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    requires: list[str] = []
    if versions.get("torch"):
        try:
            requires = list(metadata.requires("torch") or [])
        except metadata.PackageNotFoundError:
            pass
    return versions, requires


def os_info(os_release_path: str | None = None) -> dict[str, Any]:
    """distro's view of the OS: of this machine, or of a saved os-release file."""
    import distro

    if os_release_path is None:
        dist = distro.LinuxDistribution()
    else:
        dist = distro.LinuxDistribution(include_lsb=False, os_release_file=os_release_path,
                                        distro_release_file="/dev/null", include_uname=False, include_oslevel=False)
    info = dict(dist.info(best=True))
    info["name"] = dist.name(pretty=True)
    return info


# Two children in parallel. The Python stack: torch imported once for flash-attn and DeepSpeed (measured on the
# 2-core CI box: 2.2 s for one such child against 3.2 s for a torch child and a DeepSpeed child side by side,
# benchmarks/RESULTS.md). The vendor bindings: no torch, a tenth of a second, and they talk to the driver, so a
# wedged GPU that hangs amdsmi_init() is blamed on them alone; they run even when no torch-reading check does.
STACK_PROBES = ("torch", "flash_attn", "deepspeed")
BINDING_PROBES = ("nvml", "amdsmi")
PYTHON_PROBES = STACK_PROBES + BINDING_PROBES
# Asked of another interpreter than rocmcheck's own (--python, an active environment): its version and packages.
ENVIRONMENT_PROBE = "environment"
# The facts read in rocmcheck's own process that belong to the judged Python: from ENVIRONMENT_PROBE when that is
# another interpreter.
ENVIRONMENT_GROUPS = ("packages", "torch_requires", "extensions")
DEADLINE_GRACE_S = 5.0


def probe_answers(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{probe name: its data} from a python_probe child's events (ChildRun.events: the child protocol already
    parsed its stdout); events of another kind or shape are left out. The child answers each probe once: a probe
    answered more than once was written for by something else in the child (code an import ran can reach the
    channel's descriptor), so none of its answers is believed. Never raises."""
    answers: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for e in events:
        if e.get("event") == "probe" and isinstance(e.get("probe"), str) and isinstance(e.get("data"), dict):
            answers[e["probe"]] = e["data"]
            counts[e["probe"]] = counts.get(e["probe"], 0) + 1
    for name, count in counts.items():
        if count > 1:
            answers[name] = {"installed": True, "error": f"the probe answered {count} times: something its import "
                                                         "ran wrote to the probe's channel"}
    return answers


def _python_probe(names: list[str] | tuple[str, ...], timeout: float, python: str | None = None) -> ChildRun:
    """The probe child, in rocmcheck's own interpreter or in `python` (another environment's, where rocmcheck need
    not be installed: rocmcheck/facts/python_env.py)."""
    request = {"probes": list(names)}
    with child_env_in(python) as env:
        return run_child("rocmcheck.facts.python_probe", request, timeout, env=env, python=python)


def _run_group(group: tuple[str, ...], timeout: float, python: str | None = None
               ) -> tuple[dict[str, dict[str, Any]], dict[str, CommandResult]]:
    """One child for the group. If it dies part-way, the probe it was on is the culprit; the ones after it are
    re-run one per child (when it crashed) or left unreported (when it hung: the time is gone)."""
    run = _python_probe(group, timeout, python)
    probes = probe_answers(run.events)
    runs: dict[str, CommandResult] = {name: run.command for name in group if name in probes}
    missing = [n for n in group if n not in probes]
    if not missing:
        return probes, runs
    runs[missing[0]] = run.command  # the child stopped while probing this one
    for name in missing[1:]:
        if run.hung:
            continue  # not reached: CheckContext.probe_failure says so
        single = _python_probe([name], timeout, python)
        runs[name] = single.command
        probes.update(probe_answers(single.events))
    return probes, runs


def run_python_probes(timeout: float, stack: bool = True, python: str | None = None
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, CommandResult]]:
    """The stack probes (in `python` when given, its environment's facts asked first) and the vendor bindings (in
    rocmcheck's own interpreter: they read the GPUs, not the person's stack)."""
    in_target = ((ENVIRONMENT_PROBE,) if python else ()) + (STACK_PROBES if stack else ())
    groups = [(g, p) for g, p in ((in_target, python), (BINDING_PROBES, None)) if g]
    probes: dict[str, dict[str, Any]] = {}
    runs: dict[str, CommandResult] = {}
    pool = ThreadPoolExecutor(max_workers=len(groups))
    try:
        for found, ran in pool.map(lambda g: _run_group(g[0], timeout, g[1]), groups):
            probes.update(found)
            runs.update(ran)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # never wait on an error: see collect_facts
    return probes, runs


# The groups collected in this process (no tool, no child): known whole once read. `launch` is filled by the doctor
# from its own options ({} when not under a launcher).
IN_PROCESS_GROUPS = ("platform", "os_info", "env", "files", "present", "devices", "user", "limits", "rocm_layout",
                     "packages", "torch_requires", "node_health", "extensions", "launch")
KERNEL_LOG_KEYS = ("kernel-log-journalctl", "kernel-log-dmesg")
# Host tools read for the host configuration checks (checks/host_config.py): Secure Boot, the DKMS modules, the
# processes already on the GPUs, the xGMI links' state, the CPER error records amdgpu kept (root only), and the
# GPUs' firmware versions (the PLDM bundle).
HOST_TOOL_KEYS = ("mokutil-sb-state", "dkms-status", "amd-smi-process", "nvidia-smi-apps", "amd-smi-xgmi-links",
                  "amd-smi-cper", "amd-smi-firmware")
# Every key `commands` can hold: a key missing from a whole collection is a tool that is not installed.
COMMAND_KEYS = ("rocminfo", "hipconfig", "amd-smi-static", "amd-smi-version", "rocm-smi", "rocm-smi-json",
                "nvidia-smi-query", "nvidia-smi", "nvidia-smi-health") + KERNEL_LOG_KEYS + HOST_TOOL_KEYS
# NVIDIA's per-process query (nvidia-smi --help-query-compute-apps).
NVIDIA_APPS_FIELDS = ["pid", "process_name", "used_memory"]


def gpu_device_paths() -> list[str]:
    """The device files a GPU is reached through: /dev/kfd (AMD's compute interface, listed whether or not it
    exists), /dev/dri/renderD* and /dev/nvidia0.. that exist."""
    return ["/dev/kfd"] + sorted(glob.glob("/dev/dri/renderD*")) + sorted(glob.glob("/dev/nvidia[0-9]*"))


def collect_facts(deadline_s: float = 60.0, command_timeout_s: float = 20.0,
                  probe_timeout_s: float = 45.0, python_probes: bool = True,
                  on_commands_done: Callable[[Facts], None] | None = None, python: Any = None) -> Facts:
    """Gather everything. Commands and child probes run in parallel; nothing outlives deadline_s.
    on_commands_done(facts) is called once the system facts and tool outputs are in, while the Python
    probes (the torch import, the slow part) may still run: the doctor judges what it can meanwhile.
    python: the TargetPython to judge (facts/python_env.py), or None for rocmcheck's own: its version, packages
    and installed GPU libraries are read by its probe child instead of in this process."""
    target = python.executable if python is not None else None
    start = time.monotonic()
    # No single job may outlive the deadline: the pool's threads are joined at interpreter exit, so a
    # straggler would hold the doctor open after it printed (a hung rocminfo must end with the deadline).
    command_timeout_s = min(command_timeout_s, deadline_s)
    probe_timeout_s = min(probe_timeout_s, deadline_s)
    env = redact_env(os.environ, ENV_NAMES, ENV_PREFIXES)
    raw_env = dict(os.environ)
    facts = Facts(collected_at=time.time(), known={})  # each group is marked known as it is collected

    jobs: dict[str, Callable[[], CommandResult]] = {}
    rocminfo = find_tool("rocminfo", raw_env)
    if rocminfo:
        jobs["rocminfo"] = lambda: run_command([rocminfo], timeout=command_timeout_s)
    hipconfig = find_tool("hipconfig", raw_env)
    if hipconfig:
        jobs["hipconfig"] = lambda: run_command([hipconfig, "--full"], timeout=command_timeout_s)
    amd_smi = find_tool("amd-smi", raw_env)
    rocm_smi = find_tool("rocm-smi", raw_env)
    if amd_smi:
        jobs["amd-smi-static"] = lambda: run_command([amd_smi, "static", "--json"], timeout=command_timeout_s)
        jobs["amd-smi-version"] = lambda: run_command([amd_smi, "version"], timeout=command_timeout_s)
        # The links' state as the driver keeps it: no traffic is sent.
        jobs["amd-smi-xgmi-links"] = lambda: run_command([amd_smi, "xgmi", "--link-status"],
                                                         timeout=command_timeout_s)
        jobs["amd-smi-cper"] = lambda: run_command([amd_smi, "ras", "--cper"], timeout=command_timeout_s)
        jobs["amd-smi-firmware"] = lambda: run_command([amd_smi, "firmware"], timeout=command_timeout_s)
    if rocm_smi:
        jobs["rocm-smi"] = lambda: run_command([rocm_smi], timeout=command_timeout_s)
        jobs["rocm-smi-json"] = lambda: run_command(
            [rocm_smi, "--showproductname", "--showmeminfo", "vram", "--json"], timeout=command_timeout_s)
    nvidia_smi = find_tool("nvidia-smi", raw_env)
    if nvidia_smi:
        jobs["nvidia-smi-query"] = lambda: run_command(
            [nvidia_smi, "--query-gpu=" + ",".join(NVIDIA_QUERY_FIELDS), "--format=csv,noheader,nounits"],
            timeout=command_timeout_s)
        jobs["nvidia-smi"] = lambda: run_command([nvidia_smi], timeout=command_timeout_s)
        jobs["nvidia-smi-health"] = lambda: run_command([nvidia_smi, "-q", "-d", "ECC,PERFORMANCE"],
                                                        timeout=command_timeout_s)
    # The processes on the GPUs are listed once rocmcheck's own torch child has ended, so it is never among them.
    late: dict[str, list[str]] = {}
    if nvidia_smi:
        late["nvidia-smi-apps"] = [nvidia_smi, "--query-compute-apps=" + ",".join(NVIDIA_APPS_FIELDS),
                                   "--format=csv,noheader,nounits"]
    if amd_smi:
        late["amd-smi-process"] = [amd_smi, "process"]
    for key, argv in (("mokutil-sb-state", ["mokutil", "--sb-state"]), ("dkms-status", ["dkms", "status"])):
        tool = find_tool(argv[0], raw_env)
        if tool:
            jobs[key] = lambda tool=tool, argv=argv: run_command([tool, *argv[1:]], timeout=command_timeout_s)

    # Not `with`: its exit waits for every job, so an exception here (KeyboardInterrupt while rocminfo hangs) would
    # be held until the last command's timeout. The jobs end on their own timeouts, or with rocmcheck's stop.
    pool = ThreadPoolExecutor(max_workers=len(jobs) + len(late) + 2)
    try:
        futures = {pool.submit(fn): ("cmd", key) for key, fn in jobs.items()}
        # The torch child is the one expensive fact: skipped when no selected check reads it.
        probe_job = pool.submit(run_python_probes, probe_timeout_s, python_probes, target)
        futures[probe_job] = ("probe", "python")
        for key, argv in late.items():
            futures[pool.submit(_after, probe_job, argv, start + deadline_s, command_timeout_s)] = ("late", key)
        futures[pool.submit(collect_kernel_log, command_timeout_s, raw_env)] = ("cmds", "kernel-log-journalctl")
        # Cheap in-process facts while the children run.
        facts.platform = {
            "system": platform.system(), "machine": platform.machine(), "kernel": platform.release(),
            "node": platform.node(),
            "python": platform.python_version(), "executable": sys.executable,
        }
        if python is not None:  # the judged Python is another one: its own answers replace these (below)
            facts.platform.update(rocmcheck_executable=sys.executable, python_source=python.source,
                                  executable=python.executable, python=python.version or None)
        facts.os_info = os_info()
        facts.env = env
        facts.files = {p: _read(p) for p in FILES}
        facts.present = {p: os.path.exists(p) for p in PRESENCE}
        facts.devices = {p: _device_access(p) for p in gpu_device_paths()}
        facts.devices.setdefault("/dev/dri", _device_access("/dev/dri"))
        facts.user = _user()
        facts.limits = _limits()
        facts.rocm_layout = observe_layout(raw_env)
        if python is None:
            facts.packages, facts.torch_requires = package_versions()
        facts.node_health = node_health(raw_env)
        if python is None:
            facts.extensions = collect_extensions(PACKAGES, raw_env)
        facts.known.update({group: ALL for group in IN_PROCESS_GROUPS
                            if python is None or group not in ENVIRONMENT_GROUPS})

        # Every job's own timeout is clamped to the deadline, so they all end by then; the grace covers the
        # kill and, for the Python probes, a re-run of a crashed probe on its own.
        remaining = max(0.0, deadline_s - (time.monotonic() - start)) + DEADLINE_GRACE_S
        early: set = set()
        if on_commands_done is not None:
            early, _ = wait([f for f, (kind, _) in futures.items() if kind in ("cmd", "cmds")], timeout=remaining)
            for fut in early:
                if futures[fut][0] == "cmd":
                    _record_command(facts, futures[fut][1], fut.result(), deadline_s)
                else:
                    facts.commands.update(fut.result())
            # A tool still running is not known yet; one that was never started (not installed) is known absent.
            running = {futures[f][1] for f in futures if futures[f][0] in ("cmd", "late") and f not in early}
            if any(futures[f][0] == "cmds" and f not in early for f in futures):
                running |= set(KERNEL_LOG_KEYS)
            facts.known["commands"] = [k for k in COMMAND_KEYS if k not in running] if running else ALL
            on_commands_done(facts)
            remaining = max(0.0, deadline_s - (time.monotonic() - start)) + DEADLINE_GRACE_S
        done, not_done = wait([f for f in futures if f not in early], timeout=remaining)
        for fut in done:
            kind, key = futures[fut]
            if kind in ("cmd", "late"):
                _record_command(facts, key, fut.result(), deadline_s)  # run_command never raises
            elif kind == "cmds":
                facts.commands.update(fut.result())
            else:
                facts.probes, facts.probe_runs = fut.result()
                if python is not None:
                    _take_environment(facts)
                facts.deadline_hit += [n for n, r in facts.probe_runs.items() if n not in facts.probes
                                       and r.timed_out and r.timeout_s is not None and r.timeout_s >= deadline_s]
        for fut in not_done:
            kind, key = futures[fut]
            facts.deadline_hit.append(key)
            placeholder = CommandResult(argv=[key], timed_out=True, timeout_s=deadline_s)
            if kind in ("cmd", "cmds", "late"):
                facts.commands[key] = placeholder
            else:
                facts.probe_runs = {name: placeholder for name in (PYTHON_PROBES if python_probes else BINDING_PROBES)}
        # Every job has ended or is recorded as hung (a hang is a fact: its CommandResult says so).
        facts.known["commands"] = ALL
        probed = ALL if python_probes else list(BINDING_PROBES)  # the stack probes not run are not known
        facts.known["probes"] = probed
        facts.known["probe_runs"] = probed
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    _observe_hipconfig_root(facts)
    return facts


def _take_environment(facts: Facts) -> None:
    """The judged interpreter's own answer (ENVIRONMENT_PROBE) into the facts this process would have read; when
    it gave none (it crashed, hung, or could not run rocmcheck's probe), those facts stay not known and the
    platform says why."""
    answer = facts.probes.pop(ENVIRONMENT_PROBE, None)
    run = facts.probe_runs.pop(ENVIRONMENT_PROBE, None)
    if not isinstance(answer, dict) or "packages" not in answer:
        why = (answer or {}).get("error") or (answer or {}).get("import_error") if isinstance(answer, dict) else None
        facts.platform["python_error"] = why or (run.describe_failure() if run is not None else "no answer")
        return
    facts.platform.update(python=answer.get("python"), executable=answer.get("executable") or
                          facts.platform.get("executable"))
    facts.packages = answer.get("packages") or {}
    facts.torch_requires = list(answer.get("torch_requires") or [])
    facts.extensions = answer.get("extensions") or {}
    facts.known.update({group: ALL for group in ENVIRONMENT_GROUPS})


def _after(first: Any, argv: list[str], deadline: float, timeout: float) -> CommandResult:
    """Run argv once the job `first` has ended, within what is left of the deadline (time.monotonic())."""
    try:
        first.result(timeout=max(0.0, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001 - a probe that failed or is late: the command still runs in the time left
        pass
    return run_command(argv, timeout=max(1.0, min(timeout, deadline - time.monotonic())))


def _record_command(facts: Facts, key: str, result: CommandResult, deadline_s: float) -> None:
    facts.commands[key] = result
    if result.timed_out and result.timeout_s is not None and result.timeout_s >= deadline_s:
        facts.deadline_hit.append(key)


def _observe_hipconfig_root(facts: Facts) -> None:
    """hipconfig names the ROCm root it belongs to (ROCM_PATH=/usr for distribution packages): observe it too."""
    from rocmcheck.facts.parsers.hipconfig import parse_hipconfig

    res = facts.commands.get("hipconfig")
    if res is not None and res.ok:
        add_root(facts.rocm_layout, parse_hipconfig(res.stdout).rocm_path)


# build-env --arch auto waits this long for each of rocminfo and nvidia-smi; one that has not answered by then is
# called hung, and build-env says so instead of "no GPU found".
ARCH_DETECT_TIMEOUT_S = 10.0


def detect_gpu_archs_why(timeout: float = ARCH_DETECT_TIMEOUT_S) -> tuple[list[str], list[str]]:
    """The GPU archs of this machine (["gfx942"], ["sm_90"]; [] when none is found), read from rocminfo (AMD)
    then nvidia-smi (NVIDIA) only, for build-env --arch auto; and one line per tool that gave no usable answer
    (hung, crashed, failed), so "no GPU found" is said only when the tools ran and saw none."""
    from rocmcheck.facts.parsers.rocminfo import parse_rocminfo
    from rocmcheck.knowledge import cuda_arch_from_capability

    failures: list[str] = []
    rocminfo = find_tool("rocminfo")
    if rocminfo:
        res = run_command([rocminfo], timeout=timeout)
        report = parse_rocminfo(res.stdout)
        archs = [a.name for a in report.gpus if a.name.startswith("gfx")]
        if archs:
            return list(dict.fromkeys(archs)), failures
        if not res.ok:
            failures.append(res.describe_failure())
    nvidia_smi = find_tool("nvidia-smi")
    if nvidia_smi:
        res = run_command([nvidia_smi, "--query-gpu=compute_cap", "--format=csv,noheader,nounits"], timeout=timeout)
        if not res.ok:
            failures.append(res.describe_failure())
        if res.ok:
            caps = [line.strip() for line in res.stdout.splitlines() if line.strip()]
            out = []
            for cap in caps:
                major, _, minor = cap.partition(".")
                if major.isdigit() and minor.isdigit():
                    out.append(cuda_arch_from_capability(major, minor))
            return list(dict.fromkeys(out)), failures
    return [], failures
