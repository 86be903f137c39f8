"""Each deep-verification verdict catches a planted fault on a real device, and passes the healthy run there:

    python benchmarks/bench_planted_faults.py                        # cuda when torch sees a GPU, else the CPU
    python benchmarks/bench_planted_faults.py --device cpu --json /tmp/pf.json
    python benchmarks/bench_planted_faults.py --budget 60            # rows that would start past 60 s are skipped

The tests plant these faults on CPU tensors at small sizes (tests/test_probes_numerics_*.py, test_probes_stress.py);
this script plants the very same ones through the same runners with a kernel replaced (the `kernels`, `attend`,
`norm`, `make`, `matmul` and `corrupt` arguments the probe modules take), on the device it is given, at the probe
modules' GPU shapes there (their CPU test shapes on the CPU), and judges each run with the probe's own judge and a
DeviceContext of the real device. Rows, each a healthy run (expected: pass) or a planted fault (expected: fail):
- probe.gemm_blaslt (probe.gemm_blas when torch keeps the classic library): alpha dropped when beta != 0, a product
  scaled by 1.05, garbage rows past the large-M boundary (2^19 rows on a GPU);
- probe.sdpa_flash (the first fused backend that runs here, else math): an output scaled by 1.1, the causal mask
  ignored, a query gradient scaled by 1.2;
- probe.rms_norm: weight gradients 50 times too large; probe.rms_norm_llama: epsilon 0.1 instead of 1e-6;
- probe.adamw_fused: the weight decay skipped; probe.adamw_foreach: Adam's coupled L2 decay instead of AdamW's;
- probe.stress_gemm, seconds instead of minutes: one element of a repeat one ulp off every 50th product, and each
  product computed five times over for two intervals' worth of products (the rate does not hold: a fail, and the
  slowest interval must be a planted one);
- probe.memory_pattern, 8 GiB on a GPU: one bit flipped after each write pass.
A planted row also checks that the verdict names the fault (the failing call, output, or cause), not only its
status. The stress and memory rows read the memory-error counters before and after on a GPU (none on the CPU).
On the CPU the healthy stress row judges the bits alone: a shared CPU's rate wavers with the other work on it
(it may warn or fail on the rate), its bits may not.

Prints one line per row as it goes: verdict id | fault planted | expected | got | summary | seconds. Writes every
row, with the verdict's full summary and evidence, to --json PATH. Exit 0 when every row got what was expected, 1
when one did not, 3 when every row that ran did but some were skipped for the budget, 2 on bad arguments."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

T_IMPORT = time.perf_counter()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from rocmcheck.facts.torch_devices import describe_device  # noqa: E402
from rocmcheck.probes import attention_grads, gemm_paths, memtest, norms, optimizer_steps, stress  # noqa: E402
from rocmcheck.probes.catalog import (  # noqa: E402
    adamw_foreach,
    adamw_fused,
    gemm_blas,
    gemm_blaslt,
    memory_pattern,
    rms_norm,
    rms_norm_llama,
    sdpa_efficient,
    sdpa_flash,
    sdpa_math,
    stress_gemm,
)
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.measure import error_line, synchronize  # noqa: E402
from rocmcheck.probes.ras import read_counters  # noqa: E402
from rocmcheck.probes.spec import ProbeSkip  # noqa: E402
from rocmcheck.result import CheckResult, Status  # noqa: E402
from rocmcheck.units import GIB  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT
DEFAULT_BUDGET_S = {"cuda": 90.0, "cpu": 180.0}
SUMMARY_CHARS = 110  # of the verdict's summary on the printed line (the JSON has all of it)
SLOW_FACTOR = 5  # the planted slowdown: each product computed this many times over
SLOW_INTERVALS = 2  # for as many products as this many intervals hold, half way into the run
FLIP_EVERY = 50  # the planted differing repeat: every 50th product one ulp off in one element


@dataclass(frozen=True)
class Sizes:
    """What each runner is given on this kind of device: the probe modules' GPU sizes, or their CPU test ones."""

    gemm_shapes: dict[str, tuple[int, int, int]]
    gemm_tail: int
    sdpa_shapes: dict[str, tuple[int, int, int, int]]
    norm_shape: tuple[int, int]
    adamw_sizes: tuple[tuple[int, ...], ...]
    stress_size: int
    stress_s: float  # the stress run's length after its warm-up (the probe's share of --duration is minutes)
    stress_interval_s: float
    stress_warmup_s: float
    memory_bytes: int  # the pattern test's size (the probe takes most of the free memory)
    memory_block_words: int
    memory_chunk_bytes: int


