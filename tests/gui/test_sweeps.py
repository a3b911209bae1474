"""Real sweeps driven from the window: completion, Stop, and closing mid-sweep keep the file readable."""

from __future__ import annotations

import os

import numpy as np
from batchlab.core.runfile.reader import read_run_file
from batchlab.gui.main_window import STOPPING_TEXT
from batchlab.gui.worker import TRAINING_NICENESS
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.gui.conftest import TINY, wait_until


def test_tiny_sweep_runs_from_the_window_and_fills_curves_and_table(tiny_sweep):
    window, out, seen = tiny_sweep
    assert window.worker.status == "complete"
    record = read_run_file(out)
    assert record.status == "complete"
    assert [(r.batch_size, r.status) for r in record.runs] == [(64, "ok"), (128, "ok")]
    # the training children ran below the window's CPU priority, so painting is not queued behind them
    expected_nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + TRAINING_NICENESS)
    assert [r.attrs["nice"] for r in record.runs] == [expected_nice, expected_nice]
    # every plot has one curve per run, filled with what the file holds
    for plot_id in ("loss_step", "loss_time", "loss_epoch", "throughput", "memory"):
        assert window.live.curve_count(plot_id) >= 2, plot_id
    for run in record.runs:
        curve = window.live._curves[("main", run.index, "loss_step")]
        np.testing.assert_allclose(curve.yData, run.steps["loss"].astype(float), rtol=1e-6)
    for metric in ("final_loss", "total_time", "throughput", "peak_memory"):
        assert window.summary.point_count(metric) == 2
    model = window.table.runs_model
    rows = model.rows_as_text()
    assert rows[0][:5] == ["sweep", "run", "status", "batch size", "seed"]
    assert [(r[2], r[3]) for r in rows[1:]] == [("ok", "64"), ("ok", "128")]
    # columns fitted to their contents as runs ended, the last one still filling the table's width
    header = window.table.horizontalHeader()
    last = header.count() - 1
    assert header.sectionPosition(last) + header.sectionSize(last) >= window.table.viewport().width() - 1
    assert float(rows[1][-1]) == record.runs[0].final_loss
    # events came in batches, the setup is usable again, the file is in the recent list
    assert seen["batches"] and min(seen["batches"]) >= 1  # events arrive as lists, never empty
    assert window.actions["run"].isEnabled() and not window.actions["stop"].isEnabled()
    assert window.recent.paths()[0].endswith("tiny.h5")
    assert not window.progress_bar.isVisible()
    # the window's long-lived objects were kept out of the collector's way during the sweep, and again after
    # it (once what died during it was collected: gui/heap.refreeze, tests/gui/test_heap.py)
    assert seen["frozen_during"] > 10_000 and seen["frozen_after"] > 10_000


def test_tiny_sweep_keeps_tensorflow_out_of_the_gui_process(tiny_sweep, request):
    import sys

    window, _out, seen = tiny_sweep
    core_tests_ran = any("tests/core" in str(item.fspath) for item in request.session.items)
    if not core_tests_ran:  # core tests may import TensorFlow into this same pytest process
        assert seen["tf_in_gui"] is False and "tensorflow" not in sys.modules


def test_stop_mid_run_marks_the_run_interrupted_and_keeps_the_file(main_window, tmp_path):
    w = main_window
    out = str(tmp_path / "stopped.h5")
    w.setup.set_values({**TINY, "samples": "4096", "epochs": "20", "batch_sizes": "32, 64"})
    w.setup.out.setText(out)
    assert w.start_sweep()
    wait_until(lambda: w.data.runs.get(0) is not None and len(w.data.runs[0].steps) > 0, timeout_s=180)
    assert w.actions["stop"].isEnabled()
    w.actions["stop"].trigger()
    assert not w.actions["stop"].isEnabled()  # asked once
    # the plots lag the child by up to a frame, so steps trained before the request appear after it: the
    # status no longer says "Stopping after the current step" while 100-230 more steps appear
    assert w.status_label.text() == STOPPING_TEXT
    wait_until(lambda: not w.running, timeout_s=120)
    record = read_run_file(out)
    assert record.status == "interrupted"
    assert record.runs[0].status == "interrupted" and len(record.runs[0].steps["loss"]) > 0
    assert record.runs[1].status == "skipped"  # never started
    assert w.data.runs[0].status == "interrupted"
    model = w.table.runs_model
    titles = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert [model.data(model.index(r, titles.index("status"))) for r in range(2)] == ["interrupted", "skipped"]
    assert "interrupted" in w.status_label.text()


def test_closing_mid_sweep_asks_then_stops_and_leaves_the_file_readable(main_window, tmp_path, monkeypatch):
    w = main_window
    out = str(tmp_path / "closed.h5")
    w.setup.set_values({**TINY, "samples": "4096", "epochs": "20", "batch_sizes": "32"})
    w.setup.out.setText(out)
    assert w.start_sweep()
    wait_until(lambda: w.data.runs.get(0) is not None and len(w.data.runs[0].steps) > 0, timeout_s=180)
    asked = []
    answer = QMessageBox.StandardButton.No
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: (asked.append(a[2]), answer)[1])
    w.close()
    assert asked and w.isVisible() and w.running  # "No" keeps the window and the sweep
    answer = QMessageBox.StandardButton.Yes
    w.close()
    assert len(asked) == 2 and not w.isVisible()
    assert w.worker.wait(1000) and not w.running
    record = read_run_file(out)
    assert record.status == "interrupted"
    assert record.runs[0].status == "interrupted" and len(record.runs[0].steps["loss"]) > 0
