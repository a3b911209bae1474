"""Where a step's time goes: t_step(B) = alpha + beta * B, fitted robustly over a sweep.

alpha (s) is what every step costs whatever its size: launching the step function, Python and
framework dispatch, the optimizer's per-variable update, kernel launches. beta (s per sample) is
the compute each sample adds. Time per sample is alpha / B + beta, so it falls almost as 1/B while
alpha dominates and flattens at beta once B passes the knee B* = alpha / beta (where both halves
are equal). The points are each run's steady-state step time (figures.RunFigures.step_time: the
median compute time of the steps that did not trace), so tracing never enters the fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from batchlab.core.analysis.robust_line import fit_batch_line
from batchlab.core.model import SweepData

MIN_BATCH_SIZES = 2  # a line needs two distinct batch sizes


@dataclass(frozen=True)
class StepTimeFit:
    """t_step(B) = alpha + beta * B over the points it was fitted to."""

    alpha: float  # s per step
    beta: float  # s per sample
    batch_sizes: tuple[int, ...]  # of the points, in the order given
    step_times: tuple[float, ...]  # s, the points
    r2: float  # over the inliers
    median_rel_residual: float  # median |t - fit| / t over the inliers
    outliers: tuple[int, ...]  # batch sizes of the points the fit gave no weight

    @property
    def knee(self) -> float:
        """B* = alpha / beta (samples): below it the fixed per-step cost is the larger part of a step."""
        if self.alpha > 0 and self.beta > 0:
            return self.alpha / self.beta
        return math.nan

    def predict(self, batch_size) -> np.ndarray | float:
        """Predicted step time (s) at `batch_size`."""
        return self.alpha + self.beta * np.asarray(batch_size, dtype=np.float64)

    def overhead_share(self, batch_size: float) -> float:
        """Fraction of a step at `batch_size` that is the fixed cost alpha (0..1)."""
        total = float(self.predict(batch_size))
        return self.alpha / total if total > 0 else math.nan


def fit_step_time(batch_sizes: Sequence[int], step_times: Sequence[float]) -> StepTimeFit | None:
    """Robust fit of step times (s) against batch sizes; None with fewer than two distinct sizes."""
    fitted = fit_batch_line(batch_sizes, step_times, MIN_BATCH_SIZES)
    if fitted is None:
        return None
    line = fitted.line
    return StepTimeFit(
        alpha=line.intercept,
        beta=line.slope,
        batch_sizes=tuple(int(v) for v in fitted.batch_sizes),
        step_times=tuple(float(v) for v in fitted.values),
        r2=line.r2,
        median_rel_residual=line.median_rel_residual,
        outliers=fitted.outlier_batch_sizes,
    )


def sweep_step_time(sweep: SweepData) -> StepTimeFit | None:
    """The fit over every run of a sweep with a steady-state step time (one point per run)."""
    points = [(r.batch_size, r.figures.step_time) for r in sweep.ordered_runs() if r.batch_size > 0]
    points = [(b, t) for b, t in points if math.isfinite(t) and t > 0]
    if not points:
        return None
    return fit_step_time(*zip(*points, strict=True))
