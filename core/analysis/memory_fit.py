"""Peak memory against batch size: peak(B) = m0 + m1 * B, fitted robustly over a sweep.

m0 (bytes) is what a run holds whatever its batch: the framework runtime, the data, the weights
and the optimizer's state (and, on a GPU, what the allocator keeps). m1 (bytes per sample) is
what each sample adds: its activations, kept for the backward pass, and their gradients. The
points are the steady-state peaks (figures.RunFigures.steady_peak_bytes: the epochs after the
first, without the first epoch's autotuning scratch); a sweep whose runs have only one epoch
falls back to the all-epoch peaks and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from batchlab.core.analysis.robust_line import fit_batch_line
from batchlab.core.model import SweepData

RESOLVED_RISE = 0.01  # m1 is resolved when the line rises over the measured batch sizes by 1% of the median peak
RESOLVED_SCATTER = 2.0  # ... and by more than this many times the points' median relative scatter


@dataclass(frozen=True)
class MemoryFit:
    """peak(B) = m0 + m1 * B (bytes) over the points it was fitted to."""

    m0: float  # bytes
    m1: float  # bytes per sample
    batch_sizes: tuple[int, ...]
    peaks: tuple[int, ...]  # bytes, the points
    r2: float
    median_rel_residual: float
    outliers: tuple[int, ...]  # batch sizes the fit gave no weight
    source: str | None = None  # the epoch column the peaks come from (figures.MEMORY_SOURCES)
    steady: bool = True  # False: peaks include the first epoch (runs with one epoch)

    def predict(self, batch_size) -> np.ndarray | float:
        """Predicted peak (bytes) at `batch_size`."""
        return self.m0 + self.m1 * np.asarray(batch_size, dtype=np.float64)

    @property
    def slope_resolved(self) -> bool:
        """Whether the data resolve m1: positive, and its rise over the measured batch sizes, m1 (Bmax - Bmin),
        at least RESOLVED_RISE of the median peak and RESOLVED_SCATTER times the points' median scatter. A
        negative or smaller slope is noise (e.g. host RSS at two batch sizes), not activations."""
        if not (self.m1 > 0 and math.isfinite(self.m1) and len(self.peaks)):
            return False
        rise = self.m1 * (max(self.batch_sizes) - min(self.batch_sizes))
        peak = float(np.median(self.peaks))
        scatter = self.median_rel_residual if math.isfinite(self.median_rel_residual) else 0.0
        return rise >= max(RESOLVED_RISE, RESOLVED_SCATTER * scatter) * peak

    def batch_for(self, limit_bytes: float) -> int | None:
        """The largest batch whose predicted peak stays within `limit_bytes`; None when m1 is not resolved
        (slope_resolved) or none fits."""
        if not (self.slope_resolved and math.isfinite(limit_bytes)):
            return None
        b = math.floor((limit_bytes - self.m0) / self.m1)
        return b if b >= 1 else None


def fit_memory(batch_sizes: Sequence[int], peaks: Sequence[float], **context) -> MemoryFit | None:
    """Robust fit of peak memory (bytes) against batch size; None with fewer than two distinct sizes.

    Peaks of -1 (unknown) are left out. `context` sets `source` and `steady`.
    """
    fitted = fit_batch_line(batch_sizes, peaks)
    if fitted is None:
        return None
    line = fitted.line
    return MemoryFit(
        m0=line.intercept,
        m1=line.slope,
        batch_sizes=tuple(int(v) for v in fitted.batch_sizes),
        peaks=tuple(int(v) for v in fitted.values),
        r2=line.r2,
        median_rel_residual=line.median_rel_residual,
        outliers=fitted.outlier_batch_sizes,
        **context,
    )


def sweep_memory_fit(sweep: SweepData) -> MemoryFit | None:
    """The fit over a sweep's runs: steady-state peaks, or all-epoch peaks when fewer than two runs have those."""
    runs = [r for r in sweep.ordered_runs() if r.batch_size > 0]
    for attr, steady in (("steady_peak_bytes", True), ("peak_memory_bytes", False)):
        points = [(r.batch_size, getattr(r.figures, attr), r.figures.peak_memory_source) for r in runs]
        points = [p for p in points if p[1] > 0]
        if len({b for b, _, _ in points}) >= 2:
            sources = {s for _, _, s in points}
            if len(sources) != 1:  # mixed columns (e.g. GPU and CPU runs) do not share a line
                return None
            return fit_memory([b for b, _, _ in points], [p for _, p, _ in points], source=sources.pop(), steady=steady)
    return None
