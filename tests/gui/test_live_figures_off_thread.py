"""A live sweep's Summary and Analysis computed off the GUI thread (gui/figure_worker.py: a forked child sees the
data as it was when the job was asked for). On the GUI thread a live sweep's Summary cost ~1.15 ms per run at
every run's end (318 ms at 240 runs, bench/bench_window_soak.py --tab summary_splitter); the drawn figures stay
until the newer ones come, with no "(computing…)" between runs."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from batchlab.gui.analysis_view import analysis_figures
from batchlab.gui.summary_view import summary_figures

from tests.gui.conftest import wait_until
from tests.gui.soak import soak_window

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a snapshot needs a forked child")

WAIT_S = 60
RUNS = 18  # three seeds of the soak's six batch sizes


def _settled(view) -> bool:
    return view.computing is None and not view.drawing


def test_a_live_sweeps_summary_comes_from_children_and_stays_drawn_between_runs(qapp, monkeypatch):
    from batchlab.gui.summary_view import SummaryView

    cleared = []  # each "(computing…)", and whether it took down figures of the sweep then shown
    real = SummaryView.show_computing

    def show_computing(self):
        cleared.append(self._figures is not None and self._figures_of == self.data_ids())
        real(self)

    monkeypatch.setattr(SummaryView, "show_computing", show_computing)
    window, _samples = soak_window(qapp, RUNS, every=RUNS, tab="summary_splitter")
    try:
        worker, summary = window.figure_worker, window.summary
        assert worker.children >= 2 and worker.lost == 0  # computed in children, more than once as runs ended
        assert cleared and not any(cleared)  # only before the sweep's first figures: never again between runs
        summary.refresh(force=False)  # the stream has ended: the last figures are those of every run
        wait_until(lambda: _settled(summary) and summary._figures[0] == summary.data_version(), WAIT_S)
        [(source, drawn)] = summary._figures[1].items()
        assert len(drawn.runs) == RUNS
        expected = summary_figures({"main": window.data})["main"]
        # the same numbers as computed here, NaN equal to NaN (the child's are copies)
        np.testing.assert_equal([(p.index, p.values) for p in drawn.runs], [(p.index, p.values) for p in expected.runs])
        np.testing.assert_equal(drawn.groups, expected.groups)
    finally:
        window.close()


def test_a_live_sweeps_analysis_comes_from_a_child_with_the_numbers_of_the_gui_thread(qapp):
    window, _samples = soak_window(qapp, RUNS, every=RUNS, tab="analysis")
    try:
        analysis = window.analysis
        analysis.refresh(force=False)
        wait_until(lambda: _settled(analysis) and analysis._figures[0] == analysis.data_version(), WAIT_S)
        assert window.figure_worker.children >= 1 and window.figure_worker.lost == 0
        got, expected = analysis.figures, analysis_figures(window.data)
        assert got.analysis.recommendation == expected.analysis.recommendation
    finally:
        window.close()
