"""The Summary tab's time account (issue 25, item 1): one stacked bar per run whose segments are the account's
parts (core/analysis/time_account.py, the numbers `report` prints), named in a legend, fitting 1024x700."""

from __future__ import annotations

import pytest
from batchlab.core.analysis.time_account import PART_NAMES, time_account
from batchlab.core.model import SweepData
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

from tests.core.test_time_account import _run
from tests.gui.synthetic import write_run_file


def test_each_run_is_one_bar_of_its_accounts_parts(qtbot):
    from batchlab.gui.plot_style import BatchColours
    from batchlab.gui.summary_view import SummaryView

    data = SweepData(label="account")
    _run(data, 0, 32, [0.1, 0.1], [0.0, 0.0], 1.0, 1.0, 0.2)
    _run(data, 1, 512, [0.1, 0.1], [2.5, 0.0], 1.0, 1.0, 0.05)
    view = SummaryView(BatchColours())
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    view.set_source("main", data)
    qtbot.wait(20)
    bars = view.time_bars
    assert [a.batch_size for _, a in bars.rows] == [32, 512]
    for row, (_, account) in enumerate(bars.rows):
        expected = time_account(data.runs[account.run])
        segments = bars.segments(row)
        for part in PART_NAMES:
            assert segments.get(part, 0.0) == pytest.approx(max(0.0, expected.parts[part]))
        assert sum(segments.values()) == pytest.approx(expected.wall)  # the bar is the run's wall time
    assert bars.segments(1)["pipeline_close"] == pytest.approx(2.5)  # the gap between epochs, by its name
    legend = bars.legend.text().replace("&nbsp;", " ")
    assert "closing the input pipeline" in legend and "tracing and compiling" in legend
    assert "stalls" not in legend  # a part no run has is not listed


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1600, 1000)])
def test_the_bars_and_their_legend_fit_the_window(main_window, tmp_path, width, height):
    w = main_window
    w.resize(width, height)
    assert w.open_file(write_run_file(tmp_path / "t.h5", batch_sizes=(8, 16, 32, 64, 128, 256, 512)))
    w.views.setCurrentIndex(1)
    w.refresh(full=True)
    QApplication.processEvents()
    bars = w.summary.time_bars
    assert len(bars.rows) == 7
    plot, legend = bars.plot_widget, bars.legend
    assert plot.isVisible() and legend.isVisible()
    # the legend lies under the plot, inside the Summary view, and has the lines its text needs
    assert legend.geometry().top() >= plot.geometry().bottom()
    bottom = legend.mapTo(w.summary, legend.rect().bottomLeft()).y()
    assert bottom <= w.summary.height() + 1
    assert legend.height() >= legend.heightForWidth(legend.width()) - 1
    # every run's name is on the axis (pyqtgraph drops a tick label wider than the axis)
    axis = plot.getPlotItem().getAxis("left")
    metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
    labels = [text for _, text in axis._tickLevels[0]]
    assert len(labels) == 7 and axis.width() >= max(metrics.horizontalAdvance(t) for t in labels)
    # the four plots above keep at least the bars' height each
    for name, summary_plot in w.summary.plots.items():
        assert summary_plot.height() >= plot.height() * 0.6, name
