"""What keeps the GUI thread short during a sweep: a cheap grid, a throttled table, alternating ticks."""

from __future__ import annotations

from collections import Counter

from batchlab.core.model import SweepData
from batchlab.gui.plot_axes import TickGrid
from batchlab.gui.runs_table import RunsModel
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from tests.gui.synthetic import sweep_events
from tests.gui.test_live_plots import _in_chunks


def _grids(plot_widget):
    return [i for i in plot_widget.getPlotItem().items if isinstance(i, TickGrid)]


def test_every_plot_draws_its_grid_at_the_axis_ticks_without_pyqtgraphs_costly_axis_grid(main_window, qtbot):
    w = main_window
    w._show_sweep(_loaded(), "main")
    qtbot.wait(50)
    plots = {**w.live.plots, **{f"summary:{k}": v for k, v in w.summary.plots.items()}}
    for name, widget in plots.items():
        item = widget.getPlotItem()
        assert len(_grids(widget)) == 1, name
        assert item.getAxis("bottom").grid is False and item.getAxis("left").grid is False, name
    # the grid lines sit at the axis's own major ticks, across the whole view
    widget = w.live.plots["loss_step"]
    grid = _grids(widget)[0]
    view = widget.getPlotItem().vb
    rect = view.viewRect()
    major_x = grid.plot_item.getAxis("bottom").tickValues(rect.left(), rect.right(), view.size().width())[0][1]
    lines = [line for group in grid.lines().values() for line in group]
    vertical = sorted(line.x1() for line in lines if line.x1() == line.x2())
    assert len(major_x) >= 2 and set(major_x) <= set(vertical)
    assert all(line.y1() == rect.top() and line.y2() == rect.bottom() for line in lines if line.x1() == line.x2())
    # the grid never widens the auto-range: the view still fits the curves alone
    xs = [c.xData for c in widget.getPlotItem().listDataItems() if c.xData is not None and len(c.xData)]
    x_min, x_max = min(float(x.min()) for x in xs), max(float(x.max()) for x in xs)
    pad = 0.1 * (x_max - x_min) + 1e-9  # pyqtgraph's own padding is at most 10% a side
    assert grid not in view.addedItems  # the items auto-range looks at
    assert x_min - pad <= rect.left() <= x_min and x_max <= rect.right() <= x_max + pad


def _loaded() -> SweepData:
    data = SweepData(label="synthetic")
    for event in sweep_events(batch_sizes=(16, 64)):
        data.handle(event)
    return data


def test_a_running_rows_numbers_are_held_back_until_due_but_status_changes_show_at_once(qapp):
    data = SweepData()
    events = list(sweep_events(batch_sizes=(16,), epochs=3))
    first_steps = next(i for i, e in enumerate(events) if e["type"] == "steps")
    for event in events[: first_steps + 1]:
        data.handle(event)
    model = RunsModel(colours=None)
    model.set_source("main", data)
    changed = []
    model.dataChanged.connect(lambda a, b: changed.append(a.row()))
    assert model.refresh() == (False, False) and changed == []  # nothing changed since set_source
    rest = [e for e in events[first_steps + 1 :] if e["type"] == "steps"]
    data.handle(rest[0])
    assert model.refresh(values_due=True) == (True, False) and changed == [0]  # numbers due: shown
    data.handle(rest[1])
    assert model.refresh(values_due=False) == (False, False) and changed == [0]  # not due: held back
    data.handle(next(e for e in events if e["type"] == "run_ended"))
    assert model.refresh(values_due=False) == (True, True) and changed == [0, 0]  # a run ended: at once
    status_column = 2
    assert model.data(model.index(0, status_column)) == "ok"


def test_step_curves_use_one_pixel_pens_and_epoch_curves_keep_theirs(main_window):
    """1-pixel lines are Qt's fast raster path: a step plot repaint costs ~2 ms instead of ~5 ms."""
    w = main_window
    w._show_sweep(_loaded(), "main")
    w.refresh(full=True)
    for plot_id, expected in (("loss_step", 1.0), ("loss_time", 1.0), ("loss_epoch", 1.6)):
        widths = {c.opts["pen"].widthF() for c in w.live.plots[plot_id].getPlotItem().listDataItems()}
        assert widths == {expected}, plot_id
    # a selected run still stands out on the step plots
    key = ("main", 0)
    w.live.set_selection({key})
    selected = w.live._curves[("main", 0, "loss_step")].opts["pen"].widthF()
    other = w.live._curves[("main", 1, "loss_step")].opts["pen"]
    assert selected > 1.0 and other.color().alpha() < 255


