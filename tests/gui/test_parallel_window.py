"""Two runs at once from the window (Run section, "Runs at once" = 2): a real tiny sweep on the CPU whose
events arrive interleaved by run, and views that keep every run's curves and rows apart."""

from __future__ import annotations

import numpy as np
from batchlab.core.analysis.concurrency import shared_cores_note
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.sweep.parallel_launcher import NO_GPU

from tests.gui.conftest import TINY, wait_until


def test_two_runs_at_once_from_the_window_fill_each_runs_curves_and_rows(main_window, tmp_path):
    w = main_window
    out = str(tmp_path / "parallel.h5")
    w.setup.set_values({**TINY, "batch_sizes": "16, 32, 64, 128", "tf_threads": "1", "parallel": "2"})
    assert w.setup.parallel.text() == "2"
    w.setup.out.setText(out)
    seen = {"most_in_flight": 0, "runs": []}

    def on_batch(batch):
        seen["runs"] += [e.get("run") for e in batch if e.get("type") == "steps"]
        seen["most_in_flight"] = max(seen["most_in_flight"], len(w.data.in_flight))

    assert w.start_sweep(), w.setup.errors
    w.worker.events.connect(on_batch)
    wait_until(lambda: not w.running, timeout_s=300)
    wait_until(lambda: w.worker.isFinished(), timeout_s=10)
    w.refresh(full=True)

    record = read_run_file(out)
    assert record.status == "complete" and [r.status for r in record.runs] == ["ok"] * 4
    assert w.worker.status == "complete"
    assert seen["most_in_flight"] == 2  # the window's model held two runs in flight at once
    steps_of = seen["runs"]
    assert sorted(set(steps_of)) == [0, 1, 2, 3]
    for run in record.runs:
        assert run.attrs["runs_at_once"] == 2 and run.attrs["shared_cores"] == 1
        assert [line for line in record.log if f"[run {run.index}] run {run.index} {shared_cores_note(2)}" in line]
        # each run's curve holds its own steps, whatever order the runs' events came in
        curve = w.live._curves[("main", run.index, "loss_step")]
        np.testing.assert_allclose(curve.yData, run.steps["loss"].astype(float), rtol=1e-6)
    for plot_id in ("loss_step", "loss_time", "throughput", "memory"):
        assert w.live.curve_count(plot_id) >= 4, plot_id
    rows = w.table.runs_model.rows_as_text()
    assert [(r[2], r[3]) for r in rows[1:]] == [("ok", "16"), ("ok", "32"), ("ok", "64"), ("ok", "128")]
    assert not w.data.in_flight and w.actions["run"].isEnabled()


def test_runs_at_once_on_gpus_without_a_gpu_is_shown_beside_the_field(main_window, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # no GPU in sight, as on this machine
    w = main_window
    out = tmp_path / "none.h5"
    w.setup.set_values({**TINY, "device": "auto", "parallel": "gpus"})
    w.setup.out.setText(str(out))
    assert w.start_sweep(), w.setup.errors
    wait_until(lambda: not w.running, timeout_s=120)
    assert w.status_label.text() == f"Not started: parallel: {NO_GPU}"  # the field and why, in one line
    assert not out.exists()  # nothing was measured, so no file
