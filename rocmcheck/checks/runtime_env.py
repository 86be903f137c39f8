"""Runtime variables that are set and wrong for fine-tuning: allocator, TunableOp, BLAS, RCCL channels, HSA.

Each judgement names its source; nothing here fires when the variable is unset (the defaults are right).
"""

from __future__ import annotations

import re

from packaging.version import Version

from rocmcheck import fixes
from rocmcheck.checks import check, ib_settings
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.facts.health import tunableop_filename
from rocmcheck.facts.known import describe
from rocmcheck.facts.launch import LAUNCH_VARIABLES, read_launch
from rocmcheck.knowledge import load
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

ALLOC_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
# torch 2.9 reads the device-generic PYTORCH_ALLOC_CONF (c10/core/AllocatorConfig.cpp); older builds read the
# HIP variable on ROCm and the CUDA one on CUDA.
GENERIC_ALLOC_VAR_MIN_TORCH = Version("2.9")
# Options of the caching allocator (c10/cuda/CUDAAllocatorConfig.cpp); an unknown one raises
# "Unrecognized CachingAllocator option" at the first allocation.
ALLOC_OPTIONS = {
    "max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold", "roundup_power2_divisions",
    "expandable_segments", "release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "backend",
    "pinned_use_cuda_host_register", "pinned_use_hip_host_register", "pinned_num_register_threads",
    "pinned_use_background_threads", "per_process_memory_fraction", "graph_capture_record_stream_reuse",
    "pinned_reserve_segment_size_mb",
}
# expandable_segments entered the caching allocator in April 2023 (pytorch/pytorch#99933: "Now that expandable_segments
# has been merged from OSS"), after torch 2.0: torch 2.0.x raises "Unrecognized CachingAllocator option:
# expandable_segments" (deepseek-ai/DeepSeek-VL2#103, ZhengPeng7/BiRefNet#179, both torch 2.0.1).
EXPANDABLE_MIN_TORCH = Version("2.1")
# max_split_size_mb with expandable_segments:True: a live allocation reads back as zeros on ROCm 7.14 (torch 2.12 and
# 2.14 nightlies, ROCm/ROCm#6603); the ROCm 7.2 builds did not. The upstream fix is pytorch/pytorch#193400.
ZEROS_ROCM_SERIES = ("7.14",)
# expandable_segments on ROCm: a no-op ("expandable_segments not supported on this platform") until
# pytorch/pytorch#177974 (release/2.11, ROCm/pytorch#3106), gated on ROCm >= 7.0 (pytorch/pytorch#179930).
EXPANDABLE_ROCM_MIN_TORCH = Version("2.11")
EXPANDABLE_ROCM_MIN_HIP = Version("7.0")
# torch prefers hipBLASLt by default on these archs (ROCm/pytorch#2053, #2125, #2169).
HIPBLASLT_PREFERRED_ARCHS = {"gfx90a", "gfx942", "gfx950", "gfx1200", "gfx1201"}
# AMD's training system-validation runs RCCL with NCCL_MIN_NCHANNELS=40 (knowledge/rccl_settings.json, from its
# prerequisite-system-validation page), its MI300X inference guide with 112 (.../inference-optimization/workload).
RCCL_MI300X_MIN_CHANNELS = int(load("rccl_settings.json")["settings"]["NCCL_MIN_NCHANNELS"]["value"])
TUNABLEOP_VARS = ("PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME")


def _version(text: str | None) -> Version | None:
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?)", text or "")
    try:
        return Version(m.group(1)) if m else None
    except ValueError:  # InvalidVersion, or more digits than int() takes
        return None


def _archs(ctx: CheckContext) -> set[str]:
    return {g.arch for g in ctx.amd_gpus if g.arch}


