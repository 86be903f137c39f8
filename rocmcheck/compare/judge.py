"""Pure judges for `rocmcheck compare`: given one value per node, name the node(s) that differ.

Every judge takes {node label: value} in the order the nodes are shown and returns one CheckResult (warn/fail,
with a fix) naming the odd node(s) and the difference, or None when the nodes agree. `over_time=True` means the
labels are one machine's bundles, oldest first: the verdict then says what changed since the first one.
`hosts` maps a label to its node's host name, for fixes that name nodes to a command (a label may carry a
collection time: `gpu-007@2026-11-01 09:12`).

The verdict ids are written out here, one per row judged (FACET_IDS, METRIC_IDS, CHECK_STATUS_ID,
KERNEL_LOG_ID; docs/compare.md lists them). Every value in a fix comes from a bundle, which another node (or
anyone who can write the shared folder) wrote: a version or a host name goes into a shell line only as a quoted
field of rocmcheck.fixes.shell, and into prose only through fixes.note (one line).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rocmcheck.fixes import Fix, note, shell
from rocmcheck.outliers import DEFAULT_SLOW_FRACTION, SLOW_FRACTION, slow_nodes
from rocmcheck.result import CheckResult, Status, failed, warned

# The verdict id of each facet's row (rocmcheck/compare/bundles.py: VERSION_FACETS, GPU_FACETS).
FACET_IDS = {
    "driver": "compare.driver",
    "rocm": "compare.rocm",
    "cuda": "compare.cuda",
    "torch": "compare.torch",
    "triton": "compare.triton",
    "flash_attn": "compare.flash_attn",
    "deepspeed": "compare.deepspeed",
    "transformers": "compare.transformers",
    "os": "compare.os",
    "kernel": "compare.kernel",
    "python": "compare.python",
    "gpu_count": "compare.gpu_count",
    "gpu_model": "compare.gpu_model",
}
# The verdict id of each probe figure's row (rocmcheck/compare/bundles.py: METRICS).
METRIC_IDS = {
    "gemm_tflops": "compare.gemm_tflops",
    "copy_tbps": "compare.copy_tbps",
    "h2d_gbps": "compare.h2d_gbps",
    "d2h_gbps": "compare.d2h_gbps",
    "allreduce_busbw": "compare.allreduce_busbw",
    "allgather_busbw": "compare.allgather_busbw",
    "cross_best_pair_busbw": "compare.cross_best_pair_busbw",
    "cross_local_busbw": "compare.cross_local_busbw",
}
# A check that has a problem on some nodes and not on others: one id for all of them, the check's own id in the
# summary and in data["check"].
CHECK_STATUS_ID = "compare.check_status"
KERNEL_LOG_ID = "compare.kernel_log"
# Nothing differs: the one pass (so the one exit rule sees a judged comparison, exit 0).
AGREE_ID = "compare.nodes_agree"

# Versions whose difference breaks or slows multi-node jobs (fail) and those that only may (warn).
FAIL_FACETS = {"driver", "rocm", "cuda", "torch", "triton", "flash_attn", "deepspeed", "gpu_count", "gpu_model"}

# The fix of each facet: (shell template, or None for words only; the words). In a template {version} is the
# other nodes' value and {nodes} the odd nodes' host names, comma-separated (both quoted fields); in the words
# (the comment of a shell fix, or a note) {names} names the odd nodes.
FIXES: dict[str, tuple[str | None, str]] = {
    "driver": (None, "install the other nodes' GPU driver on {names} (amdgpu-dkms / the NVIDIA driver), then reboot"),
    "rocm": (None, "install the other nodes' ROCm on {names}, or run every node from the same container image"),
    "cuda": (None, "install the other nodes' driver on {names}: the CUDA version shown is the driver's"),
    "torch": ("pip install torch=={version}", "on {names}: every node must run the same torch build (or the same "
                                              "image)"),
    "triton": (None, "reinstall the other nodes' torch on {names}, so it brings the Triton it pins"),
    "flash_attn": ("pip install --no-build-isolation flash-attn=={version}", "on {names}: the other nodes' "
                                                                             "flash-attn"),
    "deepspeed": ("DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed=={version}", "on {names}"),
    "transformers": ("pip install transformers=={version}", "on {names}"),
    "gpu_count": ("sudo dmesg | grep -iE 'amdgpu|NVRM'", "on {names}: a GPU is missing or fell off the bus; drain "
                                                        "the node until it is back"),
    "gpu_model": ("sinfo -N -n {nodes} -o '%N %G'", "{names}: another GPU model; keep one model per job (a "
                                                    "partition or --constraint)"),
    "os": (None, "use one OS image on every node ({names} differs)"),
    "kernel": (None, "boot every node into the same kernel ({names} differs)"),
    "python": (None, "use one Python environment on every node ({names} differs)"),
}
METRIC_WHY = ("on {names}, twice, to rule out noise; then look for throttling (health.throttle), a PCIe link "
              "trained down (health.pcie_link) or a busy GPU")
CROSS_WHY = ("on the allocation; check the NICs of {names} (ibv_devinfo: state PORT_ACTIVE, rate), cables and "
             "NCCL_IB_HCA / NCCL_SOCKET_IFNAME")
KERNEL_LOG_WHY = ("on {names}: drain it from the scheduler (scontrol update nodename=<node> state=drain "
                  "reason=gpu-faults) until the cause is fixed")


def _names(labels: list[str]) -> str:
    return ", ".join(labels) if len(labels) <= 6 else ", ".join(labels[:6]) + f" and {len(labels) - 6} more"


def _hosts(labels: list[str], hosts: dict[str, str] | None) -> str:
    """The odd nodes' host names as one node list (Slurm's and pdsh's comma form), each once."""
    return ",".join(dict.fromkeys((hosts or {}).get(label, label) for label in labels))


