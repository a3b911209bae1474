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