@check("env.alloc_conf", "PyTorch allocator settings (PYTORCH_*_ALLOC_CONF) valid for this build")
def check_alloc_conf(ctx: CheckContext) -> CheckResult:
    setvars = ctx.env_vars(ALLOC_VARS)
    if not setvars:
        return passed("no allocator variable set (PyTorch defaults)")
    evidence = [f"{k}={v}" for k, v in setvars.items()]
    fails: list[str] = []  # torch raises, or computes wrong
    warns: list[str] = []  # torch ignores it
    for var, value in setvars.items():
        for item in filter(None, (p.strip() for p in value.split(","))):
            key, sep, val = item.partition(":")
            if not sep or not val.strip():
                fails.append(f"{var}: '{item}' is not key:value (torch raises at the first GPU allocation)")
            elif key.strip() not in ALLOC_OPTIONS:
                fails.append(f"{var}: unknown option '{key.strip()}' (torch raises 'Unrecognized CachingAllocator "
                             "option' at the first GPU allocation)")
    expandable = any(re.search(r"expandable_segments\s*:\s*true", v, re.I) for v in setvars.values())
    both_spellings = "PYTORCH_HIP_ALLOC_CONF" in setvars and "PYTORCH_CUDA_ALLOC_CONF" in setvars \
        and setvars["PYTORCH_HIP_ALLOC_CONF"] != setvars["PYTORCH_CUDA_ALLOC_CONF"]
    torch = {}
    if expandable or both_spellings:  # these depend on the torch build: it must be known
        torch = (ctx.torch or {}) if not fails else (known_or_none(lambda: ctx.torch) or {})
    tv, hv = _version(torch.get("version")), _version(torch.get("hip"))
    rocm = bool(torch.get("hip"))
    too_old = bool(expandable and tv and tv < EXPANDABLE_MIN_TORCH)
    expandable_noop = not too_old and rocm and bool(
        (tv and tv < EXPANDABLE_ROCM_MIN_TORCH) or (hv and hv < EXPANDABLE_ROCM_MIN_HIP))
    if too_old:
        fails.append(f"expandable_segments is unknown to torch {tv} (the option arrived in torch "
                     f"{EXPANDABLE_MIN_TORCH}): torch raises 'Unrecognized CachingAllocator option: "
                     "expandable_segments' at the first GPU allocation")
    elif expandable and expandable_noop:
        warns.append(f"expandable_segments:True does nothing with torch {tv} on ROCm {hv}: torch prints "
                     "'expandable_segments not supported on this platform' (supported from torch 2.11 on ROCm 7.0)")
    zeros = rocm and hv is not None and f"{hv.major}.{hv.minor}" in ZEROS_ROCM_SERIES and any(
        re.search(r"expandable_segments\s*:\s*true", v, re.I) and re.search(r"max_split_size_mb\s*:", v)
        for v in setvars.values())
    if zeros:
        fails.append(f"max_split_size_mb with expandable_segments:True on ROCm {hv.major}.{hv.minor}: a live "
                     "allocation can read back as zeros (ROCm/ROCm#6603; the fix, pytorch/pytorch#193400, lets "
                     "expandable segments reuse blocks larger than max_split_size)")
    if rocm and both_spellings:
        warns.append("PYTORCH_HIP_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF differ: only one of them is read")
    problems = fails + warns
    if problems:
        fix = _alloc_fix(ctx, setvars, tv, drop_expandable=expandable_noop or too_old, drop_max_split=zeros,
                         cuda=bool(torch.get("cuda")) and not rocm)
        return (failed if fails else warned)(problems[0], fix, problems + evidence)
    return passed("allocator options recognised", evidence)


def _alloc_fix(ctx: CheckContext, setvars: dict[str, str], torch_version: Version | None, *,
               drop_expandable: bool, drop_max_split: bool = False, cuda: bool = False) -> fixes.Fix:
    """One variable with the options this torch knows: the one already set when there is one, else the one this
    torch reads (PYTORCH_ALLOC_CONF from 2.9, else the HIP or CUDA one). Its value comes from that variable when
    it is set, else from the first set one in ALLOC_VARS order; unknown keys, pieces that are not key:value and
    (where it does nothing) expandable_segments are dropped."""
    if len(setvars) == 1:
        target = next(iter(setvars))
    elif torch_version and torch_version >= GENERIC_ALLOC_VAR_MIN_TORCH:
        target = "PYTORCH_ALLOC_CONF"
    else:
        target = "PYTORCH_CUDA_ALLOC_CONF" if cuda else "PYTORCH_HIP_ALLOC_CONF"
    source = target if target in setvars else next(v for v in ALLOC_VARS if v in setvars)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for item in filter(None, (p.strip() for p in setvars[source].split(","))):
        key, sep, val = (x.strip() for x in item.partition(":"))
        if sep and val and key in ALLOC_OPTIONS and not (drop_expandable and key == "expandable_segments") \
                and not (drop_max_split and key == "max_split_size_mb"):
            kept.setdefault(key, f"{key}:{val}")
        elif key == "expandable_segments":
            dropped.append(f"expandable_segments (it needs torch >= {EXPANDABLE_MIN_TORCH}; on ROCm, torch >= 2.11 "
                           "and ROCm >= 7.0)")
        elif key == "max_split_size_mb" and drop_max_split:
            dropped.append("max_split_size_mb (with expandable_segments on this ROCm it corrupts allocations)")
        else:
            dropped.append(key or item)
    others = [v for v in ALLOC_VARS if v in setvars and v != target]
    note = "one allocator variable with only options this torch knows" + \
        (f"; drops {', '.join(dropped)}" if dropped else "")
    if not kept:
        return fixes.unset(*[v for v in ALLOC_VARS if v in setvars], why=note)
    export = fixes.shell("export {name}={value}", note, name=target, value=",".join(kept.values()))
    return fixes.with_why(fixes.then(fixes.unset(*others), export), note) if others else export