def _show(value: Any) -> str:
    return "not found" if value is None or value == "" else str(value)


def _build(status: Status, check_id: str, summary: str, fix: Fix, evidence: list[str], **data: Any) -> CheckResult:
    build = failed if status in (Status.FAIL, Status.CRASH) else warned
    return build(summary, fix, evidence, id=check_id, **data)


def facet_fix(key: str, odd: list[str], version: str | None, hosts: dict[str, str] | None = None) -> Fix:
    """The fix for `key` on the odd nodes, `version` the others' value (None: no one value to install)."""
    template, words = FIXES.get(key, (None, "make {names} match the other nodes"))
    names = _names(odd)
    if version is None and template is not None and "{version}" in template:
        # no one value to install (the nodes split, or the others have none): the choice is a person's
        return note(f"pick one {key.replace('_', '-')} for every node and install it on {names}")
    why = words.format(names=names)
    if template is None:
        return note(why)
    return shell(template, why, version=version or "", nodes=_hosts(odd, hosts))


# --------------------------------------------------------------------------------------------- categorical

def judge_values(key: str, label: str, values: dict[str, Any], over_time: bool = False,
                 hosts: dict[str, str] | None = None) -> CheckResult | None:
    """A version, a GPU count or model: the nodes that do not share the majority's value."""
    shown = {node: _show(v) for node, v in values.items()}
    if len(set(shown.values())) <= 1:
        return None
    status = Status.FAIL if key in FAIL_FACETS else Status.WARN
    cid = FACET_IDS[key]
    evidence = [f"{node}: {v}" for node, v in shown.items()]
    if over_time:
        nodes = list(shown)
        changes = [f"{shown[a]} -> {shown[b]} (by {b})" for a, b in zip(nodes, nodes[1:]) if shown[a] != shown[b]]
        first = values[nodes[0]]
        fix = facet_fix(key, [nodes[-1]], None if first in (None, "") else str(first), hosts)
        return _build(status, cid, f"{label} changed since {nodes[0]}: " + "; ".join(changes), fix, evidence,
                      nodes=[nodes[-1]], values=shown)
    counts = Counter(shown.values())
    common, n_common = counts.most_common(1)[0]
    if n_common * 2 > len(shown):  # a strict majority: the others are the odd ones
        odd = [node for node, v in shown.items() if v != common]
        odd_values = "; ".join(f"{node} has {shown[node]}" if values[node] not in (None, "") else f"{node} has none"
                               for node in odd)
        summary = f"{label}: {odd_values} where the other {n_common} node{'s' if n_common > 1 else ''} have {common}"
        reference = next(v for node, v in values.items() if shown[node] == common)
        version = None if reference in (None, "") else str(reference)
    else:
        odd = list(shown)
        groups = {v: [n for n in shown if shown[n] == v] for v in counts}
        summary = f"{label} differs: " + "; ".join(f"{v} on {_names(ns)}" for v, ns in groups.items())
        version = None
    return _build(status, cid, summary, facet_fix(key, odd, version, hosts), evidence, nodes=odd, values=shown)


