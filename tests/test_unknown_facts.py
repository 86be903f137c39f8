"""Unknown is not absent: a check whose facts were not collected skips and names them; it never fails or warns
because of a fact nobody collected (rocmcheck/facts/known.py, CheckContext's accessors).

The recorded machines (tests/machines.py and their variants in tests/test_fixes.py) are saved as bundles with each
fact removed in turn, each group and each key of each group, and every check is run on each: no verdict may
become a warning, a failure or a crash where the whole bundle gave a pass or a skip, and every verdict that
changed must be a skip naming what is not known. A second walk records every environment variable a check reads:
each must be one the collector records (ENV_NAMES / ENV_PREFIXES)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from machines import amd_machine, ran
from test_fixes import machines

from rocmcheck.checks import CheckSpec, run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.collect import ENV_NAMES, Facts, in_env_domain
from rocmcheck.facts.known import ALL, FACT_GROUPS, NotCollected, NotKnown, known_of_bundle
from rocmcheck.result import Status

SPECS = select_checks()
MACHINES = machines()
PROBLEMS = (Status.WARN, Status.FAIL, Status.CRASH)
# The tools' outputs as parsed, shared by every context of the walks: a parser is a pure function of the text
# (CheckContext.parse_once), and a removal leaves most outputs as they were.
PARSED: dict[Any, Any] = {}


def _verdicts(facts: Facts, phrase: str = "not known") -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in run_checks(SPECS, CheckContext(facts, unknown_phrase=phrase, parsed=PARSED)):
        out.setdefault(r.id, []).append(r)
    return out


def _removals(bundle: dict[str, Any], key_groups: tuple[str, ...] = FACT_GROUPS):
    """(label, bundle) with one fact removed: a whole group, or one key of a group of key_groups (the rest of it then
    known as the list of its other keys, as a partial source would say)."""
    for group in FACT_GROUPS:
        if group not in bundle["known"]:
            continue
        cut = copy.deepcopy(bundle)
        cut.pop(group, None)
        del cut["known"][group]
        yield f"{group}", cut
        value = bundle.get(group)
        if isinstance(value, dict) and group in key_groups:
            for key in value:
                cut = copy.deepcopy(bundle)
                cut[group] = {k: v for k, v in value.items() if k != key}
                cut["known"][group] = [k for k in value if k != key]
                yield f"{group}[{key!r}]", cut


def _changes(base: dict[str, list[Any]], variant: dict[str, list[Any]]) -> list[str]:
    bad = []
    for check_id, before in base.items():
        after = variant.get(check_id, [])
        same = [(r.status, r.summary) for r in before] == [(r.status, r.summary) for r in after]
        if same:
            continue
        for r in after:
            if r.status in PROBLEMS and all(b.status in (Status.PASS, Status.SKIP) for b in before):
                bad.append(f"{check_id}: {before[0].status.value} became {r.status.value}: {r.summary}")
            elif r.status is not Status.SKIP or not r.data.get("not_known") or not r.summary.startswith("not known: "):
                bad.append(f"{check_id}: '{before[0].status.value}: {before[0].summary}' became "
                           f"'{r.status.value}: {r.summary}' (a changed verdict must be a skip naming the fact)")
    return bad


class RecordingEnv(dict):
    """A group of facts (the env group, or facts.known), noting every key read from it, however it is read, in
    `read` (a set of its own, or one shared)."""

    def __init__(self, data: Any = (), read: set[str] | None = None) -> None:
        super().__init__(data)
        self.read: set[str] = set() if read is None else read

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.read.add(key)
        return super().__contains__(key)


class _SeenKnown(RecordingEnv):
    """facts.known, noting every group asked about; reading all of it notes every group."""

    def __iter__(self):
        self.read.update(FACT_GROUPS)
        return super().__iter__()

    def keys(self):
        self.read.update(FACT_GROUPS)
        return super().keys()

    def items(self):
        self.read.update(FACT_GROUPS)
        return super().items()

    def values(self):
        self.read.update(FACT_GROUPS)
        return super().values()


class _WatchedFacts:
    """Facts that note every attribute a check reads. A method of Facts reads what it likes: calling one counts as
    reading every group."""

    def __init__(self, facts: Facts, seen: set[str]) -> None:
        self._facts, self._seen = facts, seen

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._facts, name)
        if callable(value):
            self._seen.update(FACT_GROUPS)
        self._seen.add(name)
        return _SeenKnown(value, self._seen) if name == "known" else value


def _groups_read(facts: Facts) -> dict[str, set[str]]:
    """Per check, the fact groups it reads on these facts: each check alone on its own context, so a view another
    check computed first (CheckContext caches them) still counts as read by every check that uses it."""
    out: dict[str, set[str]] = {}
    for spec in SPECS:
        seen: set[str] = set()
        run_checks([spec], CheckContext(_WatchedFacts(facts, seen), parsed=PARSED))  # type: ignore[arg-type]
        out[spec.id] = seen
    return out


def _walk(name: str, tracked: bool = True) -> list[str]:
    """Every removal of the machine's walk, judged: with `tracked`, only the checks that read the group a removal
    touches run again (a check reads its facts through the context, whose every read of a group is noted; the
    others are functions of facts that did not change); without, every check runs on every variant."""
    bundle = MACHINES[name].to_dict()
    base = _verdicts(Facts.from_dict(bundle))
    assert not [r for rs in base.values() for r in rs if r.status is Status.CRASH]
    reads = _groups_read(Facts.from_dict(bundle))
    problems = []
    # The kernel-log variants differ from their base machine only in the log: their other keys are walked there.
    key_groups = ("commands", "node_health") if name.startswith("kernel-log ") else FACT_GROUPS
    for label, cut in _removals(bundle, key_groups):
        group = label.split("[", 1)[0]
        specs = [s for s in SPECS if group in reads[s.id]] if tracked else SPECS
        variant = dict(base) if tracked else {}
        for s in specs:
            variant.pop(s.id, None)
        for r in run_checks(specs, CheckContext(Facts.from_dict(cut), parsed=PARSED)):
            variant.setdefault(r.id, []).append(r)
        problems += [f"{name} without {label}: {line}" for line in _changes(base, variant)]
    return problems


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_a_fact_removed_from_a_recorded_machine_only_ever_skips_naming_it(name):
    problems = _walk(name)
    assert not problems, "\n".join(problems[:40])


def test_the_walk_of_the_checks_that_read_a_group_finds_what_the_walk_of_every_check_finds():
    # The tracked walk, against every check run on every variant, on machines whose walk finds nothing and on one
    # whose check reads a group it never asks about (what the walk exists to catch).
    for name in ("amd-healthy", "nvidia-h100", "amd-two-rocms"):
        assert _walk(name) == _walk(name, tracked=False) == []

    def sneaky(ctx: CheckContext):  # reads the commands group without asking whether it is known
        from rocmcheck.fixes import note
        from rocmcheck.result import failed, passed
        return passed("rocminfo ran") if "rocminfo" in ctx.facts.commands else \
            failed("rocminfo is not installed", note("install it"))

    spec = CheckSpec("test.sneaky", "rocm", "reads commands without asking", sneaky)
    SPECS.append(spec)
    try:
        tracked, full = _walk("amd-healthy"), _walk("amd-healthy", tracked=False)
    finally:
        SPECS.remove(spec)
    assert tracked == full and any("test.sneaky" in line for line in tracked), tracked


def test_nothing_known_skips_every_check_that_reads_a_fact():
    facts = Facts(known={})
    results = run_checks(SPECS, CheckContext(facts))
    judged = [f"{r.id}: {r.status.value} {r.summary}" for r in results if r.status is not Status.SKIP]
    assert not judged, judged
    # gpu.expected_arch without --arch, and the site's checks without --knowledge, need no fact: they skip because
    # nothing was asked of them.
    asked_nothing = {"gpu.expected_arch", "env.site_forbidden", "rocm.site_versions"}
    unnamed = [r.id for r in results if not r.data.get("not_known") and r.id not in asked_nothing]
    assert not unnamed, unnamed
    with_arch = run_checks(select_checks(only=["gpu.expected_arch"]), CheckContext(facts, expected_archs=("gfx942",)))
    assert with_arch[0].status is Status.SKIP and with_arch[0].data.get("not_known")


def test_the_skip_says_what_is_not_known_in_the_callers_words():
    facts = amd_machine()
    facts.known = {g: ALL for g in FACT_GROUPS if g != "limits"}
    v = _verdicts(facts)["host.shm"][0]
    assert v.status is Status.SKIP and v.summary == "not known: /dev/shm size"
    assert v.data == {"not_known": ["/dev/shm size"]}
    v = _verdicts(facts, phrase="not in the paste")["host.shm"][0]
    assert v.summary == "not in the paste: /dev/shm size"


def test_unknown_packages_are_not_a_missing_torch():
    facts = amd_machine(probes={})
    facts.known = {g: ALL for g in FACT_GROUPS if g not in ("packages", "probes", "probe_runs")}
    v = _verdicts(facts)
    assert v["torch.installed"][0].status is Status.SKIP and "not known" in v["torch.installed"][0].summary
    assert v["transformers.version"][0].summary == "not known: the installed version of transformers"
    # Known whole and without torch, it is missing.
    facts.known = {g: ALL for g in FACT_GROUPS}
    facts.packages = {"transformers": "4.46.0"}
    assert _verdicts(facts)["torch.installed"][0].status is Status.FAIL


def test_vendor_is_unknown_when_nothing_about_the_gpus_is_known():
    assert CheckContext(Facts(known={})).vendor == "unknown"
    assert CheckContext(Facts()).vendor == "none"  # everything known and nothing found: a CPU-only machine
    facts = Facts(known={g: ALL for g in FACT_GROUPS if g != "commands"})
    assert CheckContext(facts).vendor == "unknown"
    with pytest.raises(NotKnown):
        CheckContext(facts).known_vendor()
    facts.present = {"/sys/module/amdgpu": True}
    assert CheckContext(facts).vendor == "amd"  # one sign known is enough to say


def test_a_bundle_without_known_knows_the_groups_it_holds():
    bundle = amd_machine().to_dict()
    del bundle["known"], bundle["limits"]
    facts = Facts.from_dict(bundle)
    assert "limits" not in facts.known and facts.known["env"] == ALL and facts.known["commands"] == ALL
    assert known_of_bundle({"known": {"env": ["PATH"]}}) == {"env": ["PATH"]}
    with pytest.raises(ValueError):
        Facts.from_dict({**amd_machine().to_dict(), "known": {"env": 3}})


def test_a_partial_group_knows_only_its_listed_keys():
    facts = amd_machine(env={"HSA_XNACK": "1"})
    facts.known["env"] = ["HSA_XNACK", "HSA_NO_SCRATCH_RECLAIM"]
    ctx = CheckContext(facts)
    assert ctx.env_var("HSA_XNACK") == "1" and ctx.env_var("HSA_NO_SCRATCH_RECLAIM") is None
    with pytest.raises(NotKnown) as err:
        ctx.env_var("HSA_OVERRIDE_GFX_VERSION")
    assert "HSA_OVERRIDE_GFX_VERSION" in err.value.what
    v = _verdicts(facts)
    assert v["env.hsa_xnack"][0].status is Status.WARN
    assert v["env.hsa_override"][0].summary == "not known: environment variable HSA_OVERRIDE_GFX_VERSION"


# ---- the environment a check reads --------------------------------------------------------------------------------

def _env_reads(facts: Facts, specs: list[CheckSpec]) -> tuple[set[str], list[str]]:
    facts = copy.deepcopy(facts)
    facts.env = RecordingEnv(facts.env)
    results = run_checks(specs, CheckContext(facts))
    return facts.env.read, [f"{r.id}: {r.summary}" for r in results if r.status is Status.CRASH]


def _with_env(facts: Facts, **env: str) -> Facts:
    facts = copy.deepcopy(facts)
    facts.env = {**facts.env, **env}
    return facts


# Every variable the checks branch on, set, so each branch that reads another one is reached.
ENV_SETTINGS = {
    "PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "0", "PYTORCH_TUNABLEOP_FILENAME": "t.csv",
    "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True", "ROCR_VISIBLE_DEVICES": "0,1",
    "HIP_VISIBLE_DEVICES": "1", "TORCH_BLAS_PREFER_HIPBLASLT": "0", "NCCL_MIN_NCHANNELS": "32",
    "HSA_OVERRIDE_GFX_VERSION": "9.4.2", "BNB_ROCM_VERSION": "63", "container": "podman",
}


def test_every_variable_a_check_reads_is_one_the_collector_records():
    read: set[str] = set()
    crashes: list[str] = []
    for name, facts in MACHINES.items():
        for variant in (facts, _with_env(facts, **ENV_SETTINGS)):
            names, crashed = _env_reads(variant, SPECS)
            read |= names
            crashes += [f"{name}: {c}" for c in crashed]
    assert not crashes, crashes
    outside = sorted(n for n in read if not in_env_domain(n))
    assert not outside, f"checks read variables the collector never records: {outside}"
    # The walk reaches the variables that decide verdicts (a walk that reads nothing proves nothing).
    assert {"PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME", "HSA_OVERRIDE_GFX_VERSION",
            "NCCL_MIN_NCHANNELS", "PYTORCH_HIP_ALLOC_CONF", "ROCR_VISIBLE_DEVICES"} <= read
    assert {"PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME"} <= set(ENV_NAMES)


def test_the_walk_catches_a_check_that_reads_a_variable_the_collector_never_records():
    def reads_env_var(ctx: CheckContext) -> None:
        ctx.env_var("SOME_UNRECORDED_SETTING")

    def reads_the_group(ctx: CheckContext) -> None:
        ctx.facts.env.get("ANOTHER_UNRECORDED_SETTING")

    with pytest.raises(NotCollected):
        CheckContext(amd_machine()).env_var("SOME_UNRECORDED_SETTING")
    specs = [CheckSpec("env.bad_one", "env", "bad", reads_env_var), CheckSpec("env.bad_two", "env", "bad",
                                                                             reads_the_group)]
    names, crashed = _env_reads(amd_machine(), specs)
    assert any("env.bad_one" in c and "NotCollected" in c for c in crashed)
    assert "ANOTHER_UNRECORDED_SETTING" in names and not in_env_domain("ANOTHER_UNRECORDED_SETTING")


def test_a_live_collection_says_what_it_collected(monkeypatch):
    from rocmcheck.facts import collect

    facts = collect.collect_facts(deadline_s=20, python_probes=False)
    assert facts.known["env"] == ALL and facts.known["commands"] == ALL and facts.known["limits"] == ALL
    # The stack probes did not run: torch is not known, the bindings are.
    assert facts.known["probes"] == ["nvml", "amdsmi"]
    assert "torch" in _verdicts(facts)["torch.installed"][0].summary and \
        _verdicts(facts)["torch.installed"][0].status is Status.SKIP
    again = Facts.from_dict(facts.to_dict())
    assert again.known == facts.known


def test_a_tool_that_hung_is_known_to_have_hung():
    facts = amd_machine(commands={"rocminfo": ran("rocminfo", stdout="", timed_out=True)})
    v = _verdicts(facts)["gpu.rocminfo"][0]
    assert v.status is Status.FAIL and "hung" in v.summary


def test_checks_read_facts_only_through_the_accessors():
    """A check that reads `ctx.facts` directly reads an unknown fact as absent: only context.py may."""
    from pathlib import Path

    import rocmcheck.checks

    folder = Path(rocmcheck.checks.__file__).parent
    direct = [f"{path.name}:{n}: {line.strip()}" for path in sorted(folder.glob("*.py")) if path.name != "context.py"
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "ctx.facts" in line]
    assert not direct, direct