def _validators(head: str) -> dict[str, str]:
    out = {}
    for line in head.splitlines():
        parts = line.split(",", 2)
        if len(parts) == 3 and parts[0] == "Validator":
            out[parts[1]] = parts[2].strip()
    return out


@check("env.tunableop", "PyTorch TunableOp settings and result files fit this stack")
def check_tunableop(ctx: CheckContext) -> CheckResult:
    env = ctx.env_vars(TUNABLEOP_VARS)
    if env.get("PYTORCH_TUNABLEOP_ENABLED") != "1":
        return passed("TunableOp off (PYTORCH_TUNABLEOP_ENABLED unset)")
    files = ctx.health("tunableop_files") or {}
    tuning = env.get("PYTORCH_TUNABLEOP_TUNING", "1") != "0"
    evidence = [f"PYTORCH_TUNABLEOP_ENABLED=1, "
                f"PYTORCH_TUNABLEOP_TUNING={env.get('PYTORCH_TUNABLEOP_TUNING', '1 (default)')}",
                f"result files ({tunableop_filename(env)}): {', '.join(files) or 'none found'}"]
    torch_version = ((ctx.torch or {}).get("version") or "") if files else ""
    archs = _archs(ctx) if files else set()
    stale, stale_paths = [], []
    for path, head in files.items():
        val = _validators(head)
        made_for = val.get("PT_VERSION")
        reasons = []
        if made_for and torch_version and not torch_version.startswith(made_for.split("+")[0]):
            reasons.append(f"{path}: made with torch {made_for}, this is {torch_version}")
        arch = (val.get("GCN_ARCH_NAME") or "").split(":")[0]
        if arch and archs and arch not in archs:
            reasons.append(f"{path}: made on {arch}, these GPUs are {', '.join(sorted(archs))}")
        stale += reasons
        if reasons:
            stale_paths.append(path)
    if stale:
        # Renamed, not deleted: TunableOp reads only its exact file name, and the old results stay for their stack.
        moves = fixes.then(*(fixes.shell("mv {path} {renamed}", path=p, renamed=p + ".stale") for p in stale_paths))
        return warned("TunableOp result file made for another stack: it is rejected and every GEMM is tuned again",
                      fixes.with_why(moves, "then tune once on this machine and keep the new file (PyTorch docs: "
                                            "torch.cuda.tunable)"), stale + evidence)
    if tuning:
        tune_note = "PyTorch docs: torch.cuda.tunable; AMD MI300X workload guide"
        fix = fixes.shell("export PYTORCH_TUNABLEOP_TUNING=0", "the results files above hold the tuned GEMMs: train "
                          f"with them, tune no more ({tune_note})") if files else \
            fixes.note("Tune once on a short run (PYTORCH_TUNABLEOP_TUNING=1) to write "
                       f"{tunableop_filename(env)}, keep it, then train with PYTORCH_TUNABLEOP_TUNING=0 ({tune_note})")
        return warned("TunableOp tunes every new GEMM shape during the run: the first steps (and every new sequence "
                      "length) are slow, and each rank tunes on its own", fix, evidence)
    if not files:
        return warned("TunableOp is on with tuning off but there is no results file: it changes nothing",
                      fixes.unset("PYTORCH_TUNABLEOP_ENABLED",
                                  why=f"or tune once (PYTORCH_TUNABLEOP_TUNING=1 on a short run) to create "
                                       f"{tunableop_filename(env)} in the working directory"),
                      evidence)
    return passed("TunableOp reads tuned results without tuning during training", evidence)


