"""The training loop's measurements: streamed steps, input wait, tracing, sync modes, failures.

Sweeps run through the real runner and training children (TensorFlow never loads in this process);
the hooks and the failure rules are TensorFlow-free and are also checked on synthetic rows.
"""

import math
import os
import signal
import threading
import time

import numpy as np
import pytest
from batchlab.core.events import STEP_FLUSH_SECONDS, STEPS
from batchlab.core.figures import steady_throughput
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training import faults
from batchlab.core.training.failures import Diverged, classify_failure, first_line
from batchlab.core.training.hooks import HookList, NanCheck, StepLog, TracingCounter, tracing_cost

AUTOENCODER = {"preset": "mnist-autoencoder", "val_samples": 0, "device": "cpu"}
KILL_AFTER_SECONDS = 2.0  # after the first step records arrive


def _events_of(events, kind):
    return [e for e in events if e["type"] == kind]


def test_steps_reach_the_file_up_to_a_kill_in_the_middle_of_an_epoch(tmp_path):
    # One long epoch (5000 steps of 2 samples, ~10 s); the child is killed a few seconds into it.
    spec = build_spec({**AUTOENCODER, "samples": 10000, "epochs": 1, "batch_sizes": "2"})
    out = tmp_path / "killed.h5"
    seen = {}

    def kill(pid):
        seen["kill_at"] = time.monotonic()
        os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would

    def sink(event):
        if event["type"] == "run_started":
            seen["pid"] = event["pid"]
        if event["type"] == STEPS and "first" not in seen:
            # The run's start on this process's clock: arrival minus the run time the rows had reached.
            seen["first"] = time.monotonic() - event["wall_time"][-1]
            threading.Timer(KILL_AFTER_SECONDS, kill, args=(seen["pid"],)).start()
        if event["type"] == STEPS and "kill_at" not in seen:
            seen["chunks_before_kill"] = seen.get("chunks_before_kill", 0) + 1

    assert run_sweep(spec, out, sink=sink) == "complete"
    run = read_run_file(out).runs[0]
    assert run.status == "crashed" and "SIGKILL" in run.message
    steps = run.steps
    assert 0 < len(steps["step"]) < 5000  # killed mid-epoch, and what came before is in the file
    assert steps["step"].tolist() == list(range(len(steps["step"])))
    assert seen["chunks_before_kill"] > 2  # streamed while training, not once per epoch
    killed_at = seen["kill_at"] - seen["first"]  # run-relative, like wall_time
    assert steps["wall_time"][-1] > killed_at - 1.0


def test_bundled_data_shows_no_input_wait_and_tracing_is_marked(tmp_path):
    # 500 samples at batch 8: 62 full batches and one of 4, whose new shape traces the step again.
    spec = build_spec({**AUTOENCODER, "samples": 500, "epochs": 2, "batch_sizes": "8"})
    events = []
    out = tmp_path / "tiny.h5"
    assert run_sweep(spec, out, sink=events.append) == "complete"
    (started,) = _events_of(events, "run_started")
    (ended,) = _events_of(events, "run_ended")
    assert started["engine"] == "loop" and started["sync"] == "every_step"
    overhead = started["fetch_overhead_s"]
    assert 0 < overhead < 0.05

    run = read_run_file(out).runs[0]
    steps, epochs = run.steps, run.epochs
    assert np.flatnonzero(steps["traced"]).tolist() == [0, 62]  # the first step and the first partial batch
    assert epochs["traced_steps"].tolist() == [2, 0]
    traced = steps["traced"] == 1
    assert epochs["tracing_time"][0] == pytest.approx(steps["step_time"][traced].sum())
    assert 0 < ended["tracing_time_s"] < epochs["tracing_time"][0]

    # Input wait is the part of a fetch spent waiting for the pipeline to make the batch: none when
    # it was already buffered, though every fetch costs next()'s own time. (Before, every fetch counted
    # as input wait: 17% of a batch-8 epoch; a calibrated fixed cost subtracted instead still left
    # 30-60% of it, as next() costs 2-3x more while training than when calibrated.)
    assert np.all(steps["fetch_time"] > 0)
    assert np.all(steps["input_wait"] >= 0) and np.all(steps["input_wait"] <= steps["fetch_time"])
    assert np.median(steps["input_wait"]) < 0.1 * np.median(steps["fetch_time"])
    # Only an epoch's first fetch (a fresh iterator starting its threads) may wait noticeably.
    later = np.diff(steps["epoch"], prepend=-1) == 0
    assert steps["input_wait"][later].sum() < 0.02 * epochs["epoch_time"].sum()
    for e in (0, 1):
        in_epoch = steps["epoch"] == e
        assert epochs["fetch_time"][e] == pytest.approx(steps["fetch_time"][in_epoch].sum())
        assert epochs["input_wait_time"][e] == pytest.approx(steps["input_wait"][in_epoch].sum())
    # The run's steady throughput (untraced steps) is the figure every view shows under that name; the epoch
    # column is the epoch throughput (every step, traced ones included), named apart
    assert ended["samples_per_s"] == pytest.approx(steady_throughput(steps, epochs))
    assert epochs["samples_per_s"][0] < ended["samples_per_s"]  # the traced first epoch is slower


