"""Statistics of benchmark timings: the median with a distribution-free confidence interval (order
statistics of the binomial), and an adaptive loop that samples until that interval is tight or a cap
(repetitions or seconds) is hit. Pure Python: the bench children import it without NumPy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

_EXACT_UP_TO = 2000  # above this many samples the binomial is replaced by its normal approximation


@dataclass(frozen=True)
class Timing:
    """The median time of a kernel, its ~95% confidence interval, and how it was reached."""

    median_ms: float
    lo_ms: float
    hi_ms: float
    reps: int
    converged: bool  # the interval's half-width came within `rel` of the median before a cap

    @property
    def spread(self) -> float:
        """Half-width of the confidence interval relative to the median."""
        if self.median_ms <= 0:
            return 0.0 if self.hi_ms == self.lo_ms else math.inf
        return (self.hi_ms - self.lo_ms) / 2 / self.median_ms


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("the median of no samples")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def _ci_rank(n: int, confidence: float) -> int:
    """The largest j (1-based) with P(Binomial(n, 1/2) < j) <= (1 - confidence) / 2, or 0 if none:
    then [x_(j), x_(n+1-j)] covers the median with probability >= confidence."""
    tail = (1 - confidence) / 2
    if n > _EXACT_UP_TO:
        z = NormalDist().inv_cdf(1 - tail)
        # P(B <= j - 1) <= tail, with the continuity correction
        return max(1, math.floor(n / 2 - z * math.sqrt(n) / 2 + 0.5))
    log_half_n = -n * math.log(2)
    cum, j = 0.0, 0
    for i in range(n // 2 + 1):
        cum += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        if cum > tail * (1 + 1e-12):  # the tolerance keeps exact ties (dyadic tails) on the right side
            break
        j = i + 1
    return j


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, lo, hi): lo and hi are order statistics that bracket the median with probability at least
    `confidence`, whatever the distribution. Too few samples for that (fewer than 6 at 95%) give
    the whole range [min, max]."""
    if not samples:
        raise ValueError("median_ci needs at least one sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    s = sorted(samples)
    n = len(s)
    j = _ci_rank(n, confidence)
    if j == 0:
        return median(s), s[0], s[-1]
    return median(s), s[j - 1], s[n - j]


def adaptive(
    sample: Callable[[int], list[float]],
    *,
    rel: float = 0.01,
    min_reps: int = 10,
    max_reps: int = 1000,
    max_seconds: float = 2.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Call `sample(n)` for batches of n repetitions (each returns n timings, in ms) until the median's
    confidence interval is within `rel` of it (converged) or `max_reps` samples or `max_seconds` of
    `clock` are spent. Batches double the sample count, shrunk to what the time left allows."""
    if rel <= 0 or min_reps < 1 or max_reps < min_reps or max_seconds <= 0:
        raise ValueError(
            f"bad limits: rel={rel} min_reps={min_reps} max_reps={max_reps} max_seconds={max_seconds}"
        )
    start = clock()
    samples: list[float] = []
    batch = min_reps
    while True:
        got = sample(batch)
        if len(got) != batch:
            raise ValueError(f"sample({batch}) returned {len(got)} timings")
        samples.extend(got)
        med, lo, hi = median_ci(samples)
        timing = Timing(med, lo, hi, len(samples), converged=False)
        if len(samples) >= min_reps and timing.spread <= rel:
            return Timing(med, lo, hi, len(samples), converged=True)
        elapsed = clock() - start
        left = max_seconds - elapsed
        if len(samples) >= max_reps or left <= 0:
            return timing
        per_rep = elapsed / len(samples)
        fits = int(left / per_rep) if per_rep > 0 else len(samples)
        if fits < 1:  # not one more repetition fits in the time left
            return timing
        batch = min(len(samples), max_reps - len(samples), fits)