@check("env.hipblaslt", "TORCH_BLAS_PREFER_HIPBLASLT fits the GPU")
def check_hipblaslt(ctx: CheckContext) -> CheckResult:
    env = ctx.env_vars(("TORCH_BLAS_PREFER_HIPBLASLT", "TORCH_BLAS_PREFER_CUBLASLT"))
    var = next((v for v in ("TORCH_BLAS_PREFER_HIPBLASLT", "TORCH_BLAS_PREFER_CUBLASLT") if v in env), None)
    if var is None:
        return passed("unset: torch picks the BLAS library for the GPU")
    if not ctx.torch_is_rocm and var == "TORCH_BLAS_PREFER_HIPBLASLT":
        return skipped("not a ROCm build of torch")
    value = env[var].strip().lower()
    archs = _archs(ctx)
    evidence = [f"{var}={env[var]}", f"GPU archs: {', '.join(sorted(archs)) or 'unknown'}"]
    off = value in ("0", "false", "off", "no")
    if off and archs and archs <= HIPBLASLT_PREFERRED_ARCHS:
        return warned(f"{var}={env[var]} forces rocBLAS on {', '.join(sorted(archs))}, where hipBLASLt is faster and "
                      "torch's default", fixes.unset(var, why="AMD's MI300X workload guide recommends hipBLASLt"),
                      evidence)
    if not off and archs and not archs <= HIPBLASLT_PREFERRED_ARCHS:
        other = sorted(archs - HIPBLASLT_PREFERRED_ARCHS)
        return warned(f"{var}={env[var]} forces hipBLASLt on {', '.join(other)}, where torch defaults to rocBLAS "
                      "(hipBLASLt kernels are missing or slower there)",
                      fixes.unset(var, why="torch picks rocBLAS for these GPUs"), evidence)
    return passed(f"{var}={env[var]} matches the GPU", evidence)


# The GPUs whose RCCL channel settings are judged: MI300 series (gfx942) and MI350 series (gfx950).
CHANNEL_ARCHS = ("gfx942", "gfx950")
# RCCL src/graph/connect.cc (ROCm/rccl): "if (comm->nRanks < 8 && 64 < minNchannels) { minNchannels = 2; WARN(
# "NCCL_MIN_NCHANNELS set by environment is ignored due to less than 8 GPUs."); }" - with fewer than 8 ranks a
# minimum above 64 is dropped (RCCL 2.27.7 in ROCm 7.2.3 prints it for the inference guide's 112 on 4 MI355X,
# ROCm/rocm-systems#11253). On a node with fewer than 8 GPUs a job of this node alone has fewer than 8 ranks.
RCCL_FEW_RANKS = 8
RCCL_FEW_RANKS_MAX_MIN_CHANNELS = 64
RCCL_IGNORED_TEXT = "NCCL_MIN_NCHANNELS set by environment is ignored due to less than 8 GPUs."


