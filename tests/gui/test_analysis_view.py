"""The Analysis tab: the plots and text show the numbers of core.analysis.analyse, and export like the others."""

import math

import numpy as np
import pyqtgraph as pg
import pytest
from batchlab.core.analysis.analyse import analyse
from batchlab.core.analysis.loss_level import loss_level_rows
from batchlab.core.analysis.regimes import PLATEAU
from batchlab.gui.analysis_view import PLOTS

from tests.core.analysis_sweeps import target_sweep
from tests.core.test_explain import synthetic_sweep


def _curve(view, plot_id: str, name_start: str) -> pg.PlotDataItem:
    return next(i for i in view.items(plot_id, pg.PlotDataItem) if (i.name() or "").startswith(name_start))


def test_the_analysis_tab_shows_the_numbers_of_the_analysis_and_what_a_sweep_without_target_needs(
    main_window, qtbot, tmp_path
):
    data = target_sweep(missed=(512,), b_simple=70.0, linear_from=8)  # a rate rule: T(B) is predicted
    main_window._show_sweep(data, "main")
    main_window.views.setCurrentWidget(main_window.analysis)
    view = main_window.analysis
    qtbot.waitUntil(lambda: view.analysis is not None)
    expected = analyse(data)
    # the fit through the prediction grid, log2 batch against log10 steps, named with Bcrit and its interval
    fit = _curve(view, "steps", "fit, Bcrit = ")
    x, y = fit.getData()
    assert np.allclose(x, np.log2(expected.prediction.batch_sizes))
    assert np.allclose(10**y, expected.prediction.steps)
    assert fit.name() == f"fit, {expected.critical.bcrit.text()}"
    examples = _curve(view, "examples", "fit, ")
    assert np.allclose(10 ** examples.getData()[1], expected.prediction.examples)
    (band,) = view.items("steps", pg.FillBetweenItem)
    assert np.allclose(band.band[1], expected.prediction.steps_low)
    # perfect scaling through the smallest batch: S(8) x 8 / B
    line = _curve(view, "steps", "perfect scaling from 8")
    lx, ly = line.getData()
    assert 10 ** ly[-1] * 2 ** lx[-1] == pytest.approx(expected.batches[0].steps_to_target.mean * 8)
    # regimes shaded where the analysis puts them, one point per run that met the target
    regions = view.items("steps", pg.LinearRegionItem)
    assert [(r.regime, *r.getRegion()) for r in regions] == [
        (s.regime, pytest.approx(math.log2(s.low)), pytest.approx(math.log2(s.high))) for s in expected.regime_spans
    ]
    assert regions[-1].regime == PLATEAU
    (runs,) = view.items("steps", pg.ScatterPlotItem)
    assert len(runs.points()) == sum(s.steps_to_target.n for s in expected.batches) == 12
    # T(B) and its minimum
    star = next(i for i in view.items("time", pg.ScatterPlotItem) if (i.name() or "").startswith("minimum"))
    (sx,), (sy,) = star.getData()
    assert 2**sx == pytest.approx(expected.best_predicted) and 10**sy == pytest.approx(expected.best_predicted_time)
    # the noise scale over training: a line per run that measured it, and the fitted Bcrit beside it
    assert view.plots["noise"].isVisibleTo(view)
    lines = view.items("noise", pg.PlotDataItem)
    assert len(lines) == len(data.runs) and 10 ** lines[0].getData()[1][-1] == pytest.approx(70.0)
    (bcrit_line,) = view.items("noise", pg.InfiniteLine)
    assert 10 ** bcrit_line.value() == pytest.approx(expected.critical.bcrit.value)
    # the recommendation, word for word
    text = view.text.toPlainText()
    assert all(p in " ".join(text.split()) for p in expected.recommendation)
    # every y axis says what it counts, time to target in seconds (the log10 axis items had dropped the labels)
    left = {plot_id: widget.getPlotItem().getAxis("left") for plot_id, widget in view.plots.items()}
    assert {p: a.labelText for p, a in left.items()} == {p: y_label for p, (_t, y_label, _u) in PLOTS.items()}
    assert left["time"].labelText == "time (s)" and left["time"].label.isVisible()
    # exportable like every plot
    path = main_window.export_plot("analysis_steps", str(tmp_path / "steps.svg"))
    assert path and "<svg" in open(path, encoding="utf-8").read(200)
    # a sweep without a target (one window for both: a window costs seconds): what is needed, empty plots
    main_window._show_sweep(synthetic_sweep(), "main")
    qtbot.waitUntil(lambda: view.analysis is not None and view.analysis.target is None)
    shown = " ".join(view.text.toPlainText().split())
    assert "Convergence section set Target to train_loss" in shown and "--target" not in shown
    level = view.analysis.loss_level  # the report's loss-and-time table, the same rows
    assert f"level {level.level:.3g}, the highest final smoothed training loss" in shown
    assert all(" ".join(row) in shown for row in loss_level_rows(level)[1:])
    assert not view.plots["noise"].isVisibleTo(view)  # no run measured the noise scale
    assert not view.items("steps", pg.PlotDataItem)
    # without a target the plots show when each run reached the common loss level the text compares at
    (reached,) = view.items("time", pg.ScatterPlotItem)
    assert sorted(10 ** reached.getData()[1]) == pytest.approx(sorted(r.time for r in level.runs))
    assert view.plots["time"].getPlotItem().titleLabel.text == f"Time to loss {level.level:.3g}"
    main_window._show_sweep(data, "main")  # back to a sweep with a target: its titles again
    qtbot.waitUntil(lambda: view.analysis is not None and view.analysis.target is not None)
    assert view.plots["time"].getPlotItem().titleLabel.text == "Time to target"


def test_a_narrow_log_axis_labels_each_amount_once_and_without_a_scale(main_window):
    # times of 1.4-3.2 s: steps of 0.5 s, each read as its amount (they read "2", "2", "2", "3")
    axis = main_window.analysis.plots["time"].getPlotItem().getAxis("left")
    levels = axis.tickValues(math.log10(1.4), math.log10(3.2), 300)
    labels = [s for spacing, values in levels for s in axis.tickStrings(values, 1.0, spacing) if s]
    assert labels == ["1.5", "2", "2.5", "3"]
    assert axis.tickStrings([math.log10(50_000), math.log10(0.05)], 1.0, 1.0) == ["50,000", "0.05"]
    assert not axis.autoSIPrefix  # no "(x0.001)" beside the label: the values are log10 amounts
