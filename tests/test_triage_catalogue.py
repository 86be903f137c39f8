"""The catalogue of error signatures (rocmcheck/knowledge/signatures.json): whole, every signature matching the
documented texts it was written from, every regular expression linear on hostile lines, every fix and ask a real
Fix, and the error texts the triage must know each pointing at its cause."""

from __future__ import annotations

import copy
import time

import pytest

from rocmcheck.checks import all_checks
from rocmcheck.fixes import FixKind
from rocmcheck.package_data import read_json
from rocmcheck.triage import triage
from rocmcheck.triage.catalogue import CATALOGUE_FILE, catalogue, parse_catalogue
from rocmcheck.triage.pasted import read_pastes
from rocmcheck.triage.remedy import FIELDS, NAMED_FIXES, build

CAT = catalogue()


def test_every_signature_matches_its_documented_examples_and_holds_a_literal():
    """Every text signature; a sign (a reader's finding, rocmcheck/triage/signs.py) has no text of its own and is
    tested on the real pastes that show it (tests/test_triage_signs.py)."""
    for sig in CAT.signatures:
        if sig.fact is not None:
            assert sig.regex is None and not sig.literals and not sig.examples, sig.id
            continue
        assert sig.examples, sig.id
        for example in sig.examples:
            m = sig.regex.search(example)
            assert m, (sig.id, example)
            assert any(lit in example.lower() for lit in sig.literals), (sig.id, example)
            assert any(lit in m.group(0).lower() or lit in example.lower() for lit in sig.literals)


def test_every_cause_and_signature_has_sources_and_the_checks_it_names_exist():
    checks = {spec.id for spec in all_checks()}
    for cause in CAT.causes.values():
        assert cause.sources and all(s.startswith("https://") for s in cause.sources), cause.id
        assert cause.check is None or cause.check in checks, cause.id
        assert set(cause.checks) <= checks, (cause.id, set(cause.checks) - checks)
        if cause.id in checks:  # a cause named like a doctor check is that check
            assert cause.check == cause.id
    for sig in CAT.signatures:
        assert sig.sources and all(s.startswith("https://") for s in sig.sources), sig.id


def test_every_fix_and_ask_builds_a_real_fix_with_and_without_pasted_facts():
    empty = read_pastes([("empty", "nothing here\n")])
    rich = read_pastes([("rich", "torch 2.4.1+rocm6.1\n>>> torch.__version__\n'2.4.1+rocm6.1'\n")])
    for cause in CAT.causes.values():
        for pasted in (empty, rich):
            for flags in (set(), {"container", "amd"}, {"nvidia"}):
                for data in filter(None, (cause.fix, cause.fix_container, cause.ask)):
                    fix = build(data, pasted, flags)
                    assert fix.kind in (FixKind.SHELL, FixKind.NOTE, FixKind.EDIT) and fix.text, cause.id


def test_named_fixes_and_fields_exist():
    for cause in CAT.causes.values():
        for data in filter(None, (cause.fix, cause.fix_container, cause.ask)):
            if "use" in data:
                assert data["use"] in NAMED_FIXES, cause.id
            for source in (data.get("fields") or {}).values():
                assert not source.startswith("$") or source in FIELDS, (cause.id, source)


