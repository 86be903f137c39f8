"""NCCL / RCCL debug logs -> NcclLog, and nccl-tests / rccl-tests output -> NcclTests.

Written against tests/fixtures/pastes/nccl_log/ and nccl_tests/: NCCL 2.20.5's INFO lines in a container
("f9139b5956e9:4685:4685 [0] NCCL INFO Bootstrap : Using eth0:172.21.0.2<0>", "NCCL version 2.20.5+cuda12.4",
"cudaDriverVersion 12040"), the /dev/shm failures of three NCCL releases ("include/shm.h:28 NCCL WARN Call to
posix_fallocate failed: No space left on device", "misc/shmutils.cc:71 NCCL WARN Error: failed to extend
/dev/shm/nccl-X to N bytes", the same with ", error: No space left on device (28)" under CI timestamps),
the NET/Socket interface list with the "NCCL" prefix removed by its author, RCCL's "Missing "iommu=pt" from
kernel command line" WARN, "NCCL_MIN_NCHANNELS set by environment ..." lines, and rccl-tests' "# nThread 1 nGpus 2
..." header, "#  Rank  0 Pid ..." device lines and result rows. Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import read_lines

MAX_KEPT = 200
_CI_PREFIX = re.compile(r"^(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]\s|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s"
                        r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s|\[rank\d+\]:\s?)")
# host:pid:tid [dev] [file.cc:line] NCCL LEVEL message
_LINE = re.compile(r"^(?:(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+)?(?:(?P<src>\S+:\d+)\s+)?"
                   r"(?:NCCL\s+)?(?P<level>INFO|WARN|ERROR|TRACE|ABORT)\s+(?P<msg>.*)$")
_VERSION = re.compile(r"\b(NCCL|RCCL) version (\d+\.\d+(?:\.\w+)?\S*)")
_VIA = re.compile(r"\bvia\s+(\S+)")
_NET = re.compile(r"\bNET/(\w+)\s*:\s*(.*)$")
_NETWORK = re.compile(r"Using network (\w+)")
_BOOTSTRAP = re.compile(r"Bootstrap\s*:\s*Using\s+(\S+)")
_IFACE = re.compile(r"^\[(\d+)\]\s*([\w.:%-]+<\d+>)")
_ENV_SET = re.compile(r"\b(NCCL_\w+|RCCL_\w+)\s+set by environment to\s+(\S+)")
_ENV_IGNORED = re.compile(r"\b(NCCL_\w+|RCCL_\w+)\s+set by environment is ignored[^.]*")
_CHANNELS = re.compile(r"Channel\s+(\d+)/(\d+)")
_ERRORS = re.compile(r"No space left on device|failed to extend|Error while creating shared memory segment"
                     r"|posix_fallocate failed|Socket recv failed|Connection refused|ncclSystemError|ncclInternalError"
                     r"|ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError|NCCL error|unhandled system error"
                     r"|Cuda failure|HIP failure|timed out|Watchdog caught collective operation timeout")


@dataclass
class NcclLog:
    version: str | None = None  # "2.20.5+cuda12.4"
    rccl: bool | None = None  # True for RCCL (ROCm), False when the log names NCCL's CUDA build, None unknown
    info_lines: int = 0
    warn_lines: int = 0
    warnings: list[str] = field(default_factory=list)  # the WARN messages, de-duplicated, in order
    errors: list[str] = field(default_factory=list)  # lines naming a failure (shm, sockets, NCCL error codes)
    transports: list[str] = field(default_factory=list)  # "P2P/IPC", "SHM/direct/direct", "NET/Socket", "NET/IB"
    network: str | None = None  # "Socket" | "IB" (from "Using network X")
    interfaces: list[str] = field(default_factory=list)  # "eth0:172.21.0.2<0>", "bond0:192.168.1.161<0>"
    hosts: list[str] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)  # the "[N]" device of each line
    env: dict[str, str] = field(default_factory=dict)  # "NCCL_MIN_NCHANNELS" -> "112" ("ignored ..." when ignored)
    channels: int | None = None  # the largest "Channel NN/MM" total
    cuda_driver_version: str | None = None  # "12040"
    rocr_version: str | None = None  # "1.1"
    kernel_version: str | None = None  # "6.6.64-1"
    plugin: str | None = None  # the NET/Plugin line ("No plugin found (librccl-net.so)")

    @property
    def found(self) -> bool:
        return bool(self.version or self.info_lines or self.warn_lines or self.errors or self.interfaces)


def parse_nccl_log(text: Any) -> NcclLog:
    """Never raises. Written against tests/fixtures/pastes/nccl_log/nccl-INFO-log_NCCL-2.20.5+cuda12.4_2xA100-docker_
    NVIDIA-nccl-1703_excerpt.txt, nccl-shm-segment-error_failed-to-extend-dev-shm_nccl-tests-166_excerpt.txt (and
    the rest of that folder) and corpus/03-NVIDIA-nccl-342, corpus/38-NVIDIA-nccl-697."""
    log = NcclLog()
    in_interfaces = False
    for raw in read_lines(text):
        line = _CI_PREFIX.sub("", raw.strip(), count=1).strip()
        if not line:
            continue
        m = _VERSION.search(line)
        if m:
            log.version = log.version or m.group(2)
            if m.group(1) == "RCCL" or "rocm" in m.group(2).lower():
                log.rccl = True
            elif "cuda" in m.group(2).lower() and log.rccl is None:
                log.rccl = False
        if "librccl" in line or "ROCr version" in line or "/rccl/" in line or "hipify" in line:
            log.rccl = True
        m = _IFACE.match(line)
        if m and in_interfaces:
            _once(log.interfaces, m.group(2))
            continue
        in_interfaces = False
        m = _LINE.match(line)
        message = m.group("msg").strip() if m else line
        if m:
            if m.group("host"):
                _once(log.hosts, m.group("host"))
                dev = int(m.group("dev")) if len(m.group("dev")) < 5 else None
                if dev is not None and dev not in log.devices and len(log.devices) < 1024:
                    log.devices.append(dev)
            if m.group("level") == "WARN":
                log.warn_lines += 1
                _once(log.warnings, message[:500])
            elif m.group("level") == "INFO":
                log.info_lines += 1
        _message(log, message)
        if message.rstrip().endswith("Using") and "NET/Socket" in message:
            in_interfaces = True  # the interface list follows, one per line
        if _ERRORS.search(line):
            _once(log.errors, line[:500])
    return log


def _message(log: NcclLog, message: str) -> None:
    m = _VIA.search(message)
    if m and "Channel" in message:
        _once(log.transports, m.group(1))
    m = _NET.search(message)
    if m:
        _once(log.transports, f"NET/{m.group(1)}")
        if m.group(1) == "Plugin":
            log.plugin = log.plugin or m.group(2).strip()[:300]
        elif m.group(1) == "Socket" and "Using" in m.group(2):
            for iface in re.findall(r"\[\d+\]([\w.:%-]+<\d+>)", m.group(2)):
                _once(log.interfaces, iface)
    m = _NETWORK.search(message)
    if m:
        log.network = m.group(1)
    m = _BOOTSTRAP.search(message)
    if m:
        _once(log.interfaces, m.group(1))
    m = _ENV_SET.search(message)
    if m and len(log.env) < 100:
        log.env[m.group(1)] = m.group(2)
    m = _ENV_IGNORED.search(message)
    if m and len(log.env) < 100:
        log.env.setdefault(m.group(1), m.group(0)[len(m.group(1)):].strip())
    for m in _CHANNELS.finditer(message):
        total = int(m.group(2)) if len(m.group(2)) < 5 else 0
        log.channels = max(log.channels or 0, total) or log.channels
    m = re.search(r"cudaDriverVersion (\d+)", message)
    if m:
        log.cuda_driver_version = m.group(1)
    m = re.search(r"ROCr version (\S+)", message)
    if m:
        log.rocr_version = m.group(1)
    m = re.search(r"Kernel version: (\S+)", message)
    if m:
        log.kernel_version = m.group(1)


def _once(items: list, value: Any) -> None:
    if value not in items and len(items) < MAX_KEPT:
        items.append(value)


# ---- nccl-tests / rccl-tests -----------------------------------------------------------------------------------

_HEADER = re.compile(r"#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_TESTS_VERSION = re.compile(r"(?:rccl|nccl)-tests: Version (\S+)")
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]+)\]\s+(.+)$")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_REDOPS = {"sum", "prod", "max", "min", "avg", "none", "mulsum"}


@dataclass
class NcclTestRow:
    size: int  # bytes
    count: int
    type: str  # "float"
    redop: str | None  # "sum"; None for collectives without one
    root: int | None
    out_of_place: tuple[float | None, ...]  # (time us, algbw GB/s, busbw GB/s, #wrong)
    in_place: tuple[float | None, ...]


@dataclass
class NcclTests:
    version: str | None = None  # "develop:3f7f785"
    threads: int | None = None
    gpus: int | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)  # rank, pid, host, device, bus, name
    rows: list[NcclTestRow] = field(default_factory=list)
    avg_bus_bandwidth: float | None = None  # GB/s; printed only when the run finished
    out_of_bounds: int | None = None
    errors: list[str] = field(default_factory=list)  # "Test NCCL failure ...", "Test failure ..."

    @property
    def complete(self) -> bool:
        """The run reached its summary line (a hang leaves the table without it)."""
        return self.avg_bus_bandwidth is not None

    @property
    def found(self) -> bool:
        return bool(self.threads is not None or self.devices or self.rows or self.version)


def parse_nccl_tests(text: Any) -> NcclTests:
    """Never raises. Written against tests/fixtures/pastes/corpus/15-ROCm-rccl-1129.paste.txt and
    nccl_tests/rccl-tests_Missing-iommu-pt-WARN_2xMI100_kernel6.6.64_rccl-1454_excerpt.txt."""
    tests = NcclTests()
    for raw in read_lines(text):
        line = raw.strip()
        if not line:
            continue
        m = _HEADER.search(line)
        if m:
            tests.threads, tests.gpus = int(m.group(1)[:6]), int(m.group(2)[:6])
            continue
        m = _TESTS_VERSION.search(line)
        if m:
            tests.version = m.group(1)
            continue
        m = _RANK.match(line)
        if m and len(tests.devices) < 1024:
            tests.devices.append({"rank": int(m.group(1)[:6]), "pid": int(m.group(2)[:9]), "host": m.group(3),
                                  "device": int(m.group(4)[:6]), "bus": m.group(5), "name": m.group(6).strip()})
            continue
        m = _AVG.search(line)
        if m:
            tests.avg_bus_bandwidth = _num(m.group(1))
            continue
        m = _OOB.search(line)
        if m:
            tests.out_of_bounds = int(m.group(1)[:9])
            continue
        if "failure" in line.lower() and len(tests.errors) < 50:
            tests.errors.append(line[:500])
            continue
        if not line.startswith("#"):
            row = _row(line.split())
            if row is not None and len(tests.rows) < 1000:
                tests.rows.append(row)
    return tests


def _row(tokens: list[str]) -> NcclTestRow | None:
    if len(tokens) < 7 or not tokens[0].isdigit() or not tokens[1].isdigit() or len(tokens[0]) > 15:
        return None
    i = 2
    dtype = tokens[i]
    i += 1
    redop = tokens[i] if i < len(tokens) and tokens[i] in _REDOPS else None
    i += 1 if redop else 0
    root = None
    if i < len(tokens) and re.fullmatch(r"-?\d+", tokens[i]) and len(tokens) - i in (9, 5):
        root = int(tokens[i])
        i += 1
    numbers = [_num(t) for t in tokens[i:]]
    half = len(numbers) // 2
    return NcclTestRow(size=int(tokens[0]), count=int(tokens[1]), type=dtype, redop=redop, root=root,
                       out_of_place=tuple(numbers[:half]), in_place=tuple(numbers[half:]))


def _num(token: str) -> float | None:
    try:
        return float(token) if len(token) < 30 else None
    except ValueError:
        return None
