"""The LR range test's math on synthetic loss curves with known answers (no TensorFlow here; the
end-to-end `batchlab lr-find` runs are in test_lr_find.py)."""

import math

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.lr_find import (
    DEFAULT_LR_MAX,
    DEFAULT_LR_MIN,
    DEFAULT_LR_STEPS,
    STOP_DIVERGED,
    STOP_END,
    STOP_NAN,
    RangeSettings,
    RangeTest,
    exponential_rates,
    parse_range_settings,
    smooth,
    suggest,
)


def test_rates_grow_geometrically_from_lr_min_to_lr_max():
    rates = exponential_rates(1e-4, 1.0, 5)
    assert rates == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1, 1.0])


def test_smoothing_is_bias_corrected():
    # by hand, beta 0.5: avg 0.5 -> 0.5/0.5 = 1; avg 0.25 + 1 = 1.25 -> 1.25/0.75
    assert smooth([1.0, 2.0], beta=0.5) == pytest.approx([1.0, 1.25 / 0.75])
    # a constant loss is its own smoothed value from the first point (no pull towards 0)
    assert smooth([3.0] * 20) == pytest.approx([3.0] * 20)


def _sigmoid_curve(center_lr: float, n: int = 200, lr_min: float = 1e-6, lr_max: float = 10.0):
    """A loss that falls from 2.3 to 0.3 along log(lr), fastest (w.r.t. ln lr) exactly at center_lr."""
    lrs = exponential_rates(lr_min, lr_max, n)
    u = np.log(lrs) - math.log(center_lr)
    return lrs, 1.3 - np.tanh(u / 1.5)


def test_steepest_descent_with_respect_to_log_lr_is_found():
    lrs, loss = _sigmoid_curve(1e-3)
    s = suggest(lrs, loss)
    step = lrs[1] / lrs[0]  # one grid point
    assert 1e-3 / step <= s.steepest_lr <= 1e-3 * step
    assert s.loss_at_steepest == pytest.approx(1.3, abs=0.05)
    # min/10: the lowest loss is at the last point (tanh keeps falling)
    assert s.min_index == len(lrs) - 1
    assert s.min10_lr == pytest.approx(lrs[-1] / 10)


def test_the_first_ten_percent_are_skipped():
    lrs, loss = _sigmoid_curve(1e-2)
    loss = loss.copy()
    loss[:10] += np.linspace(5.0, 0.0, 10)  # a cliff in the first 5%: steeper than anything after it
    assert np.argmin(np.gradient(loss, np.log(lrs))) < 10
    s = suggest(lrs, loss)
    assert s.steepest_index >= 20
    assert s.steepest_lr == pytest.approx(1e-2, rel=0.1)


def test_too_short_a_curve_gives_no_steepest_but_still_min10():
    s = suggest([1e-3, 1e-2], [1.0, 0.5])
    assert math.isnan(s.steepest_lr) and s.steepest_index == -1
    assert s.min10_lr == pytest.approx(1e-3)


def test_stop_when_the_smoothed_loss_exceeds_four_times_its_best():
    test = RangeTest(beta=0.0)  # no smoothing: the rule itself
    assert not any(test.add(lr, loss) for lr, loss in [(1, 1.0), (2, 0.5), (3, 2.0)])  # 2.0 = 4 x 0.5: not above
    assert test.add(4, 2.01)
    assert test.stop_reason == STOP_DIVERGED
    assert len(test.lrs) == 4  # the stop point is kept in the curve ...
    assert test.result().min_index == 1  # ... but left out of the suggestions


def test_stop_on_nan_and_at_the_end_of_the_range():
    test = RangeTest()
    assert not test.add(1e-3, 1.0)
    assert test.add(1e-2, float("nan"))
    assert test.stop_reason == STOP_NAN and math.isnan(test.smoothed[-1])
    whole = RangeTest()
    lrs, loss = _sigmoid_curve(1e-3, n=50)
    assert not any(whole.add(lr, v) for lr, v in zip(lrs, loss, strict=True))
    whole.finish()
    assert whole.stop_reason == STOP_END
    assert whole.smoothed == pytest.approx(smooth(loss))


def test_a_range_test_on_a_diverging_curve_suggests_before_the_blow_up():
    lrs = exponential_rates(1e-5, 10.0, 200)
    u = np.log(lrs) - math.log(1e-3)
    loss = 1.3 - np.tanh(u / 1.5) + np.exp(np.log(lrs) - math.log(0.5))  # falls, then explodes past 0.5
    test = RangeTest()
    for lr, v in zip(lrs, loss, strict=True):
        if test.add(lr, v):
            break
    assert test.stop_reason == STOP_DIVERGED
    assert test.lrs[-1] < 10.0
    s = test.result()
    assert 1e-4 < s.steepest_lr < 1e-2  # the smoothed curve lags, but the steepest fall is around 1e-3
    assert s.min10_lr < 0.5 / 10


def test_settings_defaults_and_one_line_errors():
    s = parse_range_settings()
    assert (s.lr_min, s.lr_max, s.lr_steps) == (DEFAULT_LR_MIN, DEFAULT_LR_MAX, DEFAULT_LR_STEPS)
    assert parse_range_settings("1e-4", "1", "60").rates()[-1] == pytest.approx(1.0)
    for args, field in ((("0",), "lr_min"), (("1e-3", "1e-4"), "lr_max"), ((None, None, "5"), "lr_steps")):
        with pytest.raises(SpecError) as e:
            parse_range_settings(*args)
        assert e.value.field == field and "\n" not in str(e.value)


def test_a_preset_may_bring_its_own_range_and_what_is_given_still_wins():
    # shallue-mnist: 400 steps from 1e-4 to 1 (its CNN with momentum 0.9 stops learning above ~0.3 without
    # the loss blowing up; docs/experiments.md); other presets keep lr-find's defaults
    assert parse_range_settings(preset="shallue-mnist") == RangeSettings(1e-4, 1.0, 400)
    assert parse_range_settings(None, "10", None, preset="shallue-mnist") == RangeSettings(1e-4, 10.0, 400)
    assert parse_range_settings(preset="mnist-mlp") == RangeSettings()
    with pytest.raises(SpecError) as e:  # the preset's lr_min against a typed lr_max
        parse_range_settings(None, "1e-5", None, preset="shallue-mnist")
    assert e.value.field == "lr_max" and "1e-05 is not above lr_min 0.0001" in str(e.value)
