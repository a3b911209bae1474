"""Run files in the window: open (also while being written), compare, export; selection; failed runs."""

from __future__ import annotations

import csv
import json
import math
import time

import pytest
from batchlab.core import cli
from batchlab.core.runfile import RunFileWriter
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.gui.plot_style import COMPARE_STYLE, DIM_ALPHA
from batchlab.gui.worker import SweepWorker
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.gui.conftest import wait_until
from tests.gui.synthetic import sweep_events, write_run_file


def test_opening_a_run_file_fills_plots_and_table(main_window, tiny_sweep):
    _window, path, _seen = tiny_sweep
    w = main_window
    assert w.open_file(path)
    record = read_run_file(path)
    assert w.live.curve_count("loss_step") == len(record.runs) == 2
    assert w.summary.point_count("final_loss") == 2
    rows = w.table.runs_model.rows_as_text()[1:]
    assert [r[0] for r in rows] == ["tiny.h5", "tiny.h5"]
    assert [int(r[3]) for r in rows] == [r.batch_size for r in record.runs]
    assert "tiny.h5" in w.windowTitle()
    assert not w.follower.following  # finished files are read once
    w.use_file_settings()
    assert build_spec(w.setup.values()).batch_sizes == (64, 128)


def test_the_runs_table_shows_the_same_figures_live_reopened_and_in_report(main_window, tiny_sweep, capsys):
    window, path, _seen = tiny_sweep  # the window that ran the sweep still holds the live model
    live = window.table.runs_model.rows_as_text()
    assert main_window.open_file(path)
    reopened = main_window.table.runs_model.rows_as_text()
    assert live == reopened
    assert cli.main(["report", path, "--json"]) == 0
    reported = json.loads(capsys.readouterr().out)["runs"]
    header = live[0]

    def text(value: float) -> str:  # as the table's CSV text shows a number
        return str(value) if math.isfinite(value) else ""

    for row, rep in zip(live[1:], reported, strict=True):
        cells = dict(zip(header, row, strict=True))
        assert cells["time (s)"] == text(rep["total_time"]) != ""
        assert cells["steady throughput (samples/s)"] == text(rep["samples_per_s"]) != ""
        assert cells["step time (ms)"] == text(rep["step_time"] * 1e3)
        assert cells["tracing (s)"] == text(rep["tracing_time"])
        assert cells["final loss"] == text(rep["final_loss"]) != ""
        assert float(cells["peak memory (MiB)"]) == rep["peak_memory_bytes"] / (1 << 20)


def test_a_file_still_being_written_refreshes(main_window, tmp_path):
    w = main_window
    path = tmp_path / "growing.h5"
    events = list(sweep_events(batch_sizes=(16, 64)))
    ends = [i for i, e in enumerate(events) if e["type"] == "run_ended"]
    with RunFileWriter(path) as writer:
        for event in events[: ends[0] + 1]:
            writer.handle(event)
        writer.flush()
        assert w.open_file(str(path))
        assert w.follower.following
        assert [r.status for r in w.data.ordered_runs()] == ["ok", "pending"]
        for event in events[ends[0] + 1 :]:
            writer.handle(event)
        writer.flush()
        time.sleep(0.05)  # a new mtime for the poll to see
    wait_until(lambda: [r.status for r in w.data.ordered_runs()] == ["ok", "ok"], timeout_s=10)
    assert w.live.curve_count("loss_step") == 2
    assert not w.follower.following  # the sweep ended: no more polling


def test_compare_two_sweeps_overlaid_with_dashed_curves(main_window, tmp_path):
    w = main_window
    a = write_run_file(tmp_path / "a.h5", batch_sizes=(16, 64))
    b = write_run_file(tmp_path / "b.h5", batch_sizes=(64, 256))
    assert w.open_file(a) and w.open_compare(b)
    assert w.live.curve_count("loss_step") == 4
    keys = {k[:2] for k in w.live._curves}
    assert ("compare", 0) in keys and ("main", 0) in keys
    assert w.live._curves[("compare", 0, "loss_step")].opts["pen"].style() == COMPARE_STYLE
    assert w.live._curves[("main", 0, "loss_step")].opts["pen"].style() != COMPARE_STYLE
    assert [r[0] for r in w.table.runs_model.rows_as_text()[1:]] == ["b.h5", "b.h5", "a.h5", "a.h5"]
    # batch 64 has the same colour in both sweeps
    colour = w.live._curves[("main", 1, "loss_step")].opts["pen"].color().name()
    assert w.live._curves[("compare", 0, "loss_step")].opts["pen"].color().name() == colour
    assert "a.h5 vs b.h5" in w.windowTitle()
    w.close_compare()
    assert w.live.curve_count("loss_step") == 2 and len(w.table.runs_model.rows_as_text()) == 3


def test_selecting_rows_highlights_their_curves_and_dims_the_rest(main_window, tmp_path):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "s.h5", batch_sizes=(16, 64, 256)))
    w.table.select_keys({("main", 1)})
    assert w.live.selection == {("main", 1)} and w.summary.selection == {("main", 1)}
    for plot_series in ("loss_step", "loss_time", "train_loss", "throughput"):
        chosen = w.live._curves[("main", 1, plot_series)].opts["pen"]
        other = w.live._curves[("main", 0, plot_series)].opts["pen"]
        assert chosen.color().alpha() == 255 and chosen.widthF() > other.widthF()
        assert other.color().alpha() == DIM_ALPHA
    w.table.clearSelection()
    assert w.live._curves[("main", 0, "loss_step")].opts["pen"].color().alpha() == 255


