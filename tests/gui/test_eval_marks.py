"""Evaluation points and "target met" marks on the loss plots (issue 9, item 8): live from the event
stream and from a reopened file alike, on every loss x axis, legends still clear of the data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from batchlab.core.model import SweepData

from tests.gui.synthetic import sweep_events, write_run_file
from tests.gui.test_live_plots import _assert_legends_clear

TARGET = "val_accuracy=0.6"  # synthetic val_accuracy = 1 - (loss + 0.05) / 2.2: batch 16 meets it, 256 does not
STREAM = {"batch_sizes": (16, 256), "eval_every": 10, "target": TARGET}


def _first_met(data: SweepData, index: int) -> int | None:
    """Steps of the first evaluation strictly above the target, computed here from the raw table."""
    run = data.runs[index]
    accuracy = np.asarray(run.evals["val_accuracy"])
    hits = np.flatnonzero(accuracy > 0.6)
    return int(run.evals["steps"][hits[0]]) if len(hits) else None


def _draw_all(live) -> None:
    live.take_snapshot()
    for plot_id in live.plot_ids:
        live.update_plot(plot_id)


def test_evaluation_points_and_the_target_step_live_and_reopened(main_window, tmp_path, qtbot):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    live = LivePlots(BatchColours())
    live.resize(900, 600)
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    seen_before_end = False
    for event in sweep_events(**STREAM):
        data.handle(event)
        if event["type"] == "evaluation" and event["run"] == 0 and event["steps"] == 20:
            _draw_all(live)  # mid-run: the points so far are on screen already
            x, y = live.evals.points("loss_step", ("main", 0))
            assert x.tolist() == [10, 20] and y == pytest.approx([data.runs[0].evals["val_loss"][i] for i in (0, 1)])
            seen_before_end = True
    _draw_all(live)
    assert seen_before_end
    met = _first_met(data, 0)
    assert met is not None and _first_met(data, 1) is None
    for plot_id, column in (("loss_step", "steps"), ("loss_time", "wall_time")):
        for index in (0, 1):
            x, y = live.evals.points(plot_id, ("main", index))
            run = data.runs[index]
            assert x == pytest.approx(np.asarray(run.evals[column], dtype=float)), plot_id
            assert y == pytest.approx(np.asarray(run.evals["val_loss"])), plot_id
    lines = live.evals.met_lines("loss_step")
    assert lines == [(("main", 0), float(met), f"met val_accuracy>0.6 at step {met:,}")]
    (time_line,) = live.evals.met_lines("loss_time")
    row = int(np.flatnonzero(np.asarray(data.runs[0].evals["steps"]) == met)[0])
    assert time_line[1] == pytest.approx(data.runs[0].evals["wall_time"][row])

    # examples seen, and a log axis: the line sits at log10 of its x, as pyqtgraph's log mode draws the curves
    live.set_loss_x("examples", True)
    (line,) = live.evals.met_lines("loss_step")
    assert line[1] == pytest.approx(math.log10(met * 16))
    x, _y = live.evals.points("loss_step", ("main", 0))
    assert x == pytest.approx(np.asarray(data.runs[0].evals["examples"], dtype=float))
    live.set_loss_x("step", False)
    qtbot.wait(20)  # the plot's layout puts a legend that grew back under its axis
    _assert_legends_clear({p: live.plots[p] for p in ("loss_step", "loss_time")})
    labels = [label.text for _s, label in live.plots["loss_step"].getPlotItem().legend.items]
    assert "validation loss (evaluations)" in labels
    live.close()

    # the same from the file the writer made of the same stream, in the window
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "evals.h5", **STREAM))
    qtbot.wait(20)
    assert w.live.evals.met_lines("loss_step") == lines
    x, y = w.live.evals.points("loss_step", ("main", 1))
    assert x == pytest.approx(np.asarray(data.runs[1].evals["steps"], dtype=float))
    _assert_legends_clear(w.live.plots)
