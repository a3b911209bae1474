"""Files of `batchlab export` in the window: File > Open shows the source's figures, and says what a summary lacks."""

from __future__ import annotations

from batchlab.core.cli import main

from tests.core.test_export import source_events
from tests.core.test_runfile import write


def test_a_summary_only_export_opens_with_the_source_figures_and_says_steps_are_missing(main_window, tmp_path):
    source = write(tmp_path / "sweep.h5", source_events())
    summary = tmp_path / "summary.h5"
    assert main(["export", str(summary), str(source), "--summary-only"]) == 0
    w = main_window
    assert w.open_file(str(source))
    want = [row[1:] for row in w.table.runs_model.rows_as_text()]  # without the file's name
    assert "summary-only" not in w.status_label.text() and w.live.curve_count("loss_step") == 3
    assert w.open_file(str(summary))
    assert [row[1:] for row in w.table.runs_model.rows_as_text()] == want
    assert "summary-only export: the per-step tables of 3 runs were left out" in w.status_label.text()
    assert w.live.curve_count("loss_step") == 0  # no per-step curve drawn from nothing
