"""Installed versions against the known-issues tables (rocmcheck/knowledge/known_issues*.json): a release with a known
regression or a known-bad version, on a machine its row applies to, is named with the release that fixes it or the
workaround its source gives.

Each row ends in one of four states, all in the verdict's data:
- a finding: the installed version is inside the affected range and the machine matches the row's conditions;
- clear: the installed version is outside the range;
- not applied: the machine is outside the row's conditions (another platform, GPU arch or product, kernel, no RoCE
  port);
- not judged: the version or a condition is not known (not installed, not recorded, a torch wheel naming only its ROCm
  series where the range splits that series). A row that is not judged never counts as a pass.
"""

from __future__ import annotations

from typing import Any, Callable

from packaging.version import Version

from rocmcheck import versions
from rocmcheck.checks import check, ib_settings
from rocmcheck.checks.context import VENDOR_WHAT, CheckContext
from rocmcheck.checks.rocm import detected_rocm_version
from rocmcheck.facts.known import NotKnown, describe
from rocmcheck.facts.parsers.versions import is_rocm_torch, parse_torch_rocm_suffix
from rocmcheck.fixes import Fix, note, shell
from rocmcheck.knowledge.known_issues import KnownIssue, all_issues
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

# The names a package is recorded under (rocmcheck/facts/collect.py PACKAGES), for packages known by two spellings.
PACKAGE_NAMES = {"flash-attn": ("flash-attn", "flash_attn")}


class _Unknown:
    """A fact that was not collected, with its name (NotKnown's `what`)."""

    def __init__(self, what: str) -> None:
        self.what = what


def _known(read: Callable[[], Any]) -> Any:
    """The value (None when known to be absent), or an _Unknown when the fact was not collected."""
    try:
        return read()
    except NotKnown as exc:
        return _Unknown(exc.what)


def _is_unknown(value: Any) -> bool:
    return isinstance(value, _Unknown)


def _torch(ctx: CheckContext) -> tuple[str | None, str | None, str | None]:
    """(torch's version, torch.version.hip, the fact not collected): the torch probe's version, else the installed
    torch's (a torch that fails to import, a pip list pasted to triage: its "+rocm6.4" label says the build). A probe
    that was not collected is named even when the package's version stands in for it."""
    probe = _known(lambda: ctx.torch)
    package = _known(lambda: ctx.package("torch"))
    probed = probe if isinstance(probe, dict) else {}
    version = probed.get("version") or (str(package) if package and not _is_unknown(package) else None)
    missing = probe.what if _is_unknown(probe) else (package.what if _is_unknown(package) and not version else None)
    return version, probed.get("hip"), missing


def _stack(ctx: CheckContext) -> str | None:
    """"rocm" or "cuda": what torch is built for, else the machine's GPU vendor; "none" on a machine known to have no
    GPU stack; None when not known."""
    version, hip, _ = _torch(ctx)
    if version:
        if hip or is_rocm_torch(version):
            return "rocm"
        probe = _known(lambda: ctx.torch)
        if "+cu" in version or (isinstance(probe, dict) and probe.get("cuda")):
            return "cuda"
    vendor = ctx.vendor
    return {"amd": "rocm", "nvidia": "cuda", "none": "none"}.get(vendor)


