"""What keeps opening a file of many runs and returning to the Live tab short (issue 30, round 2): each plot painted
once when its tab is shown again, plots drawn up to date skipped without a walk over the runs, slices that count
the flush of their runs' points to the group curves, and a runs table fitted from a sample of rows a turn later.
Counts and spies, no timings."""

from __future__ import annotations

from collections import Counter

from batchlab.core.model import SweepData
from batchlab.gui import runs_table
from batchlab.gui.plot_style import BatchColours
from batchlab.gui.runs_table import FIT_ROWS, RunsTable
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication

from tests.gui.conftest import wait_until
from tests.gui.synthetic import sweep_events, write_run_file

WAIT_S = 30  # generous: the 2-core CI machine is shared
MANY_SEEDS = range(10)  # 3 batch sizes x 10 seeds: 30 runs, more than KEEP_OWN: a file's runs go to groups


class PaintCounter(QObject):
    """Counts the paint events each watched widget gets."""

    def __init__(self, widgets: dict[str, object]):
        super().__init__()
        self.names = {id(widget): name for name, widget in widgets.items()}
        self.paints: Counter = Counter()
        for widget in widgets.values():
            widget.installEventFilter(self)

    def eventFilter(self, watched, event):  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint and id(watched) in self.names:
            self.paints[self.names[id(watched)]] += 1
        return False


def _opened_many(w, tmp_path) -> None:
    """A 30-run file opened as a user does (read in the thread, drawn a slice per tick), then drawn to the end."""
    path = write_run_file(tmp_path / "many.h5", batch_sizes=(16, 32, 64), seeds=MANY_SEEDS)
    w.read_in_thread = True
    assert w.open_file(path)
    wait_until(lambda: not w.readers["main"].busy and not w.refresher.active, WAIT_S)


def _settle(times: int = 10) -> None:
    for _ in range(times):
        QApplication.processEvents()


def test_returning_to_the_live_tab_paints_each_plot_once_and_walks_no_runs(main_window, tmp_path, qtbot):
    w = main_window
    _opened_many(w, tmp_path)
    w.views.setCurrentIndex(1)
    qtbot.wait(100)
    wait_until(lambda: w.summary.computing is None and not w.summary.drawing, WAIT_S)
    counter = PaintCounter({plot_id: widget.viewport() for plot_id, widget in w.live.plots.items()})
    asked: list = []  # the (source, run, plot) a plot asked "drawn as it is now?" about
    real_state = w.live._state
    w.live._state = lambda source, run, plot_id: (asked.append(plot_id), real_state(source, run, plot_id))[1]
    w.views.setCurrentIndex(0)
    qtbot.wait(200)  # every turn of the event loop the window would paint in
    # Qt's first paint of a plot shown again (and at most one more, when the window repaints meanwhile: seen after
    # other tests), never the three of before: its scene's activation updated every plot item, which came back a
    # turn later as two more paints of each plot
    assert set(counter.paints) == set(w.live.plots)
    assert all(paints <= 2 for paints in counter.paints.values()), counter.paints
    assert not asked  # nothing changed while the tab was hidden: no plot walked its runs
    # a selection changes the looks: the plots draw again, and all runs are still there
    counts = {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids}
    w.table.select_keys({("main", 4)})
    wait_until(lambda: not w.refresher.active, WAIT_S)
    assert asked
    assert {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids} == counts
    assert ("main", 4, "loss_step") in w.live._curves  # the selected run has its own curve


def test_a_plot_is_settled_only_while_nothing_it_shows_changed(main_window, tmp_path):
    w = main_window
    _opened_many(w, tmp_path)
    assert not w.live.has_pending()
    assert all(w.live.is_settled(plot_id, False) for plot_id in w.live.plot_ids)
    # a run that gets rows (a file still being written) unsettles every plot, and is drawn
    run = w.data.runs[0]
    before = len(run.epochs)
    for event in sweep_events(batch_sizes=(16,), epochs=3):
        if event["type"] == "epoch_ended" and event["epoch"] == 2:
            w.data.handle({**event, "run": 0})
    assert len(run.epochs) == before + 1
    w.live.take_snapshot()
    assert not any(w.live.is_settled(plot_id, False) for plot_id in w.live.plot_ids)
    assert w.live.has_pending()
    w.live.refresh()
    assert not w.live.has_pending()
    assert all(w.live.is_settled(plot_id, False) for plot_id in w.live.plot_ids)


def test_a_slice_counts_the_flush_of_its_runs_points_in_its_budget(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "many.h5", batch_sizes=(16, 32, 64), seeds=MANY_SEEDS)
    assert w.open_file(path)  # drawn at once: what every plot holds when whole
    expected = {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids}
    w.live.set_source("main", w.data, draw=False)
    w.live._flush_per_run["loss_epoch"] = 1.0  # as if handing a run's points to its group took a second
    assert w.live.update_plot("loss_epoch", budget_s=0.015)
    # one run (every call draws at least one), since a second one's flush would not fit in the budget
    assert "loss_epoch" in w.live.unfinished
    assert w.live.curve_count("loss_epoch") == 2  # its train and validation curves, in their groups
    calls = 1
    while "loss_epoch" in w.live.unfinished:
        w.live.update_plot("loss_epoch", budget_s=0.015)
        calls += 1
    assert calls < len(w.data.runs)  # the measured cost, not the guess, sizes the next slices
    for plot_id in w.live.plot_ids:
        while w.live.update_plot(plot_id, budget_s=0.015) and plot_id in w.live.unfinished:
            pass
    assert {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids} == expected  # no run lost


def _many_runs(seeds: int) -> SweepData:
    data = SweepData(label="many")
    for event in sweep_events(batch_sizes=(16, 64), seeds=range(seeds)):
        data.handle(event)
    return data


def test_a_long_runs_table_is_fitted_a_turn_later_from_a_sample_of_rows(qapp, qtbot, monkeypatch):
    rows_asked: set[int] = set()
    real_data = runs_table.RunsModel.data

    def spy(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and index.isValid():
            rows_asked.add(index.row())
        return real_data(self, index, role)

    monkeypatch.setattr(runs_table.RunsModel, "data", spy)  # before the model is made: Qt calls the override
    table = RunsTable(BatchColours())
    qtbot.addWidget(table)
    table.resize(900, 400)
    table.show()
    qtbot.waitExposed(table)
    data = _many_runs(30)  # 60 rows, more than FIT_ROWS
    assert len(data.runs) > FIT_ROWS
    table.runs_model.set_source("main", data)
    assert table._fit_timer.isActive()  # not in the step that showed the rows...
    rows_asked.clear()
    _settle()
    assert not table._fit_timer.isActive()  # ...but a turn of the event loop later
    header = table.horizontalHeader()
    assert rows_asked and len(rows_asked) <= FIT_ROWS + 2  # (a paint of the visible rows may come in between)
    shown = [c for c in range(header.count()) if not header.isSectionHidden(c)]
    assert all(header.sectionSize(c) >= header.sectionSizeHint(c) for c in shown)  # headers whole
    small = _many_runs(2)  # 4 rows: fitted at once, as before
    table.runs_model.set_source("main", small)
    assert not table._fit_timer.isActive()
