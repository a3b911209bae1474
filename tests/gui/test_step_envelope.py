"""The step-curve envelope: exact for short runs, bounded for long ones, same extremes as the raw data, gaps kept."""

from __future__ import annotations

import numpy as np
import pytest
from batchlab.gui.step_envelope import StepEnvelope, pause_before


def steps(loss, wall=None, busy=0.001):
    loss = np.asarray(loss, dtype=float)
    n = len(loss)
    wall = np.arange(1, n + 1) * 0.01 if wall is None else np.asarray(wall, dtype=float)
    return {"loss": loss, "wall_time": wall, "step_time": np.full(n, busy), "fetch_time": np.zeros(n)}


def test_a_short_run_is_drawn_row_for_row():
    env = StepEnvelope(max_bins=8)
    assert env.update(steps([3.0, 2.0, 1.0]))
    rows, gaps = env.draw_rows()
    assert rows.tolist() == [0, 1, 2] and not gaps.any()
    assert not env.update(steps([3.0, 2.0, 1.0]))  # nothing new


def test_the_envelope_keeps_each_bins_lowest_and_highest_loss_in_row_order():
    loss = [5, 1, 4, 2, 9, 3, 0, 7]  # bins of 2 rows: (5,1) (4,2) (9,3) (0,7)
    env = StepEnvelope(max_bins=4)
    env.update(steps(loss))
    rows, _ = env.draw_rows()
    assert env.width == 2
    assert rows.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    env = StepEnvelope(max_bins=2)  # bins of 4: (5,1,4,2) (9,3,0,7)
    env.update(steps(loss))
    rows, _ = env.draw_rows()
    assert rows.tolist() == [0, 1, 4, 6]  # 5 then 1; 9 then 0
    assert np.asarray(loss)[rows].tolist() == [5, 1, 9, 0]


def test_incremental_updates_give_the_same_curve_as_one_update():
    rng = np.random.default_rng(1)
    loss = rng.random(5000)
    whole = StepEnvelope(max_bins=64)
    whole.update(steps(loss))
    parts = StepEnvelope(max_bins=64)
    data = steps(loss)
    for n in range(0, 5001, 37):
        parts.update(data, n)
    parts.update(data)
    assert parts.width == whole.width
    assert parts.draw_rows()[0].tolist() == whole.draw_rows()[0].tolist()


@pytest.mark.parametrize("n", [10, 1000, 100_000])
def test_points_to_draw_stay_bounded_however_long_the_run(n):
    env = StepEnvelope(max_bins=256)
    loss = np.linspace(2, 1, n)
    loss[n // 3] = 50.0  # a spike must survive the reduction
    env.update(steps(loss))
    rows, _ = env.draw_rows()
    assert len(rows) <= 2 * 256
    assert loss[rows].max() == 50.0 and loss[rows].min() == loss.min()


def test_a_pause_between_epochs_starts_a_new_bin_marked_as_a_gap():
    wall = np.concatenate([np.arange(1, 11) * 0.01, 2.0 + np.arange(1, 11) * 0.01])  # 1.9 s validation pause
    env = StepEnvelope(max_bins=4)
    env.update(steps(np.ones(20), wall))
    rows, gaps = env.draw_rows()
    assert gaps.sum() == 1 and rows[gaps].tolist() == [10]


def test_a_slow_step_is_not_a_pause():
    wall = np.array([0.01, 0.02, 0.6, 0.61])
    busy = np.array([0.01, 0.01, 0.58, 0.01])  # the third step itself took 0.58 s (tracing)
    assert pause_before(wall, busy, None).tolist() == [False, False, False, False]
    assert pause_before(wall, np.zeros(4), None).tolist() == [False, False, True, False]


def test_nan_losses_do_not_hide_the_finite_extremes():
    env = StepEnvelope(max_bins=2)
    loss = [1.0, np.nan, 3.0, 2.0, np.nan, np.nan, np.nan, np.nan]
    env.update(steps(loss))
    rows, _ = env.draw_rows()
    assert rows[:2].tolist() == [0, 2]
