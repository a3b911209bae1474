"""Following a run file another process is writing: progress counts the running run, and the end shows."""

from __future__ import annotations

import time

from batchlab.core.runfile import RunFileWriter

from tests.gui.conftest import wait_until
from tests.gui.synthetic import sweep_events


def test_following_a_file_counts_the_running_run_and_ends_when_the_file_says_complete(main_window, tmp_path):
    w = main_window
    path = tmp_path / "growing.h5"
    events = list(sweep_events(batch_sizes=(16, 64), epochs=2))
    first_epoch = next(i for i, e in enumerate(events) if e["type"] == "epoch_ended")
    with RunFileWriter(path) as writer:
        for event in events[: first_epoch + 1]:  # run 0 half trained, no run ended yet
            writer.handle(event)
        writer.flush()
        assert w.open_file(str(path))
        assert w.follower.following
        wait_until(lambda: "being written" in w.status_label.text(), timeout_s=10)
        assert w.progress_bar.isVisible()
        assert w.progress_bar.value() == 250  # of 1000: half of run 0, of 2 runs
        for event in events[first_epoch + 1 :]:  # the rest, through sweep_ended
            writer.handle(event)
        writer.flush()
        time.sleep(0.05)  # a new mtime for the poll to see
    wait_until(lambda: not w.follower.following, timeout_s=10)
    wait_until(lambda: "being written" not in w.status_label.text(), timeout_s=10)
    assert w.status_label.text() == "growing.h5: sweep complete (done)"
    assert not w.progress_bar.isVisible()
    assert [r.status for r in w.data.ordered_runs()] == ["ok", "ok"]


ABANDON = """
import json, sys, time
from batchlab.core.runfile import RunFileWriter
events = json.load(sys.stdin)
writer = RunFileWriter(sys.argv[1])
for event in events:
    writer.handle(event)
writer.flush()
print("ready", flush=True)
time.sleep(600)  # killed long before: the file is never closed and still says "running"
"""


def test_a_followed_file_whose_writer_was_killed_says_writer_stopped_not_being_written(main_window, tmp_path):
    """A `batchlab sweep` killed mid-run leaves a file that says "running" forever: the window sees the
    writer process is gone and the file still, and says so instead of "being written"; the running run reads
    "interrupted (the writing process ended)" in the table, the CSV and a reopened file, as in `batchlab report`."""
    import csv
    import json
    import os
    import signal
    import subprocess
    import sys

    w = main_window
    path = tmp_path / "abandoned.h5"
    events = list(sweep_events(batch_sizes=(16, 64), epochs=2))
    first_epoch = next(i for i, e in enumerate(events) if e["type"] == "epoch_ended")
    child = subprocess.Popen(
        [sys.executable, "-c", ABANDON, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    child.stdin.write(json.dumps(events[: first_epoch + 1]))
    child.stdin.close()
    assert child.stdout.readline().strip() == "ready"
    w.follower.stale_s = 0.5  # the window waits 5 s of silence; the writer is known dead at once here
    assert w.open_file(str(path))
    assert w.follower.following  # its writer is alive: being written
    assert w.data.status == "running" and w.data.runs[0].status == "running"
    os.kill(child.pid, signal.SIGKILL)  # as a user's kill -9 or a crash: no close, no "interrupted" written
    child.wait(30)
    wait_until(lambda: "writer stopped" in w.status_label.text(), timeout_s=20)
    assert w.status_label.text() == f"abandoned.h5: writer stopped; file incomplete (its process {child.pid} is gone)"
    assert not w.follower.following and not w.progress_bar.isVisible()
    assert [r.status for r in w.data.ordered_runs()] == ["interrupted", "pending"]
    assert w.data.runs[0].message == "the writing process ended"
    assert len(w.data.runs[0].steps) == 32 and len(w.data.runs[0].epochs) == 1  # what was measured is all there
    w.refresh(full=True)
    assert w.live.curve_count("loss_step") == 1
    with open(w.export_table(str(tmp_path / "runs.csv")), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["status"], r["message"]) for r in rows][0] == ("interrupted", "the writing process ended")

    assert w.open_file(str(path))  # reopened later: the same rule, read at once
    assert not w.follower.following
    assert w.data.status_text == "interrupted (the writing process ended)"
    assert [r.status for r in w.data.ordered_runs()] == ["interrupted", "pending"]
    assert w.status_label.text() == f"Opened {path} (interrupted (the writing process ended), 2 runs)"