def test_a_run_starting_repaints_only_the_plots_where_it_shows(main_window):
    """Curves made ahead of their data are invisible: only a new legend entry or new data costs a repaint."""
    w = main_window
    events = list(sweep_events(batch_sizes=(16, 64), epochs=2))
    second_start = [i for i, e in enumerate(events) if e["type"] == "run_started"][1]
    data = SweepData(label="live")
    for event in events[:second_start]:
        data.handle(event)
    w.live.set_source("main", data)
    w.live.refresh()
    data.handle(events[second_start])  # run 1 starts; no data yet
    shown = {plot_id: w.live.update_plot(plot_id) for plot_id in w.live.plots}
    # only the loss plots get a legend entry ("batch 64"); the epoch plots' curves are empty, and the time split
    # has no running bar until the run's first steps (its bars are not set again when nothing in them changed)
    assert shown == {p: p in ("loss_step", "loss_time") for p in w.live.plots}
    assert not w.live.has_pending()  # nothing left undrawn: the empty curves exist
    assert ("main", 1, "train_loss") in w.live._curves
    rest = events[second_start + 1 :]
    for event in rest[: next(i for i, e in enumerate(rest) if e["type"] == "epoch_ended") + 1]:
        data.handle(event)
    w.live.take_snapshot()  # the next frame
    for plot_id in w.live.plots:  # then its first steps and epoch show everywhere
        assert w.live.update_plot(plot_id) is True, plot_id


def test_only_step_plots_pay_for_clipping_downsampling_and_range_limits(main_window):
    """Each costs every range change of a plot 2-3 ms; only curves of a point per step need them."""
    w = main_window
    w._show_sweep(_loaded(), "main")
    w.refresh(full=True)
    for plot_id, widget in w.live.plots.items():
        item = widget.getPlotItem()
        steps = plot_id in ("loss_step", "loss_time")
        assert item.clipToViewMode() is steps and item.downsampleMode()[1] is steps, plot_id
        for name in ("bottom", "left"):
            assert item.getAxis(name).style["maxTickLevel"] == 1, (plot_id, name)
    limits = {series: curve.opts["dynamicRangeLimit"] for (_s, _i, series), curve in w.live._curves.items()}
    step_series = ("loss_step", "loss_time")
    assert limits and all((limit is not None) is (series in step_series) for series, limit in limits.items())


class _PaintCounter(QObject):
    """Counts the paint events of the widgets it watches, by name."""

    def __init__(self, widgets: dict):
        super().__init__()
        self.count = Counter()
        self._names = {}
        for name, widget in widgets.items():
            self._names[widget.viewport()] = name
            widget.viewport().installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint:
            self.count[self._names[watched]] += 1
        return False


def test_a_frame_paints_each_changed_plot_once_and_sets_only_the_curves_that_changed(main_window, qtbot):
    """Per frame during an epoch: one paint per plot that changed (pyqtgraph queued a second one from inside the
    first, after its deferred transform update), none for the others; the epoch curves are not set again while
    only the running epoch's hollow markers move."""
    w = main_window
    data = SweepData(label="live")
    w.live.set_source("main", data)
    painted = _PaintCounter(w.live.plots)
    events = list(_in_chunks(sweep_events(batch_sizes=(16,), epochs=2, samples=512), size=5))
    first_epoch_end = next(i for i, e in enumerate(events) if e["type"] == "epoch_ended")
    frames = 0
    for event in events[: first_epoch_end + 4]:  # the first epoch, then three frames into the second
        data.handle(event)
        w.live.take_snapshot()
        for _ in range(3):  # settle: whatever the frame before queued
            QApplication.processEvents()
        painted.count.clear()
        changed = {plot_id: w.live.update_plot(plot_id) for plot_id in w.live.plot_ids}
        for _ in range(3):
            QApplication.processEvents()
        if event["type"] != "steps" or len(data.runs[0].steps) <= 5:
            continue  # a run's start and an epoch's end may re-lay out a plot (legend entries); frames may not
        assert dict(painted.count) == {p: 1 for p, c in changed.items() if c}
        if len(data.runs[0].epochs):  # within the second epoch
            frames += 1
            # the loss marker moved; the synthetic throughput is constant, so its marker stays where it appeared
            # (a float-rounding change is no move to Qt) and its plot is not repainted: the paint count above
            assert changed["loss_epoch"]
            assert w.live.set_points["loss_epoch"] == 0 and w.live.set_points["throughput"] == 0  # no curve set
    assert frames == 3


def _streamed_live_plots(live_now: list[bool] | None = None):
    """LivePlots taking a 2-epoch sweep in 5-row chunks as while a sweep runs (sticky ranges while live_now[0]);
    yields each frame."""
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live_now = live_now if live_now is not None else [True]
    live = LivePlots(BatchColours(), live=lambda: live_now[0])
    live.resize(1200, 700)
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    for event in _in_chunks(sweep_events(batch_sizes=(16, 64), epochs=2, samples=512), size=5):
        data.handle(event)
        live.take_snapshot()
        yield live, data, event
    live.close()


