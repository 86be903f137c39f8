"""Memory curves shaped like real training runs, as the driver reports them (one reading per interval).

Each is built from the phases a real run goes through: the CUDA/HIP context (~0.5 GiB), the model loading in
chunks, the first optimizer step (AdamW state: 2 x fp32 per parameter), then steps. Numbers follow a LLaMA-7B
full fine-tune in bf16 on a 141 GiB H200 (weights 13.5 GiB, AdamW state 50 GiB, activations at micro-batch 4 x
2048 about 20-40 GiB) and, for the leak, the field report's staircase: each kept loss holds its step's saved
activations. Readings carry the jitter real drivers show (a few MiB), seeded so every run builds the same curve.
"""

from __future__ import annotations

import random

from rocmcheck.units import GIB as GiB
from rocmcheck.units import MIB as MiB

H200 = 143771 * MiB  # nvidia-smi memory.total of the recorded H200
MI300X = 196592 * MiB  # amd-smi static vram size of the recorded MI300X


def _loading(rng: random.Random, seconds: int, target: float) -> list[float]:
    out, level = [], 0.5 * GiB
    for i in range(seconds):
        if i > 2:
            level = min(target, level + target / max(1, seconds - 4) * rng.uniform(0.6, 1.4))
        out.append(level)
    return out


def flat(seconds: int = 300, seed: int = 1) -> tuple[list[float], list[float]]:
    """Caching allocator keeps its cache: loading, one jump at step 1, then flat to the MiB."""
    rng = random.Random(seed)
    used = _loading(rng, 40, 14 * GiB)
    used += [14 * GiB + 50 * GiB + 30 * GiB] * (seconds - len(used))
    used = [u + rng.choice([0, 0, 0, 2 * MiB]) for u in used]
    return [float(t) for t in range(seconds)], used


def noisy_flat(seconds: int = 300, seed: int = 2) -> tuple[list[float], list[float]]:
    """Flat with the reader's jitter and a few spikes (another process, a cuDNN workspace allocated and freed)."""
    rng = random.Random(seed)
    t, used = flat(seconds, seed)
    noisy = [u + rng.gauss(0, 40 * MiB) for u in used]
    for i in rng.sample(range(60, seconds), 6):
        noisy[i] += rng.uniform(0.5, 2.0) * GiB
    for i in rng.sample(range(60, seconds), 2):
        noisy[i] -= 300 * MiB
    return t, noisy


def sawtooth(seconds: int = 300, step_s: float = 6.0, seed: int = 3) -> tuple[list[float], list[float]]:
    """Cache released between steps (empty_cache / expandable segments): up during forward, down after step."""
    rng = random.Random(seed)
    used = _loading(rng, 40, 14 * GiB)
    base = 14 * GiB + 50 * GiB
    for i in range(seconds - len(used)):
        phase = (i % step_s) / step_s
        act = 30 * GiB * (phase / 0.6) if phase < 0.6 else 30 * GiB * (1 - (phase - 0.6) / 0.4) * 0.3
        used.append(base + act + rng.gauss(0, 20 * MiB))
    return [float(t) for t in range(seconds)], used


