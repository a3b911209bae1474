"""Runs of long ago in one curve per batch size (gui/finished_curves.py): known answers, no window."""

from __future__ import annotations

import numpy as np
from batchlab.gui.finished_curves import FINISHED_POINTS, FinishedCurves, decimate


def test_a_long_step_curve_keeps_each_bins_lowest_and_highest_loss_and_its_breaks():
    x = np.arange(10_000, dtype=float)
    y = np.sin(x / 50.0)
    y[5_000] = np.nan  # a pause on a time axis
    dx, dy = decimate(x, y, bins=100)
    assert len(dx) <= 2 * 100 + 1 and np.all(np.diff(dx) > 0)  # in order, at most two a bin (and the break)
    assert np.isnan(dy[dx == 5_000]).all() and 5_000 in dx
    for start in range(0, 10_000, 100):  # every bin's extremes are kept
        part = y[start : start + 100]
        kept = dy[(dx >= start) & (dx < start + 100)]
        assert np.nanmax(kept) == np.nanmax(part) and np.nanmin(kept) == np.nanmin(part)
    short_x, short_y = decimate(x[:300], y[:300], bins=256)
    assert len(short_x) == 300  # a short curve is drawn exactly


def test_a_group_draws_its_runs_one_after_another_with_a_break_between(qapp):
    import pyqtgraph as pg

    groups, items = FinishedCurves(), []

    def make(group):
        items.append(pg.PlotDataItem())
        return items[-1]

    groups.put(("main", "loss_step", 8), 3, [1, 2], [0.5, 0.4], thin=True)
    groups.put(("main", "loss_step", 8), 1, [1, 2, 3], [0.9, 0.8, 0.7], thin=True)
    assert groups.flush({"loss_step"}, make, remove=items.remove) == 6  # 5 points and one break
    item = groups.items[("main", "loss_step", 8)]
    np.testing.assert_array_equal(item.yData, [0.9, 0.8, 0.7, np.nan, 0.5, 0.4])  # in run order
    assert groups.runs("main", "loss_step") == 2 and groups.flush({"loss_step"}, make, items.remove) == 0
    groups.put(("main", "loss_step", 8), 1, np.arange(5000.0), np.arange(5000.0), thin=True)
    groups.flush({"loss_step"}, make, items.remove)
    assert len(item.yData) <= FINISHED_POINTS + 3
    assert groups.discard(("main", "loss_step", 8), 1) and groups.discard(("main", "loss_step", 8), 3)
    groups.flush({"loss_step"}, make, items.remove)
    assert items == [] and not groups.items  # the emptied group's curve went
