"""Regimes of steps to target against the batch size (Golmant et al. 2018): perfect scaling,
diminishing returns, plateau.

The rule is on r(B) = S(B) / S(2B), the factor by which doubling the batch cuts the steps:

- perfect scaling: r >= PERFECT_RATIO (1.8; 2 would be perfect: twice the batch, half the steps);
- plateau: r <= PLATEAU_RATIO (1.1; doubling the batch saves at most a tenth of the steps);
- diminishing returns in between.

On the McCandlish curve S = Smin (1 + Bcrit/B), r(B) = (2B + 2 Bcrit) / (2B + Bcrit), so the
rule puts the borders at fixed multiples of Bcrit: perfect scaling up to Bcrit/8, plateau from
4.5 Bcrit (`fit_borders`). Between measured batch sizes B1 < B2 without a fit, r is the measured
per-doubling factor (S(B1) / S(B2)) ** (log 2 / log(B2/B1)) (`measured_regimes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

PERFECT = "perfect scaling"
DIMINISHING = "diminishing returns"
PLATEAU = "plateau"
REGIMES = (PERFECT, DIMINISHING, PLATEAU)
PERFECT_RATIO = 1.8
PLATEAU_RATIO = 1.1


def regime_of(ratio: float) -> str | None:
    """The regime of a per-doubling step ratio S(B)/S(2B); None when it is not finite."""
    if not math.isfinite(ratio):
        return None
    if ratio >= PERFECT_RATIO:
        return PERFECT
    return PLATEAU if ratio <= PLATEAU_RATIO else DIMINISHING


def fit_borders(bcrit: float) -> tuple[float, float]:
    """(end of perfect scaling, start of plateau) in samples on the McCandlish curve with this Bcrit.

    r(B) >= R  <=>  B <= Bcrit (2 - R) / (2 (R - 1)); with R = 1.8: Bcrit/8, with R = 1.1: 4.5 Bcrit.
    """

    def border(ratio: float) -> float:
        return bcrit * (2 - ratio) / (2 * (ratio - 1))

    return border(PERFECT_RATIO), border(PLATEAU_RATIO)


def fit_ratio(batch_size: float, bcrit: float) -> float:
    """S(B)/S(2B) on the McCandlish curve."""
    return (2 * batch_size + 2 * bcrit) / (2 * batch_size + bcrit)


@dataclass(frozen=True)
class Span:
    """A stretch of the batch-size axis (samples, low < high) in one regime: what a plot shades."""

    low: float
    high: float
    regime: str


def fit_spans(bcrit: float, low: float, high: float) -> list[Span]:
    """The regimes of the fitted curve over [low, high] samples, as spans in order."""
    perfect_end, plateau_start = fit_borders(bcrit)
    edges = [(low, min(high, perfect_end), PERFECT)]
    edges.append((max(low, perfect_end), min(high, plateau_start), DIMINISHING))
    edges.append((max(low, plateau_start), high, PLATEAU))
    return [Span(a, b, r) for a, b, r in edges if b > a]


def per_doubling(b1: float, s1: float, b2: float, s2: float) -> float:
    """The measured steps ratio between two batch sizes, scaled to one doubling of the batch."""
    if not (b2 > b1 > 0 and s1 > 0 and s2 > 0):
        return math.nan
    return (s1 / s2) ** (math.log(2) / math.log(b2 / b1))


def measured_spans(batch_sizes: Sequence[float], steps: Sequence[float]) -> list[tuple[Span, float]]:
    """(span, per-doubling ratio) between consecutive measured batch sizes (one steps value each, ascending)."""
    points = sorted((float(b), float(s)) for b, s in zip(batch_sizes, steps, strict=True))
    out = []
    for (b1, s1), (b2, s2) in zip(points, points[1:], strict=False):
        ratio = per_doubling(b1, s1, b2, s2)
        regime = regime_of(ratio)
        if regime is not None:
            out.append((Span(b1, b2, regime), ratio))
    return out


def batch_regimes(batch_sizes: Sequence[float], bcrit: float) -> dict[int, str]:
    """The regime of each batch size on the fitted curve."""
    return {int(b): regime_of(fit_ratio(b, bcrit)) or DIMINISHING for b in batch_sizes}
