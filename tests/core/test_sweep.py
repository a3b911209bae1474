"""End-to-end sweeps: real training children, real run files, real failures.

Each run starts a child that imports TensorFlow, so these tests keep models and data tiny.
"""

import math
import multiprocessing
import os
import signal
import threading

import h5py
import numpy as np
import psutil
import pytest
from batchlab.core.analysis.startup import one_time_costs
from batchlab.core.errors import SpecError
from batchlab.core.events import SKIPPED_MESSAGE
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.table import summary_rows

from tests.core.helpers import save_keras_model

HUGE_ACTIVATIONS_MODEL = """
inputs = keras.Input((28, 28, 1))
x = keras.layers.UpSampling2D(size=(100, 100))(inputs)
x = keras.layers.GlobalAveragePooling2D()(x)
model = keras.Model(inputs, keras.layers.Dense(10)(x))
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""

TINY = {"preset": "mnist-mlp", "samples": 256, "val_samples": 64, "epochs": 2, "device": "cpu"}


def _collect():
    events = []
    return events, events.append


def test_tiny_sweep_writes_a_complete_self_describing_file(tmp_path):
    spec = build_spec({**TINY, "batch_sizes": "32,256"})
    out = tmp_path / "sweep.h5"
    events, sink = _collect()
    status = run_sweep(spec, out, sink=sink)
    assert status == "complete"
    types = [e["type"] for e in events]
    assert types[0] == "sweep_started" and types[-1] == "sweep_ended"
    assert types.count("run_started") == 2 and types.count("run_ended") == 2

    record = read_run_file(out)
    assert record.status == "complete"
    assert record.spec["batch_sizes"] == [32, 256]
    assert record.environment["tensorflow_version"]
    assert [r.status for r in record.runs] == ["ok", "ok"]
    small, big = record.runs
    assert small.attrs["nice"] == os.getpriority(os.PRIO_PROCESS, 0)  # the CLI's children run at its priority
    # every step is recorded: 256 samples / 32 = 8 steps per epoch, 2 epochs
    assert small.steps["step"].tolist() == list(range(16))
    assert small.steps["epoch"].tolist() == [0] * 8 + [1] * 8
    assert big.steps["batch_size"].tolist() == [256, 256]
    assert np.all(np.isfinite(small.steps["loss"]))
    assert np.all(small.steps["step_time"] > 0) and np.all(small.steps["input_wait"] >= 0)
    assert np.all(np.diff(small.steps["wall_time"]) > 0)
    # per epoch: time split, losses, accuracy, throughput and memory
    epochs = small.epochs
    assert epochs["epoch"].tolist() == [0, 1]
    assert np.all(epochs["compute_time"] + epochs["input_wait_time"] <= epochs["epoch_time"] + 1e-6)
    assert np.all(epochs["rss_peak_bytes"] > 50 << 20)
    assert np.all((epochs["val_accuracy"] >= 0) & (epochs["val_accuracy"] <= 1))
    assert epochs["train_loss"][1] < epochs["train_loss"][0]  # it learns
    assert math.isclose(epochs["train_loss"][1], float(np.mean(small.steps["loss"][8:])), rel_tol=1e-5)
    assert small.final_loss == pytest.approx(epochs["train_loss"][-1])
    with h5py.File(out, "r") as f:
        assert f.attrs["format"] == "batchlab-sweep"
        assert f["runs/run_000/steps/step_time"].attrs["units"] == "s"


def test_out_of_memory_is_recorded_and_the_sweep_goes_on(tmp_path):
    # A real allocation failure on the CPU: upsampling 28x28 images 100x gives 31 MB per sample,
    # so a batch of 1024 asks for ~32 GB at once, more than this machine can ever map.
    model_file = tmp_path / "huge.keras"
    save_keras_model(HUGE_ACTIVATIONS_MODEL, model_file)
    spec = build_spec(
        {
            "preset": "keras-file",
            "model_file": str(model_file),
            "samples": 1024,
            "val_samples": 0,
            "epochs": 1,
            "batch_sizes": "1024",
            "seeds": "0,1",
            "device": "cpu",
        }
    )
    out = tmp_path / "oom.h5"
    assert run_sweep(spec, out) == "complete"
    record = read_run_file(out)
    assert [r.status for r in record.runs] == ["oom", "oom"]
    # never the process of a failed run: forked again from the fork server (Linux CPU)
    assert record.runs[1].attrs["child"] == "forked" and record.runs[1].attrs["pid"] != record.runs[0].attrs["pid"]
    assert "OOM when allocating" in record.runs[0].message
    rows = summary_rows(record)
    assert rows[1]["status"] == "oom"


def test_divergence_is_recorded_with_the_step_where_it_happened(tmp_path):
    spec = build_spec({**TINY, "optimizer": "sgd", "lr": "1e12", "epochs": 1, "val_samples": 0, "batch_sizes": "32"})
    out = tmp_path / "nan.h5"
    run_sweep(spec, out)
    run = read_run_file(out).runs[0]
    assert run.status == "diverged"
    assert "loss became" in run.message
    assert not np.isfinite(run.steps["loss"][-1])  # the step that went bad is kept


def test_a_killed_child_is_recorded_as_crashed_then_stop_interrupts_cleanly(tmp_path):
    spec = build_spec({**TINY, "samples": 2048, "epochs": 3, "batch_sizes": "8,16,32", "val_samples": 0})
    runner = SweepRunner(spec, niceness=3)  # as the window starts them: below its own CPU priority
    out = tmp_path / "crash.h5"
    seen = {}

    def sink(event):
        if event["type"] == "run_started":
            seen[event["run"]] = event["pid"]
        if event["type"] == "steps" and event["run"] == 0 and "killed" not in seen:
            seen["killed"] = True
            os.kill(seen[0], signal.SIGKILL)  # as the kernel's OOM killer would
        if event["type"] == "steps" and event["run"] == 1 and "stopped" not in seen:
            seen["stopped"] = True
            threading.Timer(0.3, runner.stop).start()  # as the GUI's Stop button would, from another thread

    status = run_sweep(spec, out, sink=sink, runner=runner)
    assert status == "interrupted"
    record = read_run_file(out)
    assert record.status == "interrupted"
    crashed, interrupted, skipped = record.runs
    assert crashed.status == "crashed" and "SIGKILL" in crashed.message
    assert "cuInit" not in crashed.message  # TensorFlow's start-up chatter on a CPU-only host is not the cause
    # on a Linux CPU every run is forked from the fork server: after the crash (the kernel's SIGKILL, as the
    # fork server reported it) the next run is forked again, and no process outlives the sweep (the server
    # is a multiprocessing child; the forked ones are the server's)
    assert crashed.attrs["child"] == interrupted.attrs["child"] == "forked"
    assert not multiprocessing.active_children()
    assert not any(psutil.pid_exists(seen[run]) for run in (0, 1))
    # a forked child pays its fork, the model build and the pipeline after its request, one after another (no
    # import, no data: the server's), then traces in its first step: no more than request to end of that step
    costs = one_time_costs(SweepData.from_file(out).runs[1])
    paid = ("startup_process_s", "startup_model_s", "startup_pipeline_s")
    assert all(costs.phases[name] > 0 for name in paid) and costs.tracing > 0 and costs.ahead == 0
    assert costs.phases["startup_import_s"] == costs.phases["startup_data_s"] == 0
    assert sum(costs.phases.values()) + costs.tracing <= costs.paid
    assert interrupted.status == "interrupted"
    assert interrupted.attrs["nice"] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 3)
    assert len(interrupted.steps["loss"]) > 0  # what was measured before the stop is kept
    assert skipped.status == "skipped" and skipped.message == SKIPPED_MESSAGE


def test_bad_data_fails_before_anything_runs_and_leaves_no_file(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.full((100, 4), np.nan, dtype="float32"), y_train=np.zeros(100, dtype="int64"))
    spec = build_spec({**TINY, "preset": "mlp", "data": str(bad), "samples": 50, "batch_sizes": "10"})
    out = tmp_path / "never.h5"
    with pytest.raises(SpecError) as e:
        run_sweep(spec, out)
    assert e.value.field == "data"
    assert not out.exists()


def test_overwrite_keeps_the_old_file_when_the_new_sweep_cannot_start(tmp_path):
    out = tmp_path / "old.h5"
    out.write_bytes(b"an earlier sweep")
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((10, 4), dtype="float32"))  # no labels for a classifier
    spec = build_spec({**TINY, "preset": "mlp", "data": str(bad), "samples": 10, "val_samples": 0, "batch_sizes": "5"})
    with pytest.raises(SpecError):
        run_sweep(spec, out, overwrite=True)
    assert out.read_bytes() == b"an earlier sweep"
