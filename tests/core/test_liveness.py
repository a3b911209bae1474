"""Whether a run file's writer is alive (core/runfile/liveness.py), from the root attributes it records."""

import socket
import subprocess
import sys

import h5py
from batchlab.core.runfile import RunFileWriter
from batchlab.core.runfile.liveness import WRITER_ALIVE, WRITER_GONE, WRITER_UNKNOWN, writer_identity, writer_state


def test_writer_state_alive_gone_reused_pid_and_unknown(tmp_path):
    with RunFileWriter(tmp_path / "a.h5") as writer:
        writer.flush()
        with h5py.File(tmp_path / "a.h5", "r", locking=False) as f:
            attrs = dict(f.attrs)
    assert attrs["writer_host"] == socket.gethostname()
    assert writer_state(attrs) == WRITER_ALIVE  # this test process wrote it
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert writer_state({**attrs, "writer_pid": int(dead.stdout)}) == WRITER_GONE
    me = writer_identity()
    assert writer_state({**me, "writer_started": me["writer_started"] - 3600}) == WRITER_GONE  # pid reused since
    assert writer_state({**me, "writer_host": "another-host"}) == WRITER_UNKNOWN
    assert writer_state({}) == WRITER_UNKNOWN  # a file from before the writer was recorded


def test_a_killed_sweep_reads_interrupted_in_report_and_json_not_running(tmp_path):
    """`kill -9` of a real `batchlab sweep` leaves a file that says "running" forever; report and --json read it
    by the one rule (the writer is gone): the sweep and its running run are interrupted, the writer's end named."""
    import json
    import os
    import signal

    from batchlab.core.model import SweepData
    from batchlab.core.table import summary_rows

    from tests.core.test_cli import TINY, _start_sweep, _wait_for_first_epoch, batchlab

    out = tmp_path / "killed.h5"
    proc = _start_sweep(*TINY, "--samples", "4096", "--epochs", "50", "--batch-sizes", "8,16", "--out", out)
    _wait_for_first_epoch(out, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent (the writer) and its training child, no clean-up
    proc.communicate(timeout=60)
    with h5py.File(out, "r", locking=False) as f:
        assert f.attrs["status"] == "running" and f["runs/run_000"].attrs["status"] == "running"  # what it says

    report = batchlab("report", out)
    assert report.returncode == 0, report.stderr
    assert "sweep interrupted (the writing process ended);" in report.stdout.splitlines()[0]
    assert "sweep running" not in report.stdout
    row = next(line for line in report.stdout.splitlines() if line.strip().startswith("8 "))
    assert row.rstrip().endswith("interrupted: the writing process ended"), row
    assert not any(line.rstrip().endswith("running") for line in report.stdout.splitlines())

    payload = json.loads(batchlab("report", out, "--json").stdout)
    assert payload["sweep"] == {"status": "interrupted", "message": "the writing process ended"}
    first, second = payload["runs"]
    assert (first["status"], first["message"]) == ("interrupted", "the writing process ended")
    assert second["status"] == "pending"  # never started: not claimed interrupted
    assert first["final_loss"] > 0  # what was measured is kept

    sweep = SweepData.from_file(out)  # the window's model, as a reopened file fills it
    assert sweep.status_text == "interrupted (the writing process ended)"
    assert [r["status"] for r in summary_rows(sweep)] == ["interrupted", "pending"]


def test_a_file_whose_writer_is_alive_or_unknown_still_reads_running(tmp_path):
    """The rule takes only a writer known dead for ended: this process writes (alive); another host (unknown)."""
    from batchlab.core.model import SweepData
    from batchlab.core.runfile.liveness import writer_gone

    with RunFileWriter(tmp_path / "a.h5") as writer:
        writer.flush()
        sweep = SweepData.from_file(tmp_path / "a.h5")
        assert sweep.status == "running" and not sweep.end_if_writer_gone()
        assert not writer_gone("running", {**sweep.file_attrs, "writer_host": "another-host"})
        assert not writer_gone("complete", {**sweep.file_attrs, "writer_pid": 10**9})  # ended files stay as written
        assert writer_gone("running", {**sweep.file_attrs, "writer_started": 0.0})  # pid reused since
