"""Small statistics for benchmark rates: seeded bootstrap and exact intervals, paired differences, pass^k, percentiles.

Everything here is deterministic: the bootstrap uses a fixed seed, so a report computed twice from the
same corpus has the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np

RESAMPLES = 1000
SEED = 20260323


@dataclass(frozen=True, slots=True)
class Rate:
    """A proportion with its 95 % interval: the percentile bootstrap (``rate``) or Clopper–Pearson (``exact_rate``).

    Attributes:
        value: successes / n (0 when n is 0).
        low: the interval's lower end.
        high: its upper end.
        k: successes.
        n: trials.
    """

    value: float
    low: float
    high: float
    k: int
    n: int

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {"value": self.value, "low": self.low, "high": self.high, "k": self.k, "n": self.n}

    def fmt(self) -> str:
        """``42.0 % [35.1, 49.0] (42/100)``."""
        if self.n == 0:
            return "n/a"
        return f"{100 * self.value:.1f} % [{100 * self.low:.1f}, {100 * self.high:.1f}] ({self.k}/{self.n})"


def rate(outcomes: Sequence[bool], *, resamples: int = RESAMPLES, seed: int = SEED) -> Rate:
    """The proportion of true outcomes with a seeded percentile-bootstrap 95 % interval."""
    n = len(outcomes)
    if n == 0:
        return Rate(0.0, 0.0, 0.0, 0, 0)
    arr = np.asarray(outcomes, dtype=np.float64)
    k = int(arr.sum())
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Rate(k / n, float(low), float(high), k, n)


def exact_rate(outcomes: Sequence[bool], *, level: float = 0.95) -> Rate:
    """The proportion of true outcomes with its exact (Clopper–Pearson) interval.

    The pass rates of agent runs use it: tens of cases, often none or all passing, where the bootstrap's interval
    collapses to a point (0/30 gives [0, 0]; the exact interval is [0, 11.6 %]). Each end is the success
    probability at which the binomial tail beyond the observed count is exactly ``(1 - level) / 2``, found by
    bisection on the binomial sums.
    """
    n = len(outcomes)
    k = sum(1 for o in outcomes if o)
    if n == 0:
        return Rate(0.0, 0.0, 0.0, 0, 0)
    tail = (1 - level) / 2
    # P(X >= k) grows with p, P(X <= k) falls with p.
    low = 0.0 if k == 0 else _bisect(lambda p: 1 - _binomial_cdf(k - 1, n, p) >= tail)
    high = 1.0 if k == n else _bisect(lambda p: _binomial_cdf(k, n, p) <= tail)
    return Rate(k / n, low, high, k, n)


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _bisect(reached: Callable[[float], bool], steps: int = 60) -> float:
    """The smallest p in [0, 1] where ``reached(p)`` holds (``reached`` is false below it, true above)."""
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, slots=True)
class Difference:
    """A paired difference of two rates (a − b) with its 95 % bootstrap interval.

    Attributes:
        value: mean(a) − mean(b) over the paired items.
        low: 2.5th percentile.
        high: 97.5th percentile.
        n: paired items.
    """

    value: float
    low: float
    high: float
    n: int

    @property
    def significant(self) -> bool:
        """True when the interval excludes zero."""
        return self.n > 0 and (self.low > 0 or self.high < 0)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "significant": self.significant}

    def fmt(self) -> str:
        """``-3.0 pp [-8.0, +2.0]``."""
        if self.n == 0:
            return "n/a"
        return f"{100 * self.value:+.1f} pp [{100 * self.low:+.1f}, {100 * self.high:+.1f}]"


def paired_difference(
    a: Mapping[Any, bool], b: Mapping[Any, bool], *, resamples: int = RESAMPLES, seed: int = SEED
) -> Difference:
    """The difference of two rates over the items both have, resampling items (a paired bootstrap)."""
    keys = sorted(set(a) & set(b), key=str)
    n = len(keys)
    if n == 0:
        return Difference(0.0, 0.0, 0.0, 0)
    diff = np.asarray([float(a[k]) - float(b[k]) for k in keys])
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Difference(float(diff.mean()), float(low), float(high), n)


def pass_hat_k(per_case: Mapping[Any, Sequence[bool]], k: int) -> float:
    """pass^k: the chance that k runs of a case all succeed, averaged over cases.

    Uses the unbiased estimator C(c, k) / C(n, k) per case (c successes in n runs, n ≥ k), as in τ-bench.
    """
    scores = [comb(sum(runs), k) / comb(len(runs), k) for runs in per_case.values() if len(runs) >= k]
    return sum(scores) / len(scores) if scores else 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) by linear interpolation, ``None`` for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
