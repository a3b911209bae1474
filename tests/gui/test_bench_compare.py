"""File > Compare of two benchmark files shows batchlab compare's table (gui/bench_compare.py)."""

from __future__ import annotations

from batchlab.core.bench.compare import cell_text, compare_benches, table_headers
from PySide6.QtWidgets import QMessageBox

from tests.core.bench_files import write_bench
from tests.gui.synthetic import sweep_events

MIB = 1 << 20


def _run(batch, seed, dt):
    return dict(batch_size=batch, seed=seed, dt=dt, step_time=0.004, memory=500 * MIB, startup=2.0)


def test_compare_of_two_bench_files_shows_the_comparison_table(main_window, tmp_path):
    w = main_window
    a = write_bench(tmp_path / "a.h5", [_run(16, 0, 0.010), _run(64, 0, 0.020)])
    b = write_bench(tmp_path / "b.h5", [_run(16, 0, 0.005), _run(64, 0, 0.021)])
    assert w.open_file(str(a)) and w.open_compare(str(b))
    dialog = w.bench_compare
    assert dialog is not None and dialog.isVisible()
    table = dialog.table
    headers = [table.horizontalHeaderItem(j).text() for j in range(table.columnCount())]
    assert headers == table_headers()
    expected = compare_benches(a, b)  # the CLI's numbers: one computation, two views
    assert table.rowCount() == 2
    assert [table.item(i, 1).text() for i in range(2)] == ["16", "64"]
    assert table.item(0, 2).text() == cell_text(expected.rows[0].cells["samples_per_s"]) == "2.00 *"
    assert table.item(1, 2).text() == cell_text(expected.rows[1].cells["samples_per_s"]) == "0.95"
    assert "beyond the noise at 1 of 2 batch sizes (1 higher, 0 lower)" in dialog.summary.text()
    assert w.live.curve_count("loss_step") == 4  # the curves are still overlaid as for any comparison
    w.close_compare()
    assert w.bench_compare is None and not dialog.isVisible()


def test_compare_of_bench_files_of_other_versions_says_why_in_one_line(main_window, tmp_path):
    w = main_window
    a = write_bench(tmp_path / "a.h5", [_run(16, 0, 0.010)])
    b = write_bench(tmp_path / "b.h5", [_run(16, 0, 0.010)], version=99)
    assert w.open_file(str(a)) and w.open_compare(str(b))
    assert w.bench_compare is None
    assert isinstance(w.error_dialog, QMessageBox) and "version 99" in w.error_dialog.text()
    assert len(w.error_dialog.text().splitlines()) == 1


def test_compare_of_two_plain_sweeps_shows_no_benchmark_table(main_window, tmp_path):
    from batchlab.core.runfile import RunFileWriter

    paths = []
    for name in ("a.h5", "b.h5"):
        writer = RunFileWriter(tmp_path / name)
        for event in sweep_events():
            writer.handle(event)
        writer.close()
        paths.append(str(tmp_path / name))
    assert main_window.open_file(paths[0]) and main_window.open_compare(paths[1])
    assert main_window.bench_compare is None