GPU_SIZES = Sizes(gemm_paths.GPU_SHAPES, gemm_paths.LARGE_M_TAIL, attention_grads.GPU_SHAPES, norms.GPU_SHAPE,
                  optimizer_steps.GPU_SIZES, stress.STRESS_SIZE, 4.0, 0.5, stress.WARMUP_S, 8 * GIB,
                  memtest.BLOCK_WORDS, memtest.CHUNK_BYTES)
# The CPU sizes are those of the probes' own CPU test mode (run_cpu), but for the stress run's timing: 0.5 s
# intervals over 6 s (the probe's CPU mode: 0.2 s over 2 s), so the rate of a shared CPU averages out over each.
CPU_SIZES = Sizes(gemm_paths.CPU_SHAPES, gemm_paths.CPU_TAIL, attention_grads.CPU_SHAPES, norms.CPU_SHAPE,
                  optimizer_steps.CPU_SIZES, stress_gemm.CPU_SIZE, 6.0, 0.5, 0.2,
                  memory_pattern.CPU_BYTES, memory_pattern.CPU_BLOCK_WORDS, memory_pattern.CPU_CHUNK_BYTES)

Check = Callable[[CheckResult], "str | None"]  # why the verdict does not name the fault, or None when it does


@dataclass
class Row:
    pid: str  # the verdict id it is judged under (the GEMM and SDPA rows follow the path that runs here)
    fault: str
    expected: tuple[str, ...]
    run: Callable[[], CheckResult]
    check: Check | None = None
    label: str = ""  # what the table's "expected" column says, when not the statuses themselves
    result: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ helpers


def wrong_cases(verdict: CheckResult) -> list[dict[str, Any]]:
    """The cases of a numerics verdict that gave wrong numbers (past the limit, or NaN/inf or unwritten)."""
    return [c for c in verdict.data.get("cases") or []
            if c.get("error") is None and (c["rel_err"] is None or c["nonfinite"] or c["rel_err"] > c["limit"])]


def says(*words: str) -> Check:
    def check(verdict: CheckResult) -> str | None:
        missing = [w for w in words if w not in verdict.summary]
        return f"the summary does not say {missing[0]!r}" if missing else None
    return check


def device_context(device: torch.device) -> DeviceContext:
    if device.type != "cuda":
        return DeviceContext(vendor="cpu", name="CPU", arch="", torch=torch.__version__)
    return DeviceContext.from_device_event({"hip": torch.version.hip, "devices": [describe_device(torch, device.index)],
                                            "count": torch.cuda.device_count(), "torch": torch.__version__})


class State:
    """What the healthy rows found and the planted rows of the same family follow: the GEMM library and the SDPA
    backend that run here."""

    gemm_library = "lt"
    sdpa_backend = "flash"


GEMM_PROBES = {"lt": gemm_blaslt, "classic": gemm_blas}
SDPA_PROBES = {"flash": sdpa_flash, "efficient": sdpa_efficient, "math": sdpa_math}


# ------------------------------------------------------------------------------------------------- the rows


