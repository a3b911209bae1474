"""Step rows reach the run file while an epoch trains, not only at its end (a kill then loses ~2 s, not an epoch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
from batchlab.core.events import make_event
from batchlab.core.runfile.writer import STEP_ROWS_FLUSH_SECONDS, RunFileWriter

from tests.core.test_cli import TINY, _start_sweep
from tests.gui.synthetic import sweep_events

READ = (
    "import sys, h5py\n"
    "with h5py.File(sys.argv[1], 'r', locking=False) as f:\n"
    "    print(len(f['runs/run_000/steps/loss']) if 'runs/run_000/steps/loss' in f else 0)\n"
)


def _rows_on_disk(path) -> int:
    """Step rows another process sees in the file now (in this process HDF5 would show its own cache)."""
    done = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise OSError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "unreadable")
    return int(done.stdout)


def test_step_rows_are_flushed_every_two_seconds_within_an_epoch(tmp_path):
    now = [0.0]
    path = tmp_path / "f.h5"
    writer = RunFileWriter(path, clock=lambda: now[0])
    events = list(sweep_events(batch_sizes=(4,), epochs=1))
    steps = next(e for e in events if e["type"] == "steps")
    for event in events:
        if event["type"] == "steps":
            break
        writer.handle(event)
    writer.handle(steps)
    assert _rows_on_disk(path) == 0  # not yet: steps arrive several times a second
    now[0] += STEP_ROWS_FLUSH_SECONDS
    writer.handle(make_event("steps", **{k: v for k, v in steps.items() if k not in ("type", "time")}))
    assert _rows_on_disk(path) == 2 * len(steps["loss"])  # mid-epoch, before any epoch_ended
    writer.close()


def test_a_sweep_killed_mid_epoch_keeps_its_steps_up_to_about_two_seconds_before(tmp_path):
    # batch 4 over 8,192 samples: a 2,048-step epoch, far longer than the wait below
    out = tmp_path / "killed.h5"
    proc = _start_sweep(*TINY, "--samples", "8192", "--epochs", "1", "--batch-sizes", "4", "--out", out)
    deadline = time.monotonic() + 240
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None and seen < 200:
        time.sleep(0.5)
        if out.exists():
            try:
                seen = _rows_on_disk(out)
            except OSError:
                continue
    assert seen >= 200, proc.communicate(timeout=60)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep's own process (the writer) and its child: no clean-up
    proc.communicate(timeout=60)
    with h5py.File(out, "r", locking=False) as f:
        run = f["runs/run_000"]
        assert len(run["epochs/epoch"]) == 0  # killed inside its first epoch
        assert len(run["steps/loss"]) >= seen  # every row a reader had seen is still there
