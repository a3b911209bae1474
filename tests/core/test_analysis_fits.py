"""Known answers for the sweep analysis fits: step time t(B) = alpha + beta*B and peak(B) = m0 + m1*B."""

import math

import numpy as np
import pytest
from batchlab.core.analysis.memory_fit import fit_memory
from batchlab.core.analysis.robust_line import fit_line
from batchlab.core.analysis.step_time import fit_step_time

ALPHA = 1.9e-3  # s per step
BETA = 12e-6  # s per sample
SIZES = np.array([8, 16, 32, 64, 128, 256, 512, 1024])


def test_step_time_fit_recovers_alpha_beta_from_per_run_medians_with_an_outlier():
    rng = np.random.default_rng(1)
    times = (ALPHA + BETA * SIZES) * rng.normal(1.0, 0.03, len(SIZES))  # 3% noise
    times[2] *= 4.0  # batch 32's run shared the machine with something else
    fit = fit_step_time(SIZES, times)
    assert fit.alpha == pytest.approx(ALPHA, rel=0.1)
    assert fit.beta == pytest.approx(BETA, rel=0.05)
    assert fit.knee == pytest.approx(ALPHA / BETA, rel=0.15)
    assert fit.outliers == (32,)
    assert fit.median_rel_residual < 0.05 and fit.r2 > 0.99


def test_step_time_fit_over_many_noisy_steps_with_ten_percent_wild_ones():
    rng = np.random.default_rng(7)
    b = np.repeat(SIZES, 60)
    t = (ALPHA + BETA * b) * rng.lognormal(0.0, 0.08, len(b))
    wild = rng.random(len(b)) < 0.1
    t[wild] *= rng.uniform(2, 20, wild.sum())  # pauses: GC, allocator growth, another process
    fit = fit_step_time(b, t)
    assert fit.alpha == pytest.approx(ALPHA, rel=0.1)
    assert fit.beta == pytest.approx(BETA, rel=0.05)
    # Plain least squares is pulled far off by the same points: the robustness matters.
    slope, intercept = np.polyfit(b, t, 1)
    assert abs(intercept - ALPHA) / ALPHA > 0.3 or abs(slope - BETA) / BETA > 0.3


def test_step_time_fit_needs_two_batch_sizes_and_ignores_missing_points():
    assert fit_step_time([64, 64], [0.01, 0.011]) is None
    assert fit_step_time([], []) is None
    fit = fit_step_time([8, 64, 512, 128], [ALPHA + BETA * 8, math.nan, ALPHA + BETA * 512, -1])
    assert fit.batch_sizes == (8, 512)
    assert fit.alpha == pytest.approx(ALPHA) and fit.beta == pytest.approx(BETA)


def test_step_time_overhead_share_is_half_at_the_knee():
    fit = fit_step_time(SIZES, ALPHA + BETA * SIZES)
    assert fit.overhead_share(fit.knee) == pytest.approx(0.5)
    assert fit.overhead_share(8) > 0.9


def test_memory_fit_on_synthetic_peaks():
    m0, m1 = 420 * 2**20, 0.75 * 2**20  # 420 MiB fixed, 0.75 MiB per sample
    rng = np.random.default_rng(3)
    peaks = (m0 + m1 * SIZES) * rng.normal(1.0, 0.01, len(SIZES))
    peaks[-1] = -1  # unknown for one run
    fit = fit_memory(SIZES, peaks.astype(np.int64), source="tf_peak_bytes")
    assert fit.m0 == pytest.approx(m0, rel=0.03)
    assert fit.m1 == pytest.approx(m1, rel=0.05)
    assert fit.batch_sizes == tuple(SIZES[:-1])
    assert fit.source == "tf_peak_bytes"
    limit = 4 * 2**30
    expected = (limit - m0) / m1
    assert abs(fit.batch_for(limit) - expected) / expected < 0.05
    assert fit.batch_for(m0 / 2) is None


def test_line_fit_exact_points_have_no_outliers():
    line = fit_line([1, 2, 3, 4], [3, 5, 7, 9])
    assert (line.intercept, line.slope) == (pytest.approx(1.0), pytest.approx(2.0))
    assert line.outliers == () and line.r2 == pytest.approx(1.0)
