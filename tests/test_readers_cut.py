"""The readers on real outputs cut short or thinned out: a reader given part of an output never states a fact that part
does not show. Each fact a reader gives (a GPU's arch, partition, index, bus, product, compute units, a driver or torch
version, a kernel-log line, an import error) must be printed in the text it was given."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import PROJECT_FIXTURES_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmcheck.facts.parsers.kernel_log import parse_kernel_log
from rocmcheck.facts.parsers.rocminfo import parse_rocminfo
from rocmcheck.facts.parsers.smi import parse_amd_smi_static, parse_amd_smi_version, parse_rocm_smi
from rocmcheck.triage.readers.collect_env import parse_collect_env
from rocmcheck.triage.readers.ds_report import parse_ds_report
from rocmcheck.triage.readers.packages import parse_packages


def _texts(*globs: str) -> list[tuple[str, str]]:
    return [(str(p.relative_to(PROJECT_FIXTURES_DIR)), p.read_bytes().decode("utf-8"))
            for pattern in globs for p in sorted(PROJECT_FIXTURES_DIR.glob(pattern))]


_SPACE = re.compile(r"\s+")


def _shown(value: object, text: str) -> bool:
    """The value is printed in the text (case and runs of white space aside)."""
    return _SPACE.sub(" ", str(value)).strip().lower() in _SPACE.sub(" ", text).lower()


def _rocminfo_facts(text: str) -> list[object]:
    r = parse_rocminfo(text)
    facts: list[object] = [r.runtime_version, r.kfd_module_version]
    for a in r.agents:
        facts += [a.name, a.marketing_name, a.compute_units, a.uuid]
    return facts


# Where a GPU's index is printed: "GPU[3]", "GPU: 3", a JSON "gpu" key, a table row's first cell. An output printing
# none (a jq-filtered object) has its GPUs numbered by position.
_INDEXES = re.compile(r'GPU\s*\[?\s*:?\s*\d|"gpu"\s*:|^\s*\|?\s*\d+\s', re.IGNORECASE | re.MULTILINE)


def _smi_facts(report, text: str) -> list[object]:
    facts: list[object] = [report.driver_version, report.tool_version, report.rocm_version]
    for g in report.gpus:
        facts += [g.index if _INDEXES.search(text) else None, g.product_name, g.gfx, g.partition, g.memory_partition,
                  g.partition_id, g.pci_bus, g.uuid, g.compute_units, g.device_id, g.node]
    return facts


def _kernel_facts(text: str) -> list[object]:
    return [f.example for f in parse_kernel_log(text)] + [p.split(" (pid ")[0] for f in parse_kernel_log(text)
                                                          for p in f.processes]


def _collect_env_facts(text: str) -> list[object]:
    ce = parse_collect_env(text)
    facts: list[object] = [ce.torch_version, ce.torch_build, ce.rocm_build, *ce.gpu_archs]
    return facts + [f"amd-torch-device-{arch}" for arch in ce.torch_device_archs]


def _ds_report_facts(text: str) -> list[object]:
    r = parse_ds_report(text)
    return [r.import_error, r.deepspeed_version, r.torch_version, r.accelerator, *r.ops]


def _package_facts(text: str) -> list[object]:
    p = parse_packages(text)
    return [p.torch_version, *p.versions.values()]


READERS = [
    (_rocminfo_facts, _texts("public/rocminfo/*.txt", "pastes/rocminfo/*.txt")),
    (lambda t: _smi_facts(parse_rocm_smi(t), t), _texts("public/rocm-smi/*.txt", "pastes/rocm_smi/[!j]*.txt")),
    (lambda t: _smi_facts(parse_amd_smi_static(t), t) + _smi_facts(parse_amd_smi_version(t), t),
     _texts("public/amd-smi/*.txt", "pastes/amd_smi/*.txt")),
    (_kernel_facts, _texts("pastes/kernel_log/*.txt")),
    (_collect_env_facts, _texts("pastes/collect_env/*.txt", "public/collect_env/*.txt")),
    (_ds_report_facts, _texts("pastes/ds_report/*.txt", "pastes/traceback/ds_report_crash*.txt")),
    (_package_facts, _texts("pastes/pip_list/*.txt", "pastes/pip_freeze/*.txt")),
]
CASES = [(facts, name, text) for facts, texts in READERS for name, text in texts]


def _unshown(facts, text: str) -> list[object]:
    return [f for f in facts(text) if f is not None and f != "" and not _shown(f, text)]


def test_the_readers_have_real_outputs_to_cut():
    assert all(texts for _, texts in READERS) and len(CASES) > 60


def test_every_line_boundary():
    """Each output cut after each of its lines, and from each of its lines on (every line of an output up to 24 lines
    long, every n-th of a longer one: 24 cuts each way)."""
    for facts, name, text in CASES:
        lines = text.splitlines(keepends=True)
        step = max(1, len(lines) // 24)
        for n in range(0, len(lines) + 1, step):
            for part in ("".join(lines[:n]), "".join(lines[n:])):
                assert not _unshown(facts, part), (name, n, _unshown(facts, part))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), data=st.data())
def test_random_line_subsets(case, data):
    """Any lines of an output, in order, with the others left out (a grep, a paste that skipped some)."""
    facts, name, text = case
    lines = text.splitlines(keepends=True)
    keep = data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    part = "".join(line for line, kept in zip(lines, keep) if kept)
    assert not _unshown(facts, part), (name, _unshown(facts, part))


def test_a_partition_verdict_needs_its_evidence_in_the_cut():
    """rocminfo of 8 MI300X, cut at each agent: "whole GPUs (SPX)" only where a Compute Unit line shows it."""
    from machines import amd_machine, ran, verdicts

    from rocmcheck.result import Status

    text = (Path(PROJECT_FIXTURES_DIR) / "public/rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").read_text()
    lines = text.splitlines(keepends=True)
    for n in [i for i, line in enumerate(lines) if re.match(r"\*+\s*$", line)][::3] + [len(lines)]:
        for part in ("".join(lines[:n]), "".join(line for line in lines[n:] if "Compute Unit" not in line)):
            r = verdicts(amd_machine(commands={"rocminfo": ran("rocminfo", stdout=part)}), "gpu.partition")
            if r["gpu.partition"].status == Status.PASS:
                assert "Compute Unit" in part, (n, r["gpu.partition"].summary)
