"""Live plots and summary as a user reads them: legends off the data, axes that start at zero and
always have tick labels, the loss x axis choices, gaps at pauses, markers at their own run's value,
and an update cost that does not grow with the curve (points handed to setData)."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
import pytest
from batchlab.core.events import make_event
from batchlab.core.model import SweepData
from batchlab.gui.running_epoch_marks import MarkSpot
from batchlab.gui.step_envelope import MAX_BINS
from batchlab.gui.summary_view import FROM_ZERO, metric_value

from tests.gui.synthetic import sweep_events, write_run_file


def _data(**kwargs) -> SweepData:
    data = SweepData(label="synthetic")
    for event in sweep_events(**kwargs):
        data.handle(event)
    return data


def _data_scene_rect(widget: pg.PlotWidget):
    """Scene rectangle of every data item's points in the plot (curves, scatter, bars)."""
    item = widget.getPlotItem()
    view = item.getViewBox()
    rect = None
    for child in view.addedItems:
        if isinstance(child, pg.PlotDataItem) and child.xData is not None and len(child.xData):
            x, y = child.getData()
            finite = np.isfinite(x) & np.isfinite(y)
            if not finite.any():
                continue
            xs, ys = x[finite], y[finite]
            r = pg.QtCore.QRectF(xs.min(), ys.min(), xs.max() - xs.min(), ys.max() - ys.min())
        elif isinstance(child, (pg.ScatterPlotItem, pg.BarGraphItem)) and child.isVisible():
            r = child.boundingRect()
            if r.isEmpty():
                continue
        elif isinstance(child, MarkSpot) and child.isVisible():  # a running epoch's marker, sized in pixels
            scene = child.boundingRect().translated(view.mapViewToScene(child.pos()))  # scene units are pixels
            rect = scene if rect is None else rect.united(scene)
            continue
        else:
            continue
        scene = view.mapViewToScene(r).boundingRect()
        rect = scene if rect is None else rect.united(scene)
    return rect


def _assert_legends_clear(widgets: dict) -> None:
    for plot_id, widget in widgets.items():
        item = widget.getPlotItem()
        legend = item.legend
        if legend is None or not legend.isVisible():
            continue
        assert legend.items, f"{plot_id}: a visible legend with no entries"
        data = _data_scene_rect(widget)
        assert data is not None, plot_id
        assert not legend.sceneBoundingRect().intersects(data), plot_id
        assert not legend.sceneBoundingRect().intersects(item.getViewBox().sceneBoundingRect()), plot_id
        # under the x axis (not moved to the plot's corner over the title)
        assert legend.sceneBoundingRect().top() >= item.getAxis("bottom").sceneBoundingRect().top(), plot_id


def test_legends_never_cover_data_and_none_is_empty(main_window, tmp_path, qtbot):
    w = main_window
    w.resize(1024, 700)
    assert w.open_file(write_run_file(tmp_path / "s.h5", batch_sizes=(16, 64, 256)))
    qtbot.wait(50)
    _assert_legends_clear(w.live.plots)
    # the loss plots name the batch sizes (colours mean the same batch size everywhere), each once
    for plot_id in ("loss_step", "loss_time"):
        labels = [label.text for _sample, label in w.live.plots[plot_id].getPlotItem().legend.items]
        batch_labels = [t for t in labels if t.startswith("batch")]
        assert batch_labels == ["batch 16", "batch 64", "batch 256"], plot_id
    w.views.setCurrentWidget(w.summary_splitter)
    qtbot.wait(50)
    _assert_legends_clear(w.summary.plots)
    for metric, widget in w.summary.plots.items():  # one sweep: nothing to explain, no box
        assert not widget.getPlotItem().legend.isVisible(), metric