def staircase(seconds: int = 300, step_s: float = 3.0, leak_per_step: float = 0.4 * GiB,
              seed: int = 4, capacity: float = H200) -> tuple[list[float], list[float]]:
    """The field report: a sawtooth whose floor moves up every step until out of memory, then freed."""
    rng = random.Random(seed)
    used = _loading(rng, 40, 14 * GiB)
    base = 14 * GiB + 50 * GiB
    oom = False
    for i in range(seconds - len(used)):
        if oom:
            used.append(0.5 * GiB)
            continue
        step = int(i // step_s)
        phase = (i % step_s) / step_s
        value = base + step * leak_per_step + (20 * GiB if phase < 0.5 else 0) + rng.gauss(0, 20 * MiB)
        if value >= capacity:
            oom = True
            value = 0.5 * GiB
        used.append(value)
    return [float(t) for t in range(seconds)], used


def step_once(seconds: int = 300, seed: int = 5) -> tuple[list[float], list[float]]:
    """Flat, one step up by 3 GiB a third of the way in (a longer batch grew the cache), flat after."""
    rng = random.Random(seed)
    t, used = flat(seconds, seed)
    jump = seconds // 3
    return t, [u + (3 * GiB if i >= jump else 0) + rng.gauss(0, 10 * MiB) for i, u in enumerate(used)]


def kept_logits(seconds: int = 300, step_s: float = 2.0, seed: int = 6,
                capacity: float = H200) -> tuple[list[float], list[float]]:
    """A LoRA run that keeps each step's logits: weights 13.5 GiB loaded in 20 s, adapters and their AdamW state
    under 0.5 GiB, activations of micro-batch 4 x 2048 (~12 GiB, freed after each step); every step keeps its
    fp32 logits alive (4 x 2048 x 32000 x 4 bytes = 1 GiB). The floor starts low and climbs far: the case
    where measuring loading against the final floor called the first minutes of the leak "loading"."""
    rng = random.Random(seed)
    used = _loading(rng, 20, 13.5 * GiB)
    base = 14 * GiB
    for i in range(seconds - len(used)):
        step = int(i // step_s)
        phase = (i % step_s) / step_s
        value = base + step * GiB + (12 * GiB if phase < 0.5 else 0) + rng.gauss(0, 20 * MiB)
        used.append(min(value, capacity - 256 * MiB))
    return [float(t) for t in range(seconds)], used


def rising_peaks(seconds: int = 300, step_s: float = 6.0, seed: int = 7) -> tuple[list[float], list[float]]:
    """A sawtooth back to the same floor whose peaks rise: batches grouped by length, longest last (the cache is
    released after each step, so the floor stays). The floor does not move, its median does: a rule on medians
    calls this a leak, a rule on floors does not."""
    rng = random.Random(seed)
    used = _loading(rng, 40, 14 * GiB)
    base = 14 * GiB + 50 * GiB
    steps = (seconds - len(used)) / step_s
    for i in range(seconds - len(used)):
        phase = (i % step_s) / step_s
        act = (10 + 30 * (i // step_s) / steps) * GiB
        used.append(base + (act if phase < 0.6 else 0) + rng.gauss(0, 20 * MiB))
    return [float(t) for t in range(seconds)], used


H100 = 81559 * MiB  # nvidia-smi memory.total of an H100 80GB HBM3


def fast_leak(seconds: float = 24.0, interval: float = 1.0, step_s: float = 1.5, leak_per_step: float = 2.8 * GiB,
              seed: int = 8, capacity: float = H100, load_s: float = 6.0) -> tuple[list[float], list[float]]:
    """A short run that keeps each step's graph (`total = total + loss` of a loss never backpropagated): context and
    weights (10 GiB) in `load_s`, the optimizer's state at step 1, then every step keeps its activations: the
    floor climbs by `leak_per_step` a step to 51 GiB of 80 GiB in 24 s, where the run ends on its own. At
    capacity the process dies (out of memory) and frees its memory."""
    rng = random.Random(seed)
    out_t, out_u = [], []
    t, dead = 0.0, False
    while t < seconds:
        if t < load_s:
            value = 0.5 * GiB + 9.5 * GiB * t / load_s
        else:
            step = int((t - load_s) // step_s)
            value = 10 * GiB + 4 * GiB + step * leak_per_step + rng.gauss(0, 5 * MiB)
        if value >= capacity or dead:
            dead, value = True, 0.5 * GiB
        out_t.append(round(t, 3))
        out_u.append(value)
        t += interval
    return out_t, out_u


def short_flat(seconds: float = 24.0, interval: float = 1.0, seed: int = 9) -> tuple[list[float], list[float]]:
    """A short clean run: loading for 12 s (context, weights, optimizer state), then flat steps until it ends."""
    rng = random.Random(seed)
    out_t, out_u = [], []
    t = 0.0
    while t < seconds:
        value = 0.5 * GiB + 40 * GiB * min(1.0, t / 12) + rng.gauss(0, 5 * MiB)
        out_t.append(round(t, 3))
        out_u.append(value)
        t += interval
    return out_t, out_u
