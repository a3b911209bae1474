"""Steps and examples to a target against the batch size: the McCandlish et al. (2018) model.

    S(B) = Smin (1 + Bcrit / B)        E(B) = Emin (1 + B / Bcrit)        Emin = Smin * Bcrit

Smin is the fewest optimizer steps any batch size could take, Emin the fewest examples; at
B = Bcrit training takes 2 Smin steps and 2 Emin examples. E = B * S (up to a short last batch),
so one fit of S(B) gives both curves.

The fit: noise on steps to target is multiplicative (a seed that takes 10% longer does so at any
batch), so it minimises the squared error of log S. For a given Bcrit, log Smin is the mean of
log S - log(1 + Bcrit/B) (closed form), which leaves one unknown: Bcrit is searched on a
logarithmic grid from BCRIT_RANGE below the smallest to BCRIT_RANGE above the largest measured
batch (GRID_POINTS points) and refined by golden-section search around the best grid point.

The confidence interval: a case bootstrap over the runs (each run that reached the target is one
point (B, S)); BOOTSTRAP_RESAMPLES resamples from a seeded generator (BOOTSTRAP_SEED), resamples
with fewer than MIN_BATCH_SIZES distinct batch sizes are left out; the interval is the 2.5th to
97.5th percentile of the resamples' Bcrit (on the grid) and Smin. When the kept resamples cannot
differ (e.g. three runs at three batch sizes: every kept resample is the runs themselves), there is
no interval: the fitted value is given with "no interval" (NaN ends) rather than a zero-width one.

The bound rule: Bcrit is stated as a number only when the fitted value lies within the measured
batch sizes and both ends of its interval are off the edges of the search grid. Otherwise the
measured batch sizes sit in one regime and only a bound is honest:

- ">= X" when the fit runs to or beyond the largest batch (steps still fall as 1/B there):
  X = the smaller of the largest measured batch and the interval's lower end;
- "<= X" when it runs to or below the smallest batch (steps no longer fall with B):
  X = the larger of the smallest measured batch and the interval's upper end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

BCRIT_RANGE = 1000.0  # the search grid reaches this factor below/above the measured batch sizes
GRID_POINTS = 1200  # log-spaced grid points for Bcrit (about 2% apart over a 1e3..1e8 span)
GOLDEN_ITERATIONS = 60
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
MIN_BATCH_SIZES = 3  # two parameters and a shape: three distinct batch sizes at least
MIN_DISTINCT_RESAMPLES = 10  # fewer different kept resamples than this: too few runs for an interval


@dataclass(frozen=True)
class Bcrit:
    """The critical batch: a value (kind "="), or a bound (kind ">=" or "<="), with its bootstrap interval."""

    kind: str  # "=", ">=", "<=" or "?" (the runs do not bound it)
    value: float  # samples: the estimate, or the bound
    low: float  # the interval's ends (samples); inf/0 where the interval runs off the search grid, NaN when
    high: float  # the runs are too few for an interval

    @property
    def bounded(self) -> bool:
        """True when only a bound is known (every measured batch size in one regime)."""
        return self.kind != "="

    def text(self) -> str:
        """`Bcrit = 210 (95% CI 150-300)`, or `Bcrit >= 1024`."""
        if self.kind == "?":
            return "Bcrit not determined by these runs"
        if self.bounded:
            return f"Bcrit {self.kind} {self.value:,.0f}"
        if math.isnan(self.low):
            return f"Bcrit = {self.value:,.0f} (no interval: too few runs)"
        return f"Bcrit = {self.value:,.0f} ({CONFIDENCE:.0%} CI {self.low:,.0f}-{self.high:,.0f})"


@dataclass(frozen=True)
class CriticalFit:
    """S(B) = Smin (1 + Bcrit/B) fitted to per-run steps to target, with bootstrap intervals."""

    smin: float  # steps, at the fitted Bcrit
    bcrit_fit: float  # samples, the least-squares value (meaningful only when bcrit is not a bound)
    bcrit: Bcrit
    smin_low: float  # steps, the bootstrap interval of Smin
    smin_high: float
    batch_sizes: tuple[int, ...]  # the points fitted: one per run that reached the target
    steps: tuple[float, ...]
    rms_log_residual: float  # root mean square of log(S) - log(fit): 0.1 is about 10% scatter
    resamples: int  # bootstrap resamples used
    # (Smin, Bcrit) of each kept resample: the band of the curves; left out of JSON (core.analysis.analyse)
    samples: tuple[tuple[float, float], ...] = field(default=(), repr=False, compare=False, metadata={"json": False})

    def band(self, batch_size) -> tuple[np.ndarray, np.ndarray]:
        """The CONFIDENCE band of S(B) (steps) at these batch sizes: percentiles of the resamples' curves."""
        b = np.asarray(batch_size, dtype=np.float64)
        if not self.samples:
            return np.full(b.shape, np.nan), np.full(b.shape, np.nan)
        smin, bcrit = np.asarray(self.samples).T
        curves = smin[:, None] * (1.0 + bcrit[:, None] / np.atleast_1d(b)[None, :])
        tail = (1 - CONFIDENCE) / 2
        low, high = np.quantile(curves, [tail, 1 - tail], axis=0)
        return low.reshape(b.shape), high.reshape(b.shape)

    @property
    def emin(self) -> float:
        """Emin = Smin * Bcrit (examples)."""
        return self.smin * self.bcrit_fit

    def steps_at(self, batch_size) -> np.ndarray | float:
        """S(B) on the fitted curve (steps)."""
        return self.smin * (1.0 + self.bcrit_fit / np.asarray(batch_size, dtype=np.float64))

    def examples_at(self, batch_size) -> np.ndarray | float:
        """E(B) = B * S(B) on the fitted curve (examples)."""
        return np.asarray(batch_size, dtype=np.float64) * self.steps_at(batch_size)