def test_legends_stay_under_their_plots_while_a_sweep_streams_in(main_window, qtbot):
    """Entries added run by run, epoch by epoch (the memory plot's legend once jumped over its title)."""
    w = main_window
    data = SweepData(label="live")
    w.live.set_source("main", data)
    for event in sweep_events(batch_sizes=(16, 64, 256)):
        if event["type"] == "run_started":
            event = {**event, "rss_before_training_bytes": 480 << 20}
        data.handle(event)
        w.live.take_snapshot()
        for plot_id in w.live.plot_ids:
            w.live.update_plot(plot_id)
        qtbot.wait(1)
        _assert_legends_clear({p: w.live.plots[p] for p in w.live.plot_ids if w.live.curve_count(p)})


def test_memory_and_amount_axes_start_at_zero_and_cpu_memory_says_process_rss(main_window, tmp_path, qtbot):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "s.h5", batch_sizes=(16, 64, 256)))
    for plot_id in ("memory", "throughput", "epoch_split"):
        low = w.live.plots[plot_id].getPlotItem().getViewBox().viewRange()[1][0]
        assert low <= 0.0, plot_id
    assert w.live.plots["memory"].getPlotItem().getAxis("left").labelText.startswith("process RSS")
    w.views.setCurrentWidget(w.summary_splitter)
    qtbot.wait(20)
    for metric in FROM_ZERO:
        assert w.summary.plots[metric].getPlotItem().getViewBox().viewRange()[1][0] <= 0.0, metric
    assert w.summary.plots["peak_memory"].getPlotItem().getAxis("left").labelText == "process RSS peak"


def _tick_labels(widget: pg.PlotWidget) -> list[str]:
    axis = widget.getPlotItem().getAxis("left")
    low, high = widget.getPlotItem().getViewBox().viewRange()[1]
    levels = axis.tickValues(low, high, axis.height() or 200)
    return [s for spacing, values in levels for s in axis.tickStrings(values, 1.0, spacing) if s]


def test_the_summary_of_one_finished_run_has_tick_labels_on_every_axis(main_window, tmp_path, qtbot):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "one.h5", batch_sizes=(64,)))
    w.views.setCurrentWidget(w.summary_splitter)
    qtbot.wait(20)
    for metric, widget in w.summary.plots.items():
        assert len(_tick_labels(widget)) >= 2, metric


def test_a_stopped_runs_marker_sits_at_its_own_value(main_window, qtbot):
    """Stopped in its first epoch: a loss, a time and a throughput of its own, no memory reading yet."""
    w = main_window
    data = SweepData(label="stopped")
    for event in sweep_events(batch_sizes=(16, 64, 256), statuses=("ok", "oom", "ok")):
        if event["type"] == "run_ended" and event["status"] == "oom":
            event = {**event, "status": "interrupted"}
        data.handle(event)
    w._show_sweep(data, "main")
    w.views.setCurrentWidget(w.summary_splitter)
    qtbot.wait(20)
    stopped = data.runs[1]
    assert math.isnan(metric_value(stopped, "peak_memory"))
    for metric in ("final_loss", "total_time", "throughput", "peak_memory"):
        value = metric_value(stopped, metric)
        scatter = [i for i in w.summary._items[metric] if isinstance(i, pg.ScatterPlotItem)][0]
        ys = [p.pos().y() for p in scatter.points() if p.data() == ("main", 1)]
        # its own value; without one, at zero and labelled so, never at another run's value
        assert ys == [pytest.approx(value if math.isfinite(value) else 0.0)], metric
    assert ("peak_memory", "main", 1, "stopped (no value)") in w.summary.marks


