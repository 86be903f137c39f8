"""Which of several nodes is slow: the outlier maths shared by `rocmcheck compare` (probe figures of several
nodes' bundles) and the cross-node collective (each node's bus bandwidth). Pure: numbers in, names out.

A node is an outlier when it is BOTH clearly slower than the nodes' median by a fraction that run-to-run noise
does not reach, AND (with 3+ nodes) far from the rest by a robust z-score, so one noisy node in a spread-out
group is not named.
"""

from __future__ import annotations

import statistics

MODIFIED_Z_LIMIT = 3.5  # Iglewicz & Hoaglin's cut for the modified z-score 0.6745 (x - median) / MAD
MAD_TO_SIGMA = 0.6745  # the normal distribution's MAD is 0.6745 sigma
# The fraction below the median that counts as slow, per metric. Measured run-to-run spread on one H200 x2
# (benchmarks/RESULTS.md, 2026-11-30): GEMM 99.3-104.3 % of a careful benchmark over five runs (5 points); the
# in-node all-reduce busbw 260.8 vs 279.5 GB/s in two runs (7 %). Each limit is about twice the noise seen; the
# host copies depend on which CPU socket the probe ran from, so they get more room.
SLOW_FRACTION = {
    "gemm_tflops": 0.10,
    "copy_tbps": 0.10,
    "h2d_gbps": 0.20,
    "d2h_gbps": 0.20,
    "allreduce_busbw": 0.15,
    "allgather_busbw": 0.15,
    "cross_best_pair_busbw": 0.20,
    "cross_local_busbw": 0.20,
}
DEFAULT_SLOW_FRACTION = 0.15


def slow_nodes(values: dict[str, float], fraction: float) -> tuple[list[str], float]:
    """(the nodes far below the rest, the reference they are below). Three or more nodes: the median, with the
    robust z-score cut. Two: the faster one is the reference (which one is "right" needs a third node)."""
    if len(values) < 2:
        return [], 0.0
    xs = list(values.values())
    if len(xs) == 2:
        ref = max(xs)
        return [n for n, v in values.items() if v < ref * (1 - fraction)], ref
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    slow = []
    for node, v in values.items():
        if v >= med * (1 - fraction):
            continue
        if mad == 0 or MAD_TO_SIGMA * (med - v) / mad > MODIFIED_Z_LIMIT:
            slow.append(node)
    return slow, med
