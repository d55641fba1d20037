"""The paired yardstick's statistics against scipy.stats and the published figures they must reproduce."""

from __future__ import annotations

import math

import pytest

from promote.core.paired import Pairs, clopper_pearson, items_to_decide, mcnemar_p, newcombe, wilson

stats = pytest.importorskip("scipy.stats")

# (on_only b, off_only c, items n): no discordant pair, one item, all discordant, lopsided, large.
GRID = [
    (0, 0, 1), (1, 0, 1), (0, 1, 1), (0, 0, 2), (0, 0, 164), (2, 0, 164), (14, 12, 164), (0, 20, 164), (3, 3, 10),
    (5, 0, 5), (0, 7, 7), (1, 9, 30), (40, 25, 500), (120, 80, 10_000), (0, 0, 10_000),
]  # fmt: skip
CONFIDENCES = (0.9, 0.95, 0.99)


def table(b: int, c: int, n: int) -> Pairs:
    """The discordant pairs as given, the concordant ones split between both solved and neither."""
    both = (n - b - c) * 2 // 3
    return Pairs(both, b, c, n - b - c - both)


def scipy_newcombe(t: Pairs, confidence: float) -> tuple[float, float, float]:
    """Newcombe's method 10, from scipy's Wilson intervals and his phi, written out as the paper gives it."""
    a, b, c, d = t.both, t.on_only, t.off_only, t.neither
    n = t.n

    def ci(k: int) -> tuple[float, float]:
        found = stats.binomtest(k, n).proportion_ci(confidence, method="wilson")
        return float(found.low), float(found.high)

    (l1, u1), (l2, u2) = ci(a + b), ci(a + c)
    p1, p2 = (a + b) / n, (a + c) / n
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    phi = (
        0.0
        if denominator == 0
        else max(cross - n / 2, 0) / math.sqrt(denominator)
        if cross > 0
        else cross / math.sqrt(denominator)
    )
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return p1 - p2, low, high


@pytest.mark.parametrize(("b", "c", "n"), GRID)
def test_mcnemars_exact_p_is_scipys_binomial_test_on_the_discordant_pairs(b: int, c: int, n: int) -> None:
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_p(b, c) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("b", "c", "n"), GRID)
@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_each_arms_exact_and_score_intervals_are_scipys(b: int, c: int, n: int, confidence: float) -> None:
    t = table(b, c, n)
    for k in (t.on, t.off):
        exact = stats.binomtest(k, n).proportion_ci(confidence, method="exact")
        assert clopper_pearson(k, n, confidence) == pytest.approx((exact.low, exact.high), abs=1e-6)
        score = stats.binomtest(k, n).proportion_ci(confidence, method="wilson")
        assert wilson(k, n, confidence) == pytest.approx((score.low, score.high), abs=1e-6)


@pytest.mark.parametrize(("b", "c", "n"), GRID)
@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_the_paired_difference_is_newcombes_hybrid_score_interval(b: int, c: int, n: int, confidence: float) -> None:
    t = table(b, c, n)
    estimate, low, high = newcombe(t, confidence)
    assert (estimate, low, high) == pytest.approx(scipy_newcombe(t, confidence), abs=1e-6)
    assert -1.0 <= low <= estimate <= high <= 1.0


def test_the_incidents_figures_are_the_published_ones() -> None:
    # 152 vs 150 of 164: with 2 / 0 discordant [-1.4, +4.2] points and p = 0.5; with 14 / 12 [-5.1, +7.6].
    narrow, wide = newcombe(Pairs(150, 2, 0, 12), 0.95), newcombe(Pairs(138, 14, 12, 0), 0.95)
    assert [round(100 * v, 1) for v in narrow] == [1.2, -1.4, 4.2]
    assert [round(100 * v, 1) for v in wide] == [1.2, -5.1, 7.6]
    assert mcnemar_p(2, 0) == pytest.approx(0.5)


def test_the_items_that_would_decide_put_the_interval_past_the_margin_at_the_same_rates() -> None:
    t = Pairs(138, 14, 12, 0)
    needed = items_to_decide(t, 0.95, 0.02)
    assert needed is not None
    scale = needed / t.n
    scaled = tuple(x * scale for x in (t.both, t.on_only, t.off_only, t.neither))
    assert newcombe(scaled, 0.95)[1] > -0.02  # type: ignore[arg-type]
    fewer = tuple(x * scale * 0.95 for x in (t.both, t.on_only, t.off_only, t.neither))
    assert newcombe(fewer, 0.95)[1] <= -0.02  # type: ignore[arg-type]
    # An estimate exactly on the margin is never decided, however many items.
    assert items_to_decide(Pairs(90, 0, 2, 8), 0.95, 0.02) is None