@check("env.nccl_channels", "RCCL channel limits on MI300 / MI350")
def check_nccl_channels(ctx: CheckContext) -> CheckResult:
    gpus = [g for g in ctx.amd_gpus if g.arch in CHANNEL_ARCHS]
    if len(gpus) < 2:
        return skipped("fewer than 2 MI300- or MI350-class GPUs: no intra-node collectives to tune")
    mi300 = any(g.arch == "gfx942" for g in gpus)
    lo, hi = ctx.env_var("NCCL_MIN_NCHANNELS"), ctx.env_var("NCCL_MAX_NCHANNELS")
    ranks, counted = job_ranks(ctx, len(gpus))
    evidence = [f"NCCL_MIN_NCHANNELS={lo}" if lo is not None else "NCCL_MIN_NCHANNELS unset",
                f"NCCL_MAX_NCHANNELS={hi}" if hi is not None else "NCCL_MAX_NCHANNELS unset",
                f"{len(gpus)} GPUs ({', '.join(sorted({g.arch for g in gpus if g.arch}))}) on this node",
                f"the job's ranks: {counted}"]
    raise_min = fixes.shell("export NCCL_MIN_NCHANNELS={channels}", channels=RCCL_MI300X_MIN_CHANNELS)
    fix = fixes.with_why(fixes.then(raise_min, fixes.unset("NCCL_MAX_NCHANNELS")) if hi is not None else raise_min,
                         "AMD's training validation uses 40 channels; its MI300X inference guide 112")
    for name, value in (("NCCL_MIN_NCHANNELS", lo), ("NCCL_MAX_NCHANNELS", hi)):
        if value is not None and _channels(value) is None:
            return warned(f"{name}={value} is not a number: RCCL ignores it", fix, evidence)
    if lo is not None and ranks < RCCL_FEW_RANKS and _channels(lo) > RCCL_FEW_RANKS_MAX_MIN_CHANNELS:
        return warned(f"NCCL_MIN_NCHANNELS={lo} is ignored with {ranks} ranks: RCCL drops a minimum above "
                      f"{RCCL_FEW_RANKS_MAX_MIN_CHANNELS} when fewer than {RCCL_FEW_RANKS} ranks take part and "
                      f"prints '{RCCL_IGNORED_TEXT}'",
                      fixes.unset("NCCL_MIN_NCHANNELS", why=f"RCCL resets it to 2 on fewer than {RCCL_FEW_RANKS} ranks "
                                  f"(src/graph/connect.cc); a minimum of {RCCL_FEW_RANKS_MAX_MIN_CHANNELS} or less is "
                                  "honoured there"),
                      evidence + [f"RCCL prints: {RCCL_IGNORED_TEXT}"])
    if mi300 and hi is not None and _channels(hi) < RCCL_MI300X_MIN_CHANNELS:
        return warned(f"NCCL_MAX_NCHANNELS={hi} caps RCCL below the {RCCL_MI300X_MIN_CHANNELS} channels AMD validates "
                      "MI300X with: all-reduce bandwidth drops", fix, evidence)
    if lo is not None and hi is not None and _channels(lo) > _channels(hi):
        return warned(f"NCCL_MIN_NCHANNELS={lo} is above NCCL_MAX_NCHANNELS={hi}", fix, evidence)
    if lo is None:
        advice = f"; AMD's MI300X guides raise the minimum ({raise_min.text})" if mi300 else ""
        return passed(f"RCCL chooses its channels{advice}", evidence)
    return passed(f"NCCL_MIN_NCHANNELS={lo}", evidence)


# RCCL settings AMD's validation page sets (knowledge/rccl_settings.json); the ones judged here beyond the channels.
RCCL_SETTINGS = load("rccl_settings.json")["settings"]
# RCCL's MSCCL++ path (RCCL_MSCCLPP_ENABLE) is another algorithm family the page's MSCCL line does not name: shown, not
# judged.
MSCCLPP_VAR = "RCCL_MSCCLPP_ENABLE"


def _setting(name: str) -> dict[str, str]:
    return RCCL_SETTINGS[name]


@check("env.rccl_validation", "RCCL settings against AMD's system validation")
def check_rccl_validation(ctx: CheckContext) -> CheckResult:
    """The variables AMD's prerequisite-system-validation page sets for RCCL that hold whatever the node's NICs are,
    each judged against the page's value and reason: MSCCL (data mismatches), high-priority streams. The GID index
    and the RDMA NIC list depend on the node's own devices: env.nccl_ib judges them against /sys/class/infiniband, on
    AMD and NVIDIA nodes alike (AMD's values are shown here)."""
    gpus = [g for g in ctx.amd_gpus if g.arch in CHANNEL_ARCHS]
    if len(gpus) < 2:
        return skipped("fewer than 2 MI300- or MI350-class GPUs: no collectives to judge")
    source = _setting("RCCL_MSCCL_ENABLE")["source"]
    evidence = [f"AMD's values ({source}): " + ", ".join(f"{n}={s['value']}" for n, s in RCCL_SETTINGS.items()),
                "NCCL_IB_GID_INDEX and NCCL_IB_HCA: judged against this node's RDMA devices by env.nccl_ib"]
    problems: list[tuple[str, fixes.Fix]] = []
    msccl = ctx.env_var("RCCL_MSCCL_ENABLE")
    want = _setting("RCCL_MSCCL_ENABLE")
    if msccl is not None and msccl.strip() != want["value"]:
        problems.append((f"RCCL_MSCCL_ENABLE={msccl} turns MSCCL on, which AMD's validation turns off to "
                         f"\"{want['why']}\"",
                         fixes.shell("export RCCL_MSCCL_ENABLE={v}", want["why"], v=want["value"])))
    priority = ctx.env_var("TORCH_NCCL_HIGH_PRIORITY")
    want = _setting("TORCH_NCCL_HIGH_PRIORITY")
    if priority is not None and priority.strip() != want["value"]:
        problems.append((f"TORCH_NCCL_HIGH_PRIORITY={priority}: AMD's training image sets {want['value']} to "
                         f"\"{want['why']}\"", fixes.shell("export TORCH_NCCL_HIGH_PRIORITY={v}", want["why"],
                                                            v=want["value"])))
    mscclpp = ctx.env_var(MSCCLPP_VAR)
    for name in (*RCCL_SETTINGS, MSCCLPP_VAR):
        value = ctx.env_var(name)
        evidence.append(f"{name}={value}" if value is not None else f"{name} unset")
    if problems:
        summary = "; ".join(text for text, _ in problems)
        fix = problems[0][1] if len(problems) == 1 else fixes.then(*(f for _, f in problems))
        return warned(summary, fix, evidence)
    unset = [n for n in ("RCCL_MSCCL_ENABLE", "TORCH_NCCL_HIGH_PRIORITY") if ctx.env_var(n) is None]
    wanted = ", ".join(f"{n}={_setting(n)['value']}" for n in unset)
    advice = f"; AMD's training image also sets {wanted}" if unset else ""
    return passed("MSCCL and stream priority agree with AMD's validation" + advice
                  + (f" ({MSCCLPP_VAR}={mscclpp} is not among them)" if mscclpp is not None else ""), evidence)


