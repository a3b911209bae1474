"""Where a batch-size schedule changed a run's batch, the loss plots show a marker (issue 9 item 3, the window)."""

from __future__ import annotations

import pytest
from batchlab.core.model import SweepData

from tests.gui.synthetic import sweep_events


def _grown(events, factor: int = 2, from_epoch: int = 1):
    """The synthetic stream as a grow schedule would send it: from `from_epoch` on each full batch is
    `factor` times larger (the epoch's last, short batch stays short: no change)."""
    for event in events:
        if event["type"] == "steps" and event["epoch"][0] >= from_epoch:
            sizes = event["batch_size"]
            full = max(sizes)
            event = {**event, "batch_size": [b * factor if b == full else b for b in sizes]}
        yield event


def test_the_step_where_the_batch_changed_is_marked_live_and_from_the_file(qapp, tmp_path):
    from batchlab.core.runfile import RunFileWriter
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    events = list(_grown(sweep_events(batch_sizes=(16,), epochs=3, samples=500)))  # 32 steps, the last one of 4
    for event in events:
        if event["type"] == "steps" and event["epoch"][0] == 0:
            event["batch_size"][-1] = 4  # the short last batch of an epoch is not a change
    live = LivePlots(BatchColours())
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    for event in events:
        data.handle(event)
    live.refresh()
    first_of_epoch_1 = 32
    loss = float(data.runs[0].steps["loss"][first_of_epoch_1])
    expected = [(first_of_epoch_1 + 1.0, pytest.approx(loss), "batch 16 -> 32 at step 32")]
    assert live.batch_marks.marks("loss_step", ("main", 0)) == expected
    (time_mark,) = live.batch_marks.marks("loss_time", ("main", 0))
    assert time_mark[0] == pytest.approx(data.runs[0].steps["wall_time"][first_of_epoch_1])
    labels = [label.text for _s, label in live.plots["loss_step"].getPlotItem().legend.items]
    assert "batch size changed" in labels

    path = tmp_path / "grown.h5"
    with RunFileWriter(path) as writer:
        for event in events:
            writer.handle(event)
    live.set_source("main", SweepData.from_file(path))
    live.refresh()
    assert live.batch_marks.marks("loss_step", ("main", 0)) == expected
    live.set_source("main", None)
    labels = [label.text for _s, label in live.plots["loss_step"].getPlotItem().legend.items]
    assert "batch size changed" not in labels
    live.close()
