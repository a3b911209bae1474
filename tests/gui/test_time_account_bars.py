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


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1440, 900)])
def test_the_bars_and_their_legend_fit_the_window(main_window, tmp_path, width, height):
    w = main_window
    w.resize(width, height)
    assert w.open_file(write_run_file(tmp_path / "t.h5", batch_sizes=(8, 16, 32, 64, 128, 256, 512)))
    w.views.setCurrentIndex(1)
    w.refresh(full=True)
    QApplication.processEvents()
    plot_heights = {name: p.height() for name, p in w.summary.plots.items()}
    w.why_tabs.setCurrentIndex(1)  # "Where the time went": its pane grows to the bars (at most 2/3 of the Summary)
    QApplication.processEvents()
    bars = w.summary.time_bars
    assert len(bars.rows) == 7
    plot, legend = bars.plot_widget, bars.legend
    assert plot.isVisible() and legend.isVisible()
    # the legend lies under the plot and has the lines its text needs (the pane scrolls where it is taller)
    assert legend.geometry().top() >= plot.geometry().bottom()
    assert legend.height() >= legend.heightForWidth(legend.width()) - 1
    # at 1440x900 every bar shows without scrolling; at 1024x700 seven bars take more than the room the plots
    # leave (2/3 of the Summary), and the pane scrolls to them and their legend
    area = w.why_tabs.currentWidget()
    shown = plot.mapTo(area.viewport(), plot.rect().bottomLeft()).y() <= area.viewport().height() + 1
    assert shown if width >= 1400 else (shown or area.verticalScrollBar().maximum() > 0)
    # every run's name is on the axis (pyqtgraph drops a tick label wider than the axis)
    axis = plot.getPlotItem().getAxis("left")
    metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
    labels = [text for _, text in axis._tickLevels[0]]
    assert len(labels) == 7 and axis.width() >= max(metrics.horizontalAdvance(t) for t in labels)
    # the four plots above keep a readable height with the bars shown (the pane takes at most 2/3)
    for name, summary_plot in w.summary.plots.items():
        assert summary_plot.height() >= 100, name
    # with "Why" shown the bars take no room from the plots (issue 29: they were 120 px at 1024x700 and 1440x900)
    assert min(plot_heights.values()) >= (140 if width < 1400 else 180), plot_heights