def gemm_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes, state: State) -> list[Row]:
    def run(kernels: dict[str, gemm_paths.Kernel] | None = None) -> CheckResult:
        data = gemm_paths.gemm_path(device, state.gemm_library, sizes.gemm_shapes, sizes.gemm_tail,
                                    kernels={**gemm_paths.KERNELS, **(kernels or {})})
        return GEMM_PROBES[state.gemm_library].judge(data, ctx)

    def healthy() -> CheckResult:
        try:
            return run()
        except ProbeSkip:  # torch keeps the classic library here: the planted rows go through that one
            state.gemm_library = "classic"
            return run()

    def drops_alpha(o: gemm_paths.Operands) -> torch.Tensor:
        return torch.addmm(o.c, o.a, o.b, beta=gemm_paths.BETA, alpha=1.0)

    def scaled(o: gemm_paths.Operands) -> torch.Tensor:
        return torch.matmul(o.a, o.b) * 1.05

    def garbage_tail(o: gemm_paths.Operands) -> torch.Tensor:
        out = torch.matmul(o.a, o.b)
        if out.shape[0] > sizes.gemm_tail:
            out[sizes.gemm_tail:] = 0.25
        return out

    def only_addmm(verdict: CheckResult) -> str | None:
        wrong = [c["what"] for c in wrong_cases(verdict)]
        others = [w for w in wrong if "addmm(" not in w or "out=" in w]
        if not wrong:
            return "no case was wrong"
        return f"other calls failed too: {others[0]}" if others else None

    tail = sizes.gemm_tail
    pid = gemm_blaslt.ID
    return [
        Row(pid, "none (healthy)", ("pass",), healthy),
        Row(pid, f"addmm drops alpha (beta={gemm_paths.BETA:g})", ("fail",), lambda: run({"addmm": drops_alpha}),
            only_addmm),
        Row(pid, "matmul's product scaled by 1.05", ("fail",), lambda: run({"mm": scaled}),
            says("fp32, tf32, bf16, fp16")),
        Row(pid, f"matmul: garbage rows from row {tail:,}", ("fail",), lambda: run({"mm": garbage_tail}),
            says(f"rows {tail}+")),
    ]