def _grid(batch_sizes: np.ndarray) -> np.ndarray:
    return np.geomspace(batch_sizes.min() / BCRIT_RANGE, batch_sizes.max() * BCRIT_RANGE, GRID_POINTS)


def _residuals(grid: np.ndarray, b: np.ndarray, log_s: np.ndarray) -> np.ndarray:
    """R[k, i] = log S_i - log(1 + c_k / B_i): its mean over i is log Smin at c_k."""
    return log_s[None, :] - np.log1p(grid[:, None] / b[None, :])


def _sse(c: float, b: np.ndarray, log_s: np.ndarray) -> tuple[float, float]:
    """(sum of squared log residuals, log Smin) at Bcrit = c."""
    r = log_s - np.log1p(c / b)
    return float(((r - r.mean()) ** 2).sum()), float(r.mean())


def _golden(b: np.ndarray, log_s: np.ndarray, lo: float, hi: float) -> float:
    """The Bcrit in [lo, hi] (searched in log c) with the least squared error."""
    g = (math.sqrt(5) - 1) / 2
    x0, x1 = math.log(lo), math.log(hi)
    for _ in range(GOLDEN_ITERATIONS):
        a, c = x1 - g * (x1 - x0), x0 + g * (x1 - x0)
        if _sse(math.exp(a), b, log_s)[0] <= _sse(math.exp(c), b, log_s)[0]:
            x1 = c
        else:
            x0 = a
    return math.exp((x0 + x1) / 2)


def _bootstrap(grid: np.ndarray, b: np.ndarray, log_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices of Bcrit and log Smin for each kept resample (case bootstrap over the points)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    n = len(b)
    counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(BOOTSTRAP_RESAMPLES)])
    sizes = np.unique(b, return_inverse=True)[1]
    distinct = np.array([len(np.unique(sizes[row > 0])) for row in counts])
    counts = counts[distinct >= MIN_BATCH_SIZES]
    if len(np.unique(counts, axis=0)) < MIN_DISTINCT_RESAMPLES:  # the kept resamples cannot differ
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    counts = counts.astype(np.float64)
    r = _residuals(grid, b, log_s)  # K x n
    total = counts.sum(axis=1, keepdims=True)
    s1 = counts @ r.T  # resamples x K
    sse = counts @ (r**2).T - s1**2 / total
    best = np.argmin(sse, axis=1)
    log_smin = s1[np.arange(len(best)), best] / total[:, 0]
    return best, log_smin


