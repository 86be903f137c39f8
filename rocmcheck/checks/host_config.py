"""The host's configuration around the driver and the stack: amdgpu kept out by modprobe.d, Secure Boot refusing an
unsigned amdgpu-dkms module, ROCm package repositories that disagree, other processes already on the GPUs, a
PyPI `amdsmi` that is not the installed ROCm's, and ROCm 7.0-7.2's IPC memory rule."""

from __future__ import annotations

from packaging.version import Version

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.rocm import detected_rocm_version
from rocmcheck.checks.where import host_only_skip
from rocmcheck.facts.parsers.host_tools import (
    amdgpu_blacklist_lines,
    parse_amd_smi_cper,
    parse_amd_smi_process,
    parse_dkms_status,
    parse_nvidia_apps,
    parse_sb_state,
    parse_xgmi_link_status,
    repo_versions,
)
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

# A DKMS module must be signed with a key the firmware trusts when Secure Boot is on ("Key was rejected by service");
# dkms 3 signs with /var/lib/dkms/mok.pub, Ubuntu's shim-signed with /var/lib/shim-signed/mok/MOK.der
# (https://github.com/dkms-project/dkms/issues/347, https://github.com/awesometic/realtek-r8126-dkms/issues/3,
# https://github.com/ROCm/ROCm/issues/4328: Secure Boot kept amdgpu from loading after a ROCm 6.3.2 install).
DKMS_MOK_KEY = "/var/lib/dkms/mok.pub"
# ROCm 7.0-7.2.x: GPU memory exported through IPC / dma-buf is not returned after hipFree, so RL fine-tuning with
# vLLM colocated leaks a few GB a step until OOM; HSA_ENABLE_IPC_MODE_LEGACY=1 is the accepted workaround until
# a ROCm with rocm-systems PR#6151 (https://github.com/radixark/miles/pull/1707, https://github.com/ROCm/hip/issues/3886).
IPC_LEAK_ROCM = (Version("7.0"), Version("7.3"))
IPC_LEGACY_VAR = "HSA_ENABLE_IPC_MODE_LEGACY"
IPC_SHARING_PACKAGES = ("vllm",)
# PyPI's amdsmi is versioned like the ROCm release it wraps (6.4.3, 7.0.2); the one ROCm installs from
# /opt/rocm/share/amd_smi carries amd-smi's own version (24.x, 25.x, 26.x). A PyPI build of another ROCm release
# clashes with torch's libamd_smi: torch sees 0 GPUs or fails to import
# (https://github.com/pytorch/pytorch/issues/186516, https://github.com/RLinf/RLinf/pull/1507).
AMDSMI_ROCM_STYLE_MAJOR_BELOW = 20


def _release(version: str | None) -> Version | None:
    try:
        return Version((version or "").split("-")[0].split("+")[0].strip())
    except ValueError:  # InvalidVersion, or more digits than int() takes
        return None


def _series(v: Version) -> tuple[int, int]:
    return v.major, v.minor