def sdpa_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes, state: State) -> list[Row]:
    def run(attend: attention_grads.Attend = attention_grads.causal_sdpa) -> CheckResult:
        data = attention_grads.sdpa_backend(device, state.sdpa_backend, sizes.sdpa_shapes, attend)
        return SDPA_PROBES[state.sdpa_backend].judge(data, ctx)

    def healthy() -> CheckResult:
        for backend in SDPA_PROBES:  # the first backend that runs here; math runs everywhere
            state.sdpa_backend = backend
            verdict = run()
            if verdict.status is not Status.SKIP:
                return verdict
        return verdict

    def scaled_out(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention_grads.causal_sdpa(q, k, v) * 1.1

    def not_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)

    def scaled_dq(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q.register_hook(lambda grad: grad * 1.2)
        return attention_grads.causal_sdpa(q, k, v)

    def outputs(*names: str, exactly: bool = False) -> Check:
        def check(verdict: CheckResult) -> str | None:
            got = {c["what"].split()[1] for c in wrong_cases(verdict)}  # "bf16 dq causal 1x8x2048x128"
            ok = got == set(names) if exactly else set(names) <= got
            return None if ok else f"failing outputs {sorted(got)}, expected {'exactly ' if exactly else ''}" \
                                   f"{sorted(names)}"
        return check

    pid = sdpa_flash.ID
    return [
        Row(pid, "none (healthy)", ("pass",), healthy),
        Row(pid, "output scaled by 1.1", ("fail",), lambda: run(scaled_out), outputs("out")),
        Row(pid, "causal mask ignored", ("fail",), lambda: run(not_causal), outputs("out", "dq", "dk", "dv")),
        Row(pid, "query gradient scaled by 1.2", ("fail",), lambda: run(scaled_dq), outputs("dq", exactly=True)),
    ]


class LargeWeightGradient(torch.autograd.Function):
    """The weight as it is, its gradient 50 times too large: the abnormally large RMSNorm weight gradients."""

    @staticmethod
    def forward(ctx: Any, w: torch.Tensor) -> torch.Tensor:
        return w.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 50


def norm_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes) -> list[Row]:
    def run(probe: Any, form: str, norm: norms.Norm | None = None) -> CheckResult:
        return probe.judge(norms.rms_norm_probe(device, form, sizes.norm_shape, norm=norm), ctx)

    def large_dw(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return norms.torch_rms_norm(x, LargeWeightGradient.apply(w), eps)

    def y_fails(verdict: CheckResult) -> str | None:
        got = {c["group"].split()[1] for c in wrong_cases(verdict)}  # "bf16 y"
        return None if "y" in got else f"failing outputs {sorted(got)}, not y"

    return [
        Row(rms_norm.ID, "none (healthy)", ("pass",), lambda: run(rms_norm, "torch")),
        Row(rms_norm.ID, "weight gradient 50x too large", ("fail",), lambda: run(rms_norm, "torch", large_dw),
            says("weight gradient is 50x the size")),
        Row(rms_norm_llama.ID, "none (healthy)", ("pass",), lambda: run(rms_norm_llama, "llama")),
        Row(rms_norm_llama.ID, f"epsilon 0.1 instead of {norms.EPS:g}", ("fail",),
            lambda: run(rms_norm_llama, "llama", lambda x, w, eps: norms.llama_rms_norm(x, w, 0.1)), y_fails),
    ]


def adamw_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes) -> list[Row]:
    lr, betas, eps, wd = optimizer_steps.LR, optimizer_steps.BETAS, optimizer_steps.EPS, optimizer_steps.WEIGHT_DECAY

    def run(probe: Any, form: str, make: optimizer_steps.MakeOptimizer | None = None) -> CheckResult:
        return probe.judge(optimizer_steps.adamw_probe(device, form, sizes.adamw_sizes, make=make), ctx)

    def no_decay(ps: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps, weight_decay=0.0, fused=True)

    def coupled(ps: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.Adam(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=True)

    return [
        Row(adamw_fused.ID, "none (healthy)", ("pass",), lambda: run(adamw_fused, "fused")),
        Row(adamw_fused.ID, "weight decay skipped", ("fail",), lambda: run(adamw_fused, "fused", no_decay),
            says("the update is AdamW without its weight decay")),
        Row(adamw_foreach.ID, "none (healthy)", ("pass",), lambda: run(adamw_foreach, "foreach")),
        Row(adamw_foreach.ID, "Adam's coupled L2 decay", ("fail",), lambda: run(adamw_foreach, "foreach", coupled),
            says("Adam with L2 weight decay")),
    ]


def counters(device: torch.device, vendor: str) -> dict[str, Any]:
    return read_counters(vendor) if device.type == "cuda" else {}


def stress_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes) -> list[Row]:
    vendor = ctx.vendor
    last = {"began": 0.0}  # when the last run's intervals began (perf_counter): the planted window's clock
    slowed_at: list[float] = []  # when the first and the last slowed product were called

    def run(matmul: stress.Matmul | None = None) -> CheckResult:
        threads = torch.get_num_threads()
        if device.type == "cpu":  # one thread: the other work of a shared CPU then slows every interval alike
            torch.set_num_threads(1)
        try:
            before = counters(device, vendor)
            planted = {"matmul": matmul} if matmul is not None else {}
            data = stress.sustained_gemm(device, sizes.stress_s, size=sizes.stress_size, warmup_s=sizes.stress_warmup_s,
                                         interval_s=sizes.stress_interval_s, **planted)
            last["began"] = time.perf_counter() - data["ran_s"]
        finally:
            torch.set_num_threads(threads)
        data["telemetry"]["why_not"] = "not sampled by this benchmark"
        data.update(ras={"before": before, "after": counters(device, vendor)}, vendor=vendor)
        return stress_gemm.judge(data, ctx)

    def flaky() -> stress.Matmul:
        calls = {"n": 0}

        def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
            torch.matmul(a, b, out=out)
            calls["n"] += 1
            if calls["n"] % FLIP_EVERY == 0:
                out.view(torch.int16)[3, 5] += 1
        return matmul

    def slowed() -> stress.Matmul:
        """SLOW_FACTOR times the work for as many products as SLOW_INTERVALS intervals hold at the rate so far,
        half way into the run: fewer than half the intervals, so the median stays the healthy rate and the slowest
        is a fraction of it. Counted in products, not seconds: slowed products take longer."""
        seen = {"first": 0.0, "calls": 0, "left": -1}
        start = sizes.stress_warmup_s + 2 * sizes.stress_interval_s + sizes.stress_s / 2
        slowed_at.clear()

        def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
            now = time.perf_counter()
            if not seen["calls"]:
                seen["first"] = now
            seen["calls"] += 1
            if seen["left"] < 0 and now - seen["first"] >= start:
                per_s = seen["calls"] / (now - seen["first"])
                seen["left"] = round(per_s * SLOW_INTERVALS * sizes.stress_interval_s)
            repeats = 1
            if seen["left"] > 0:
                seen["left"] -= 1
                repeats = SLOW_FACTOR
                if not slowed_at:
                    slowed_at.append(now)
                slowed_at[1:] = [now]
            for _ in range(repeats):
                torch.matmul(a, b, out=out)
        return matmul

    def bits_held(verdict: CheckResult) -> str | None:
        n = verdict.data.get("differing_repeats")
        return None if n == 0 else f"{n} repeats differed bitwise"

    def slowest_is_planted(verdict: CheckResult) -> str | None:
        """The slowest interval is one the planted products ran in (within an interval: on a GPU the host queues
        an interval's products at its start), not one the machine's other work slowed."""
        wrong = says("the rate does not hold")(verdict) or bits_held(verdict)
        if wrong:
            return wrong
        if not slowed_at:
            return "no product was slowed: the planted window fell outside the run"
        curve = [(t, r) for t, r in verdict.data["curve"] if t is not None and r is not None]
        i = min(range(len(curve)), key=lambda j: curve[j][1])
        span = (curve[i - 1][0] if i else 0.0, curve[i][0])
        planted = (slowed_at[0] - last["began"], slowed_at[-1] - last["began"])
        slack = sizes.stress_interval_s
        if span[0] - slack <= planted[1] and planted[0] <= span[1] + slack:
            return None
        return (f"the slowest interval ({span[0]:.2f}-{span[1]:.2f} s) is not the planted one "
                f"({planted[0]:.2f}-{planted[1]:.2f} s)")

    def bits_not_rate(verdict: CheckResult) -> str | None:
        """On a shared CPU: the bits judged, the rate not (other processes take their share of it)."""
        if verdict.status is Status.FAIL and "the rate does not hold" not in verdict.summary:
            return "failed for another reason than the rate"
        return bits_held(verdict)

    pid = stress_gemm.ID
    healthy = Row(pid, "none (healthy)", ("pass",), run, bits_held)
    if device.type != "cuda":
        healthy = Row(pid, "none (healthy; CPU: bits, not rate)", ("pass", "warn", "fail"), run,
                      bits_not_rate, label="bits same")
    return [
        healthy,
        Row(pid, f"every {FLIP_EVERY}th product one ulp off", ("fail",), lambda: run(flaky()),
            says("differ bitwise from the first")),
        Row(pid, f"{SLOW_FACTOR}x slower for {SLOW_INTERVALS} intervals", ("fail",), lambda: run(slowed()),
            slowest_is_planted),
    ]