# --------------------------------------------------------------------------------------------- check status

_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "crash": 2}


def judge_statuses(check_id: str, statuses: dict[str, str | None], summaries: dict[str, str],
                   fixes: dict[str, Fix | None], over_time: bool = False) -> CheckResult | None:
    """A check that has a problem (warn/fail) on some nodes but not on the others: verdict CHECK_STATUS_ID, the
    check's id in the summary and data["check"]. A check absent from a bundle (an older rocmcheck, another
    vendor's stage) is not a problem."""
    present = {n: s for n, s in statuses.items() if s is not None}
    if not present:
        return None
    ranks = {n: _RANK.get(s, 0) for n, s in present.items()}
    if len(set(ranks.values())) <= 1:
        return None
    best = min(ranks.values())
    worse = [n for n, r in ranks.items() if r > best]
    if over_time:
        nodes = list(present)
        if ranks[nodes[-1]] <= ranks[nodes[0]]:  # better (or no worse) than it was: nothing to blame
            return None
        worse = [nodes[-1]]
    worst = max(ranks[n] for n in worse)
    status = Status.FAIL if worst >= 2 else Status.WARN
    first = worse[0]
    what = f"{present[first]}s" if len(worse) == 1 else "does not pass"
    where = f"since {list(present)[0]}" if over_time else f"on {len(present) - len(worse)} other node(s)"
    summary = f"{check_id} {what} on {_names(worse)} but not {where}: {summaries.get(first, '')}"
    evidence = [f"{n}: {present[n]}: {summaries.get(n, '')}"[:300] for n in present]
    fix = fixes.get(first) or shell("rocmcheck doctor --only {check} -v", f"on {first}", check=check_id)
    return _build(status, CHECK_STATUS_ID, summary[:400], fix, evidence, check=check_id, nodes=worse,
                  statuses=dict(present))