@check("driver.blacklist", "amdgpu not blacklisted in modprobe.d or on the kernel command line")
def check_blacklist(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() == "nvidia":
        return skipped("an NVIDIA machine")
    files = ctx.health("modprobe_amdgpu")
    if files is None:
        return skipped("modprobe.d was not read (a bundle from an older rocmcheck)")
    hits = amdgpu_blacklist_lines(files, known_or_none(lambda: ctx.file("/proc/cmdline")))
    if not hits:
        return passed("nothing in modprobe.d or the kernel command line keeps amdgpu out")
    loaded = bool(known_or_none(lambda: ctx.present("/sys/module/amdgpu")))
    first = hits[0].split(": ", 1)
    fix = fixes.edit(first[0], f"delete or comment out `{first[1]}`" + (f" (and {len(hits) - 1} more line(s))"
                                                                       if len(hits) > 1 else ""),
                     "then rebuild the initramfs (update-initramfs -u, or dracut -f) and reboot"
                     if first[0] != "/proc/cmdline" else "it comes from GRUB_CMDLINE_LINUX in /etc/default/grub: "
                     "remove it there, update-grub, reboot")
    if loaded:
        return warned("amdgpu is blacklisted but loaded now (by hand or from the initramfs): the next boot may "
                      "come up without it", fix, hits)
    return failed("amdgpu is blacklisted: the kernel does not load the GPU driver", fix, hits)


@check("driver.secure_boot", "Secure Boot lets the amdgpu-dkms module load")
def check_secure_boot(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() == "nvidia":
        return skipped("an NVIDIA machine")
    sb = ctx.command("mokutil-sb-state")
    if sb is None:
        return skipped("mokutil is not installed: Secure Boot's state is not known")
    state = parse_sb_state(sb.stdout + "\n" + sb.stderr)
    if not state:
        return passed("Secure Boot is off" if state is False else "no EFI Secure Boot on this machine")
    dkms = ctx.command("dkms-status")
    modules = [m for m in parse_dkms_status(dkms.stdout if dkms is not None else "") if m.name == "amdgpu"]
    evidence = ["mokutil --sb-state: SecureBoot enabled"] + [
        f"dkms: amdgpu/{m.version}, {m.kernel or '?'}: {m.state}" for m in modules]
    if not modules:
        return passed("Secure Boot is on; amdgpu is the kernel's own (signed) driver, no DKMS module", evidence)
    if ctx.present("/sys/module/amdgpu"):
        return passed("Secure Boot is on and the amdgpu-dkms module loaded (its signing key is enrolled)", evidence)
    return failed("Secure Boot is on and the amdgpu-dkms module is not loaded: the firmware refuses a module signed "
                  "by a key it does not trust",
                  fixes.shell("sudo mokutil --import {key}", "then reboot and enrol the key in the MOK manager "
                              "(Ubuntu's shim-signed key: /var/lib/shim-signed/mok/MOK.der); or turn Secure Boot off",
                              key=DKMS_MOK_KEY),
                  evidence)


@check("rocm.repos", "one ROCm release in the package repositories, the installed one")
def check_repos(ctx: CheckContext) -> CheckResult:
    files = ctx.health("rocm_repos")
    if files is None:
        return skipped("the repository files were not read (a bundle from an older rocmcheck)")
    found = repo_versions(files)
    rocm = {path: [v for kind, v in pairs if kind == "rocm"] for path, pairs in found.items()}
    rocm = {p: vs for p, vs in rocm.items() if vs}
    if not rocm:
        return skipped("no AMD ROCm repository configured")
    evidence = [f"{p}: ROCm {', '.join(vs)}" for p, vs in rocm.items()]
    versions = sorted({v for vs in rocm.values() for v in vs})
    if len(versions) > 1:
        older = min((p for p in rocm), key=lambda p: max(_release(v) or Version("999") for v in rocm[p]))
        return warned(f"the package repositories name {len(versions)} ROCm releases ({', '.join(versions)}): "
                      "an upgrade mixes packages of both",
                      fixes.edit(older, "remove this file (or the older release's lines)",
                                 "keep one ROCm release; then apt update / dnf clean all"), evidence)
    if len(rocm) > 1:
        return warned(f"ROCm {versions[0]} is configured in {len(rocm)} repository files: the package manager "
                      "warns about duplicate sources and may pin the wrong one",
                      fixes.edit(sorted(rocm)[-1], "remove this duplicate file", "one repository file per source"),
                      evidence)
    installed = _release(known_or_none(lambda: detected_rocm_version(ctx)))
    repo = _release(versions[0])
    if installed is not None and repo is not None:
        same = _series(repo) == _series(installed) and (len(repo.release) < 3 or repo.release[:3] ==
                                                        installed.release[:3])
        if not same:
            return warned(f"the ROCm repository is for {versions[0]} but ROCm {installed} is installed: the next "
                          "package install or upgrade brings another release's packages",
                          fixes.edit(next(iter(rocm)), f"point it at the installed release ({installed}) or "
                                     "upgrade ROCm to the repository's on purpose"), evidence)
    return passed(f"one ROCm repository ({versions[0]})", evidence)


@check("gpu.busy", "no other process holds the GPUs")
def check_busy(ctx: CheckContext) -> CheckResult:
    vendor = ctx.known_vendor()
    if vendor == "none":
        return skipped("no GPU")
    key, parse = ("amd-smi-process", parse_amd_smi_process) if vendor == "amd" else \
        ("nvidia-smi-apps", parse_nvidia_apps)
    res = ctx.command(key)
    if res is None:
        return skipped(f"{'amd-smi' if vendor == 'amd' else 'nvidia-smi'} is not installed")
    if not res.ok:
        return skipped(f"{key}: {res.describe_failure()}")
    procs = parse(res.stdout)
    if not procs:
        return passed("no other process is on the GPUs")
    evidence = [f"{'GPU ' + str(p.gpu) + ': ' if p.gpu is not None else ''}pid {p.pid} "
                f"{p.name or '(name not shown)'}{' ' + p.vram_text if p.vram_text else ''}" for p in procs[:16]]
    return warned(f"{len(procs)} other process(es) already on the GPUs: they hold memory and compute, and a "
                  "fine-tune here runs out of memory or slower",
                  fixes.smi_processes(vendor, "see who they are; end them (kill PID) or choose free GPUs"),
                  evidence)


def amdsmi_mismatch(ctx: CheckContext) -> tuple[str, str] | None:
    """(amdsmi's version, the ROCm release) when an installed `amdsmi` distribution is a PyPI build of another
    ROCm release than the installed one; else None."""
    version = known_or_none(lambda: ctx.package("amdsmi"))
    amdsmi = _release(version)
    if amdsmi is None or amdsmi.major >= AMDSMI_ROCM_STYLE_MAJOR_BELOW:
        return None
    rocm = _release(known_or_none(lambda: detected_rocm_version(ctx)))
    if rocm is None or _series(amdsmi) == _series(rocm):
        return None
    return str(version), str(rocm)


def amdsmi_fix(rocm: str) -> fixes.Fix:
    series = ".".join(rocm.split(".")[:2])
    return fixes.shell("pip uninstall -y amdsmi", f"or pin it to the installed ROCm: pip install 'amdsmi=={series}.*' "
                       "(torch carries its own libamd_smi)")


@check("torch.amdsmi_package", "the amdsmi Python package matches the ROCm userspace")
def check_amdsmi_package(ctx: CheckContext) -> CheckResult:
    version = ctx.package("amdsmi")
    if version is None:
        return skipped("amdsmi is not installed")
    mismatch = amdsmi_mismatch(ctx)
    if mismatch is None:
        return passed(f"amdsmi {version}")
    amdsmi, rocm = mismatch
    torch = known_or_none(lambda: ctx.torch) or {}
    seen = torch.get("device_count")
    evidence = [f"amdsmi {amdsmi} (a PyPI build for ROCm {'.'.join(amdsmi.split('.')[:2])})",
                f"ROCm userspace {rocm}"] + ([f"torch sees {seen} GPU(s)"] if seen is not None else [])
    gpus = known_or_none(lambda: ctx.amd_gpus) or []
    status = failed if torch.get("version") and not seen and gpus else warned
    return status(f"the amdsmi package {amdsmi} is for another ROCm than the installed {rocm}: its libamd_smi "
                  "clashes with torch's (torch sees 0 GPUs, or import fails with an undefined amdsmi_ symbol)",
                  amdsmi_fix(rocm), evidence)


@check("env.ipc_legacy", "ROCm 7.0-7.2 IPC / dma-buf memory rule (HSA_ENABLE_IPC_MODE_LEGACY)")
def check_ipc_legacy(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    rocm = _release(detected_rocm_version(ctx))
    if rocm is None:
        return skipped("no ROCm release found")
    if not IPC_LEAK_ROCM[0] <= rocm < IPC_LEAK_ROCM[1]:
        return passed(f"ROCm {rocm}: outside 7.0-7.2.x")
    if ctx.env_var(IPC_LEGACY_VAR) == "1":
        return passed(f"{IPC_LEGACY_VAR}=1 is set")
    sharing = [p for p in IPC_SHARING_PACKAGES if known_or_none(lambda p=p: ctx.package(p))]
    why = ("ROCm 7.0-7.2.x does not return GPU memory exported through IPC / dma-buf after it is freed: training "
           "beside vLLM (RL fine-tuning, colocated) grows a few GB a step until OOM")
    fix = fixes.shell(f"export {IPC_LEGACY_VAR}=1", "the accepted workaround until a ROCm with the dma-buf fix "
                      "(rocm-systems PR#6151); add it to the job script")
    if sharing:
        return warned(f"ROCm {rocm} with {', '.join(sharing)} installed: {why}", fix, [f"ROCm {rocm}"])
    return passed(f"ROCm {rocm}: no vLLM here (note: {why}; {IPC_LEGACY_VAR}=1 avoids it)")


# ACS P2P Request Redirect (bit 2), P2P Completion Redirect (bit 3) and P2P Egress Control (bit 5): the bits the
# kernel's pci=disable_acs_redir= clears "to always allow passing P2P traffic uninterrupted" (Linux commit
# aaca43fda742). Set on a bridge above the GPUs, they send peer-to-peer traffic (GPU-GPU over PCIe, GPU-NIC RDMA)
# up to the root complex: collectives slow down or hang (NCCL's troubleshooting guide, "PCI Access Control
# Services (ACS)": https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html).
ACS_P2P_BITS = 0x04 | 0x08 | 0x20


@check("health.pcie_acs", "PCIe ACS redirect off on the bridges above the GPUs")
def check_pcie_acs(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    acs = ctx.health("pcie_acs")
    if acs is None:
        return skipped("the bridges' ACS settings were not read (a bundle from an older rocmcheck)")
    bridges = acs.get("bridges") or {}
    if not bridges:
        return skipped("no PCIe bridge above an AMD GPU in sysfs")
    if not acs.get("readable"):
        return skipped("the bridges' extended configuration space is readable by root only: run the doctor with "
                       "sudo, or look with `sudo lspci -vvv | grep ACSCtl`")
    on = {bdf: ctrl for bdf, ctrl in bridges.items() if ctrl is not None and ctrl & ACS_P2P_BITS}
    evidence = [f"{bdf}: ACSCtl 0x{ctrl:04x}" for bdf, ctrl in sorted(bridges.items()) if ctrl is not None]
    if not on:
        return passed(f"ACS redirect is off on the {len(bridges)} bridge(s) above the GPUs", evidence)
    names = sorted(on)
    first = names[0]
    return warned(f"ACS redirect is on at {len(on)} bridge(s) above the GPUs ({', '.join(names[:6])}"
                  f"{' ...' if len(names) > 6 else ''}): peer-to-peer traffic goes through the root complex",
                  fixes.shell("sudo setpci -s {bdf} ECAP_ACS+6.w=0000",
                              f"for each bridge named ({len(on)}); until the next boot: disable ACS in the BIOS or "
                              "add pci=disable_acs_redir= to the kernel command line to keep it", bdf=first),
                  evidence)


# amdgpu's bad_page_threshold (amdgpu_drv.c MODULE_PARM_DESC): 0 disables bad page retirement; a positive value is
# a user-set threshold; -1 and -2 are the driver's own rule (their meaning changed between driver releases: "ignore
# threshold" / "determined by a formula"). The driver warns at 90 % of the threshold (Linux commit 8483fdfea778),
# and a GPU over it is not initialized (commit 68daadf3d673).
BAD_PAGE_WARN_FRACTION = 0.9


@check("health.bad_page_threshold", "retired VRAM pages against amdgpu's bad_page_threshold")
def check_bad_page_threshold(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    params = ctx.health("amdgpu_params")
    if params is None:
        return skipped("amdgpu's parameters were not read (a bundle from an older rocmcheck)")
    raw = params.get("bad_page_threshold")
    if raw is None:
        return skipped("/sys/module/amdgpu/parameters/bad_page_threshold is not there (amdgpu not loaded)")
    try:
        threshold = int(raw)
    except ValueError:
        return skipped(f"bad_page_threshold {raw!r} is not a number")
    pages = {d.get("bdf", "?"): len([line for line in (d.get("bad_pages") or "").splitlines() if line.strip()])
             for d in ctx.health("pci_gpus") or [] if d.get("vendor") == "amd" and d.get("bad_pages") is not None}
    evidence = [f"bad_page_threshold={threshold}"] + [f"{bdf}: {n} retired page(s)" for bdf, n in sorted(pages.items())]
    if threshold == 0:
        return warned("bad page retirement is off (amdgpu.bad_page_threshold=0): VRAM pages with uncorrectable "
                      "errors stay in use",
                      fixes.note("remove amdgpu.bad_page_threshold=0 from the kernel command line or modprobe.d "
                                 "(the default retires bad pages)"), evidence)
    if threshold > 0:
        near = {b: n for b, n in pages.items() if n >= BAD_PAGE_WARN_FRACTION * threshold}
        if near:
            worst = max(near.values())
            status = failed if worst >= threshold else warned
            return status(f"{len(near)} GPU(s) at {worst} retired pages of the threshold {threshold}: a GPU over it "
                          "is not initialized by amdgpu", fixes.note("plan the GPU's replacement (RMA) with your "
                                                                     "vendor; `amd-smi bad-pages` lists the pages"),
                          evidence)
    return passed(f"bad_page_threshold={threshold}" + (f"; most retired pages on a GPU: {max(pages.values())}"
                                                        if pages else ""), evidence)


@check("health.xgmi_links", "every xGMI link between the GPUs is up (amd-smi, no traffic sent)")
def check_xgmi_links(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    res = ctx.command("amd-smi-xgmi-links")
    if res is None:
        return skipped("amd-smi is not installed")
    if not res.ok:
        return skipped(f"amd-smi xgmi --link-status: {res.describe_failure()}")
    links = parse_xgmi_link_status(res.stdout)
    known = {gpu: states for gpu, states in links.items() if any(s in ("U", "D") for s in states)}
    if not known:
        return skipped("amd-smi shows no xGMI link state here (no xGMI, or the driver does not expose it)")
    down = {gpu: states.count("D") for gpu, states in known.items() if "D" in states}
    evidence = [f"{gpu}: {' '.join(states)}" for gpu, states in known.items()]
    if down:
        total = sum(down.values())
        return warned(f"{total} xGMI link(s) down on {len(down)} GPU(s): GPU-to-GPU bandwidth drops and collectives "
                      "slow down or route over PCIe",
                      fixes.note("check again after a cold power cycle; links that stay down need the platform "
                                 "vendor (seating, firmware): AMD's node validation expects every link up"), evidence)
    return passed(f"every xGMI link of {len(known)} GPU(s) is up", evidence)


# CPER (Common Platform Error Record, UEFI appendix N) records amdgpu keeps for RAS events; a fatal or uncorrected
# one is what decides a retry against an RMA after a hang (AMD's node-scraper reads them; the AFIDs name the fault).
CPER_BAD = ("fatal", "non_fatal_uncorrected")


@check("health.cper", "no fatal or uncorrected CPER error record on the GPUs")
def check_cper(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    res = ctx.command("amd-smi-cper")
    if res is None:
        return skipped("amd-smi is not installed")
    if not res.ok:
        return skipped(f"amd-smi ras --cper: {res.describe_failure()} (it needs root, and an MI300 or later)")
    records = parse_amd_smi_cper(res.stdout)
    if not records:
        return passed("no CPER record")
    bad = [r for r in records if r.severity in CPER_BAD]
    evidence = [f"GPU {r.gpu}: {r.severity}{' at ' + r.timestamp if r.timestamp else ''}"
                f"{' (AFID ' + ' '.join(r.afids) + ')' if r.afids else ''}" for r in (bad or records)[:16]]
    if bad:
        gpus = sorted({r.gpu for r in bad if r.gpu is not None})
        return warned(f"{len(bad)} fatal or uncorrected CPER record(s) on GPU(s) {', '.join(map(str, gpus))}: a GPU "
                      "had an error it could not correct",
                      fixes.shell("sudo amd-smi ras --cper --severity all --folder {folder}",
                                  "writes each record as a .cper file; `sudo amd-smi ras --afid --cper-file FILE` "
                                  "names the fault (AFID) for your vendor's RMA process", folder="/tmp/cper"),
                      evidence)
    return passed(f"{len(records)} CPER record(s), all corrected", evidence)
