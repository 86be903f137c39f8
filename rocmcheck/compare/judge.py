"""Pure judges for `rocmcheck compare`: given one value per node, name the node(s) that differ.

Every judge takes {node label: value} in the order the nodes are shown and returns one CheckResult (warn/fail,
with a fix) naming the odd node(s) and the difference, or None when the nodes agree. `over_time=True` means the
labels are one machine's bundles, oldest first: the verdict then says what changed since the first one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rocmcheck.outliers import DEFAULT_SLOW_FRACTION, SLOW_FRACTION, slow_nodes
from rocmcheck.result import CheckResult, Status, failed, warned

# Versions whose difference breaks or slows multi-node jobs (fail) and those that only may (warn).
FAIL_FACETS = {"driver", "rocm", "cuda", "torch", "triton", "flash_attn", "deepspeed", "gpu_count", "gpu_model"}
FIXES = {
    "driver": "install the same GPU driver on {nodes} as on the other nodes (amdgpu-dkms / the NVIDIA driver), then reboot it",
    "rocm": "install the ROCm version of the other nodes on {nodes} (or run every node from the same container image)",
    "cuda": "install the driver of the other nodes on {nodes}: the CUDA version shown is the driver's",
    "torch": "pip install torch=={value}  # on {nodes}: every node must run the same torch build (or the same image)",
    "triton": "reinstall torch on {nodes} so it brings the Triton it pins (pip install --force-reinstall torch==<the others' version>)",
    "flash_attn": "install the other nodes' flash-attn on {nodes} (pip install --no-build-isolation flash-attn=={value})",
    "deepspeed": "DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed=={value}  # on {nodes}",
    "transformers": "pip install transformers=={value}  # on {nodes}",
    "gpu_count": "rocm-smi --showallinfo; sudo dmesg | grep -iE 'amdgpu|NVRM'  # on {nodes}: a GPU is missing or fell off the bus; drain the node until it is back",
    "gpu_model": "sinfo -N -o '%N %G'  # {nodes} is another GPU model: keep one model per job (a partition or --constraint)",
    "os": "use one OS image on every node ({nodes} differs)",
    "kernel": "boot every node into the same kernel ({nodes} differs)",
    "python": "use one Python environment on every node ({nodes} differs)",
}
METRIC_FIX = ("rocmcheck probe {probe} --json  # on {nodes}, twice, to rule out noise; then look for throttling "
              "(health.throttle), a PCIe link trained down (health.pcie_link) or a busy GPU")
CROSS_FIX = ("NCCL_DEBUG=INFO rocmcheck doctor --across-nodes --bundle-dir DIR  # on the allocation; check {nodes}' "
             "NICs (ibv_devinfo: state PORT_ACTIVE, rate), cables and NCCL_IB_HCA / NCCL_SOCKET_IFNAME")


def _names(labels: list[str]) -> str:
    return ", ".join(labels) if len(labels) <= 6 else ", ".join(labels[:6]) + f" and {len(labels) - 6} more"


def _show(value: Any) -> str:
    return "not found" if value is None or value == "" else str(value)


def _build(status: Status, check_id: str, summary: str, fix: str, evidence: list[str], **data: Any) -> CheckResult:
    build = failed if status in (Status.FAIL, Status.CRASH) else warned
    return build(summary, fix, evidence, id=check_id, **data)


# --------------------------------------------------------------------------------------------- categorical

def judge_values(key: str, label: str, values: dict[str, Any], over_time: bool = False) -> CheckResult | None:
    """A version, a GPU count or model: the nodes that do not share the majority's value."""
    shown = {node: _show(v) for node, v in values.items()}
    if len(set(shown.values())) <= 1:
        return None
    status = Status.FAIL if key in FAIL_FACETS else Status.WARN
    cid = f"compare.{key}"
    evidence = [f"{node}: {v}" for node, v in shown.items()]
    if over_time:
        nodes = list(shown)
        changes = [f"{shown[a]} -> {shown[b]} (by {b})" for a, b in zip(nodes, nodes[1:]) if shown[a] != shown[b]]
        fix = FIXES.get(key, "compare the two bundles' evidence").format(nodes=nodes[-1], value=shown[nodes[0]])
        return _build(status, cid, f"{label} changed since {nodes[0]}: " + "; ".join(changes), fix, evidence,
                      nodes=[nodes[-1]], values=shown)
    counts = Counter(shown.values())
    common, n_common = counts.most_common(1)[0]
    if n_common * 2 > len(shown):  # a strict majority: the others are the odd ones
        odd = [node for node, v in shown.items() if v != common]
        odd_values = "; ".join(f"{node} has {shown[node]}" if values[node] not in (None, "") else f"{node} has none"
                               for node in odd)
        summary = f"{label}: {odd_values} where the other {n_common} node{'s' if n_common > 1 else ''} have {common}"
        value = common
    else:
        odd = list(shown)
        groups = {v: [n for n in shown if shown[n] == v] for v in counts}
        summary = f"{label} differs: " + "; ".join(f"{v} on {_names(ns)}" for v, ns in groups.items())
        value = "<one version for all>"
    fix = FIXES.get(key, "make {nodes} match the others").format(nodes=_names(odd), value=value)
    return _build(status, cid, summary, fix, evidence, nodes=odd, values=shown)


# --------------------------------------------------------------------------------------------- check status

_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "crash": 2}


def judge_statuses(check_id: str, statuses: dict[str, str | None], summaries: dict[str, str],
                   fixes: dict[str, str | None], over_time: bool = False) -> CheckResult | None:
    """A check that has a problem (warn/fail) on some nodes but not on the others. A check absent from a
    bundle (an older rocmcheck, another vendor's stage) is not a problem."""
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
    fix = fixes.get(first) or f"rocmcheck doctor --only {check_id} -v  # on {first}"
    return _build(status, f"compare.{check_id}", summary[:400], fix, evidence, nodes=worse,
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
                 over_time: bool = False) -> CheckResult | None:
    """A probe figure (bigger is better) far below the other nodes' (or, over time, below the first bundle's)."""
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
    fix = (CROSS_FIX if probe == "cluster.collective" else METRIC_FIX).format(
        probe=probe.split(".", 1)[1], nodes=_names(slow))
    return warned(summary, fix, evidence, id=f"compare.{key}", nodes=slow, values=dict(values),
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
    fix = (f"journalctl -k -b | grep -iE 'amdgpu|NVRM|AER|Xid'  # on {_names(list(odd))}: drain it from the "
           "scheduler (scontrol update nodename=NODE state=drain reason=gpu-faults) until the cause is fixed")
    return _build(worst, "compare.kernel_log", summary[:400], fix, evidence, nodes=list(odd))