def memory_rows(device: torch.device, ctx: DeviceContext, sizes: Sizes) -> list[Row]:
    vendor = ctx.vendor

    def run(corrupt: memtest.Corrupt | None = None) -> CheckResult:
        total = sizes.memory_bytes
        if device.type == "cuda":
            torch.cuda.empty_cache()
            total = min(total, memtest.bytes_to_test(torch.cuda.mem_get_info(device)[0]))
        before = counters(device, vendor)
        data = memtest.pattern_test(device, total, 0.0, block_words=sizes.memory_block_words,
                                    chunk_bytes=sizes.memory_chunk_bytes, corrupt=corrupt)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        # free_bytes not given: this run tests a fixed size, not most of the free memory as the probe does.
        data.update(free_bytes=None, total_bytes=None, vendor=vendor,
                    ras={"before": before, "after": counters(device, vendor)})
        return memory_pattern.judge(data, ctx)

    def flip(chunks: list[torch.Tensor]) -> None:
        chunks[-1][777] ^= 1 << 12

    def one_word(verdict: CheckResult) -> str | None:
        n = verdict.data.get("mismatches")
        wrong = says("1 bit(s) flipped")(verdict)
        return wrong or (None if n == len(memtest.PATTERNS) else f"{n} mismatches, expected one per pattern")

    pid = memory_pattern.ID
    return [
        Row(pid, "none (healthy)", ("pass",), run),
        Row(pid, "bit 12 of one word flipped", ("fail",), lambda: run(flip), one_word),
    ]


# ---------------------------------------------------------------------------------------------------- main