def test_regular_expressions_are_linear_on_hostile_lines():
    """A 64 KiB line of each literal repeated, of one character, and of the punctuation the patterns use: every
    signature searches it in well under a second (a backtracking blow-up would take minutes)."""
    hostile = ["a" * 65536, " " * 65536, "/" * 65536, "(" * 65536, "=" * 65536, "[0]" * 21845,
               "Error! " * 9362, "x: " * 21845, "/dev/kfd " * 7281]
    for sig in CAT.signatures:
        if sig.regex is None:
            continue
        lines = hostile + [(lit + " ") * (65536 // (len(lit) + 1)) for lit in sig.literals]
        for line in lines:
            start = time.monotonic()
            sig.regex.search(line)
            assert time.monotonic() - start < 0.5, (sig.id, line[:40])


def test_a_damaged_catalogue_is_refused():
    doc = read_json("rocmcheck.knowledge", CATALOGUE_FILE)
    for damage in (
        lambda d: d["signatures"][0]["causes"].append({"cause": "no.such.cause", "weight": 2}),
        lambda d: d["signatures"][0]["causes"][0].__setitem__("weight", 7),
        lambda d: d["signatures"][0]["causes"][0].__setitem__("when", {"moon": ["full"]}),
        lambda d: d["signatures"][0]["causes"][0].__setitem__("when", {"paste": ["mars"]}),
        lambda d: d["signatures"][0].__setitem__("literals", ["UPPER"]),
        lambda d: d["signatures"].append(dict(d["signatures"][0])),
        lambda d: d["causes"]["gpu.oom"].__setitem__("fix", {"note": "a", "shell": "b"}),
        lambda d: d["causes"]["gpu.oom"].__setitem__("sources", []),
        lambda d: next(s for s in d["signatures"] if "fact" in s).__setitem__("fact", "no.such.sign"),
        lambda d: next(s for s in d["signatures"] if "fact" in s).__setitem__("regex", "x"),
    ):
        broken = copy.deepcopy(doc)
        damage(broken)
        with pytest.raises(ValueError):
            parse_catalogue(broken)


# The error texts the triage must know (the brief's list), as the tools print them, and the cause each names.
KNOWN_ERRORS = [
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", "torch.arch_list"),
    ("RuntimeError: HIP error: invalid device function", "torch.arch_list"),
    ("RuntimeError: No HIP GPUs are available", "torch.sees_gpus"),
    ("ImportError: /x/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
     "_ZN3c104cuda9SetDeviceEi", "flash_attn.import"),
    ("ImportError: /home/u/.cache/torch_extensions/py310_cu121/cpu_adam/cpu_adam.so: undefined symbol: "
     "_ZN3c1015SmallVectorBaseIjE8grow_podEPvmm", "deepspeed.install"),
    ("Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)", "host.shm"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 11.74 GiB. GPU 7 has a total capacity of 251.98 "
     "GiB of which 6.94 GiB is free.", "gpu.oom"),
    ("ValueError: Some keys are not used by the HfArgumentParser: ['split']", "hf.unused_keys"),
    ("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", "deepspeed.ops"),
    ("ModuleNotFoundError: No module named 'triton.ops'", "triton.pin"),
    ("Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.",
     "devices.kfd"),
    ("HSA Error: Incompatible kernel and userspace, AMD Radeon Pro VII disabled. Upgrade amdgpu.", "driver.amdgpu"),
    ("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version", "nvidia.driver_cuda"),
    ("amdgpu 0000:03:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 pasid:32769)",
     "gpu.page_fault"),
    ("HW Exception by GPU node-9 (Agent handle: 0x5650) reason :GPU Hang", "gpu.hang"),
    ("RuntimeError: CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED when calling `HIPBLAS_STATUS_NOT_SUPPORTED`",
     "env.hipblaslt"),
    ("RuntimeError: Configured CUDA binary not found at /usr/lib/python3/site-packages/bitsandbytes/"
     "libbitsandbytes_rocm63.so", "bitsandbytes.library"),
    ("Unable to open /dev/kfd read-write: Permission denied", "devices.kfd"),
    ("UserWarning: expandable_segments not supported on this platform (Triggered internally at "
     "/pytorch/c10/hip/HIPAllocatorConfig.h:29.)", "env.alloc_conf"),
    ("AssertionError: Torch not compiled with CUDA enabled", "torch.build"),
]


@pytest.mark.parametrize("text,cause", KNOWN_ERRORS)
def test_each_known_error_text_names_its_cause_first(text, cause):
    t = triage([("paste", text + "\n")])
    assert t.findings and t.findings[0].id == cause, [(f.id, f.score) for f in t.findings]
    assert t.findings[0].quotes[0].text == text


def test_the_failing_frame_tells_torch_from_an_extension():
    """invalid device function: in torch's own frame it is torch's arch list, in flash-attn's or in a C++ library's
    source file it is that library's; with no frame both stay, torch first."""
    torch_frame = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                   '  File "/venv/lib/python3.10/site-packages/torch/nn/functional.py", line 2546, in layer_norm\n'
                   '    return torch.layer_norm(input)\nRuntimeError: HIP error: invalid device function\n')
    fa_frame = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                '  File "/venv/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 91, in _fwd\n'
                '    out = flash_attn_gpu.fwd(q, k, v)\nRuntimeError: HIP error: invalid device function\n')
    cpp = ("HIP error: invalid device function\n"
           "File: /build/src/extlibs/rocALUTION/src/base/hip/hip_vector.cpp; line: 845\n")
    bare = "RuntimeError: HIP error: invalid device function\n"
    first = {name: [f.id for f in triage([(name, text)]).findings] for name, text in
             (("torch", torch_frame), ("fa", fa_frame), ("cpp", cpp), ("bare", bare))}
    assert first["torch"][0] == "torch.arch_list" and "extensions.arch" not in first["torch"]
    assert first["fa"][0] == "extensions.arch" and "torch.arch_list" not in first["fa"]
    assert first["cpp"][0] == "extensions.arch"
    assert first["bare"][:2] == ["torch.arch_list", "extensions.arch"]


def test_a_supporting_hint_alone_is_no_cause():
    """`sudo rocminfo` alone says nothing; beside an HSA failure it points at the user's access to /dev/kfd."""
    assert triage([("p", "$ sudo rocminfo\n")]).findings == []
    both = triage([("p", "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed\n$ sudo rocminfo\n")])
    kfd = next(f for f in both.findings if f.id == "devices.kfd")
    assert "sudo.rocm_tool" in kfd.signatures
