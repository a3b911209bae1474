"""A robust straight-line fit y = a + b*x, shared by the step-time and the memory models.

Theil-Sen gives a start that ignores up to ~29% of wild points; iteratively reweighted least
squares with Huber and then Tukey bisquare weights refines it, so clean points count fully and
gross outliers (a run slowed by another process, a step that paused for the allocator) count not
at all. Residuals are relative (divided by y) by default: step times and memory peaks span orders
of magnitude across a sweep and their noise grows with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HUBER_K = 1.345  # Huber's tuning constant (95% efficiency on normal noise)
BISQUARE_C = 4.685  # Tukey's bisquare constant (95% efficiency on normal noise)
MAD_TO_SIGMA = 1.4826  # median absolute deviation -> standard deviation for normal noise
ITERATIONS = 50
THEIL_SEN_MAX_POINTS = 400  # pairs grow as n^2: a strided subsample starts larger fits
TOLERANCE = 1e-10


@dataclass(frozen=True)
class LineFit:
    """y = intercept + slope * x, with how well it fits the points it was made from."""

    intercept: float
    slope: float
    n: int  # points used
    r2: float  # coefficient of determination over the inliers (1 = exact)
    median_rel_residual: float  # median |y - fit| / |y| over the inliers
    outliers: tuple[int, ...]  # indices of the points the fit gave no weight (bisquare weight 0)

    def __call__(self, x):
        return self.intercept + self.slope * np.asarray(x, dtype=np.float64)


def _theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) > THEIL_SEN_MAX_POINTS:
        keep = np.linspace(0, len(x) - 1, THEIL_SEN_MAX_POINTS).astype(int)
        x, y = x[keep], y[keep]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    ok = dx != 0
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    return float(np.median(y - slope * x)), slope


def _weighted_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    sw = w.sum()
    if sw <= 0:
        return None
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    sxx = (w * (x - mx) ** 2).sum()
    if sxx <= 0:
        return None
    slope = (w * (x - mx) * (y - my)).sum() / sxx
    return float(my - slope * mx), float(slope)


def fit_line(x, y, relative: bool = True) -> LineFit | None:
    """Robust y = a + b*x over the finite points; None with fewer than two distinct x values.

    relative=True weighs each residual by 1/|y| (the fit minimises relative, not absolute, errors).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & ((y != 0) if relative else True)
    x, y = x[keep], y[keep]
    index = np.flatnonzero(keep)
    if len(np.unique(x)) < 2:
        return None
    scale_of = 1.0 / np.abs(y) if relative else np.ones_like(y)
    a, b = _theil_sen(x, y)
    weights = np.ones_like(y)
    for psi, constant in (("huber", HUBER_K), ("bisquare", BISQUARE_C)):
        for _ in range(ITERATIONS):
            r = (y - a - b * x) * scale_of
            sigma = MAD_TO_SIGMA * float(np.median(np.abs(r - np.median(r))))
            if sigma <= TOLERANCE * max(1.0, float(np.median(np.abs(r)))):
                sigma = max(sigma, float(np.std(r)))
            if sigma <= 0:  # an exact fit: nothing to reweigh
                weights = np.ones_like(y)
                break
            u = np.abs(r) / (constant * sigma)
            previous = weights
            if psi == "huber":
                weights = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-300))
            else:
                weights = np.where(u < 1, (1 - u**2) ** 2, 0.0)
            line = _weighted_line(x, y, weights * scale_of**2)
            if line is None:  # no point kept (bisquare can cycle to all-zero weights on a near-exact fit)
                weights = previous
                break
            moved = abs(line[0] - a) + abs(line[1] - b) * (np.abs(x).max() or 1.0)
            a, b = line
            if moved <= TOLERANCE * (abs(a) + abs(b) * (np.abs(x).max() or 1.0) + 1e-300):
                break
    inlier = weights > 0
    fitted = a + b * x
    ys, fs = y[inlier], fitted[inlier]
    total = float(((ys - ys.mean()) ** 2).sum()) if len(ys) else 0.0
    r2 = 1.0 - float(((ys - fs) ** 2).sum()) / total if total > 0 else 1.0
    rel = np.abs(ys - fs) / np.abs(ys) if len(ys) else np.array([math.nan])
    return LineFit(
        intercept=a,
        slope=b,
        n=len(x),
        r2=r2,
        median_rel_residual=float(np.median(rel)),
        outliers=tuple(int(i) for i in index[~inlier]),
    )


@dataclass(frozen=True)
class BatchLine:
    """A robust line over per-batch-size points (value against batch size), with the points it kept."""

    line: LineFit
    batch_sizes: np.ndarray  # the points kept (positive and finite), in the order given
    values: np.ndarray

    @property
    def outlier_batch_sizes(self) -> tuple[int, ...]:
        """Batch sizes of the points the fit gave no weight."""
        return tuple(int(self.batch_sizes[i]) for i in self.line.outliers)


def fit_batch_line(batch_sizes, values, min_sizes: int = 2) -> BatchLine | None:
    """The shape the step-time and memory fits share: keep points with a positive, finite batch size and
    value, fit value = a + b*B robustly (relative residuals); None with fewer than `min_sizes` distinct sizes."""
    b = np.asarray(batch_sizes, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(b) & np.isfinite(v) & (b > 0) & (v > 0)
    b, v = b[keep], v[keep]
    if len(np.unique(b)) < max(2, min_sizes):
        return None
    line = fit_line(b, v, relative=True)
    return None if line is None else BatchLine(line, b, v)