def test_a_starved_pipeline_shows_real_input_wait(tmp_path, monkeypatch):
    delay = 0.1
    monkeypatch.setenv(faults.INPUT_DELAY_ENV, str(delay))  # test hook: each batch takes 0.1 s to make
    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 256, "val_samples": 0, "epochs": 2, "batch_sizes": "64", "device": "cpu"}
    )
    events = []
    out = tmp_path / "slow.h5"
    assert run_sweep(spec, out, sink=events.append) == "complete"
    (started,) = _events_of(events, "run_started")
    steps = read_run_file(out).runs[0].steps
    second = steps["epoch"] == 1  # a fresh iterator: every batch is made while the step waits
    assert np.median(steps["input_wait"][second]) > delay / 2
    assert np.median(steps["input_wait"][second]) > 10 * started["fetch_overhead_s"]


def test_sampled_sync_times_every_tenth_step_and_reads_every_loss(tmp_path):
    spec = build_spec({**AUTOENCODER, "samples": 500, "epochs": 1, "batch_sizes": "16", "sync": "sampled"})
    events = []
    out = tmp_path / "sampled.h5"
    assert run_sweep(spec, out, sink=events.append) == "complete"
    (started,) = _events_of(events, "run_started")
    (ended,) = _events_of(events, "run_ended")
    assert started["sync"] == "sampled"
    run = read_run_file(out).runs[0]
    steps, epochs = run.steps, run.epochs
    assert len(steps["step"]) == 32  # 31 batches of 16 and one of 4
    timed = np.isfinite(steps["step_time"])
    expected = (steps["step"] % 10 == 0) | (steps["traced"] == 1)
    assert timed.tolist() == expected.tolist()
    assert np.all(np.isfinite(steps["loss"])) and np.all(np.diff(steps["wall_time"]) > 0)
    assert math.isnan(epochs["compute_time"][0])  # not every step was timed
    assert epochs["train_loss"][0] == pytest.approx(np.average(steps["loss"], weights=steps["batch_size"]), rel=1e-5)
    # One epoch, traced: the run's throughput comes from its untraced timed steps, not the traced epoch.
    assert ended["samples_per_s"] > epochs["samples_per_s"][0]


def test_a_run_stopped_mid_epoch_reports_throughput_without_tracing(tmp_path):
    spec = build_spec({**AUTOENCODER, "samples": 4000, "epochs": 3, "batch_sizes": "8"})
    runner = SweepRunner(spec)
    events = []

    def sink(event):
        events.append(event)
        if event["type"] == STEPS and event["epoch"][-1] == 1:
            runner.stop()  # as the window's Stop button would: in the second epoch, the first one finished

    assert run_sweep(spec, tmp_path / "stopped.h5", sink=sink, runner=runner) == "interrupted"
    (ended,) = _events_of(events, "run_ended")
    (epoch0,) = _events_of(events, "epoch_ended")
    assert ended["status"] == "interrupted"
    assert epoch0["traced_steps"] == 1
    # No finished epoch is free of tracing, so the figure comes from the untraced steps: finite, and
    # above the traced first epoch's (which carries about a second of tracing).
    assert ended["samples_per_s"] > epoch0["samples_per_s"]


