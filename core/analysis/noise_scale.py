"""Gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018), from micro-batch gradient norms.

A measured step splits its batch into k micro-batches of B_s samples at the same weights; |G_s|^2 is the
mean of their gradients' squared norms and |G_b|^2 the squared norm of their mean (B_b = k B_s). Since
E|G_B|^2 = |G|^2 + tr(Sigma) / B for a batch gradient of B samples, two batch sizes give unbiased
estimates of both parts (`unbiased_estimates`). Single estimates are very noisy (|G|^2 can come out
negative), so the numerator and the denominator are smoothed by separate exponential moving averages
and divided at the end, as gpt-neox and AdaptDL do (`NoiseScaleEMA`).

McCandlish et al. predict the critical batch size from it: B_crit ~ B_simple. It is a prediction from
one run, not a measured critical batch (core/analysis/critical.py fits that from a sweep).

numpy only (no TensorFlow, no Qt): the training child (core/training/noise_scale.py), the CLI and the
window share it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from batchlab.core.analysis.lr_policy import sweep_lr_policy

# Decay of the moving averages per measurement: each new measurement weighs 1 - 0.9 = 10%. The averages
# are bias-corrected (divided by 1 - beta^n, as Adam's moments), so the first measurements are not pulled
# towards 0. An average with this decay has the mean age of a plain mean over 19 measurements
# ((1 + beta) / (1 - beta)), the window the final value's spread is taken over.
NOISE_SCALE_BETA = 0.9
SPREAD_RESAMPLES = 1000  # bootstrap resamples of the final value's spread
SPREAD_QUANTILES = (0.1, 0.9)  # the spread: the 10% and 90% points of the resampled values

Table = Mapping[str, np.ndarray]


def unbiased_estimates(
    g_small_sq: float | np.ndarray, g_big_sq: float | np.ndarray, b_small: float, b_big: float
) -> tuple[np.ndarray, np.ndarray]:
    """(|G|^2, tr(Sigma)) estimates from squared gradient norms at batch sizes b_small < b_big (samples).

    |G|^2 ~ (B_b |G_b|^2 - B_s |G_s|^2) / (B_b - B_s),  tr(Sigma) ~ (|G_s|^2 - |G_b|^2) / (1/B_s - 1/B_b).
    """
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small} and {b_big}")
    g_small_sq = np.asarray(g_small_sq, dtype=np.float64)
    g_big_sq = np.asarray(g_big_sq, dtype=np.float64)
    g2 = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    trace = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


class NoiseScaleEMA:
    """Separate bias-corrected moving averages of |G|^2 and tr(Sigma); B_simple is their ratio."""

    def __init__(self, beta: float = NOISE_SCALE_BETA):
        self.beta = beta
        self.n = 0
        self._g2 = 0.0
        self._trace = 0.0

    def update(self, g2: float, trace: float) -> tuple[float, float, float]:
        """Add one measurement; return (ema_g2, ema_trace, b_simple), b_simple NaN while ema_g2 <= 0.

        A non-finite measurement (a diverging step) is skipped: the averages stay as they were."""
        if math.isfinite(g2) and math.isfinite(trace):
            self.n += 1
            self._g2 = self.beta * self._g2 + (1 - self.beta) * g2
            self._trace = self.beta * self._trace + (1 - self.beta) * trace
        if self.n == 0:
            return math.nan, math.nan, math.nan
        correction = 1 - self.beta**self.n
        ema_g2, ema_trace = self._g2 / correction, self._trace / correction
        return ema_g2, ema_trace, ratio(ema_trace, ema_g2)


def ratio(trace: float, g2: float) -> float:
    """B_simple = tr(Sigma) / |G|^2 (samples); NaN when |G|^2 <= 0 (no gradient signal above the noise yet)."""
    return trace / g2 if g2 > 0 and math.isfinite(trace) else math.nan


@dataclass(frozen=True)
class NoiseScaleSeries:
    """B_simple over one run's training and its final value with a spread."""

    steps: np.ndarray  # step of each measurement
    b_simple: np.ndarray  # samples: the moving-average ratio after each measurement (NaN where |G|^2 <= 0)
    final: float  # samples: the last finite b_simple; NaN when there is none
    low: float  # samples: 10% point of the final value's bootstrap spread (NaN: not measurable)
    high: float  # samples: 90% point
    window: int  # measurements the spread is taken over (the last ones)
    measurements: int  # all measurements of the run


