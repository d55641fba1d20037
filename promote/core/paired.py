"""Exact and score statistics for a paired yardstick: items solved with a path off and on, compared pair by pair.

Pure functions of counts, with nothing but `math`: an exact (Clopper-Pearson) interval per arm, the exact
McNemar test on the discordant pairs, and Newcombe's hybrid score interval (his method 10, 1998) for the
paired difference on - off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

_TINY = 1e-300
_EPS = 1e-15


@dataclass(frozen=True)
class Pairs:
    """A paired 2x2 table: items solved both ways, only with the path on, only off, neither."""

    both: int
    on_only: int
    off_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.on_only + self.off_only + self.neither

    @property
    def on(self) -> int:
        return self.both + self.on_only

    @property
    def off(self) -> int:
        return self.both + self.off_only


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def _log_front(a: float, b: float, x: float, shift: float = 0.0) -> float:
    """log of x^(a - shift) (1-x)^(b - shift) / B(a, b): the continued fraction's front, or (shift 1) the density."""
    lbeta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return (a - shift) * math.log(x) + (b - shift) * math.log1p(-x) - lbeta


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(_log_front(a, b, x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def beta_quantile(p: float, a: float, b: float, start: float | None = None) -> float:
    """The x with I_x(a, b) = p: Newton's steps from `start` (a close guess saves most of them), kept inside a
    bisection bracket."""
    lo, hi = 0.0, 1.0
    x = start if start is not None and 0.0 < start < 1.0 else a / (a + b)
    for _ in range(200):
        f = betainc(a, b, x) - p
        if f > 0:
            hi = x
        else:
            lo = x
        if f == 0.0 or hi - lo < 1e-15:
            return x
        slope = math.exp(_log_front(a, b, x, 1.0))
        step = x - f / slope if slope > 0 else math.nan
        if abs(step - x) <= 1e-13 * x:
            return min(max(step, lo), hi)
        x = step if lo < step < hi else (lo + hi) / 2
    return x


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """The exact interval for a proportion k of n: each end's binomial tail is (1 - confidence) / 2."""
    if n == 0:
        return 0.0, 1.0
    tail = (1.0 - confidence) / 2
    # Wilson's interval, a little narrower than the exact one, is where Newton starts.
    near = wilson(k, n, confidence)
    low = 0.0 if k == 0 else beta_quantile(tail, k, n - k + 1, near[0])
    high = 1.0 if k == n else beta_quantile(1.0 - tail, k + 1, n - k, near[1])
    return low, high


def binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1, 0.5)


def mcnemar_p(on_only: int, off_only: int) -> float:
    """The exact two-sided McNemar p: the binomial test of the discordant pairs against one half each way."""
    n = on_only + off_only
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binom_cdf_half(min(on_only, off_only), n))


def wilson(k: float, n: float, confidence: float) -> tuple[float, float]:
    """The Wilson score interval for a proportion k of n."""
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2)
    p, z2 = k / n, z * z
    centre, spread = p + z2 / (2 * n), z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z2 / n)), min(1.0, (centre + spread) / (1 + z2 / n))


def _phi(t: Pairs | tuple[float, float, float, float]) -> float:
    """Newcombe's correlation of the two arms, with his continuity correction of a positive association."""
    a, b, c, d = (t.both, t.on_only, t.off_only, t.neither) if isinstance(t, Pairs) else t
    n = a + b + c + d
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2:
        return (cross - n / 2) / math.sqrt(margins)
    return 0.0 if cross >= 0 else cross / math.sqrt(margins)


def newcombe(t: Pairs | tuple[float, float, float, float], confidence: float) -> tuple[float, float, float]:
    """(estimate, low, high) of on - off: Newcombe's hybrid score interval for paired proportions (method 10)."""
    a, b, c, d = (t.both, t.on_only, t.off_only, t.neither) if isinstance(t, Pairs) else t
    n = a + b + c + d
    if n == 0:
        return 0.0, -1.0, 1.0
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2), phi = wilson(a + b, n, confidence), wilson(a + c, n, confidence), _phi((a, b, c, d))
    low = (p1 - p2) - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = (p1 - p2) + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2, max(-1.0, low), min(1.0, high)


def items_to_decide(t: Pairs, confidence: float, margin: float, *, limit: int = 10_000_000) -> int | None:
    """About how many items, at the observed rates of agreement and disagreement, would put the interval on one
    side of -margin (None: the estimate sits on the margin, or more than `limit` items would be needed)."""
    n = t.n
    if n == 0:
        return None
    estimate = (t.on_only - t.off_only) / n
    if estimate == -margin:
        return None

    def decides(m: float) -> bool:
        scaled = tuple(x * m / n for x in (t.both, t.on_only, t.off_only, t.neither))
        _, low, high = newcombe((scaled[0], scaled[1], scaled[2], scaled[3]), confidence)
        return low > -margin if estimate > -margin else high < -margin

    lo, hi = float(n), float(n)
    while not decides(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while hi - lo > max(1.0, lo * 0.001):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return math.ceil(hi)
