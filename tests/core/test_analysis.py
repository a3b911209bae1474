"""The analysis of steps to target: known answers for the McCandlish fit, its bounds, the regime rule,
the predicted best batch, and the recommendation text of a fixed synthetic sweep (golden file)."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from batchlab.core.analysis.advice import NO_TARGET
from batchlab.core.analysis.analyse import analyse
from batchlab.core.analysis.critical import fit_critical, optimal_batch
from batchlab.core.analysis.regimes import (
    DIMINISHING,
    PERFECT,
    PLATEAU,
    batch_regimes,
    fit_borders,
    fit_ratio,
    fit_spans,
    measured_spans,
    regime_of,
)
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

from tests.core.analysis_sweeps import ALPHA, BCRIT, BETA, SMIN, TARGET, steps_to_target, target_sweep
from tests.core.test_explain import synthetic_sweep

# The recommendation of target_sweep(missed=(512,), linear_from=8); after a deliberate change of the wording, rewrite
# it with BATCHLAB_UPDATE_GOLDEN=1 pytest tests/core/test_analysis.py and read the diff before committing it.
GOLDEN = Path(__file__).parent / "data" / "advice_golden.txt"


def noisy_steps(smin, bcrit, sizes, seeds=2, noise=0.10, seed=7):
    """S(B) = smin (1 + bcrit/B) times exp(N(0, noise)): 10% multiplicative noise per run."""
    rng = np.random.default_rng(seed)
    b = np.repeat(np.asarray(sizes, dtype=float), seeds)
    return b, smin * (1 + bcrit / b) * np.exp(rng.normal(0, noise, len(b)))


def test_the_fit_recovers_smin_and_bcrit_within_ten_percent_from_ten_percent_noise():
    b, s = noisy_steps(500.0, 256.0, 2 ** np.arange(3, 14))
    fit = fit_critical(b, s)
    assert fit.bcrit.kind == "="
    assert fit.smin == pytest.approx(500.0, rel=0.10)
    assert fit.bcrit.value == pytest.approx(256.0, rel=0.10)
    assert fit.bcrit.low < fit.bcrit.value < fit.bcrit.high < 1.5 * fit.bcrit.low  # a bounded, useful interval
    assert fit.smin_low < fit.smin < fit.smin_high
    assert fit.emin == pytest.approx(fit.smin * fit.bcrit.value)
    assert fit.rms_log_residual == pytest.approx(0.10, rel=0.35)
    assert fit.resamples > 900  # resamples that lost a batch size are left out, few are with 22 runs


def test_exact_points_give_the_exact_curve():
    b = np.array([16, 32, 64, 128, 256, 512, 1024])
    fit = fit_critical(b, 100 * (1 + 200 / b))
    assert fit.smin == pytest.approx(100, rel=1e-4) and fit.bcrit.value == pytest.approx(200, rel=1e-4)
    assert float(fit.steps_at(200)) == pytest.approx(200, rel=1e-4)  # 2 Smin at Bcrit
    assert float(fit.examples_at(200)) == pytest.approx(2 * 100 * 200, rel=1e-4)  # 2 Emin


def test_all_batches_in_perfect_scaling_give_a_lower_bound_not_a_number():
    b, s = noisy_steps(50.0, 1e5, [16, 32, 64, 128, 256, 512])
    fit = fit_critical(b, s)
    assert fit.bcrit.kind == ">=" and fit.bcrit.value <= 512
    assert fit.bcrit.text() == f"Bcrit >= {fit.bcrit.value:,.0f}"


def test_all_batches_on_the_plateau_give_an_upper_bound():
    b, s = noisy_steps(300.0, 2.0, [64, 128, 256, 512, 1024])
    fit = fit_critical(b, s)
    assert fit.bcrit.kind == "<=" and fit.bcrit.value >= 64
    assert "<= " in fit.bcrit.text()


def test_the_fit_needs_three_batch_sizes_and_skips_runs_that_missed():
    assert fit_critical([32, 32, 64, 64], [100, 110, 60, 55]) is None
    assert fit_critical([32, 64, 128], [100, 60, math.nan]) is None


def test_three_runs_at_three_batch_sizes_give_the_fitted_value_without_a_zero_width_interval():
    """Every bootstrap resample that keeps three batch sizes is then the three runs themselves: an interval
    from them would read "95% CI 10-10" (the mnist-cnn-98 sweep of 2026-12-01 printed that)."""
    b = np.array([8.0, 16.0, 32.0])
    fit = fit_critical(b, np.array([11000.0, 7100.0, 6500.0]))
    assert fit.bcrit.kind == "=" and 8 < fit.bcrit.value < 32
    assert math.isnan(fit.bcrit.low) and math.isnan(fit.smin_low) and not fit.samples
    assert fit.bcrit.text() == f"Bcrit = {fit.bcrit.value:,.0f} (no interval: too few runs)"
    assert np.isnan(fit.band(np.array([8.0, 64.0]))[0]).all()  # no band drawn from one resample
    four = fit_critical(np.array([8.0, 16.0, 32.0, 64.0]), np.array([11000.0, 7100.0, 6500.0, 5900.0]))
    assert four.bcrit.low < four.bcrit.high  # four runs: resamples differ, an interval again


def test_the_best_batch_minimises_steps_times_step_time():
    best = optimal_batch(256.0, ALPHA, BETA)
    grid = np.geomspace(1, 1e5, 200_001)
    total = 100 * (1 + 256 / grid) * (ALPHA + BETA * grid)
    assert best == pytest.approx(grid[np.argmin(total)], rel=1e-3)
    assert math.isnan(optimal_batch(256.0, -1e-3, BETA))


def test_regime_rule_on_ratios_and_on_the_mccandlish_curve():
    assert regime_of(2.0) == regime_of(1.8) == PERFECT
    assert regime_of(1.79) == regime_of(1.11) == DIMINISHING
    assert regime_of(1.1) == regime_of(1.0) == PLATEAU
    assert regime_of(math.nan) is None
    perfect_end, plateau_start = fit_borders(100.0)
    assert (perfect_end, plateau_start) == pytest.approx((12.5, 450.0))
    assert fit_ratio(perfect_end, 100.0) == pytest.approx(1.8) and fit_ratio(plateau_start, 100.0) == pytest.approx(1.1)
    assert batch_regimes([4, 12, 13, 100, 449, 451, 4096], 100.0) == {
        4: PERFECT,
        12: PERFECT,
        13: DIMINISHING,
        100: DIMINISHING,
        449: DIMINISHING,
        451: PLATEAU,
        4096: PLATEAU,
    }
    spans = fit_spans(100.0, 1.0, 10_000.0)
    assert [s.regime for s in spans] == [PERFECT, DIMINISHING, PLATEAU]
    assert spans[0].low == 1.0 and spans[2].high == 10_000.0
    assert spans[0].high == pytest.approx(12.5) and spans[2].low == pytest.approx(450.0)


def test_measured_regimes_between_batch_sizes_follow_the_per_doubling_ratio():
    sizes = [4, 8, 32, 128, 1024, 4096]
    steps = [1000.0 * (1 + 256 / b) for b in sizes]
    spans = measured_spans(sizes, steps)
    assert [(s.low, s.high) for s, _ in spans] == [(4, 8), (8, 32), (32, 128), (128, 1024), (1024, 4096)]
    assert [s.regime for s, _ in spans] == [PERFECT, PERFECT, DIMINISHING, DIMINISHING, PLATEAU]
    # 8 -> 32 is two doublings: the ratio is the square root of S(8)/S(32)
    assert spans[1][1] == pytest.approx(math.sqrt(steps[1] / steps[2]))


def test_analyse_a_target_sweep_finds_the_known_curve_and_best_batch():
    analysis = analyse(target_sweep(linear_from=8))  # a rate rule: the predicted minimum's assumption holds
    fit = analysis.critical
    assert fit.bcrit.kind == "=" and fit.bcrit.value == pytest.approx(BCRIT, rel=0.10)
    assert fit.smin == pytest.approx(SMIN, rel=0.10)
    assert analysis.step_time.alpha == pytest.approx(ALPHA, rel=0.01) and analysis.step_time.beta == pytest.approx(
        BETA, rel=0.01
    )
    assert analysis.best_predicted == pytest.approx(math.sqrt(fit.bcrit_fit * ALPHA / BETA), rel=1e-6)
    assert analysis.prediction.fixed_time == pytest.approx(0.5 - ALPHA - BETA * 64, abs=0.01)  # tracing
    p = analysis.prediction
    assert all(lo <= s <= hi for lo, s, hi in zip(p.steps_low, p.steps, p.steps_high, strict=True))
    at_bcrit = p.batch_sizes.index(min(p.batch_sizes, key=lambda b: abs(b - BCRIT)))
    assert p.steps_low[at_bcrit] < steps_to_target(p.batch_sizes[at_bcrit]) < p.steps_high[at_bcrit]
    by_size = {s.batch_size: s for s in analysis.batches}
    assert by_size[8].regime == "perfect scaling" and by_size[512].regime == "plateau"
    assert by_size[64].steps_to_target.n == 2 and by_size[64].reached == 2
    assert by_size[64].step_wall_time.mean == pytest.approx(ALPHA + BETA * 64, rel=1e-6)
    # loss noise falls with the batch (the generator's per-step noise is 0.4/sqrt(B))
    noise = [by_size[b].loss_noise.mean for b in sorted(by_size)]
    assert noise == sorted(noise, reverse=True)
    assert by_size[8].loss_noise.mean == pytest.approx(0.4 / math.sqrt(8) * math.sqrt(2), rel=0.25)
    assert by_size[64].gap.mean == pytest.approx(0.45 - (0.3 + 0.0002 * 64)) and by_size[64].gap_at == "target"
    assert by_size[64].lr == 0.05 * 64 / 8
    text = json.dumps(analysis.as_dict(), allow_nan=False)  # plain JSON, NaN as null
    assert json.loads(text)["critical"]["bcrit"]["kind"] == "="


def test_recommendation_text_of_a_fixed_sweep_matches_the_golden_file():
    """With a profile's prediction (B_simple 128, the same step time): best ~101 predicted, 64 measured."""
    from batchlab.core.analysis.predict import predict_from_profile

    from tests.core.test_noise_scale import profile_sweep

    profile = predict_from_profile(profile_sweep(b_simple=128.0))
    text = "\n".join(analyse(target_sweep(missed=(512,), linear_from=8), profile).recommendation) + "\n"
    if os.environ.get("BATCHLAB_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_the_noise_scale_of_the_runs_fills_its_slot_and_is_compared_with_the_fit():
    analysis = analyse(target_sweep(sizes=(8, 32, 128, 512), b_simple=70.0, linear_from=8))
    ns = analysis.noise_scale
    runs = 8  # each run's final estimate is 70 x (1 + index/100), index 0..7
    assert ns.runs == runs and ns.low == 70.0 and ns.high == pytest.approx(70 * 1.07)
    assert ns.b_simple == pytest.approx(70 * (1 + 3.5 / 100))
    assert ns.per_batch[8] == pytest.approx(70 * 1.005)
    text = "\n".join(analysis.recommendation)
    bcrit = analysis.critical.bcrit.value
    said = f"B_simple = {ns.b_simple:,.0f} (the final estimate, median of 8 runs, 70-75), which predicts Bcrit ~ 72"
    assert said in text
    assert f"the fit of steps to target gives {bcrit:,.0f}, {bcrit / ns.b_simple:.2g}x the prediction" in text
    assert not any(line.startswith("Not measured") and "noise scale" in line for line in analysis.recommendation)
    assert analyse(target_sweep()).noise_scale is None


def test_the_learning_rate_named_is_the_rules_peak_not_where_warmup_starts():
    """A linear rule from 0.05 at batch 8: batch 64 trains at 0.4 after warmup (golmant-lsr's report once said
    its batch 256 ran at 0.01, the rate warmup starts from)."""
    analysis = analyse(target_sweep(linear_from=8))
    assert {s.batch_size: s.lr for s in analysis.batches} == pytest.approx(
        {b: 0.05 * b / 8 for b in (8, 16, 32, 64, 128, 256, 512)}
    )
    best = analysis.best_measured
    said = (
        f"Learning rate for batch {best}: {0.05 * best / 8:g}, the peak rate its runs used "
        "(the linear rule from 0.05 at batch 8, 10 warmup steps)."
    )
    assert said in analysis.recommendation


def test_a_step_time_line_without_a_fixed_cost_gives_no_predicted_minimum_and_says_why():
    analysis = analyse(target_sweep(alpha=-1e-4, linear_from=8))
    assert analysis.step_time.alpha < 0 and math.isnan(analysis.best_predicted)
    assert any(
        "T(B) then only grows with B: by this model the smallest batch is fastest" in p for p in analysis.recommendation
    )


def test_a_sweep_still_running_says_which_runs_are_to_come_not_that_they_failed():
    data = target_sweep(sizes=(8, 32, 128))
    data.handle(make_event("run_started", run=99, batch_size=512, seed=0, target=TARGET))
    text = analyse(data).recommendation[-1]
    assert text.startswith("Not measured: ") and "batch 512: runs still to come or running" in text
    assert "did not finish" not in text
    data.handle(make_event("run_ended", run=99, status="oom", message="out of memory"))
    assert "batch 512: some runs did not finish" in analyse(data).recommendation[-1]


def test_one_regime_sweep_says_bcrit_is_a_bound_and_gives_no_predicted_optimum():
    analysis = analyse(target_sweep(sizes=(1, 2, 4), seeds=(0,), linear_from=1))
    assert analysis.critical.bcrit.kind == ">="
    assert math.isnan(analysis.best_predicted) and analysis.regime_source == "measured"
    text = "\n".join(analysis.recommendation)
    assert "Bcrit >= " in text and "only bounded" in text
    assert "one run per batch size" in text


def test_a_sweep_without_a_target_compares_loss_and_time_and_still_gives_memory():
    analysis = analyse(synthetic_sweep())
    assert analysis.critical is None and analysis.target is None
    text = analysis.recommendation
    assert text[0].startswith("Soonest to a common loss: batch ")
    assert any("per steady epoch" in line for line in text)
    assert any(line.startswith("Memory: batch 512, the largest that ran") for line in text)
    assert analyse(SweepData()).recommendation[0] == NO_TARGET  # nothing finished: nothing to compare


def test_steps_to_target_of_the_generator():
    assert steps_to_target(BCRIT) == 2 * SMIN