def test_failed_runs_are_marked_in_the_summary_and_table(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "f.h5", batch_sizes=(16, 64, 256), statuses=("ok", "ok", "oom"))
    assert w.open_file(path)
    labels = {(metric, label) for metric, _s, _i, label in w.summary.marks}
    # the OOM run has a loss but no memory reading: marked at 0 on the memory axis, saying so
    assert ("final_loss", "OOM") in labels and ("peak_memory", "OOM (no value)") in labels
    assert w.summary.point_count("final_loss") == 3  # two ok runs and the OOM marker
    assert w.table.runs_model.failed_rows() == [("main", 2)]
    status_index = w.table.runs_model.index(2, 2)
    assert w.table.runs_model.data(status_index) == "oom"
    assert w.table.runs_model.data(status_index, Qt.ItemDataRole.BackgroundRole) is not None


def test_exports_table_csv_and_plots_png_svg(main_window, tmp_path):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "e.h5", batch_sizes=(16, 64)))
    w.export_table(str(tmp_path / "runs.csv"))
    with open(tmp_path / "runs.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][2:4] == ["status", "batch size"] and len(rows) == 3
    assert float(rows[1][6]) > 0  # throughput as a plain number
    w.export_plot("loss_step", str(tmp_path / "loss.png"))
    w.export_plot("summary_throughput", str(tmp_path / "tp.svg"))
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (tmp_path / "tp.svg").read_text()[:2000]


def test_a_file_that_is_not_a_run_file_is_refused_in_a_dialog(main_window, tmp_path):
    w = main_window
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    assert not w.open_file(str(bad))
    assert isinstance(w.error_dialog, QMessageBox) and "not an HDF5 file" in w.error_dialog.text()
    w.error_dialog.close()


def test_worker_batches_events_so_the_gui_thread_is_not_flooded(qapp, tmp_path):
    worker = SweepWorker(build_spec({"preset": "mnist-mlp"}), str(tmp_path / "x.h5"))
    batches = []
    worker.events.connect(batches.append)
    steps = [e for e in sweep_events(batch_sizes=(8,), samples=4096, epochs=1) if e["type"] == "steps"][0]
    chunk = {k: (v[:1] if isinstance(v, list) else v) for k, v in steps.items()}
    start = time.monotonic()
    for _ in range(2000):
        worker._sink(dict(chunk))
    worker._sink({"type": "run_ended", "run": 0, "status": "ok"})  # structural events flush at once
    elapsed = time.monotonic() - start
    assert sum(len(b) for b in batches) == 2001
    assert len(batches) <= 2 + elapsed / 0.05 * 1.5
    assert batches[-1][-1]["type"] == "run_ended"


def test_one_throughput_per_name_across_table_summary_csv_file_report_and_live_plot(
    main_window, tiny_sweep, capsys, tmp_path
):
    """The runs table, the Summary, the CSV, `report --json` and the file's run attribute give one number, the
    steady throughput, under that name; the Live plot, named epoch throughput, draws the file's epoch column."""
    import h5py
    import pyqtgraph as pg

    _window, path, _seen = tiny_sweep  # a real sweep run from the window (TensorFlow in child processes)
    w = main_window
    assert w.open_file(path)
    assert cli.main(["report", path, "--json"]) == 0
    reported = {r["index"]: r["samples_per_s"] for r in json.loads(capsys.readouterr().out)["runs"]}
    with h5py.File(path, "r") as f:
        attribute = {i: float(f[f"runs/run_{i:03d}"].attrs["samples_per_s"]) for i in reported}
        epoch_column = {i: f[f"runs/run_{i:03d}/epochs/samples_per_s"][()].tolist() for i in reported}
    header, *rows = w.table.runs_model.rows_as_text()
    table = {int(r[header.index("run")]): float(r[header.index("steady throughput (samples/s)")]) for r in rows}
    csv_path = w.export_table(str(tmp_path / "one-throughput.csv"))
    with open(csv_path, newline="", encoding="utf-8") as f:
        exported = list(csv.DictReader(f))
    in_csv = {int(r["run"]): float(r["steady throughput (samples/s)"]) for r in exported}
    assert "samples_per_s" not in exported[0]  # one column per figure (it was there twice, under two names)
    summary = {
        p.data()[1]: p.pos().y()
        for item in w.summary._items["throughput"]
        if isinstance(item, pg.ScatterPlotItem)
        for p in item.points()
    }
    assert len(reported) == 2
    for i, value in reported.items():
        assert math.isfinite(value) and value > 0
        assert table[i] == in_csv[i] == value
        assert summary[i] == pytest.approx(value, rel=1e-12)
        assert attribute[i] == pytest.approx(value, rel=1e-12)  # the file's own record, the same rule
    # the names: steady throughput in the table, the Summary and the CLI table; epoch throughput on the Live plot
    assert w.summary.plots["throughput"].getPlotItem().titleLabel.text == "Steady throughput"
    assert w.live.plots["throughput"].getPlotItem().getAxis("left").labelText == "epoch throughput"
    for i, per_epoch in epoch_column.items():
        assert w.live._curves[("main", i, "throughput")].yData.tolist() == per_epoch
    assert cli.main(["report", path]) == 0
    assert "steady samples/s" in capsys.readouterr().out