IB_VARIABLES = ("NCCL_IB_GID_INDEX", "NCCL_IB_HCA")
GID_FIX_WHY = ("the index whose type reads 'RoCE v2' (with an IPv4-mapped GID) is the one to export as "
               "NCCL_IB_GID_INDEX; InfiniBand fabrics need none")
# At most this many ports are listed in the evidence (a node has one or two per NIC).
IB_EVIDENCE_PORTS = 16


@check("env.nccl_ib", "NCCL_IB_GID_INDEX / NCCL_IB_HCA against the node's RDMA devices")
def check_nccl_ib(ctx: CheckContext) -> CheckResult:
    """NCCL's RDMA variables, which RCCL reads too, against the node's RDMA devices as /sys/class/infiniband lists
    them (rocmcheck/facts/infiniband.py; the judging is rocmcheck/checks/ib_settings.py): the GID index must be a
    populated, routable RoCE v2 entry of every active RoCE port; each NIC NCCL_IB_HCA names must exist with an
    ACTIVE port; a list that leaves active NICs out gives the GPUs fewer NICs than there are GPUs; a NIC list on a
    node with no RDMA device sends the collectives between nodes over TCP. Any vendor: NCCL on NVIDIA, RCCL on AMD.
    Without the record (a bundle from before it was collected) nothing is judged: AMD's index 3 is right only where
    the node's table puts the IPv4 address there."""
    ib = ctx.health("infiniband")
    if not isinstance(ib, dict):  # node health read by a collector that did not read /sys/class/infiniband
        return ctx.not_known(describe("node_health", "infiniband"))
    env = ctx.env_vars(IB_VARIABLES)
    gid, hca = env.get("NCCL_IB_GID_INDEX"), env.get("NCCL_IB_HCA")
    evidence = [f"{n}={v}" for n, v in env.items()]
    if not ib.get("present"):
        evidence.append("no /sys/class/infiniband: no RDMA device on this node")
        listed = [t for t in (hca or "").strip().lstrip("=^").split(",") if t.strip()]
        if hca is not None and listed and not hca.strip().startswith("^"):
            return warned(f"NCCL_IB_HCA={hca} names RDMA NICs, but this node has none (no /sys/class/infiniband): "
                          "the collectives between nodes fall back to TCP sockets (one node needs no RDMA NIC)",
                          fixes.unset("NCCL_IB_HCA", why="no RDMA device is visible here: load the NIC's RDMA driver "
                                      "(mlx5_ib, bnxt_re, ionic_rdma, ...), or in a container pass the RDMA devices "
                                      "in; on one node the variable is not needed"), evidence)
        return skipped("no RDMA device on this node: " + (", ".join(evidence[:-1]) + " not used" if env else
                                                          "nothing to judge"), evidence)
    evidence += [ib_settings.describe_port(p) for p in ib_settings.ports(ib)][:IB_EVIDENCE_PORTS]
    problems: list[tuple[str, fixes.Fix]] = []
    if gid is not None:
        problem = ib_settings.gid_index_problem(gid, ib)
        if problem:
            better = ib_settings.suggested_gid_index(ib)
            fix = (fixes.shell("export NCCL_IB_GID_INDEX={v}", "the IPv4-mapped RoCE v2 entry of every active RoCE "
                               "port in /sys/class/infiniband", v=better) if better is not None else
                   fixes.shell(ib_settings.GID_FIX_COMMAND, GID_FIX_WHY))
            problems.append((problem + ": the first cross-node collective stalls or fails to connect", fix))
    hca_fix = fixes.shell(ib_settings.HCA_FIX_COMMAND, "list every active RDMA NIC of the node in NCCL_IB_HCA "
                          "(export NCCL_IB_HCA=<nic0>,<nic1>,...), one per GPU")
    if hca is not None:
        listed = [t for t in hca.strip().lstrip("=^").split(",") if t.strip()]
        missing = ib_settings.hca_problems(hca, ib)
        chosen, active = ib_settings.chosen_active_hcas(hca, ib), ib_settings.active_hcas(ib)
        if not listed:
            problems.append(("NCCL_IB_HCA is set but names no NIC",
                             fixes.unset("NCCL_IB_HCA", why="the library then chooses among every RDMA device")))
        elif missing:
            problems.append((f"NCCL_IB_HCA={hca}: " + "; ".join(missing)
                             + ": the job runs without that NIC, or fails to find one", hca_fix))
        elif active - chosen and len(chosen) < len(ctx.gpus):  # the GPUs are needed only here
            problems.append((f"NCCL_IB_HCA={hca} lets the job use {len(chosen)} of this node's {len(active)} "
                             f"active RDMA NICs for {len(ctx.gpus)} GPUs (left out: "
                             f"{', '.join(sorted(active - chosen))}): the GPUs share NICs and cross-node bandwidth "
                             "drops (AMD's and NVIDIA's validated nodes give each GPU its own)", hca_fix))
    if problems:
        summary = "; ".join(text for text, _ in problems)
        fix = problems[0][1] if len(problems) == 1 else fixes.then(*(f for _, f in problems))
        return warned(summary, fix, evidence)
    if not env:
        return passed(f"{len(ib_settings.ports(ib))} RDMA port(s); NCCL_IB_GID_INDEX and NCCL_IB_HCA unset: the "
                      "library picks the GID and the NICs itself", evidence)
    names = ", ".join(f"{n}={v}" for n, v in env.items())
    return passed(f"{names}: consistent with this node's RDMA devices", evidence)


