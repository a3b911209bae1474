"""Issue 11 item 1 leftovers: the time split (and memory) advance within an epoch, with work that follows the
running epoch, not the whole run."""

from __future__ import annotations

import pytest
from batchlab.core.figures import running_epoch
from batchlab.core.model import SweepData

from tests.gui.synthetic import sweep_events
from tests.gui.test_live_plots import _in_chunks


def test_the_time_split_shows_the_running_epoch_so_far_from_its_own_steps_only(qapp, monkeypatch):
    import batchlab.gui.running_epoch_marks as running_epoch_marks
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    rows_passed = []

    def counting(steps, epochs):
        rows_passed.append(len(steps["step"]))
        return running_epoch(steps, epochs)

    monkeypatch.setattr(running_epoch_marks, "running_epoch", counting)
    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    per_epoch = 32  # 512 samples at batch 16
    totals = []
    for event in _in_chunks(sweep_events(batch_sizes=(16,), epochs=3, samples=512), size=5):
        data.handle(event)
        live.take_snapshot()
        for plot_id in live.plot_ids:
            live.update_plot(plot_id)
        run = data.runs[0]
        if event["type"] == "steps":
            expected = running_epoch(run.steps.as_dict(), run.epochs.as_dict())  # from the whole run's table
            _x, compute, wait, total = live.bars.running[("main", 0)]
            whole = (expected.compute_s, expected.input_wait_s, expected.elapsed_s)
            assert (compute, wait, total) == pytest.approx(whole)
            totals.append((expected.epoch, total))
            labels = [label.text for _s, label in live.plots["epoch_split"].getPlotItem().legend.items]
            assert "running epoch so far" in labels
        elif event["type"] == "epoch_ended":
            assert ("main", 0) not in live.bars.running  # the epoch's own row now: the mean bar holds it
            heights = live.bars.items[("main", "compute")].opts["height"]
            assert heights[0] == pytest.approx(sum(run.epochs["compute_time"]) / len(run.epochs))
    by_epoch = {}
    for epoch, total in totals:
        by_epoch.setdefault(epoch, []).append(total)
    assert sorted(by_epoch) == [0, 1, 2]
    for values in by_epoch.values():  # 32 steps in frames of 5: the bar grew with every frame
        assert len(values) == 7 and all(a < b for a, b in zip(values, values[1:], strict=False))
    # each frame's figures came from the running epoch's steps (and the one before), never the whole run
    assert rows_passed and max(rows_passed) <= per_epoch + 1
    assert not live.bars.running  # the run ended
    labels = [label.text for _s, label in live.plots["epoch_split"].getPlotItem().legend.items]
    assert "running epoch so far" not in labels  # nothing running: no legend entry for it
    live.close()


def _with_memory(events):
    """The chunked stream with the memory peaks so far on each steps event, as the training child sends them."""
    i = 0
    for event in events:
        if event["type"] == "steps":
            i += 1
            event = {**event, "memory": {"epoch": event["epoch"][-1], "tf_peak_bytes": -1, "device_memory_bytes": -1}}
            event["memory"]["rss_peak_bytes"] = (600 + i) << 20
        yield event


def test_the_memory_plot_shows_the_running_epochs_peak_so_far(qapp):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    seen = []
    for event in _with_memory(_in_chunks(sweep_events(batch_sizes=(16,), epochs=2, samples=512), size=5)):
        data.handle(event)
        live.take_snapshot()
        for plot_id in live.plot_ids:
            live.update_plot(plot_id)
        point = live.provisional_point("main", 0, "memory")
        if event["type"] == "steps":
            memory = event["memory"]
            assert point == pytest.approx((memory["epoch"] + 1, memory["rss_peak_bytes"] / 2**20))
            seen.append(point)
        elif event["type"] == "epoch_ended":
            assert point is None  # the epoch's own peak is drawn now
    assert len(seen) == 14 and len({y for _x, y in seen}) == 14  # it moved with every frame
    assert live.provisional_point("main", 0, "memory") is None
    live.close()