def fit_critical(batch_sizes: Sequence[float], steps: Sequence[float]) -> CriticalFit | None:
    """The McCandlish fit to per-run (batch size, steps to target); None with fewer than three batch sizes.

    Points with a non-positive or non-finite value are left out (runs that did not reach the target).
    """
    b = np.asarray(batch_sizes, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    keep = np.isfinite(b) & np.isfinite(s) & (b > 0) & (s > 0)
    b, s = b[keep], s[keep]
    if len(np.unique(b)) < MIN_BATCH_SIZES:
        return None
    log_s = np.log(s)
    grid = _grid(b)
    r = _residuals(grid, b, log_s)
    sse = (r**2).sum(axis=1) - r.sum(axis=1) ** 2 / len(b)
    k = int(np.argmin(sse))
    c = _golden(b, log_s, grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)])
    sse_c, log_smin = _sse(c, b, log_s)
    best, boot_log_smin = _bootstrap(grid, b, log_s)
    tail = (1 - CONFIDENCE) / 2
    if len(best):
        k_low, k_high = (int(v) for v in np.quantile(best, [tail, 1 - tail], method="nearest"))
        smin_low, smin_high = (float(v) for v in np.exp(np.quantile(boot_log_smin, [tail, 1 - tail])))
        low = grid[k_low] if k_low > 0 else 0.0
        high = grid[k_high] if k_high < len(grid) - 1 else math.inf
        bound = _bcrit(c, low, high, float(b.min()), float(b.max()))
    else:  # too few runs for the resamples to differ: the fitted value (or a bound at an edge), no interval
        smin_low = smin_high = math.nan
        bmin, bmax = float(b.min()), float(b.max())
        if c >= bmax:
            bound = Bcrit(">=", bmax, math.nan, math.nan)
        elif c <= bmin:
            bound = Bcrit("<=", bmin, math.nan, math.nan)
        else:
            bound = Bcrit("=", c, math.nan, math.nan)
    return CriticalFit(
        smin=math.exp(log_smin),
        bcrit_fit=c,
        bcrit=bound,
        smin_low=smin_low,
        smin_high=smin_high,
        batch_sizes=tuple(int(v) for v in b),
        steps=tuple(float(v) for v in s),
        rms_log_residual=math.sqrt(sse_c / len(b)),
        resamples=len(best),
        samples=tuple(zip(np.exp(boot_log_smin).tolist(), grid[best].tolist(), strict=True)),
    )


def _bcrit(c: float, low: float, high: float, bmin: float, bmax: float) -> Bcrit:
    """The bound rule (module docstring): a value, a bound, or "?" when the interval spans the whole grid."""
    above = c >= bmax or (high == math.inf and c > math.sqrt(bmin * bmax))
    below = c <= bmin or (low == 0.0 and not above)
    if (above or below) and low == 0.0 and high == math.inf:
        return Bcrit("?", math.nan, low, high)
    if above:
        return Bcrit(">=", min(bmax, low), low, high)
    if below:
        return Bcrit("<=", max(bmin, high), low, high)
    return Bcrit("=", c, low, high)


def optimal_batch(bcrit: float, alpha: float, beta: float) -> float:
    """The batch minimising T(B) = S(B) * (alpha + beta*B) = Smin (alpha + beta Bcrit + alpha Bcrit/B + beta B):
    B_opt = sqrt(Bcrit * alpha / beta) (samples); NaN unless all three are positive and finite."""
    if all(math.isfinite(v) and v > 0 for v in (bcrit, alpha, beta)):
        return math.sqrt(bcrit * alpha / beta)
    return math.nan
