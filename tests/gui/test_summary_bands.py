"""Repeats over seeds in the summary (issue 9, item 6): the mean over seeds with a min-max band, said so in
the legend, from core/aggregate.py; a sweep with one seed per batch size has no band and no legend."""

from __future__ import annotations

import math

import numpy as np
import pytest
from batchlab.core.model import SweepData

from tests.gui.synthetic import sweep_events
from tests.gui.test_live_plots import _assert_legends_clear


def _data(**kwargs) -> SweepData:
    data = SweepData(label="seeds")
    for event in sweep_events(**kwargs):
        data.handle(event)
    return data


def test_summary_draws_mean_and_min_max_band_over_seeds(qtbot):
    from batchlab.gui.plot_style import BatchColours
    from batchlab.gui.summary_view import SummaryView

    view = SummaryView(BatchColours())
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    data = _data(batch_sizes=(16, 64), seeds=[0, 1, 2])
    view.set_source("main", data)
    qtbot.wait(20)
    (band,) = view.bands("final_loss")
    x, low, high = band
    for i, batch in enumerate((16, 64)):
        losses = [r.figures.final_loss for r in data.runs.values() if r.batch_size == batch]
        assert len(losses) == 3 and max(losses) > min(losses)  # the seeds differ (synthetic loss x (1 + 0.05 seed))
        assert (x[i], low[i], high[i]) == pytest.approx((math.log2(batch), min(losses), max(losses)))
    line = next(i for i in view._items["final_loss"] if getattr(i, "name", lambda: None)() is not None)
    mean_y = line.getData()[1]
    expected = [np.mean([r.figures.final_loss for r in data.runs.values() if r.batch_size == b]) for b in (16, 64)]
    assert mean_y == pytest.approx(expected)
    for metric, widget in view.plots.items():
        labels = [label.text for _s, label in widget.getPlotItem().legend.items]
        assert labels == ["mean, band = min-max over 3 seeds"], metric
    _assert_legends_clear(view.plots)

    one = _data(batch_sizes=(16, 64))  # one seed each: a mean line, no band, nothing to explain
    view.set_source("main", one)
    qtbot.wait(20)
    assert view.bands("final_loss") == []
    assert not view.plots["final_loss"].getPlotItem().legend.isVisible()