def _rocm_versions(ctx: CheckContext) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(what, version) of each ROCm in use (the system's user space, the one torch was built for); why one that may
    be in use cannot be judged; the facts not collected that name one."""
    found, cannot, unknown = [], [], []
    vendor = ctx.vendor
    if vendor == "amd":
        system = _known(lambda: detected_rocm_version(ctx))
        if _is_unknown(system):
            unknown.append(system.what)
        elif system:
            found.append(("the system ROCm", str(system).strip()))
    elif vendor == "unknown":
        unknown.append(VENDOR_WHAT)
    version, hip, missing = _torch(ctx)
    if missing:
        unknown.append(missing)
    if version and (hip or is_rocm_torch(version)):
        bundled = parse_torch_rocm_suffix(version) or versions.series(hip)
        if bundled:
            found.append(("torch's ROCm", bundled))
        else:
            cannot.append(f"torch's ROCm: torch {version} names no ROCm release")
    return found, cannot, unknown


# A ROCm series known without its patch release ("6.4" from a "+rocm6.4" wheel) stands for its patch releases
# 0 to PATCHES - 1: more than any series has had, so "every patch release" covers the ones to come too.
PATCHES = 100


def _in_range(issue: KnownIssue, package: str, version: str) -> tuple[bool | None, str]:
    """(inside the affected range?, a note): None when the version cannot say. A ROCm series alone ("6.2", from a
    "+rocm6.2" wheel or torch.version.hip) is inside when the range holds every patch release of it, outside when it
    holds none, and not judged when the range splits the series. So is a HIP version ("6.2.41133")."""
    parsed = versions.parse(version)
    if parsed is None:
        return None, f"{version!r} is not a version"
    # HIP prints a build number where a ROCm release has its patch ("6.2.41133" is ROCm 6.2.x): the series only
    if package == "rocm" and (len(parsed.release) < 3 or parsed.release[2] >= PATCHES):
        series = versions.series(version)
        if series is None:
            return None, f"{version!r} names no ROCm series"
        inside = [p for p in range(PATCHES) if issue.affects(Version(f"{series}.{p}"))]
        if len(inside) == PATCHES:
            return True, f"every ROCm {series}.x release is affected"
        if not inside:
            return False, ""
        return None, f"only the series {series} is known, and the range holds some of its patch releases"
    return issue.affects(parsed), ""


def _conditions(ctx: CheckContext, issue: KnownIssue) -> tuple[bool | None, str, str | None]:
    """(does the machine match the row's conditions?, why not / what cannot be told, the fact not collected)."""
    if issue.archs or issue.products:
        gpus = _known(lambda: ctx.amd_gpus)
        if _is_unknown(gpus):
            return None, gpus.what, gpus.what
        if not gpus or not all(g.arch for g in gpus):
            return None, "the GPUs' arch is not known", None
        archs = sorted({g.arch for g in gpus if g.arch})
        if issue.archs and not set(archs) & set(issue.archs):
            return False, f"GPU arch {', '.join(archs)}, the row is for {', '.join(issue.archs)}", None
        if issue.products:
            products = {g.product.name for g in gpus if g.product is not None}
            if not products & set(issue.products):
                if any(g.product is None and (not issue.archs or g.arch in issue.archs) for g in gpus):
                    return None, f"the GPU product is not known (the row is for {', '.join(issue.products)})", None
                return False, f"GPU {', '.join(sorted(products))}, the row is for {', '.join(issue.products)}", None
    if issue.kernel is not None:
        kernel = _known(lambda: ctx.platform_info("kernel"))
        if _is_unknown(kernel):
            return None, kernel.what, kernel.what
        parsed = versions.parse(kernel) if kernel else None
        if parsed is None:
            return None, f"the kernel release {kernel!r} is not a version", None
        base = Version(".".join(str(n) for n in parsed.release))
        if not issue.kernel.contains(base, prereleases=True):
            return False, f"kernel {kernel}, the row is for kernels {issue.kernel}", None
    if issue.roce:
        ib = _known(lambda: ctx.health("infiniband"))
        if _is_unknown(ib):
            return None, ib.what, ib.what
        if not isinstance(ib, dict):
            what = describe("node_health", "infiniband")
            return None, what, what
        if not any(p.roce for p in ib_settings.ports(ib)):
            return False, "no RoCE port in /sys/class/infiniband", None
    return True, "", None


def _versions_of(ctx: CheckContext, issue: KnownIssue) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(what, version) pairs of the row's package, why one cannot be judged, the facts not collected."""
    if issue.package == "rocm":
        return _rocm_versions(ctx)
    for name in PACKAGE_NAMES.get(issue.package, (issue.package,)):
        version = _known(lambda name=name: ctx.package(name))
        if _is_unknown(version):
            return [], [], [version.what]
        if version:
            return [(name, str(version))], [], []
    return [], [f"{issue.package}: not installed"], []


def judge(ctx: CheckContext, issue: KnownIssue) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """(state, why, the affected (what, version) pairs, the facts not collected that left it open) for one row;
    state: "finding", "clear", "not applied", "not judged"."""
    found, cannot, unknown = _versions_of(ctx, issue)
    if issue.package == "rocm":
        # a ROCm release row is about the ROCm in use: the system's on an AMD machine, or the one torch was built for
        if not found and not unknown and ctx.vendor in ("nvidia", "none"):
            return "not applied", f"no ROCm here (GPU vendor: {ctx.vendor})", [], []
    if issue.platform is not None:
        stack = _stack(ctx)
        if stack is None:
            return "not judged", "neither torch's build nor the GPU vendor is known", [], unknown or [VENDOR_WHAT]
        if stack != issue.platform:
            return "not applied", f"the row is for {issue.platform}, this is {stack}", [], []
    inside = []
    for what, version in found:
        verdict, why = _in_range(issue, issue.package, version)
        if verdict:
            inside.append((what, version))
        elif verdict is None:
            cannot.append(f"{what} {version}: {why}")
    if inside:
        matches, why, missing = _conditions(ctx, issue)
        if matches is False:
            return "not applied", why, [], []
        if matches is None:
            return "not judged", why, [], [missing] if missing else []
        return "finding", "", inside, []
    if cannot or unknown:
        return "not judged", "; ".join(cannot + [f"not known: {u}" for u in unknown]), [], unknown
    return "clear", ", ".join(f"{w} {v}" for w, v in found), [], []


def issue_fix(issue: KnownIssue) -> Fix:
    """The row's workaround variables as one export line (with the fixing release in its comment), else the upgrade:
    a pip line for a Python package, words for ROCm."""
    upgrade = f"{'ROCm' if issue.package == 'rocm' else issue.package} {issue.upgrade} fixes it" \
        if issue.upgrade else "no fixed release is named"
    extra = f"; {issue.fix_text}" if issue.fix_text else ""
    if issue.env:
        # names are checked as variable names when the table is read (knowledge/known_issues.py row_problems)
        template = "export " + " ".join(f"{name}={{v{i}}}" for i, (name, _) in enumerate(issue.env))
        return shell(template, f"workaround ({issue.id}); {upgrade}{extra}",
                     **{f"v{i}": value for i, (_, value) in enumerate(issue.env)})
    if issue.package != "rocm":
        return shell("pip install {req}", f"{issue.id}: {upgrade}{extra}", req=f"{issue.package}>={issue.upgrade}")
    return note(f"upgrade ROCm to {issue.upgrade} or newer, with a torch wheel built for it ({issue.id}){extra}")


def _describe(issue: KnownIssue, inside: list[tuple[str, str]]) -> str:
    where = ", ".join(f"{what} {version}" for what, version in inside)
    fixed = f" (fixed in {issue.upgrade})" if issue.upgrade else ""
    return f"{where}: {issue.what}{fixed}"


@check("versions.known_issues", "installed versions against known regressions and known-bad releases")
def check_known_issues(ctx: CheckContext) -> CheckResult:
    """Each row of the known-issues tables against the installed version of its package, on the machines it applies
    to (docs/knowledge.md lists the rows' sources)."""
    states: dict[str, list[str]] = {"finding": [], "clear": [], "not applied": [], "not judged": []}
    findings: list[tuple[KnownIssue, list[tuple[str, str]]]] = []
    evidence, later, missing = [], [], []
    for issue in all_issues():
        state, why, inside, unknown = judge(ctx, issue)
        states[state].append(issue.id)
        missing += [u for u in unknown if u not in missing]
        if state == "finding":
            findings.append((issue, inside))
            fix = issue_fix(issue)
            evidence.append(f"{issue.id}: {_describe(issue, inside)}; affected {issue.package} {issue.range} "
                            f"({issue.range_basis}); fix: {fix.line()}; {', '.join(issue.sources)} (read "
                            f"{issue.read})")
        elif state == "not judged":
            later.append(f"not judged: {issue.id} ({issue.package} {issue.range}): {why}")
        elif state == "clear":
            later.append(f"clear: {issue.id}: {why} outside {issue.package} {issue.range}")
    if states["not applied"]:
        later.append(f"not applied to this machine: {', '.join(states['not applied'])}")
    data = {k.replace(" ", "_"): v for k, v in states.items()}
    evidence += later
    if findings:
        findings.sort(key=lambda f: f[0].severity != "fail")
        first, inside = findings[0]
        summary = _describe(first, inside) if len(findings) == 1 else (
            f"{len(findings)} known issues: " + "; ".join(_describe(i, v) for i, v in findings))
        build = failed if first.severity == "fail" else warned
        return build(summary, issue_fix(first), evidence, **data)
    if missing:  # unknown is not absent: no pass while a row waits on a fact nobody collected
        return skipped(f"{ctx.unknown_phrase}: {missing[0]}", evidence, not_known=missing, **data)
    if states["clear"]:
        open_rows = f"; {len(states['not judged'])} not judged" if states["not judged"] else ""
        return passed(f"no installed version in a known-bad range ({len(states['clear'])} rows judged"
                      f"{open_rows})", evidence, **data)
    if states["not judged"]:
        return skipped(f"not judged: {len(states['not judged'])} rows need a version that is not here",
                       evidence, **data)
    return skipped("no known issue applies to this machine", evidence, **data)