def _long_run(steps: int, batch: int = 8) -> SweepData:
    data = SweepData(label="long")
    data.handle(make_event("sweep_started", spec={}, runs=[{"index": 0, "batch_size": batch, "seed": 0}]))
    per_epoch = steps // 2
    data.handle(
        make_event(
            "run_started",
            run=0,
            batch_size=batch,
            seed=0,
            steps_per_epoch=per_epoch,
            epochs=2,
            samples=per_epoch * batch,
        )
    )
    step = np.arange(steps)
    epoch = step // per_epoch
    wall = 0.001 * (step + 1) + 2.0 * epoch  # a 2 s validation pause between the epochs
    data.handle(
        make_event(
            "steps",
            run=0,
            step=step,
            epoch=epoch,
            loss=1.0 + np.sin(step / 50.0),
            batch_size=np.full(steps, batch),
            step_time=np.full(steps, 0.0008),
            fetch_time=np.full(steps, 0.0001),
            input_wait=np.zeros(steps),
            wall_time=wall,
        )
    )
    return data


@pytest.mark.parametrize("steps", [20_000, 200_000])
def test_a_step_plot_update_hands_setdata_a_bounded_number_of_points(qapp, steps):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = _long_run(steps)
    live.set_source("main", data)
    for plot_id in ("loss_step", "loss_time"):
        assert 0 < live.set_points[plot_id] <= 2 * MAX_BINS + 2, plot_id
    curve = live._curves[("main", 0, "loss_step")]
    assert np.nanmax(curve.yData) == pytest.approx(2.0, abs=1e-3)  # the peaks survive the reduction
    live.close()


def test_loss_x_axis_choices_log_scale_and_gaps_at_pauses(qapp):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = _long_run(1000, batch=8)
    live.set_source("main", data)
    curve = live._curves[("main", 0, "loss_step")]
    assert curve.xData[0] == 1 and curve.xData[-1] == 1000  # steps done
    assert not np.isnan(curve.yData).any()  # no gap on a step axis: no step is missing
    time_curve = live._curves[("main", 0, "loss_time")]
    assert np.isnan(time_curve.yData).sum() == 1  # the validation pause is a gap, not a line
    live.set_loss_x("examples")
    assert curve.xData[-1] == 1000 * 8  # two epochs of 500 steps of 8 examples
    assert live.plots["loss_step"].getPlotItem().titleLabel.text == "Loss vs examples"
    live.set_loss_x("wall_time", log_x=True)
    assert np.isnan(curve.yData).sum() == 1
    for plot_id in ("loss_step", "loss_time"):
        assert live.plots[plot_id].getPlotItem().ctrl.logXCheck.isChecked(), plot_id
    assert live.x_choice.currentData() == "wall_time" and live.log_box.isChecked()
    live.log_box.setChecked(False)  # the user's checkbox does the same
    assert not live.plots["loss_step"].getPlotItem().ctrl.logXCheck.isChecked()
    with pytest.raises(ValueError, match="loss x axis"):
        live.set_loss_x("epochs")
    live.close()


def test_a_hidden_tab_is_not_drawn_until_it_is_shown(main_window, tmp_path, qtbot):
    w = main_window
    w.views.setCurrentWidget(w.summary_splitter)
    qtbot.wait(20)
    data = _data(batch_sizes=(16,))
    w.live.set_source("main", data)
    assert w.live.curve_count("loss_step") == 0 and w.live.has_pending()
    w.views.setCurrentWidget(w.live)  # shown: the refresher's last frame draws it, a slice of runs per tick
    assert w.refresher.active
    qtbot.waitUntil(lambda: not w.refresher.active, timeout=10_000)
    assert w.live.curve_count("loss_step") == 1 and not w.live.has_pending()


def test_on_a_cpu_each_runs_rss_before_training_is_drawn_as_the_memory_baseline(qapp):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import MIB, BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="cpu")
    for event in sweep_events(batch_sizes=(16, 256)):  # RSS peaks of (500 + batch) MiB
        if event["type"] == "run_started":
            event = {**event, "rss_before_training_bytes": 480 << 20}
        data.handle(event)
    live.set_source("main", data)
    for index in (0, 1):
        base = live._curves[("main", index, "rss_base")]
        assert np.allclose(base.yData, (480 << 20) / MIB) and base.xData[0] < 1 and base.xData[-1] > 2
    low, high = live.plots["memory"].getPlotItem().getViewBox().viewRange()[1]
    assert 0 < low <= 480 and high >= 756  # from the baseline, not from zero: the batch-dependent part shows
    labels = [label.text for _s, label in live.plots["memory"].getPlotItem().legend.items]
    assert labels == ["process RSS", "before training"]
    live.close()