# Low-level HIP / ROCr runtime knobs that inference setups and old workarounds leave in environments (public vLLM and
# JAX launch scripts for MI300X set GPU_MAX_HW_QUEUES=2 and HIP_FORCE_DEV_KERNARG=1). Each changes how the runtime
# queues work or copies data; a fine-tune's defaults were not chosen with them.
# - GPU_MAX_HW_QUEUES: hardware queues HIP opens per device (the HIP runtime's default is 4).
# - HSA_ENABLE_SDMA=0: ROCr copies with blit kernels on the compute queues instead of the SDMA copy engines (a
#   workaround for SDMA faults, and a requirement for several instances on an APU).
# - HIP_FORCE_DEV_KERNARG=1: kernel arguments in device memory (lower launch latency).
HIP_DEFAULT_HW_QUEUES = 4
RUNTIME_KNOBS = ("HIP_FORCE_DEV_KERNARG", "GPU_MAX_HW_QUEUES", "HSA_ENABLE_SDMA")


@check("env.runtime_knobs", "Leftover low-level HIP / ROCr runtime knobs")
def check_runtime_knobs(ctx: CheckContext) -> CheckResult:
    env = ctx.env_vars(RUNTIME_KNOBS)
    if not env:
        return passed("none of " + ", ".join(RUNTIME_KNOBS) + " is set: the runtime's defaults")
    evidence = [f"{n}={v}" for n, v in env.items()]
    costly = []
    queues = env.get("GPU_MAX_HW_QUEUES")
    count = _channels(queues) if queues is not None else None  # a plain number of a handful of digits, else None
    if queues is not None and (count is None or count < HIP_DEFAULT_HW_QUEUES):
        costly.append(f"GPU_MAX_HW_QUEUES={queues} gives HIP fewer hardware queues than its default "
                      f"{HIP_DEFAULT_HW_QUEUES}: the compute, copy and RCCL streams of a training step share them")
    if env.get("HSA_ENABLE_SDMA", "").strip() == "0":
        costly.append("HSA_ENABLE_SDMA=0 moves host<->device copies off the SDMA engines onto compute queues, "
                      "where they compete with the training kernels (CPU offload, data loading)")
    names = ", ".join(f"{n}={v}" for n, v in env.items())
    if costly:
        return warned("; ".join(costly), fixes.unset(*[n for n in env if n != "HIP_FORCE_DEV_KERNARG"],
                                                     why="inference-image tuning or an old workaround; set one again "
                                                         "only when a measured run of this job needs it"), evidence)
    return passed(f"set: {names} (inference-image tuning; harmless for a fine-tune)", evidence)


