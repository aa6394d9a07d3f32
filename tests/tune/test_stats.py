"""compiler.tune.stats: the median's order-statistic confidence interval against hand-computed ranks and an
exact binomial recount, and the adaptive sampling loop's three ways to stop (converged, reps, seconds)."""

from __future__ import annotations

import random
from fractions import Fraction
from math import comb

import pytest

from tilec.compiler.tune.stats import Timing, adaptive, median_ci


def _shuffled(values: list[float], seed: int = 0) -> list[float]:
    out = list(values)
    random.Random(seed).shuffle(out)
    return out


@pytest.mark.parametrize(
    ("n", "confidence", "median", "lo", "hi"),
    [
        # n=10, 95%: P(B<=1) = 11/1024 <= 0.025 < P(B<=2) = 56/1024, so j=2: [x(2), x(9)]
        (10, 0.95, 5.5, 2, 9),
        # n=20, 95%: P(B<=5) = 21700/2^20 = 0.0207 <= 0.025 < P(B<=6) = 0.0577: [x(6), x(15)]
        (20, 0.95, 10.5, 6, 15),
        # n=6, 95%: P(B=0) = 1/64 <= 0.025 < P(B<=1) = 7/64: [x(1), x(6)]
        (6, 0.95, 3.5, 1, 6),
        # n=10, 50%: P(B<=3) = 176/1024 <= 0.25 < P(B<=4) = 386/1024: [x(4), x(7)]
        (10, 0.5, 5.5, 4, 7),
        # n=3, 75%: P(B=0) = 1/8 == 0.125, a tie that counts: [x(1), x(3)]
        (3, 0.75, 2, 1, 3),
        # n=5, 95%: P(B=0) = 1/32 > 0.025: no interval that sure; the whole range
        (5, 0.95, 3, 1, 5),
        (1, 0.95, 1, 1, 1),
    ],
)
def test_median_ci_hand_computed(n: int, confidence: float, median: float, lo: float, hi: float) -> None:
    samples = _shuffled([float(i) for i in range(1, n + 1)])
    assert median_ci(samples, confidence) == (median, lo, hi)


def _exact_rank(n: int, confidence: float) -> int:
    tail = Fraction(1) / 2 * (1 - Fraction(confidence))
    j, cum = 0, Fraction(0)
    for i in range(n // 2 + 1):
        cum += Fraction(comb(n, i), 2**n)
        if cum > tail:
            break
        j = i + 1
    return j


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_median_ci_matches_exact_binomial(confidence: float) -> None:
    for n in range(1, 120):
        samples = [float(i) for i in range(1, n + 1)]
        j = _exact_rank(n, confidence)
        _, lo, hi = median_ci(samples, confidence)
        assert (lo, hi) == ((1.0, float(n)) if j == 0 else (float(j), float(n + 1 - j))), n


def test_median_ci_large_n_uses_a_close_approximation() -> None:
    samples = [float(i) for i in range(1, 5001)]
    _, lo, hi = median_ci(samples)
    # the normal approximation: rank n/2 - 1.96 sqrt(n)/2 + 1/2 = 2431.2 -> 2431
    assert (lo, hi) == (2431.0, 5001 - 2431.0)


def test_median_ci_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        median_ci([])
    with pytest.raises(ValueError, match="confidence"):
        median_ci([1.0], 1.5)


def test_timing_spread() -> None:
    assert Timing(2.0, 1.9, 2.3, 10, False).spread == pytest.approx(0.1)
    assert Timing(0.0, 0.0, 0.0, 10, True).spread == 0.0


def test_adaptive_converges_on_a_constant_sampler() -> None:
    calls: list[int] = []

    def sample(n: int) -> list[float]:
        calls.append(n)
        return [0.25] * n

    t = adaptive(sample, min_reps=10)
    assert t == Timing(0.25, 0.25, 0.25, 10, True)
    assert calls == [10]


def test_adaptive_converges_on_small_noise() -> None:
    rng = random.Random(1)
    t = adaptive(lambda n: [1.0 + rng.uniform(-0.005, 0.005) for _ in range(n)], rel=0.01, max_reps=1000)
    assert t.converged and t.spread <= 0.01
    assert t.lo_ms <= t.median_ms <= t.hi_ms


def test_adaptive_hits_the_rep_cap_on_a_noisy_sampler() -> None:
    rng = random.Random(0)
    calls: list[int] = []

    def sample(n: int) -> list[float]:
        calls.append(n)
        return [rng.lognormvariate(0, 1) for _ in range(n)]

    t = adaptive(sample, rel=0.001, min_reps=10, max_reps=200, max_seconds=1e9, clock=lambda: 0.0)
    assert not t.converged
    assert t.reps == 200
    assert calls == [10, 10, 20, 40, 80, 40], "batches double the count, the last one trimmed to the cap"
    assert t.spread > 0.001


def test_adaptive_respects_max_seconds_on_a_fake_clock() -> None:
    now = [0.0]
    rng = random.Random(2)

    def sample(n: int) -> list[float]:
        now[0] += 0.125 * n  # each repetition "takes" 1/8 s
        return [rng.lognormvariate(0, 1) for _ in range(n)]

    t = adaptive(sample, rel=0.001, min_reps=4, max_reps=1000, max_seconds=1.0, clock=lambda: now[0])
    assert not t.converged
    assert t.reps == 8, "4 reps, then the 4 that fit in the half second left"
    assert now[0] <= 1.0


def test_adaptive_refuses_bad_limits_and_short_batches() -> None:
    with pytest.raises(ValueError, match="bad limits"):
        adaptive(lambda n: [1.0] * n, min_reps=10, max_reps=5)
    with pytest.raises(ValueError, match="returned 1 timings"):
        adaptive(lambda n: [1.0], min_reps=3)