def test_with_a_gpu_reading_the_memory_axis_starts_at_zero_and_has_no_rss_baseline(qapp):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="gpu")
    for event in sweep_events(batch_sizes=(16, 256)):
        if event["type"] == "run_started":
            event = {**event, "rss_before_training_bytes": 480 << 20}
        if event["type"] == "epoch_ended":
            event = {**event, "tf_peak_bytes": 50 << 20}
        data.handle(event)
    live.set_source("main", data)
    assert ("main", 0, "rss_base") not in live._curves
    assert live.plots["memory"].getPlotItem().getViewBox().viewRange()[1][0] <= 0
    assert live.plots["memory"].getPlotItem().getAxis("left").labelText.startswith("memory")
    live.close()


def test_empty_plots_keep_a_sensible_axis_until_data_comes(qapp):
    """The zero anchor only acts once there is data: no -400..400 axis with 'msamples/s' before the first epoch."""
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="starting")
    events = list(sweep_events(batch_sizes=(16,)))
    data.handle(events[0])
    data.handle(events[1])  # run started, nothing measured yet
    live.set_source("main", data)
    for plot_id in ("throughput", "memory", "epoch_split"):
        low, high = live.plots[plot_id].getPlotItem().getViewBox().viewRange()[1]
        assert low >= 0 and high <= 1, plot_id
    # a CPU sweep (the device is known when it starts) says what its memory axis will show before data comes
    assert live.plots["memory"].getPlotItem().getAxis("left").labelText == "process RSS"
    live.close()


def _started(device: str, gpu: bool) -> SweepData:
    """A live sweep whose first run started and has no epoch yet, on `device` (spec) with or without a GPU seen."""
    events = list(sweep_events(batch_sizes=(16, 64)))
    devices = [{"name": "cpu", "kind": "CPU"}] + ([{"name": "gpu:0", "kind": "GPU"}] if gpu else [])
    started = {**events[0], "spec": {**events[0]["spec"], "device": device}, "environment": {"devices": devices}}
    run = {k: v for k, v in events[1].items() if k != "device"}
    run = {**run, "rss_before_training_bytes": 500 << 20, **({"device": "gpu:0"} if gpu else {})}
    data = SweepData(label="starting")
    data.handle(started)
    data.handle(run)
    return data


@pytest.mark.parametrize("device,gpu", [("cpu", False), ("auto", False), ("auto", True)])
def test_a_live_sweep_gets_its_legends_and_memory_label_before_its_first_epoch(qapp, device, gpu):
    """Made inside the first finished epoch (mid-training) they were the sweep's longest GUI stall: now they
    come at the sweep's start, where the device says which memory readings there will be."""
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = _started(device, gpu)
    live.set_source("main", data)
    legend_text = {p: [label.text for _s, label in live.plots[p].getPlotItem().legend.items] for p in live.plots}
    assert legend_text["loss_epoch"] == ["train", "validation"]
    memory = live.plots["memory"].getPlotItem()
    if not gpu:  # host RSS the only reading: label, legend and the run's (empty) curves made now
        assert memory.getAxis("left").labelText == "process RSS"
        assert legend_text["memory"] == ["process RSS", "before training"]
        assert {("main", 0, "rss"), ("main", 0, "rss_base")} <= set(live._curves)
    else:  # what a GPU reports is not known before its first epoch: nothing guessed
        assert memory.getAxis("left").labelText == "memory" and legend_text["memory"] == []
        assert not any(key[2] in ("rss", "rss_base", "tf_peak") for key in live._curves)
    assert live.curve_count("memory") == 0  # nothing drawn without data
    # the first epoch then only fills them in: no new legend entry, no new label
    for event in sweep_events(batch_sizes=(16, 64)):
        if event["type"] == "epoch_ended":
            data.handle(event if gpu else {**event, "tf_peak_bytes": -1})
            break
    live.refresh()
    if not gpu:
        assert [label.text for _s, label in memory.legend.items] == legend_text["memory"]
        assert live.curve_count("memory") == 2 and memory.getAxis("left").labelText == "process RSS"
    live.close()