def test_a_data_file_removed_mid_sweep_is_an_error_with_its_traceback_in_the_log(tmp_path):
    data = tmp_path / "data.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x_train=rng.random((128, 784), dtype="float32"), y_train=rng.integers(0, 10, 128))
    spec = build_spec(
        {"preset": "mnist-mlp", "data": str(data), "samples": 128, "val_samples": 0, "epochs": 1}
        | {"batch_sizes": "32,64", "device": "cpu"}
    )

    def sink(event):
        if event["type"] == "run_ended" and event["run"] == 0:
            data.unlink()  # the user deletes or moves the file while the sweep runs

    out = tmp_path / "gone.h5"
    # each run's own child loads the data when its run is asked for (a fork server or a standby child holds
    # the data it loaded before the file went, and the child takes the parent's checked spec as it is)
    runner = SweepRunner(spec, standby=False, reuse=False, fork=False)
    assert run_sweep(spec, out, sink=sink, runner=runner) == "complete"
    record = read_run_file(out)
    first, second = record.runs
    assert first.status == "ok"
    assert second.status == "error"
    assert str(data) in second.message or "data.npz" in second.message
    tracebacks = [line for line in record.log if "[run 1]" in line and "Traceback (most recent call last)" in line]
    assert tracebacks, record.log


# ---------------------------------------------------------------- TensorFlow-free parts


def test_memory_errors_are_out_of_memory():
    assert classify_failure(MemoryError()) == "oom"
    assert first_line(MemoryError()) == "out of memory"

    class ResourceExhaustedError(Exception):  # named like TensorFlow's, as a copy to the device raises it
        pass

    assert classify_failure(ResourceExhaustedError("failed to copy")) == "oom"
    assert classify_failure(ValueError("bad shape")) == "error"


def _row(step, wall_time, loss=1.0, step_time=0.01, traced=0):
    return {
        "step": step,
        "epoch": 0,
        "loss": loss,
        "batch_size": 8,
        "step_time": step_time,
        "fetch_time": 0.001,
        "input_wait": 0.0,
        "traced": traced,
        "wall_time": wall_time,
    }


def test_the_step_log_sends_every_flush_interval_of_run_time():
    sent = []
    log = StepLog(run_index=3, emit=sent.append)
    # 400 steps of 10 ms, starting 50 s into a run (a late epoch): chunks must still be ~0.25 s apart.
    for i in range(400):
        log.on_train_batch_end(i, _row(i, 50.0 + 0.01 * (i + 1)))
    log.on_run_end({})
    assert sum(len(e["step"]) for e in sent) == 400
    assert all(e["type"] == STEPS and e["run"] == 3 for e in sent)
    spans = [e["wall_time"][-1] - e["wall_time"][0] for e in sent[1:-1]]
    assert len(sent) >= 4.0 / STEP_FLUSH_SECONDS - 1
    assert max(spans) < STEP_FLUSH_SECONDS + 0.011


def test_a_nan_loss_ends_the_run_after_its_step_is_recorded():
    sent = []
    hooks = HookList([StepLog(0, sent.append), NanCheck()])
    hooks.on_train_batch_end(0, _row(0, 0.1))
    with pytest.raises(Diverged, match="step 1"):
        hooks.on_train_batch_end(1, _row(1, 0.2, loss=math.nan))
    hooks.on_run_end({})
    assert math.isnan(sent[-1]["loss"][-1])


def test_tracing_cost_is_traced_time_beyond_a_typical_step():
    counter = TracingCounter()
    counter.on_epoch_begin(0)
    times = [0.9, 0.01, 0.012, 0.011, 0.3]
    for i, t in enumerate(times):
        counter.on_train_batch_end(i, _row(i, i, step_time=t, traced=int(t > 0.1)))
    epoch = {}
    counter.on_epoch_end(0, epoch)
    assert epoch == {"traced_steps": 2, "tracing_time": pytest.approx(1.2)}
    end = {}
    counter.on_run_end(end)
    assert end["tracing_time_s"] == pytest.approx(1.2 - 2 * 0.011)
    assert tracing_cost([], [0.01]) == 0.0
