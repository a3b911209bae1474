"""File > Open and Compare read in a worker thread (gui/file_reader.py): what a user gets is what a
synchronous read shows, errors keep their one line, and the window handles events while a file is read."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from batchlab.core.runfile import reader
from batchlab.gui import file_reader
from PySide6.QtCore import QTimer

from tests.gui.conftest import wait_until
from tests.gui.synthetic import write_run_file

READ_S = 30  # generous: the 2-core CI machine is shared


def _held_reads(monkeypatch) -> threading.Event:
    """Reads in the worker thread wait for the returned event before reading (a big file, in slow motion)."""
    go = threading.Event()
    real = file_reader.read_sweep

    def held(path, label, progress=None, pause=None):
        assert go.wait(READ_S), "the test never let the read go"
        return real(path, label, progress, pause)

    monkeypatch.setattr(file_reader, "read_sweep", held)
    return go


def _table_csv(w, tmp_path: Path, name: str) -> str:
    return Path(w.table.export_csv(str(tmp_path / name))).read_text()


def test_threaded_open_and_compare_show_what_a_synchronous_read_shows(main_window, tmp_path):
    w = main_window
    a = write_run_file(tmp_path / "a.h5", batch_sizes=(16, 64), seeds=(0, 1))
    b = write_run_file(tmp_path / "b.h5", batch_sizes=(32,), epochs=1)
    assert w.open_file(a) and w.open_compare(b)  # synchronous (the fixture's default)
    expected = _table_csv(w, tmp_path, "sync.csv")
    expected_loss = {i: r.figures.final_loss for i, r in w.data.runs.items()}
    expected_curves = {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids}
    w.close_compare()
    w.read_in_thread = True
    assert w.open_file(a)
    wait_until(lambda: not w.readers["main"].busy, READ_S)
    assert w.status_label.text().startswith(f"Opened {a} (")
    assert w.open_compare(b)
    wait_until(lambda: not w.readers["compare"].busy, READ_S)
    assert w.status_label.text().startswith(f"Comparing with {b} (")
    assert w.data is not None and w.compare is not None
    assert w.compare.path == b and str(w.data.path) == a
    assert {i: r.figures.final_loss for i, r in w.data.runs.items()} == expected_loss
    assert _table_csv(w, tmp_path, "thread.csv") == expected
    wait_until(lambda: not w.refresher.active, READ_S)  # the plots are drawn by the ticks, a slice at a time
    assert {plot_id: w.live.curve_count(plot_id) for plot_id in w.live.plot_ids} == expected_curves
    assert not w.live.has_pending()
    assert not w.progress_bar.isVisible()


def test_open_returns_before_the_file_is_read_and_the_window_handles_events_meanwhile(
    main_window, tmp_path, monkeypatch
):
    w = main_window
    w.read_in_thread = True
    go = _held_reads(monkeypatch)
    path = write_run_file(tmp_path / "big.h5", batch_sizes=(16, 64))
    assert w.open_file(path)
    assert w.data is None and w.readers["main"].busy  # nothing read yet: the call came back at once
    assert w.status_label.text().startswith("Reading") and w.progress_bar.isVisible()
    fired = []
    QTimer.singleShot(0, lambda: fired.append(True))  # an event the GUI thread handles while the read waits
    wait_until(lambda: fired, 5)
    assert w.data is None
    go.set()
    wait_until(lambda: w.data is not None, READ_S)
    assert len(w.data.runs) == 2 and w.status_label.text().startswith(f"Opened {path}")


def test_a_second_open_replaces_the_read_in_flight(main_window, tmp_path, monkeypatch):
    w = main_window
    w.read_in_thread = True
    go = _held_reads(monkeypatch)
    first = write_run_file(tmp_path / "first.h5", batch_sizes=(16,))
    second = write_run_file(tmp_path / "second.h5", batch_sizes=(16, 64, 256))
    shown = []
    w.readers["main"].read.connect(lambda data: shown.append(data.path))
    assert w.open_file(first) and w.open_file(second)
    go.set()
    wait_until(lambda: not w.readers["main"].busy, READ_S)
    assert str(w.data.path) == second and len(w.data.runs) == 3
    assert shown == [second]  # the first file's read was cancelled: never shown, not even for a moment


@pytest.mark.parametrize("broken", ["not_hdf5", "mid_way"])
def test_a_file_that_cannot_be_read_in_the_thread_gives_its_one_line_error_and_leaves_the_window(
    main_window, tmp_path, monkeypatch, broken
):
    w = main_window
    good = write_run_file(tmp_path / "good.h5", batch_sizes=(16, 64))
    assert w.open_file(good)  # shown before (synchronously)
    before = _table_csv(w, tmp_path, "before.csv")
    w.read_in_thread = True
    if broken == "not_hdf5":
        bad = tmp_path / "bad.h5"
        bad.write_bytes(b"not a run file at all" * 100)
        bad = str(bad)
    else:  # an HDF5 error on the third run of a 4-run file
        bad = write_run_file(tmp_path / "bad.h5", batch_sizes=(8, 16, 32, 64))
        real, calls = reader._read_run, []

        def failing(group):
            calls.append(group.name)
            if len(calls) == 3:
                raise OSError("Can't read data (inflate() failed)")
            return real(group)

        monkeypatch.setattr(reader, "_read_run", failing)
    assert w.open_file(bad)
    wait_until(lambda: not w.readers["main"].busy, READ_S)
    text = w.error_dialog.text()
    assert bad in text and len(text.splitlines()) == 1
    assert str(w.data.path) == good and _table_csv(w, tmp_path, "after.csv") == before
    assert not w.progress_bar.isVisible()
