"""A file's Summary, explanation and Analysis figures computed off the GUI thread (gui/figure_worker.py: in a child
forked by the worker thread on Linux, in the thread elsewhere), the live
plots drawn and restyled a plot per tick (issue 30): the same numbers as on the GUI thread, a "computing" state
instead of the last file's figures, stale results dropped, and only the curves whose looks changed restyled."""

from __future__ import annotations

import dataclasses
import sys
import threading

import numpy as np
import pytest
from batchlab.core.analysis.analyse import analyse
from batchlab.gui import summary_view
from batchlab.gui.analysis_view import analysis_figures
from batchlab.gui.explain_panel import COMPUTING, explanation_or_error
from batchlab.gui.finished_curves import KEEP_OWN
from batchlab.gui.summary_view import METRICS, summary_figures

from tests.gui.conftest import wait_until
from tests.gui.synthetic import write_run_file

WAIT_S = 30  # generous: the 2-core CI machine is shared
MANY_SEEDS = range(10)  # 3 batch sizes x 10 seeds: 30 runs, more than KEEP_OWN, so a file's runs go to groups


def _threaded_open(w, path: str) -> None:
    """Open as a user does: read in the reader thread, shown when read, the plots drawn by the ticks."""
    w.read_in_thread = True
    assert w.open_file(path)
    wait_until(lambda: not w.readers["main"].busy and not w.refresher.active, WAIT_S)


def _settled(w) -> bool:
    views = (w.summary, w.explanation, w.analysis)
    return all(v.computing is None and not v.drawing for v in views) and not w.refresher.active


def _same(a, b) -> None:
    """a and b hold the same numbers, NaN equal to NaN (a result sent back from the child is a copy: its NaNs are
    not the `math.nan` object that makes `==` true for a result computed here)."""
    plain = dataclasses.asdict if dataclasses.is_dataclass(a) else (lambda x: x)
    np.testing.assert_equal(plain(a), plain(b))


def _held_summary(w, monkeypatch) -> tuple[threading.Event, list]:
    """The worker's summary jobs wait for the returned event (a 500-run summary, in slow motion); the list gets
    each job's sweeps as it starts. The jobs run in the worker's thread: a forked child would wait for an event
    of its own copy of this test."""
    w.figure_worker.in_child = False
    go, started = threading.Event(), []
    real = summary_view.summary_figures

    def held(sources):
        started.append(dict(sources))
        assert go.wait(WAIT_S), "the test never let the summary go"
        return real(sources)

    monkeypatch.setattr(summary_view, "summary_figures", held)
    return go, started


def test_figures_from_the_worker_equal_those_computed_on_the_gui_thread(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "a.h5", batch_sizes=(16, 32, 64), seeds=(0, 1))
    _threaded_open(w, path)
    jobs, children = w.figure_worker.jobs, w.figure_worker.children
    w.views.setCurrentWidget(w.summary_splitter)
    wait_until(lambda: _settled(w) and w.explanation.paragraphs, WAIT_S)
    w.views.setCurrentWidget(w.analysis)
    wait_until(lambda: _settled(w) and w.analysis.analysis is not None, WAIT_S)
    assert w.figure_worker.jobs == jobs + 3  # summary, explanation, analysis: each computed off the GUI thread
    if sys.platform.startswith("linux"):  # each in a forked child, none lost
        assert (w.figure_worker.children, w.figure_worker.lost) == (children + 3, 0)
    # one number, one place: what the child computed is what the same functions give here
    for source, figures in summary_figures({"main": w.data}).items():
        _same(w.summary._figures[1][source], figures)
    assert (w.explanation.paragraphs, "") == explanation_or_error(w.data, None)
    _same(w.analysis.figures, analysis_figures(w.data))
    assert w.analysis.analysis.recommendation == analyse(w.data, surface="window").recommendation
    for metric in METRICS:  # and what is drawn is those numbers: every ended run, at its own value
        expected = sorted(summary_view.metric_value(r, metric) for r in w.data.runs.values())
        drawn = sorted(p.pos().y() for s in w.summary._items[metric] if hasattr(s, "points") for p in s.points())
        assert drawn == pytest.approx(expected), metric


def test_the_summary_says_it_computes_and_shows_no_figures_of_the_last_file_meanwhile(
    main_window, tmp_path, monkeypatch
):
    w = main_window
    first = write_run_file(tmp_path / "first.h5", batch_sizes=(16, 32), seeds=(0,))
    second = write_run_file(tmp_path / "second.h5", batch_sizes=(64, 128, 256), seeds=(0, 1))
    _threaded_open(w, first)
    w.views.setCurrentWidget(w.summary_splitter)
    wait_until(lambda: _settled(w), WAIT_S)
    assert w.summary.point_count("final_loss") == 2  # the first file's two runs
    go, started = _held_summary(w, monkeypatch)
    _threaded_open(w, second)  # the summary is shown: its figures are asked for at once
    wait_until(lambda: started, WAIT_S)
    assert w.summary.computing is not None
    assert w.summary.point_count("final_loss") == 0  # never the first file's points under the second's name
    assert "Computing the summary of 6 runs" in w.summary.time_bars.legend.text()
    assert w.summary.plots["final_loss"].getPlotItem().titleLabel.text == "Final loss (computing…)"
    assert w.explanation.text.toPlainText() in (COMPUTING, *[f"- {p}" for p in w.explanation.paragraphs])
    go.set()
    wait_until(lambda: _settled(w), WAIT_S)
    assert w.summary.point_count("final_loss") == 6
    assert "Computing" not in w.summary.time_bars.legend.text()
    assert w.summary.plots["final_loss"].getPlotItem().titleLabel.text == "Final loss"