def noise_scale_series(
    table: Table, beta: float = NOISE_SCALE_BETA, resamples: int = SPREAD_RESAMPLES, seed: int = 0
) -> NoiseScaleSeries | None:
    """B_simple over training from a run's noise_scale/ table (columns as core.events.NOISE_SCALE_COLUMNS).

    `final` is the last finite moving-average ratio, the value the run ended with. Its spread is a
    bootstrap over the last (1 + beta) / (1 - beta) measurements (the averages' effective window): the
    ratio of the mean tr(Sigma) to the mean |G|^2 of each resample, its 10% and 90% points. Returns
    None for a run without measurements.
    """
    steps = np.asarray(table.get("step", ()), dtype=np.int64)
    if not len(steps):
        return None
    g2 = np.asarray(table["g2_est"], dtype=np.float64)
    trace = np.asarray(table["trace_est"], dtype=np.float64)
    b_simple = np.asarray(table["b_simple"], dtype=np.float64)
    finite_b = b_simple[np.isfinite(b_simple)]
    final = float(finite_b[-1]) if len(finite_b) else math.nan
    keep = np.isfinite(g2) & np.isfinite(trace)
    window = min(int(keep.sum()), round((1 + beta) / (1 - beta)))
    low = high = math.nan
    if window >= 2:
        g2_tail, trace_tail = g2[keep][-window:], trace[keep][-window:]
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, window, size=(resamples, window))
        mean_g2 = g2_tail[picks].mean(axis=1)
        mean_trace = trace_tail[picks].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.where(mean_g2 > 0, mean_trace / mean_g2, np.inf)  # no signal above noise: unbounded
        ordered = np.sort(values)  # order statistics, not interpolation: the values may be infinite
        low, high = (float(ordered[round(q * (resamples - 1))]) for q in SPREAD_QUANTILES)
    return NoiseScaleSeries(steps, b_simple, final, low, high, window, len(steps))


@dataclass(frozen=True)
class NoiseScaleCost:
    """What measuring cost a run: a measured step against an ordinary one."""

    measured_step_time: float  # s: median of measure_time + step_time over the untraced measurements
    ordinary_step_time: float  # s: the run's steady step time (figures.RunFigures.step_time)
    ratio: float  # measured_step_time / ordinary_step_time
    every: int  # steps between measurements
    extra_fraction: float  # added training time: median measure_time / (every x ordinary step time)


def noise_scale_cost(table: Table, ordinary_step_time: float, every: int) -> NoiseScaleCost | None:
    """The cost of the measurements of a run's noise_scale/ table, leaving out the ones that traced;
    None when there is none to judge by (no untraced measurement, or no ordinary step time)."""
    measure = np.asarray(table.get("measure_time", ()), dtype=np.float64)
    step = np.asarray(table.get("step_time", np.full(len(measure), np.nan)), dtype=np.float64)
    traced = np.asarray(table.get("traced", np.zeros(len(measure))), dtype=np.int64)
    keep = (traced != 1) & np.isfinite(measure) & np.isfinite(step)
    if not keep.any() or not (ordinary_step_time > 0) or every < 1:
        return None
    measured = float(np.median(measure[keep] + step[keep]))
    extra = float(np.median(measure[keep])) / (every * ordinary_step_time)
    return NoiseScaleCost(measured, ordinary_step_time, measured / ordinary_step_time, every, extra)


def describe_cost(cost: NoiseScaleCost) -> str:
    """One line for a report, e.g. 'measured steps 1.8x an ordinary step (every 20 steps: +4% training time)'."""
    return (
        f"measured steps {cost.ratio:.2g}x an ordinary step "
        f"(every {cost.every} steps: +{cost.extra_fraction:.0%} training time, left out of the run's clock)"
    )


def describe_series(series: NoiseScaleSeries, applies: bool = True) -> str:
    """The final B_simple as a prediction, e.g. 'predicted critical batch ~ 850 (B_simple; 10-90%: 700-1,020)';
    `applies` False (one fixed learning rate, lr_policy.py): the measurement alone, no predicted critical batch."""
    if not math.isfinite(series.final):
        return f"no gradient signal above the noise yet ({series.measurements} measurements): B_simple not measurable"
    spread = ""
    if math.isfinite(series.low):
        high = "unbounded" if not math.isfinite(series.high) else f"{series.high:,.0f}"
        spread = f"; 10-90% over the last {series.window} measurements: {series.low:,.0f}-{high}"
    if not applies:
        return f"B_simple ~ {series.final:,.0f} (measured in one run{spread}; no critical batch predicted, see below)"
    return f"predicted critical batch ~ {series.final:,.0f} (B_simple, a prediction from one run{spread})"


def noise_scale_report(sweep) -> list[str]:
    """Lines for `batchlab report` and a sweep's end: per run that measured, its final B_simple as a
    prediction and what measuring cost, then the prediction's assumption against the sweep's learning-rate
    policy (lr_policy.py). `sweep` is a core.model.SweepData (live or from a file)."""
    policy = sweep_lr_policy(sweep)
    lines = []
    for run in sweep.ordered_runs():
        table = run.noise_scale.as_dict()
        series = noise_scale_series(table)
        if series is None:
            continue
        lines.append(f"batch {run.batch_size}, seed {run.seed}: {describe_series(series, policy.tuned)}")
        every = int(run.attrs.get("noise_scale_every", 0) or 0)
        cost = noise_scale_cost(table, run.figures.step_time, every)
        if cost is not None:
            lines.append(f"  noise scale cost: {describe_cost(cost)}")
    if lines and policy.tuned:
        lines.append(f"As a critical batch, B_simple {policy.assumption()}.")
    elif lines:
        lines.append(policy.refusal("A critical batch predicted from B_simple"))
    return lines