class _PaintRegions(QObject):
    """The rects of every paint of the watched plots' viewports, by name (a marker moving to the next epoch
    repaints two small rects, its old place and its new one)."""

    def __init__(self, widgets: dict):
        super().__init__()
        self.rects: dict[str, list] = {name: [] for name in widgets}
        self._names = {widget.viewport(): name for name, widget in widgets.items()}
        for viewport in self._names:
            viewport.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint:
            self.rects[self._names[watched]].extend(event.region())
        return False


def test_a_moving_running_epoch_marker_repaints_its_own_place_not_the_whole_view(qapp):
    """While a run trains only the hollow markers of loss per epoch and throughput move between epoch ends; where
    the view's range holds, the repaint takes in their old and new places only (pyqtgraph repainted the whole
    view to settle its auto-range, every curve and the grid with it, on every frame)."""
    regions, frames = None, 0
    for live, data, event in _streamed_live_plots():
        if regions is None:
            regions = _PaintRegions({p: live.plots[p] for p in ("loss_epoch", "throughput")})
        run = data.runs.get(0)
        for _ in range(3):
            QApplication.processEvents()
        for rects in regions.rects.values():
            rects.clear()
        views = {p: live.plots[p].getPlotItem().getViewBox() for p in regions.rects}
        before = {p: view.viewRange() for p, view in views.items()}
        changed = {p: live.update_plot(p) for p in live.plot_ids}
        for _ in range(3):
            QApplication.processEvents()
        if event["type"] != "steps" or run is None or run.status != "running" or not len(run.epochs):
            continue  # only frames within the second epoch, where nothing but the markers moves
        for plot_id, rects in regions.rects.items():
            view = views[plot_id]
            if not changed[plot_id] or view.viewRange() != before[plot_id]:
                continue  # a constant synthetic throughput leaves its marker put; a new range repaints it all
            frames += 1
            area = view.size().width() * view.size().height()
            painted = sum(r.width() * r.height() for r in rects)
            assert rects and painted < 0.05 * area, (plot_id, [r.getRect() for r in rects], view.size())
    assert frames >= 3


def test_a_live_views_kept_child_bounds_give_pyqtgraphs_own_auto_range_every_frame(qapp):
    """The sticky views keep each child's bounds until it changes; the union (with the symbols' pixel padding) must
    be what pyqtgraph computes from scratch, on every plot and every frame of a sweep."""
    import pyqtgraph as pg
    import pytest

    compared = 0
    for live, _data, _event in _streamed_live_plots():
        for plot_id in live.plot_ids:
            live.update_plot(plot_id)
            view = live.plots[plot_id].getPlotItem().getViewBox()
            assert view.sticky
            kept, fresh = view.childrenBounds(), pg.ViewBox.childrenBounds(view)
            for axis in (0, 1):
                if fresh[axis] is None:
                    assert kept[axis] is None, plot_id
                else:
                    assert kept[axis] == pytest.approx(fresh[axis], rel=1e-9, abs=1e-12), (plot_id, axis)
                    compared += 1
    assert compared > 100


def test_the_running_bars_legend_entry_and_the_epoch_axes_hold_between_runs(qapp):
    """From the first running epoch to the sweep's end, the time split keeps its "running epoch so far" entry (taken
    out and put back at each run's start it re-laid out the plot) and the epoch plots' x axis reaches the planned
    epochs at once, though the runs yet to start have not said theirs."""
    from batchlab.gui.epoch_bars import RUNNING_LEGEND

    entries, x_ranges, live_now = [], set(), [True]
    for live, data, event in _streamed_live_plots(live_now):
        legend = live.plots["epoch_split"].getPlotItem().legend
        if event["type"] == "sweep_ended":  # the window's last frame: no longer live, the entry goes
            live_now[0] = False
            live.update_plot("epoch_split")
            assert RUNNING_LEGEND not in [label.text for _sample, label in legend.items]
            break
        for plot_id in live.plot_ids:
            live.update_plot(plot_id)
        labels = [label.text for _sample, label in legend.items]
        if entries or RUNNING_LEGEND in labels:
            entries.append(RUNNING_LEGEND in labels)
        if event["type"] == "steps" and len(data.runs[0].epochs):
            x_ranges.add(tuple(live.plots["loss_epoch"].getPlotItem().getViewBox().targetRange()[0]))
    assert entries and all(entries), entries.index(False)
    assert len(x_ranges) == 1 and 2.0 <= max(x_ranges)[1] < 2.3, x_ranges  # epochs 1..2 planned, padded