def test_a_result_computed_for_a_file_no_longer_shown_is_dropped(main_window, tmp_path, monkeypatch):
    w = main_window
    first = write_run_file(tmp_path / "first.h5", batch_sizes=(16, 32), seeds=(0,))
    second = write_run_file(tmp_path / "second.h5", batch_sizes=(64, 128, 256), seeds=(0,))
    w.read_in_thread = True
    w.views.setCurrentWidget(w.summary_splitter)
    wait_until(lambda: _settled(w), WAIT_S)  # (the summary of no sweep)
    go, started = _held_summary(w, monkeypatch)
    drawn: list[int] = []  # the runs of each summary drawn
    real_steps = w.summary.draw_steps
    w.summary.draw_steps = lambda figures: (drawn.append(len(figures["main"].runs)), real_steps(figures))[1]
    _threaded_open(w, first)
    wait_until(lambda: len(started) == 1, WAIT_S)  # the first file's summary is being computed...
    _threaded_open(w, second)  # ...when the second file is opened
    go.set()
    wait_until(lambda: _settled(w) and w.summary._figures is not None, WAIT_S)
    assert [set(s["main"].runs) for s in started] == [{0, 1}, {0, 1, 2}]
    assert w.summary._figures[0] == w.summary.data_version()
    assert drawn == [3]  # the first file's figures came back too, and were never drawn
    assert w.summary.point_count("final_loss") == 3
    assert {key for _m, _s, key, _l in w.summary.marks} <= {0, 1, 2}


def test_closing_the_window_while_a_summary_is_computed_drops_it(main_window, tmp_path, monkeypatch, qtbot):
    w = main_window
    path = write_run_file(tmp_path / "a.h5", batch_sizes=(16, 32), seeds=(0,))
    w.read_in_thread = True
    w.views.setCurrentWidget(w.summary_splitter)
    go, started = _held_summary(w, monkeypatch)
    _threaded_open(w, path)
    wait_until(lambda: started, WAIT_S)
    w.close()
    go.set()
    qtbot.wait(200)  # the job ends in its thread; nothing reaches the closed window (an error would fail the test)
    assert w.summary.point_count("final_loss") == 0


def test_a_file_of_many_runs_is_drawn_whole_by_the_slices_and_in_its_groups(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "many.h5", batch_sizes=(16, 32, 64), seeds=MANY_SEEDS)
    assert w.open_file(path)  # read and drawn at once, on the GUI thread (the fixture's default)
    expected = {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids}
    _threaded_open(w, path)
    runs = len(w.data.runs)
    assert runs > KEEP_OWN
    assert expected["loss_step"] == expected["loss_time"] == runs and expected["loss_epoch"] == 2 * runs  # train, val
    # every run drawn once the slices are done, as the drawing at once drew them
    assert {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids} == expected
    assert not w.live.has_pending()
    assert not w.live._curves  # a file opened whole: every run in its batch size's group, none on its own


def test_a_selection_restyles_a_plot_per_tick_and_only_the_curves_whose_looks_change(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "many.h5", batch_sizes=(16, 32, 64), seeds=MANY_SEEDS)
    _threaded_open(w, path)
    w.table.select_keys({("main", 3)})
    assert w.live.restyle_due == set(w.live.plot_ids)  # nothing restyled in the selection's own call...
    assert w.refresher.active  # ...the refresher's ticks do it, a plot each
    wait_until(lambda: not w.refresher.active, WAIT_S)
    assert not w.live.restyle_due
    own = {k for k in w.live._curves if k[:2] == ("main", 3)}
    assert own and all(c.opts["pen"].widthF() > 1.6 for k, c in w.live._curves.items() if k in own)  # highlighted
    restyled: list = []  # (run key) of each curve whose looks a restyle changed
    real_style = w.live._style_curve

    drawn = [*w.live._curves.values(), *w.live.finished.items.values()]  # (held: no new curve takes an old id)
    existing = {id(c) for c in drawn}

    def spy(curve, batch_size, compare=None):
        before = getattr(curve, "looks", None)
        real_style(curve, batch_size, compare)
        if id(curve) in existing and curve.looks != before:  # (a curve made now is styled as it is made)
            restyled.append(curve.run_key)

    w.live._style_curve = spy
    groups: list = []  # the groups whose points were set again
    for group, item in w.live.finished.items.items():
        item.setData = lambda *a, group=group, real=item.setData, **k: (groups.append(group), real(*a, **k))
    w.table.select_keys({("main", 7)})
    wait_until(lambda: not w.refresher.active, WAIT_S)
    # the groups stay dimmed and the other runs have no curve of their own: of the curves drawn before, only run
    # 3's changed looks (highlighted -> dimmed, then back into its group); run 7's are new
    assert restyled and set(restyled) == {("main", 3)}
    assert len(restyled) == len(own)
    assert {k[:2] for k in w.live._curves} == {("main", 7)}
    # and only the groups the two runs left or joined were drawn again
    sizes = {w.data.runs[3].batch_size, w.data.runs[7].batch_size}
    assert groups and {b for _s, _series, b in groups} == sizes