def shared_problems(per_node: dict[str, dict[str, str]], summaries: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Checks that fail (or warn) on every node alike: not a node's fault, a problem of them all."""
    nodes = list(per_node)
    if not nodes:
        return []
    out = []
    ids = list(dict.fromkeys(cid for statuses in per_node.values() for cid in statuses))
    for cid in ids:
        seen = {per_node[n].get(cid) for n in nodes}
        if len(seen) == 1 and (status := seen.pop()) in ("warn", "fail", "crash"):
            out.append({"id": cid, "status": status, "summary": summaries[nodes[0]].get(cid, "")})
    return out


# --------------------------------------------------------------------------------------------- numbers

def judge_metric(key: str, label: str, unit: str, values: dict[str, float], probe: str,
                 over_time: bool = False, hosts: dict[str, str] | None = None,
                 bundle_dir: str | None = None) -> CheckResult | None:
    """A probe figure (bigger is better) far below the other nodes' (or, over time, below the first bundle's).
    bundle_dir: the folder the bundles came from, for the cross-node fix that writes them again."""
    fraction = SLOW_FRACTION.get(key, DEFAULT_SLOW_FRACTION)
    if over_time:
        nodes = list(values)
        if len(nodes) < 2:
            return None
        ref = values[nodes[0]]
        slow = [n for n in nodes[1:] if values[n] < ref * (1 - fraction)]
        ref_text = f"{ref:,.1f} {unit} in {nodes[0]}"
    else:
        slow, ref = slow_nodes(values, fraction)
        ref_text = (f"{ref:,.1f} {unit} on the faster node" if len(values) == 2
                    else f"the nodes' median {ref:,.1f} {unit}")
    if not slow:
        return None
    parts = [f"{n} {values[n]:,.1f} {unit} ({values[n] / ref - 1:+.0%})" for n in slow]
    summary = f"{label}: {'; '.join(parts)} against {ref_text} (limit -{fraction:.0%})"
    if len(values) == 2 and not over_time:
        summary += "; with two nodes either may be the odd one: add a third or read the probe's own verdict"
    evidence = [f"{n}: {v:,.1f} {unit}" for n, v in values.items()]
    names = _names(slow)
    if probe != "cluster.collective":
        fix = shell("rocmcheck probe {probe} --json", METRIC_WHY.format(names=names), probe=probe.split(".", 1)[1])
    elif bundle_dir:
        fix = shell("NCCL_DEBUG=INFO rocmcheck doctor --across-nodes --bundle-dir {folder}",
                    CROSS_WHY.format(names=names), folder=bundle_dir)
    else:
        fix = note("run `NCCL_DEBUG=INFO rocmcheck doctor --across-nodes --bundle-dir DIR` on the allocation; "
                   + CROSS_WHY.split("; ", 1)[1].format(names=names))
    return warned(summary, fix, evidence, id=METRIC_IDS[key], nodes=slow, values=dict(values),
                  reference=ref, limit_fraction=fraction)


# --------------------------------------------------------------------------------------------- kernel log

def _finding_key(f: dict[str, Any]) -> str:
    return str(f.get("title") or f.get("pattern") or "?")


def judge_kernel_logs(findings: dict[str, list[dict[str, Any]] | None], over_time: bool = False) -> CheckResult | None:
    """Kernel-log faults (GPU resets, page faults, RAS/ECC, AER, Xids, OOM) that some nodes show and others do
    not. None per node: its kernel log was not readable (not counted either way)."""
    known = {n: fs for n, fs in findings.items() if fs is not None}
    kinds = {n: {_finding_key(f) for f in fs} for n, fs in known.items()}
    if len(known) < 2:
        return None
    everywhere = set.intersection(*kinds.values()) if kinds else set()
    odd = {n: ks - everywhere for n, ks in kinds.items() if ks - everywhere}
    if over_time:
        last = list(known)[-1]
        odd = {last: odd[last]} if last in odd else {}
    if not odd:
        return None
    parts = []
    evidence = []
    worst = Status.WARN
    for node, ks in odd.items():
        mine = [f for f in known[node] if _finding_key(f) in ks]
        parts.append(f"{node}: " + ", ".join(f"{f.get('count', 1)}x {_finding_key(f)}"
                                              + (f" ({f['device']})" if f.get("device") else "") for f in mine[:4]))
        evidence += [f"{node}: {f.get('example', '')}"[:300] for f in mine[:3]]
        if any(f.get("severity") == "fail" for f in mine):
            worst = Status.FAIL
    summary = "kernel log: " + "; ".join(parts) + (" (new since the first bundle)" if over_time else
                                                    " (the other nodes' logs do not show it)")
    fix = shell("journalctl -k -b | grep -iE 'amdgpu|NVRM|AER|Xid'", KERNEL_LOG_WHY.format(names=_names(list(odd))))
    return _build(worst, KERNEL_LOG_ID, summary[:400], fix, evidence, nodes=list(odd))
