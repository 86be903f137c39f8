"""Node health: the kernel log, GPU error counters, PCIe links and throttling.

Why a stack that checks out fails hours into a run: GPU page faults and resets, RAS/ECC errors, a link
trained down to x8 or Gen3, a GPU slowed by heat or a lowered power cap. Sources, in order of preference:
the vendor binding (NVML / amdsmi, in the bindings child), `nvidia-smi -q`, then sysfs.
"""

from __future__ import annotations

import re
from typing import Any

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none, tool_failure
from rocmcheck.checks.shell_words import words
from rocmcheck.facts.health import GPU_VENDORS, kernel_log_usable
from rocmcheck.facts.known import NotKnown
from rocmcheck.facts.parsers._text import to_int
from rocmcheck.facts.parsers.gpu_health import (
    NVML_REASON_IDLE,
    NVML_REASONS_SLOWDOWN,
    count_bad_pages,
    describe_reasons,
    parse_nvidia_smi_q,
    parse_ras_count,
    pcie_gen,
)
from rocmcheck.facts.parsers.kernel_log import Finding, line_epoch, parse_kernel_log
from rocmcheck.result import CheckResult, Status, failed, passed, skipped, warned

PCI_ADDRESS = re.compile(r"(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
RECENT_S = 3600  # "in the last hour": a fault that recent is likely the job that just died
MAX_EVIDENCE = 12
POWER_CAP_WARN_FRACTION = 0.9  # an enforced power limit under 90 % of the default was lowered by someone
SMI_SLOWDOWN_REASONS = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
KERNEL_LOG_ACCESS_HINT = ("run the doctor with sudo, or add the user to the systemd-journal (or adm) group; "
                          "dmesg needs kernel.dmesg_restrict=0 or CAP_SYSLOG")


# ------------------------------------------------------------------------------------------------ kernel log

def _kernel_log(ctx: CheckContext) -> tuple[str | None, str | None, list[str], list[str]]:
    """(source name, text, why-not lines, the names of the readers that hung) of the first readable kernel log."""
    why, hung = [], []
    for key, name in (("kernel-log-journalctl", "journalctl -k -b"), ("kernel-log-dmesg", "dmesg")):
        res = ctx.command(key)
        if res is None:
            continue
        if kernel_log_usable(res):
            return name, res.stdout, why, hung
        if res.timed_out:
            hung.append(name.split()[0])
        text = (res.stderr or res.stdout).strip().splitlines()
        reason = tool_failure(res) if not res.ok else (text[-1] if text else "printed nothing")
        why.append(f"{name}: {reason[:200]}")
    return None, None, why, hung


def _when(f: Finding, boot: float | None, now: float) -> str:
    last = line_epoch(f.last, boot)
    if last is None:
        return f"at {f.last.time_text}" if f.last and f.last.time_text else "this boot"
    ago = now - last
    if 0 <= ago < RECENT_S:
        return f"in the last hour ({ago / 60:.0f} min ago)"
    return f"since boot ({ago / 3600:.1f} h ago)" if ago >= 0 else "this boot"


@check("health.kernel_log", "kernel log: GPU faults, resets, RAS/ECC, PCIe AER, OOM kills, Xids")
def check_kernel_log(ctx: CheckContext) -> CheckResult:
    source, text, why, hung = _kernel_log(ctx)
    if source is None:
        if not why:  # the collector always records one of them: these facts come from elsewhere
            return ctx.not_known("the kernel log (not recorded: a bundle from an older rocmcheck)")
        if hung and len(hung) == len(why):  # a reader that hangs says nothing about permissions
            return skipped(f"kernel log not read: {' and '.join(hung)} hung (no answer in time); "
                           "a hung journald or a wedged kernel is worth a look of its own", why)
        return skipped("kernel log not readable here: neither journalctl nor dmesg gave it"
                       + (f" ({' and '.join(hung)} hung)" if hung else "") + "; " + KERNEL_LOG_ACCESS_HINT, why)
    findings = ctx.parse_once(parse_kernel_log, text)
    uptime = known_or_none(lambda: ctx.health("uptime_s"))  # only for "how long ago"
    now = ctx.collected_at
    boot = now - uptime if isinstance(uptime, (int, float)) and now else None
    judged = [f for f in findings if f.severity in ("fail", "warn")]
    order = {"fail": 0, "warn": 1, "note": 2}
    evidence = []
    for f in sorted(findings, key=lambda f: order.get(f.severity, 3))[:MAX_EVIDENCE]:
        procs = f"; process {', '.join(f.processes)}" if f.processes else ""
        evidence.append(f"{f.count}x {f.title} on {f.device or 'an unnamed device'} {_when(f, boot, now)}{procs}: "
                        f"{f.meaning}. Line: {f.example}")
    data: dict[str, Any] = {"source": source, "findings": [f.to_dict() for f in findings]}
    if not judged:
        noted = f" ({len(findings)} informational line kinds)" if findings else ""
        return passed(f"no GPU fault, reset, RAS/ECC error, fatal PCIe error or OOM kill in {source}{noted}",
                      evidence, **data)
    worst = "fail" if any(f.severity == "fail" for f in judged) else "warn"
    top = [f for f in judged if f.severity == worst]
    # One line to paste: the first finding's next step; the other kinds' steps follow the evidence.
    steps = list(dict.fromkeys((f.title, finding_fix(f)) for f in top))
    evidence += [f"next step for {title}: {fix.line()}" for title, fix in steps[1:3]]
    names = ", ".join(dict.fromkeys(f"{f.title}" + (f" ({f.device})" if f.device else "") for f in top))
    summary = f"{source} shows {names}"
    build = failed if worst == "fail" else warned
    return build(summary[:300], steps[0][1], evidence, **data)


def finding_fix(f: Finding) -> fixes.Fix:
    """The finding's next step as kernel_log.json writes it: a note, or a shell command whose {device} is a field
    filled with the PCI address the log line names. A command that needs a device the line did not name (none, or
    a "GPU node-N") becomes a note, with ADDRESS in the device's place."""
    spec = f.fix if isinstance(f.fix, dict) else {"note": str(f.fix)}
    pci = f.device if f.device and PCI_ADDRESS.fullmatch(f.device) else None
    why = spec.get("why", "").replace("{device}", fixes.quote(pci) if pci else "ADDRESS")
    template = spec.get("shell")
    if not template:
        return fixes.note(spec.get("note", ""))
    if "{device}" not in template:
        return fixes.shell(template, why)
    if pci:
        return fixes.shell(template, why, device=pci)
    return fixes.note(f"run {template.replace('{device}', 'ADDRESS')}, with ADDRESS the GPU's PCI address (the log "
                      f"line names none): {why}" if why else f"run {template.replace('{device}', 'ADDRESS')}")


# ------------------------------------------------------------------------------------------------ per-GPU state

def gpu_states(ctx: CheckContext, unknown: list[str] | None = None) -> list[dict[str, Any]]:
    """One record per GPU with what is known of its counters and link, whichever known source knew it; the
    sources that are not known are named in `unknown`."""
    unknown = [] if unknown is None else unknown
    rows: list[dict[str, Any]] = []
    for vendor, probe in (("nvidia", "nvml"), ("amd", "amdsmi")):
        for g in (ctx.from_source(lambda probe=probe: ctx.probe(probe), unknown) or {}).get("gpus") or []:
            health = g.get("health") or {}
            rows.append({"vendor": vendor, "index": g.get("index"), "source": probe, **health})
    smi = ctx.from_source(lambda: ctx.command("nvidia-smi-health"), unknown)
    if not any(r["vendor"] == "nvidia" for r in rows) and smi is not None and smi.ok:
        for i, g in enumerate(ctx.parse_once(parse_nvidia_smi_q, smi.stdout)):
            rows.append({"vendor": "nvidia", "index": i, "source": "nvidia-smi -q", **g})
    by_bus = {_norm_bdf(r.get("bus_id")): r for r in rows if r.get("bus_id")}
    for dev in ctx.from_source(lambda: ctx.health("pci_gpus"), unknown) or []:
        row = by_bus.get(_norm_bdf(dev.get("bdf")))
        if row is None:
            row = {"vendor": dev.get("vendor"), "index": None, "source": "sysfs", "bus_id": dev.get("bdf")}
            rows.append(row)
        row["sysfs"] = dev
    return rows


def _norm_bdf(bdf: str | None) -> str:
    """'00000000:00:06.0' (NVML) and '0000:00:06.0' (sysfs) name the same function."""
    text = (bdf or "").lower()
    parts = text.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _name(row: dict[str, Any]) -> str:
    idx = row.get("index")
    bus = row.get("bus_id")
    return (f"GPU {idx}" if idx is not None else "GPU") + (f" ({bus})" if bus else "")


def _num(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _vendor(ctx: CheckContext, rows: list[dict[str, Any]]) -> str:
    """Whose tool a fix names: the vendor of the GPUs concerned, else this machine's."""
    found = {r.get("vendor") for r in rows} & {"amd", "nvidia"}
    return found.pop() if len(found) == 1 else ctx.vendor


def _gpu_ids(rows: list[dict[str, Any]]) -> list[str]:
    """The GPUs as amd-smi -g / nvidia-smi -i name them: the index, else the PCI address (both tools take either).
    Empty when one of them has neither: the fix then names every GPU."""
    ids = [str(r["index"]) if r.get("index") is not None else _norm_bdf(r.get("bus_id")) if r.get("bus_id") else ""
           for r in rows]
    return [] if "" in ids else list(dict.fromkeys(ids))


def _select(vendor: str, ids: list[str]) -> tuple[str, dict[str, str]]:
    """(template text, its fields) that select GPUs: ` -g {gpu0} {gpu1}` for amd-smi, ` -i {gpus}` (0,1) for
    nvidia-smi; nothing (every GPU) when the GPUs are not known."""
    if not ids:
        return "", {}
    if vendor == "amd":
        selected, values = words("gpu", ids)
        return " -g " + selected, values
    return " -i {gpus}", {"gpus": ",".join(ids)}


def _selected_words(vendor: str, ids: list[str]) -> str:
    """The same selection as words in a comment (quoted like the command's)."""
    if not ids:
        return ""
    return (" -g " + " ".join(map(fixes.quote, ids))) if vendor == "amd" else " -i " + fixes.quote(",".join(ids))


def _memory_fix(vendor: str, ids: list[str], *, broken: bool) -> fixes.Fix:
    """Read the counters now (harmless); the GPU reset that retires pages is named in the comment, for an idle
    GPU only. amd-smi: metric --ecc, bad-pages, reset -G; nvidia-smi: -q -d ECC,ROW_REMAPPER, -r."""
    sel, values = _select(vendor, ids)
    said = _selected_words(vendor, ids)
    if vendor == "amd":
        look, reset = f"amd-smi metric --ecc{sel}; amd-smi bad-pages{sel}", f"sudo amd-smi reset -G{said or ' -g all'}"
    else:
        look, reset = f"nvidia-smi -q -d ECC,ROW_REMAPPER{sel}", f"sudo nvidia-smi -r{said}"
    if broken:
        why = (f"drain the node, then reboot it (or, once the GPU is idle: {reset}) to retire the bad memory; if "
               "uncorrectable errors come back, contact the vendor (RMA)")
    else:
        why = f"once the GPU is idle: {reset} (or reboot) so pending retirements take effect; then watch these counts"
    return fixes.shell(look, why, **values)


@check("health.gpu_errors", "GPU memory errors: ECC counts, retired pages, row remapping, RAS")
def check_gpu_errors(ctx: CheckContext) -> CheckResult:
    unknown: list[str] = []
    rows = gpu_states(ctx, unknown)
    fails, warns, evidence = [], [], []
    fail_rows, warn_rows, ecc_off_rows = [], [], []
    seen_counter = False
    for row in rows:
        name = _name(row)
        unc = _num(row.get("ecc_uncorrected_volatile"))
        unc_amd = _num(row.get("ecc_uncorrectable"))
        ras_ue = ras_ce = None
        sysfs = row.get("sysfs") or {}
        for text in (sysfs.get("ras") or {}).values():
            ue, ce = parse_ras_count(text)
            ras_ue = (ras_ue or 0) + (ue or 0) if ue is not None else ras_ue
            ras_ce = (ras_ce or 0) + (ce or 0) if ce is not None else ras_ce
        bad = _num(row.get("bad_pages"))
        if bad is None:
            bad = count_bad_pages(sysfs.get("bad_pages"))
        remap = row.get("remapped_rows") if isinstance(row.get("remapped_rows"), list) else None
        counters = [unc, unc_amd, ras_ue, bad, _num(row.get("ecc_corrected_volatile")), remap]
        if all(c is None for c in counters):
            continue
        seen_counter = True
        line = []
        row_fails, row_warns = len(fails), len(warns)
        if (unc or 0) > 0 or (unc_amd or 0) > 0 or (ras_ue or 0) > 0:
            fails.append(f"{name}: {max(unc or 0, unc_amd or 0, ras_ue or 0)} uncorrectable ECC/RAS errors")
        if remap and len(remap) >= 4 and remap[3]:
            fails.append(f"{name}: row remapping failed (memory repair exhausted)")
        if remap and len(remap) >= 4 and remap[2]:
            warns.append(f"{name}: row remapping pending (applied at the next GPU reset)")
        if row.get("retired_pages_pending") in (1, True):
            warns.append(f"{name}: retired pages pending (applied at the next GPU reset)")
        if (_num(row.get("ecc_deferred")) or 0) > 0:
            warns.append(f"{name}: {row['ecc_deferred']} deferred (poisoned) errors")
        if (_num(row.get("ecc_uncorrected_aggregate")) or 0) > 0 and not unc:
            warns.append(f"{name}: {row['ecc_uncorrected_aggregate']} uncorrectable ECC errors in the GPU's lifetime")
        if bad:
            warns.append(f"{name}: {bad} retired (bad) memory pages")
        ecc_off = row.get("ecc_mode_current") in (0, "Disabled")
        if ecc_off:
            warns.append(f"{name}: ECC is disabled")
            ecc_off_rows.append(row)
        if len(fails) > row_fails:
            fail_rows.append(row)
        elif len(warns) > row_warns + ecc_off:
            warn_rows.append(row)
        for label, value in (("uncorrectable (this boot)", unc if unc is not None else unc_amd),
                             ("correctable",
                              _num(row.get("ecc_corrected_volatile")) or _num(row.get("ecc_correctable"))),
                             ("RAS ue/ce", f"{ras_ue}/{ras_ce}" if ras_ue is not None else None),
                             ("retired pages", bad)):
            if value is not None:
                line.append(f"{label} {value}")
        evidence.append(f"{name} [{row.get('source')}]: " + ", ".join(line))
    if not seen_counter:
        if unknown:
            raise NotKnown(unknown[0])
        return skipped("no GPU error counters readable (no NVML/amdsmi binding, nvidia-smi or amdgpu RAS sysfs)")
    if fails:
        vendor = _vendor(ctx, fail_rows)
        return failed("; ".join(fails)[:300], _memory_fix(vendor, _gpu_ids(fail_rows), broken=True),
                      fails + warns + evidence)
    if warns:
        if warn_rows:
            fix = _memory_fix(_vendor(ctx, warn_rows), _gpu_ids(warn_rows), broken=False)
        else:  # only ECC turned off; NVIDIA GPUs switch it with nvidia-smi -e, effective at the next reboot
            sel, values = _select("nvidia", _gpu_ids(ecc_off_rows))
            fix = fixes.shell(f"sudo nvidia-smi{sel} -e 1", "turns ECC on from the next reboot; without it memory "
                                                             "errors go unnoticed", **values)
        return warned("; ".join(warns)[:300], fix, warns + evidence)
    return passed(f"no uncorrectable memory errors on {len(evidence)} GPU(s)", evidence)


def _link(row: dict[str, Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """(gen now, gen max, width now, width max) from the binding, else sysfs (max capped by the upstream port)."""
    if row.get("pcie_width_max") and (row.get("pcie_gen_max") or row.get("pcie_speed_max_mts")):
        if row.get("pcie_gen_max"):
            return (_num(row.get("pcie_gen_current")), _num(row.get("pcie_gen_max")),
                    _num(row.get("pcie_width_current")), _num(row.get("pcie_width_max")))
        return (pcie_gen(str(row.get("pcie_speed_current_mts"))), pcie_gen(str(row.get("pcie_speed_max_mts"))),
                _num(row.get("pcie_width_current")), _num(row.get("pcie_width_max")))
    s = row.get("sysfs") or {}
    up = s.get("upstream") or {}
    gen_max, up_gen = pcie_gen(s.get("max_link_speed")), pcie_gen(up.get("max_link_speed"))
    w = lambda t: to_int(t) if isinstance(t, str) else None  # noqa: E731
    width_max, up_width = w(s.get("max_link_width")), w(up.get("max_link_width"))
    if gen_max and up_gen:
        gen_max = min(gen_max, up_gen)
    if width_max and up_width:
        width_max = min(width_max, up_width)
    return pcie_gen(s.get("current_link_speed")), gen_max, w(s.get("current_link_width")), width_max


def _idle(row: dict[str, Any]) -> bool:
    reasons = row.get("clock_event_reasons")
    if isinstance(reasons, int) and reasons & NVML_REASON_IDLE:
        return True
    if "Idle" in (row.get("reasons_active") or []):
        return True
    return row.get("gfx_activity") == 0


# lspci -d takes the PCI vendor id: the one place that maps vendor ids to names is the sysfs collector.
PCI_VENDOR_IDS = {name: code.removeprefix("0x") for code, name in GPU_VENDORS.items()}


def _link_fix(ctx: CheckContext, rows: list[dict[str, Any]]) -> fixes.Fix:
    """lspci's LnkCap (what the link can do) beside LnkSta (what it trained to), for the one slow GPU's address or
    for every GPU of the vendor."""
    buses = [_norm_bdf(r.get("bus_id")) for r in rows if r.get("bus_id")]
    code = PCI_VENDOR_IDS.get(_vendor(ctx, rows))
    if len(rows) == 1 and buses:
        select = " -s {bus}"
    else:
        select = " -d {vendor_id}:" if code else ""
    return fixes.shell("sudo lspci -vv" + select + " | grep -e LnkCap -e LnkSta",
                       "LnkSta below LnkCap: reseat the GPU or its riser/retimer and check the slot's link speed in "
                       "the BIOS (Auto, or the GPU's generation); probe.host_bandwidth measures what the link gives",
                       bus=buses[0] if buses else None, vendor_id=code)


@check("health.pcie_link", "each GPU's PCIe link runs at its full generation and width")
def check_pcie_link(ctx: CheckContext) -> CheckResult:
    from rocmcheck.checks.where import host_only_skip

    if (guest := host_only_skip(ctx)) is not None:  # a VF's link is virtual: the host's PCIe is not visible
        return guest
    evidence, slow, idle_notes, slow_rows = [], [], [], []
    unknown: list[str] = []
    for row in gpu_states(ctx, unknown):
        gen, gen_max, width, width_max = _link(row)
        if not (gen and gen_max and width and width_max):
            continue
        text = f"{_name(row)}: Gen{gen} x{width} (max Gen{gen_max} x{width_max})"
        evidence.append(text)
        if width < width_max or (gen < gen_max and not _idle(row)):
            slow.append(text)
            slow_rows.append(row)
        elif gen < gen_max:
            # GPUs lower the link speed when idle to save power (nvidia-smi documents it); judged only under load.
            idle_notes.append(text)
    if not evidence:
        if unknown:
            raise NotKnown(unknown[0])
        return skipped("no PCIe link state readable for the GPUs")
    if slow:
        return warned(f"{len(slow)} GPU link(s) below their maximum: host<->GPU copies (ZeRO offload, data loading) "
                      "slow down in proportion", _link_fix(ctx, slow_rows),
                      slow + [e for e in evidence if e not in slow], slow=slow)
    note = [f"{t} while idle: GPUs lower the link speed when idle; re-check under load" for t in idle_notes]
    return passed(f"{len(evidence)} GPU link(s) at full width" + (", speed judged under load only" if note else
                                                                   " and speed"), note + evidence)


def _throttle_fix(ctx: CheckContext, slowed: list[dict[str, Any]], capped: list[dict[str, Any]]) -> fixes.Fix:
    """A lowered power cap goes back to its default (nvidia-smi -pl takes watts, NVML reports milliwatts;
    `amd-smi reset --power-cap` restores the default itself); heat and power brakes are read, not changed."""
    vendor = _vendor(ctx, capped or slowed)
    sel, values = _select(vendor, _gpu_ids(capped or slowed))
    restore: fixes.Fix | None = None
    if vendor == "amd":
        look = fixes.shell(f"amd-smi metric --power --temperature{sel}", **values)
        restore = fixes.shell(f"sudo amd-smi reset{sel} --power-cap", **values) if capped else None
    else:
        look = fixes.shell(f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER{sel}", **values)
        per_gpu = []
        for r in capped:
            if _num(r.get("power_default_limit_mw")):
                one, gpu = _select("nvidia", _gpu_ids([r]))
                per_gpu.append(fixes.shell(f"sudo nvidia-smi{one} -pl {{watts}}", **gpu,
                                           watts=r["power_default_limit_mw"] // 1000))
        restore = fixes.then(*per_gpu) if per_gpu else None
    if restore is not None:
        return fixes.with_why(restore, "back to the default power cap; if clocks still drop, check cooling and power "
                                       f"delivery ({look.text})")
    return fixes.with_why(look, "the slowdown reasons and temperatures: check cooling (fans, airflow, inlet "
                                "temperature) and power delivery (PSUs, cabling)")


@check("health.throttle", "GPUs not slowed by heat, power brakes or a lowered power cap")
def check_throttle(ctx: CheckContext) -> CheckResult:
    evidence, slowed, slowed_rows, capped = [], [], [], []
    unknown: list[str] = []
    for row in gpu_states(ctx, unknown):
        before = len(slowed)
        name = _name(row)
        parts = []
        reasons = row.get("clock_event_reasons")
        if isinstance(reasons, int):
            parts.append("reasons: " + (", ".join(describe_reasons(reasons)) or "none"))
            if reasons & NVML_REASONS_SLOWDOWN:
                slowed.append(f"{name}: " + ", ".join(describe_reasons(reasons & NVML_REASONS_SLOWDOWN)))
        active = row.get("reasons_active")
        if isinstance(active, list):
            parts.append("reasons: " + (", ".join(active) or "none"))
            bad = [a for a in active if a in SMI_SLOWDOWN_REASONS]
            if bad:
                slowed.append(f"{name}: " + ", ".join(bad))
        throttle = row.get("throttle_status")
        if throttle not in (None, 0, False, "UNTHROTTLED"):
            slowed.append(f"{name}: amdsmi throttle status {throttle}")
        limit, default = (row.get("power_limit_mw"), row.get("power_default_limit_mw")) if "power_limit_mw" in row \
            else (row.get("power_cap"), row.get("power_default_cap"))
        if _num(limit) and _num(default):
            parts.append(f"power cap {limit / default:.0%} of default")
            if limit < POWER_CAP_WARN_FRACTION * default:
                slowed.append(f"{name}: power cap lowered to {limit / default:.0%} of its default")
                capped.append(row)
        clock, clock_max = (row.get("sm_clock_mhz"), row.get("sm_clock_max_mhz")) if "sm_clock_mhz" in row \
            else (row.get("gfx_clock_mhz"), row.get("gfx_clock_max_mhz"))
        if _num(clock) and _num(clock_max):
            parts.append(f"clock {clock}/{clock_max} MHz")
        if len(slowed) > before:
            slowed_rows.append(row)
        if parts:
            evidence.append(f"{name} [{row.get('source')}]: " + "; ".join(parts))
    if not evidence:
        if unknown:
            raise NotKnown(unknown[0])
        return skipped("no throttle or power state readable for the GPUs")
    if slowed:
        return warned("; ".join(slowed)[:300], _throttle_fix(ctx, slowed_rows, capped), slowed + evidence)
    return passed(f"{len(evidence)} GPU(s) not slowed by heat, power brakes or a lowered power cap", evidence)


def annotate_link_with_bandwidth(results: list[CheckResult]) -> None:
    """A link below its maximum is shown beside the measured pinned host<->GPU bandwidth, when measured."""
    link = next((r for r in results if r.id == "health.pcie_link" and r.status == Status.WARN), None)
    band = next((r for r in results if r.id == "probe.host_bandwidth"), None)
    if link is not None and band is not None and band.status in (Status.PASS, Status.WARN, Status.FAIL):
        link.evidence.insert(0, f"measured (probe.host_bandwidth): {band.summary}")