# The variables a launcher gives its world size in (facts/launch.py reads them per launcher).
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS",
                        "PMI_SIZE")


def job_ranks(ctx: CheckContext, node_gpus: int) -> tuple[int, str]:
    """How many ranks an RCCL communicator of the job has, and how that was counted: the launcher's world size when
    the doctor runs under one (torchrun, srun, mpirun, the DeepSpeed launcher); else one rank per GPU this
    environment leaves visible (rocminfo already applies ROCR_VISIBLE_DEVICES; HIP_VISIBLE_DEVICES, else
    CUDA_VISIBLE_DEVICES, narrows what HIP sees)."""
    env = ctx.env_vars(LAUNCH_VARIABLES)
    launch = read_launch(env, "")
    # read_launch takes an unreadable world size for 1: only a size the launcher really gave counts here.
    sized = any(_channels(env[name]) for name in WORLD_SIZE_VARIABLES if name in env)
    if launch.launcher != "none" and sized:
        return launch.world_size, (f"{launch.world_size} ({launch.launcher}: {launch.local_world_size} on this node, "
                                   f"{launch.nnodes or '?'} node(s))")
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = ctx.env_var(name)
        if value is not None:
            ids = [t for t in value.split(",") if t.strip()]
            visible = min(len(ids), node_gpus)
            return visible, f"{visible} ({name}={value} leaves {visible} of the node's {node_gpus} GPUs)"
    return node_gpus, f"{node_gpus} (no launcher: one rank per GPU this environment sees)"


def _channels(value: str) -> int | None:
    """A channel count as RCCL reads it: a plain number (a handful of digits), else None."""
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


@check("env.hsa_xnack", "HSA_XNACK not switching the GPUs to XNACK mode")
def check_hsa_xnack(ctx: CheckContext) -> CheckResult:
    value = ctx.env_var("HSA_XNACK")
    if value is None or value.strip() == "0":
        return passed("HSA_XNACK " + ("unset" if value is None else "=0") + ": XNACK (GPU page-fault retry) off")
    # ROCm docs (HIP programming guide, unified memory / XNACK): with HSA_XNACK=1 the runtime loads only
    # xnack+ or xnack-any code objects, and page-fault retry costs performance.
    return warned(f"HSA_XNACK={value} turns on XNACK: code built for xnack- no longer loads ('no kernel image' / "
                  "hipErrorNoBinaryForGpu) and memory-bound kernels slow down; fine-tuning needs no unified memory",
                  fixes.unset("HSA_XNACK", why="back to the default: XNACK off"))


@check("env.scratch_reclaim", "HSA_NO_SCRATCH_RECLAIM value understood")
def check_scratch_reclaim(ctx: CheckContext) -> CheckResult:
    value = ctx.env_var("HSA_NO_SCRATCH_RECLAIM")
    if value is None:
        return passed("unset (ROCr default 0: large scratch allocations are released after each dispatch; AMD's "
                      "training containers set 1)")
    if value.strip() in ("0", "1"):
        return passed(f"HSA_NO_SCRATCH_RECLAIM={value}" + (": scratch stays assigned to its queue until the process "
                                                           "exits" if value.strip() == "1" else ""))
    # ROCR-Runtime environment variables: only 0 and 1 are defined.
    return warned(f"HSA_NO_SCRATCH_RECLAIM={value} is neither 0 nor 1",
                  fixes.shell("export HSA_NO_SCRATCH_RECLAIM=1", "ROCR-Runtime docs; AMD's training containers use 1"))