def test_a_legend_never_makes_its_plot_wider_than_its_cell(main_window, tmp_path, qtbot):
    w = main_window
    w.resize(1024, 700)
    assert w.open_file(write_run_file(tmp_path / "s.h5", batch_sizes=(16, 32, 64, 128, 256, 512)))
    qtbot.wait(50)
    tab = w.live.rect()
    for plot_id, widget in w.live.plots.items():
        legend = widget.getPlotItem().legend
        right = widget.mapTo(w.live, widget.rect().topRight()).x()
        assert right <= tab.right() + 1, plot_id  # the grid fits the tab
        item = widget.getPlotItem()
        assert legend.sceneBoundingRect().width() <= item.getViewBox().sceneBoundingRect().right(), plot_id


def _in_chunks(events, size: int):
    """The synthetic stream with each epoch's steps event split into chunks of `size` steps (frames mid-epoch)."""
    for event in events:
        if event["type"] != "steps":
            yield event
            continue
        columns = {k: v for k, v in event.items() if isinstance(v, list)}
        n = len(columns["step"])
        for start in range(0, n, size):
            yield make_event("steps", run=event["run"], **{k: v[start : start + size] for k, v in columns.items()})


def test_epoch_plots_move_within_an_epoch_and_the_provisional_point_gives_way_to_the_epochs_own(qapp):
    """Item 1: loss per epoch and throughput advanced only at an epoch's end; now a hollow marker follows the
    running epoch's steps (core.figures.running_epoch) and the epoch's row replaces it when the epoch ends."""
    from batchlab.core.figures import running_epoch
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    seen = {"loss_epoch": [], "throughput": []}  # provisional points after each frame within epochs
    replaced = 0
    for event in _in_chunks(sweep_events(batch_sizes=(16,), epochs=2, samples=512), size=5):
        data.handle(event)
        live.take_snapshot()  # a frame: the refresher's snapshot, then each plot brought to it
        for plot_id in live.plot_ids:
            live.update_plot(plot_id)
        run = data.runs[0]
        if event["type"] == "steps":
            expected = running_epoch(run.steps.as_dict(), run.epochs.as_dict())
            for plot_id, field in (("loss_epoch", "train_loss"), ("throughput", "samples_per_s")):
                point = live.provisional_point("main", 0, plot_id)
                assert point == pytest.approx((expected.epoch + 1, getattr(expected, field))), plot_id
                seen[plot_id].append(point)
        elif event["type"] == "epoch_ended":
            epoch = event["epoch"]
            for plot_id, series, column in (
                ("loss_epoch", "train_loss", "train_loss"),
                ("throughput", "throughput", "samples_per_s"),
            ):
                assert live.provisional_point("main", 0, plot_id) is None, plot_id  # gone: the epoch's own point
                curve = live._curves[("main", 0, series)]
                assert curve.xData[-1] == epoch + 1 and curve.yData[-1] == pytest.approx(event[column])
            replaced += 1
    assert replaced == 2
    for plot_id, points in seen.items():  # 32 steps an epoch in frames of 5: a point after every frame
        assert len(points) == 14 and {x for x, _y in points} == {1.0, 2.0}, plot_id
    loss = seen["loss_epoch"]  # the falling loss moves it every frame (the synthetic steps all take as long)
    assert all(a[1] > b[1] for a, b in zip(loss, loss[1:], strict=False) if a[0] == b[0])
    assert live.provisional_point("main", 0, "loss_epoch") is None  # the run ended
    live.close()