def line(*cells: Any) -> None:
    widths = (22, 40, 9, 15, SUMMARY_CHARS, 6)
    print(" | ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip(), flush=True)


def run_row(row: Row) -> None:
    t0 = time.perf_counter()
    try:
        verdict = row.run()
        got, summary, pid = verdict.status.value, verdict.summary, verdict.id
        why = row.check(verdict) if row.check is not None and got in row.expected else None
        evidence = list(verdict.evidence)
    except Exception as exc:  # noqa: BLE001 - a row that raises is reported as such, and the next one runs
        got, summary, pid, why, evidence = "error", error_line(exc), row.pid, None, []
    seconds = time.perf_counter() - t0
    as_expected = got in row.expected and why is None
    row.pid = pid
    row.result = {"id": pid, "fault": row.fault, "expected": list(row.expected), "expected_label": row.label or None,
                  "got": got,
                  "as_expected": as_expected, "not_as_expected_because": why, "summary": summary,
                  "evidence": evidence[:12], "seconds": round(seconds, 3)}
    shown = summary if len(summary) <= SUMMARY_CHARS else summary[:SUMMARY_CHARS - 3] + "..."
    mark = "ok" if as_expected else "WRONG"
    line(pid, row.fault, row.label or "/".join(row.expected), f"{got} ({mark})", shown, f"{seconds:.1f}")
    if why:
        print(f"    ^ {why}", flush=True)


def bad_input(text: str) -> int:
    print(f"bench_planted_faults: {text}", file=sys.stderr)
    return 2


def parse_device(text: str) -> tuple[torch.device | None, str]:
    """(the device, with its index on a GPU, or None; why not)."""
    try:
        device = torch.device(text)
    except RuntimeError as exc:
        return None, error_line(exc)
    if device.type == "cpu":
        return device, ""
    if device.type != "cuda":
        return None, "this script runs on cuda (also ROCm's) or cpu"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no GPU here"
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= torch.cuda.device_count():
        return None, f"torch sees {torch.cuda.device_count()} GPU(s)"
    return torch.device("cuda", index), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--budget", type=float, help="seconds: rows that would start later are skipped "
                                                     "(default 90 on a GPU, 180 on the CPU)")
    args = parser.parse_args(argv)
    device, why = parse_device(args.device)
    if device is None:
        return bad_input(f"--device {args.device!r}: {why}")
    if args.json:
        try:  # before the run, not after it
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.touch()
        except OSError as exc:
            return bad_input(f"--json {str(args.json)!r}: {error_line(exc)}")
    budget = args.budget if args.budget is not None else DEFAULT_BUDGET_S[device.type]
    began = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)
        synchronize(device)
    init_s = time.perf_counter() - began
    ctx = device_context(device)
    sizes = GPU_SIZES if device.type == "cuda" else CPU_SIZES
    state = State()
    rows = (gemm_rows(device, ctx, sizes, state) + sdpa_rows(device, ctx, sizes, state) + norm_rows(device, ctx, sizes)
            + adamw_rows(device, ctx, sizes) + stress_rows(device, ctx, sizes) + memory_rows(device, ctx, sizes))
    print(f"planted faults on {device} ({ctx.label()}, vendor {ctx.vendor}), torch {torch.__version__}"
          f"{', HIP ' + torch.version.hip if torch.version.hip else ''}; import {IMPORT_S:.1f} s, device init "
          f"{init_s:.1f} s; budget {budget:g} s", flush=True)
    line("probe/verdict id", "fault planted", "expected", "got (status)", "summary", "s")
    skipped = []
    for row in rows:
        if time.perf_counter() - began > budget:
            skipped.append(row)
            row.result = {"id": row.pid, "fault": row.fault, "expected": list(row.expected), "got": None,
                          "as_expected": None, "skipped": f"past the budget of {budget:g} s"}
            continue
        run_row(row)
    total = time.perf_counter() - began
    ran = [r for r in rows if r not in skipped]
    wrong = [r for r in ran if not r.result["as_expected"]]
    code = 1 if wrong else 3 if skipped else 0
    for row in skipped:
        print(f"skipped (past the budget of {budget:g} s): {row.pid}: {row.fault}", flush=True)
    print(f"{len(ran) - len(wrong)} of {len(rows)} rows as expected, {len(wrong)} not, {len(skipped)} skipped; "
          f"{total:.1f} s (plus {IMPORT_S:.1f} s importing torch); exit {code}", flush=True)
    if args.json:
        doc = {"device": str(device), "context": {"vendor": ctx.vendor, "name": ctx.name, "arch": ctx.arch,
                                                  "count": ctx.count, "hip": ctx.hip},
               "torch": torch.__version__, "gemm_library": state.gemm_library, "sdpa_backend": state.sdpa_backend,
               "budget_s": budget, "import_s": round(IMPORT_S, 3), "init_s": round(init_s, 3),
               "total_s": round(total, 3), "exit": code, "rows": [r.result for r in rows]}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
