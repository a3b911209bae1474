"""The HDF5 run file: what the writer makes of the event stream, and what the reader gives back."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import batchlab.core
import h5py
import numpy as np
import pytest
from batchlab.core.batch_rules import BatchPlan
from batchlab.core.errors import SpecError
from batchlab.core.events import (
    EPOCH_COLUMNS,
    EPOCH_ENDED,
    EVAL_COLUMN_NAMES,
    EVAL_COLUMNS,
    EVALUATION,
    NOISE_SCALE,
    NOISE_SCALE_COLUMN_NAMES,
    NOISE_SCALE_COLUMNS,
    RUN_ENDED,
    RUN_FILE_STATUSES,
    RUN_STARTED,
    SKIPPED,
    SKIPPED_MESSAGE,
    STEP_COLUMNS,
    STEPS,
    SWEEP_ENDED,
    SWEEP_STARTED,
    log_event,
    make_event,
)
from batchlab.core.lr_rules import LrPlan
from batchlab.core.model import SweepData
from batchlab.core.runfile import FORMAT, FORMAT_VERSION, RunFileError, RunFileWriter
from batchlab.core.runfile.format import column_values
from batchlab.core.runfile.layout import STEP_CHUNK
from batchlab.core.runfile.reader import read_root_attrs, read_run_file, status_if_writer_gone
from batchlab.core.spec import SweepSpec
from batchlab.core.table import format_table, summary_rows
from batchlab.core.training.startup import StartupClock

REPO = Path(__file__).resolve().parents[2]
SPEC = SweepSpec(batch_sizes=(16, 64, 256), samples=1024, val_samples=256)
ENVIRONMENT = {
    "app_version": batchlab.core.__version__,
    "python_version": "3.11.9",
    "platform": "Linux-6.8-x86_64",
    "tensorflow_version": "2.17.0",
    "keras_version": "3.4.1",
    "cuda_version": "12.3",
    "cudnn_version": "8",
    "devices": [{"name": "/GPU:0", "kind": "GPU", "description": "NVIDIA H200", "memory_bytes": 150 << 30}],
    "device_description": "NVIDIA H200",
    "host": "lab-01",
}
MIB = 1 << 20
VAL_TIME = 0.05  # s, each epoch's validation pass


def sweep_started(spec: SweepSpec = SPEC) -> dict:
    runs = [{"index": r.index, "batch_size": r.batch_size, "seed": r.seed} for r in spec.runs()]
    return make_event(
        SWEEP_STARTED, spec=spec.to_dict(), runs=runs, environment=ENVIRONMENT, started="2024-05-01T10:00:00+00:00"
    )


def run_started(run: int, batch_size: int, steps_per_epoch: int, epochs: int = 2) -> dict:
    return make_event(
        RUN_STARTED,
        run=run,
        batch_size=batch_size,
        seed=0,
        pid=4242 + run,
        device="gpu:0",
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        samples=1024,
        started="2024-05-01T10:00:05+00:00",
    )


def steps(run: int, epoch: int, first_step: int, n: int, batch_size: int) -> dict:
    """n realistic step rows: a falling loss, ~2 ms steps (2.1 ms apart), small input waits; wall_time counts
    the validation passes of the epochs before (64 steps per epoch, as run 0 has)."""
    idx = np.arange(first_step, first_step + n)
    return make_event(
        STEPS,
        run=run,
        step=idx.tolist(),
        epoch=[epoch] * n,
        loss=(1.0 / (1.0 + 0.01 * idx)).tolist(),
        batch_size=[batch_size] * n,
        step_time=(0.002 + 1e-5 * idx).tolist(),
        input_wait=[0.0001] * n,
        wall_time=(0.0021 * (idx + 1) + VAL_TIME * epoch).tolist(),
    )


def epoch_ended(run: int, epoch: int, **overrides) -> dict:
    values = {
        "epoch": epoch,
        "epoch_time": 0.5 + epoch,
        "compute_time": 0.45 + epoch,
        "input_wait_time": 0.01,
        "train_loss": 0.8 - 0.1 * epoch,
        "train_accuracy": math.nan,
        "val_loss": 0.85 - 0.1 * epoch,
        "val_accuracy": math.nan,
        "val_time": VAL_TIME,
        "samples_per_s": 2048.0 - 100 * epoch,
        "tf_peak_bytes": (40 + epoch) * MIB,
        "device_memory_bytes": 900 * MIB,
        "rss_peak_bytes": 1500 * MIB,
        "wall_time": (0.0021 * 64 + VAL_TIME) * (epoch + 1),
    }
    values.update(overrides)
    return make_event(EPOCH_ENDED, run=run, **values)


def full_sweep() -> list[dict]:
    """Run 0 trains two epochs (ok); run 1 runs out of memory in epoch 0; run 2 crashes before its first epoch ends."""
    events = [sweep_started(), log_event("info", "sweep of 3 runs")]
    events += [run_started(0, 16, steps_per_epoch=64), steps(0, 0, 0, 40, 16), steps(0, 0, 40, 24, 16)]
    events += [epoch_ended(0, 0), steps(0, 1, 64, 64, 16), epoch_ended(0, 1)]
    events.append(
        make_event(
            RUN_ENDED,
            run=0,
            status="ok",
            message="",
            ended="2024-05-01T10:00:09+00:00",
            final_loss=0.7,
            total_time=1.2,
            samples_per_s=1850.0,
        )
    )
    events += [run_started(1, 64, steps_per_epoch=16), steps(1, 0, 0, 3, 64)]
    events.append(log_event("warning", "out of memory at batch size 64", run=1))
    events.append(
        make_event(RUN_ENDED, run=1, status="oom", message="OOM when allocating tensor with shape [64,784]", ended="x")
    )
    events += [run_started(2, 256, steps_per_epoch=4), steps(2, 0, 0, 2, 256)]
    events.append(
        make_event(
            RUN_ENDED,
            run=2,
            status="crashed",
            message="the training process died (exit code -11, SIGSEGV)\nsee run_002.log",
            ended="2024-05-01T10:00:20+00:00",
        )
    )
    events.append(make_event(SWEEP_ENDED, status="complete", message="3 runs", ended="2024-05-01T10:00:21+00:00"))
    return events


def write(path: Path, events: list[dict]) -> Path:
    with RunFileWriter(path) as writer:
        for event in events:
            writer.handle(event)
    return path


# ---------------------------------------------------------------------- writing


def test_full_sweep_round_trip(tmp_path):
    events = full_sweep()
    record = read_run_file(write(tmp_path / "sweep.h5", events))

    assert record.attrs["format"] == FORMAT == "batchlab-sweep"
    assert record.attrs["format_version"] == FORMAT_VERSION == 1
    assert record.attrs["app_version"] == batchlab.core.__version__
    assert record.attrs["created"] <= record.attrs["updated"]
    assert record.attrs["started"] == "2024-05-01T10:00:00+00:00"
    assert record.attrs["ended"] == "2024-05-01T10:00:21+00:00"
    assert (record.status, record.message) == ("complete", "3 runs")
    assert record.spec == json.loads(json.dumps(SPEC.to_dict()))
    assert record.environment == ENVIRONMENT
    for key in ("tensorflow_version", "cuda_version", "cudnn_version", "device_description", "host"):
        assert record.attrs[key] == ENVIRONMENT[key]
    assert "devices" not in record.attrs  # not a string: only in the environment JSON

    assert [(r.index, r.batch_size, r.seed, r.status) for r in record.runs] == [
        (0, 16, 0, "ok"),
        (1, 64, 0, "oom"),
        (2, 256, 0, "crashed"),
    ]
    ok = record.runs[0]
    assert ok.attrs["pid"] == 4242 and ok.attrs["device"] == "gpu:0"
    assert (ok.attrs["steps_per_epoch"], ok.attrs["epochs"], ok.attrs["samples"]) == (64, 2, 1024)
    assert ok.attrs["started"] == "2024-05-01T10:00:05+00:00"
    assert ok.attrs["ended"] == "2024-05-01T10:00:09+00:00"
    assert (ok.attrs["final_loss"], ok.attrs["total_time"], ok.attrs["samples_per_s"]) == (0.7, 1.2, 1850.0)
    # the figures follow the model's rules: last epoch's train_loss, run_ended's time, steady-state steps
    assert ok.final_loss == pytest.approx(0.7) and ok.total_time == 1.2
    assert ok.samples_per_s == pytest.approx(16 / 0.0021)  # epoch 1's steps: 16 samples every 2.1 ms

    sent = [e for e in events if e["type"] == STEPS and e["run"] == 0]
    for c in STEP_COLUMNS:
        expected = np.concatenate([column_values(c, e.get(c.name), len(e["step"])) for e in sent])
        np.testing.assert_array_equal(ok.steps[c.name], expected)
        assert ok.steps[c.name].dtype == np.dtype(c.dtype)
    assert len(ok.steps["step"]) == 128
    sent_epochs = [e for e in events if e["type"] == EPOCH_ENDED and e["run"] == 0]
    for c in EPOCH_COLUMNS:
        expected = np.concatenate([column_values(c, [e.get(c.name)], 1) for e in sent_epochs])
        np.testing.assert_array_equal(ok.epochs[c.name], expected)

    oom = record.runs[1]
    assert oom.message.startswith("OOM when allocating")
    assert len(oom.steps["loss"]) == 3 and all(len(v) == 0 for v in oom.epochs.values())
    assert oom.final_loss == pytest.approx(np.mean(oom.steps["loss"])) and oom.peak_memory_bytes == -1
    assert record.log[0].endswith(" info sweep of 3 runs")
    assert record.log[1].endswith(" warning [run 1] out of memory at batch size 64")


def test_file_explains_itself_to_plain_h5py(tmp_path):
    path = write(tmp_path / "sweep.h5", full_sweep())
    with h5py.File(path, "r") as f:
        run = f["runs/run_000"]
        for table, columns, chunk in (("steps", STEP_COLUMNS, STEP_CHUNK), ("epochs", EPOCH_COLUMNS, 64)):
            group = run[table]
            assert [str(n) for n in group.attrs["columns"]] == [c.name for c in columns]
            for c in columns:
                ds = group[c.name]
                assert ds.attrs["units"] == c.units and ds.attrs["long_name"] == c.long_name
                assert ds.dtype == np.dtype(c.dtype)
                assert (ds.compression, ds.compression_opts, ds.shuffle) == ("gzip", 4, True)
                assert ds.maxshape == (None,) and ds.chunks == (chunk,)
        assert f["log"].dtype.kind == "O"
        assert f.attrs["status"] == "complete"


def test_missing_optional_values_are_written_as_nan_or_minus_one(tmp_path):
    incomplete = epoch_ended(0, 0)
    for key in ("val_loss", "tf_peak_bytes", "device_memory_bytes"):
        del incomplete[key]
    incomplete["rss_peak_bytes"] = None
    partial_steps = steps(0, 0, 0, 4, 16)
    del partial_steps["input_wait"]
    partial_steps["batch_size"] = [16, None, 16, 16]
    events = [sweep_started(), run_started(0, 16, 4), partial_steps, incomplete]
    events.append(make_event(RUN_STARTED, run=1))  # nothing but the run index
    run0, run1 = read_run_file(write(tmp_path / "sweep.h5", events)).runs[:2]

    assert math.isnan(run0.epochs["val_loss"][0])
    assert run0.epochs["tf_peak_bytes"][0] == run0.epochs["device_memory_bytes"][0] == -1
    assert run0.epochs["rss_peak_bytes"][0] == -1 and run0.peak_memory_bytes == -1
    assert np.isnan(run0.steps["input_wait"]).all()
    np.testing.assert_array_equal(run0.steps["batch_size"], [16, -1, 16, 16])
    assert run1.attrs["pid"] == run1.attrs["epochs"] == run1.attrs["steps_per_epoch"] == -1
    assert run1.attrs["device"] == ""


def test_unknown_events_are_ignored_and_planned_runs_end_skipped(tmp_path):
    events = [sweep_started(), {"type": "gpu_temperature", "celsius": 71}, {"no_type": True}]
    events.append(make_event(SWEEP_ENDED, status="interrupted", message="stopped by the user", ended="t"))
    record = read_run_file(write(tmp_path / "sweep.h5", events))
    assert [r.status for r in record.runs] == [SKIPPED] * 3  # the sweep ended before any run started
    assert all(r.steps == {} and r.epochs == {} for r in record.runs)
    assert record.status == "interrupted"


def test_refuses_to_overwrite_unless_asked(tmp_path):
    path = write(tmp_path / "sweep.h5", full_sweep())
    with pytest.raises(SpecError) as info:
        RunFileWriter(path)
    assert info.value.field == "out"
    assert str(path) in info.value.message and "--overwrite" in info.value.message
    assert read_run_file(path).status == "complete"  # untouched

    write_over = RunFileWriter(path, overwrite=True)
    write_over.handle(sweep_started(SweepSpec(batch_sizes=(8,), samples=64, val_samples=0)))
    write_over.close()
    record = read_run_file(path)
    assert [r.batch_size for r in record.runs] == [8] and record.status == "interrupted"


@pytest.mark.parametrize("name", ["sweep.txt", "sweep", "sweep.h5.bak"])
def test_refuses_a_name_that_is_not_hdf5(tmp_path, name):
    with pytest.raises(SpecError) as info:
        RunFileWriter(tmp_path / name)
    assert info.value.field == "out" and ".h5" in info.value.message
    assert not (tmp_path / name).exists()


def test_refuses_a_location_it_cannot_write(tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("x")
    with pytest.raises(SpecError) as info:
        RunFileWriter(tmp_path / "missing" / "sweep.h5")
    assert info.value.field == "out" and "does not exist" in info.value.message
    with pytest.raises(SpecError) as info:
        RunFileWriter(not_a_folder / "sweep.h5")
    assert info.value.field == "out" and str(not_a_folder / "sweep.h5") in info.value.message


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that file permissions apply to")
def test_refuses_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(SpecError) as info:
            RunFileWriter(folder / "sweep.h5")
        assert info.value.field == "out" and "Permission denied" in info.value.message
    finally:
        folder.chmod(0o755)


def test_close_marks_running_runs_interrupted(tmp_path):
    path = tmp_path / "sweep.h5"
    writer = RunFileWriter(path)
    for event in [sweep_started(), run_started(0, 16, 64), steps(0, 0, 0, 10, 16)]:
        writer.handle(event)
    writer.close()
    writer.close()  # twice is harmless
    with pytest.raises(RuntimeError):
        writer.handle(steps(0, 0, 10, 1, 16))

    record = read_run_file(path)
    assert [r.status for r in record.runs] == ["interrupted", "pending", "pending"]
    assert record.runs[0].message == "sweep ended before this run finished"
    assert len(record.runs[0].steps["step"]) == 10  # close() flushes the steps too
    assert record.status == "interrupted"


def test_runs_the_sweep_never_reached_are_skipped_in_the_file_the_model_and_the_table(tmp_path):
    """Stop after the first run: the two runs never started read "skipped", not "pending", everywhere."""
    path = tmp_path / "stopped.h5"
    events = [sweep_started(), run_started(0, 16, 64), steps(0, 0, 0, 64, 16), epoch_ended(0, 0)]
    events.append(make_event(RUN_ENDED, run=0, status="ok", message="", final_loss=0.8, total_time=1.0))
    events.append(make_event(SWEEP_ENDED, status="interrupted", message="stopped by the user"))
    live = SweepData()
    with RunFileWriter(path) as writer:
        for event in events:
            writer.handle(event)
            live.handle(event)
    record = read_run_file(path)
    assert [(r.status, r.message) for r in record.runs[1:]] == [(SKIPPED, SKIPPED_MESSAGE)] * 2
    assert [r.status for r in live.ordered_runs()] == [r.status for r in record.runs] == ["ok", SKIPPED, SKIPPED]
    rows = summary_rows(record)  # what `batchlab report` prints
    assert [(r["status"], r["message"]) for r in rows] == [(r["status"], r["message"]) for r in summary_rows(live)]
    assert format_table(rows).count("skipped") == 2 and SKIPPED_MESSAGE in format_table(rows)
    assert SKIPPED in RUN_FILE_STATUSES


def test_reader_sees_flushed_data_while_the_writer_is_open(tmp_path):
    path = tmp_path / "sweep.h5"
    with RunFileWriter(path) as writer:
        for event in [sweep_started(), run_started(0, 16, 64), steps(0, 0, 0, 64, 16), epoch_ended(0, 0)]:
            writer.handle(event)
        live = read_run_file(path)
        assert live.status == "running" and live.runs[0].status == "running"
        assert len(live.runs[0].steps["step"]) == 64 and live.runs[0].epochs["epoch"].tolist() == [0]
        writer.handle(epoch_ended(0, 1))  # the writer carries on after a reader came and went
        assert read_run_file(path).runs[0].epochs["epoch"].tolist() == [0, 1]


def test_a_killed_writer_leaves_a_readable_file(tmp_path):
    path = tmp_path / "killed.h5"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_runfile import sweep_started, run_started, steps, epoch_ended
        from batchlab.core.runfile import RunFileWriter
        writer = RunFileWriter({str(path)!r})
        for event in [sweep_started(), run_started(0, 16, 64), steps(0, 0, 0, 64, 16), epoch_ended(0, 0)]:
            writer.handle(event)
        writer.handle(steps(0, 1, 64, 5, 16))  # not flushed: may or may not survive
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr

    record = read_run_file(path)  # opens without h5clear
    assert record.status == "running"
    run = record.runs[0]
    assert run.status == "running" and status_if_writer_gone(run.status) == "interrupted"
    assert run.epochs["epoch"].tolist() == [0] and run.epochs["train_loss"].tolist() == [0.8]
    assert len(run.steps["step"]) >= 64
    rows = summary_rows(record, writer_gone=True)
    assert rows[0]["status"] == "interrupted" and rows[0]["final_loss"] == 0.8
    assert [r["status"] for r in rows[1:]] == ["pending", "pending"]


# ---------------------------------------------------------------------- reading bad input


def _assert_file_error(path: Path, *words: str) -> None:
    with pytest.raises(RunFileError) as info:
        read_run_file(path)
    assert isinstance(info.value, SpecError) and info.value.field == "file"
    message = info.value.message
    assert str(path) in message and "\n" not in message
    for word in words:
        assert word in message


def test_root_attributes_alone_are_the_whole_files(tmp_path):
    """The window asks a file's mode (lr-find or sweep) from its root attributes, without reading its runs."""
    path = write(tmp_path / "sweep.h5", full_sweep())
    assert read_root_attrs(path) == read_run_file(path).attrs
    assert read_root_attrs(path)["format"] == FORMAT
    text = tmp_path / "notes.h5"
    text.write_text("batch,loss\n16,0.5\n")
    with pytest.raises(RunFileError, match="not an HDF5 file"):
        read_root_attrs(text)


def test_reading_files_that_are_not_run_files(tmp_path):
    _assert_file_error(tmp_path / "missing.h5", "does not exist")
    _assert_file_error(tmp_path, "not a file")
    text = tmp_path / "notes.h5"
    text.write_text("batch,loss\n16,0.5\n")
    _assert_file_error(text, "not an HDF5 file")

    other = tmp_path / "weights.h5"
    with h5py.File(other, "w") as f:
        f["kernel"] = np.zeros(3)
    _assert_file_error(other, "not a BatchLab run file", "format='batchlab-sweep'")

    newer = write(tmp_path / "newer.h5", full_sweep())
    with h5py.File(newer, "r+") as f:
        f.attrs["format_version"] = FORMAT_VERSION + 1
    _assert_file_error(newer, "format version 2", "update BatchLab")

    with h5py.File(newer, "r+") as f:
        del f.attrs["format_version"]
    _assert_file_error(newer, "format_version")


# ---------------------------------------------------------------------- summary


def test_peak_memory_prefers_the_tensorflow_allocator_then_the_device_then_host_rss(tmp_path):
    events = [sweep_started(), epoch_ended(0, 0), epoch_ended(0, 1)]
    events.append(epoch_ended(1, 0, tf_peak_bytes=-1))
    events.append(epoch_ended(2, 0, tf_peak_bytes=-1, device_memory_bytes=-1))
    runs = read_run_file(write(tmp_path / "sweep.h5", events)).runs
    assert (runs[0].peak_memory_source, runs[0].peak_memory_bytes) == ("tf_peak_bytes", 41 * MIB)
    assert (runs[1].peak_memory_source, runs[1].peak_memory_bytes) == ("device_memory_bytes", 900 * MIB)
    assert (runs[2].peak_memory_source, runs[2].peak_memory_bytes) == ("rss_peak_bytes", 1500 * MIB)


def test_summary_rows_and_table_for_ok_oom_and_crashed_runs(tmp_path):
    record = read_run_file(write(tmp_path / "sweep.h5", full_sweep()))
    rows = summary_rows(record)
    assert [(r["index"], r["batch_size"], r["seed"], r["status"]) for r in rows] == [
        (0, 16, 0, "ok"),
        (1, 64, 0, "oom"),
        (2, 256, 0, "crashed"),
    ]
    assert rows[0]["final_loss"] == pytest.approx(0.7) and rows[0]["total_time"] == 1.2
    assert rows[0]["samples_per_s"] == pytest.approx(16 / 0.0021)
    assert (rows[0]["first_epoch_peak_bytes"], rows[0]["steady_peak_bytes"]) == (40 * MIB, 41 * MIB)
    assert rows[0]["peak_memory_bytes"] == 41 * MIB and rows[0]["message"] == ""
    assert rows[1]["final_loss"] == pytest.approx(np.mean(1 / (1 + 0.01 * np.arange(3))))  # steps of epoch 0
    assert rows[1]["peak_memory_bytes"] == -1 and math.isnan(rows[1]["samples_per_s"]) is False

    lines = format_table(rows).splitlines()
    assert lines[0].split("  ")[:3] == ["batch", "seed", "final loss"]
    assert lines[0].endswith("mem 1st epoch (MiB)  mem steady (MiB)  status")
    assert lines[1].split() == ["16", "0", "0.7", "1.2", "7619", "-", "40.0", "41.0", "ok"]
    assert lines[2].split()[:8] == ["64", "0", "0.9902", "0.0", "30476", "-", "-", "-"]
    assert lines[2].split(None, 8)[8] == "oom: OOM when allocating tensor with shape [64,784]"
    assert lines[3].split(None, 8)[8] == "crashed: the training process died (exit code -11, SIGSEGV)"
    assert len(lines) == 4
    header_end = lines[0].index("status")
    assert all(line[header_end - 1] == " " != line[header_end] for line in lines[1:])  # status column lines up


# ---------------------------------------------------------------------- self-description


def test_log_exists_from_the_start_even_when_nothing_was_logged(tmp_path):
    path = tmp_path / "quiet.h5"
    with RunFileWriter(path):
        with h5py.File(path, "r", locking=False) as f:
            assert f["log"].shape == (0,) and f["log"].attrs["units"] == ""
    assert read_run_file(path).log == []


def test_unknown_scalar_run_fields_are_kept_as_run_attributes(tmp_path):
    start = run_started(0, 16, 4)
    start.update(engine="fit", sync="sampled", fetch_overhead_s=0.00033, jit=True, layers=[1, 2], note=None)
    end = make_event(RUN_ENDED, run=0, status="ok", message="", ended="t", tracing_time_s=0.91, index=99)
    attrs = read_run_file(write(tmp_path / "sweep.h5", [sweep_started(), start, end])).runs[0].attrs
    assert (attrs["engine"], attrs["sync"], attrs["fetch_overhead_s"]) == ("fit", "sampled", 0.00033)
    assert attrs["jit"] == 1 and attrs["tracing_time_s"] == 0.91
    assert "layers" not in attrs and "note" not in attrs  # only scalars; None means "not given"
    assert attrs["index"] == 0  # the writer's own attributes are not overwritten


def _datasets(f: h5py.File) -> dict[str, h5py.Dataset]:
    found = {}

    def visit(name: str, obj) -> None:  # returning anything but None would stop the walk
        if isinstance(obj, h5py.Dataset):
            found[name] = obj

    f.visititems(visit)
    return found


def test_nexus_tags_let_generic_viewers_plot_the_tables(tmp_path):
    path = write(tmp_path / "sweep.h5", full_sweep())
    with h5py.File(path, "r") as f:
        assert f.attrs["NX_class"] == "NXroot" and f["runs"].attrs["NX_class"] == "NXcollection"
        for run in f["runs"].values():
            assert run.attrs["NX_class"] == "NXentry"
            assert run.attrs["default"] in run and run[run.attrs["default"]].attrs["NX_class"] == "NXdata"
            for table, signal, axes in (("steps", "loss", "step"), ("epochs", "train_loss", "epoch")):
                group = run[table]
                assert group.attrs["NX_class"] == "NXdata"
                assert (group.attrs["signal"], group.attrs["axes"]) == (signal, axes)
                assert group[signal].shape == group[axes].shape  # the signal plots against its axis
        assert f["runs/run_000/steps/loss"].shape == (128,) and f["runs/run_000/epochs/train_loss"].shape == (2,)
        datasets = _datasets(f)
        assert "log" in datasets and len(datasets) == 1 + 3 * (len(STEP_COLUMNS) + len(EPOCH_COLUMNS))
        for name, ds in datasets.items():
            assert isinstance(ds.attrs["units"], str) and ds.attrs["long_name"], name


# ---------------------------------------------------------------------- the format document

DOC = REPO / "docs" / "runfile-format.md"


def _doc_tables() -> dict[str, dict[str, str]]:
    """Every markdown table of the format document: heading -> {name in backticks: second cell}."""
    tables: dict[str, dict[str, str]] = {}
    heading = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            for name in cells[0].split(","):
                tables.setdefault(heading, {})[name.strip().strip("`")] = cells[1]
    return tables


def _doc_table(tables: dict[str, dict[str, str]], starts: str) -> dict[str, str]:
    matches = [rows for heading, rows in tables.items() if heading.startswith(starts)]
    assert len(matches) == 1, f"docs/runfile-format.md needs one table under a heading '{starts}...'"
    return matches[0]


def _attr_type(value) -> str:
    """An attribute's type as the document writes it."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, np.ndarray):
        return "string array" if value.dtype.kind == "O" else f"{value.dtype} array"
    return str(np.asarray(value).dtype)


def _assert_attrs_documented(attrs, documented: dict[str, str], where: str) -> None:
    found = {name: _attr_type(value) for name, value in attrs.items()}
    assert set(found) == set(documented), f"{where}: file-only {set(found) - set(documented)}, doc-only " + str(
        set(documented) - set(found)
    )
    for name, kind in found.items():
        assert documented[name].split(",")[0] == kind, f"{where} attribute {name}: file {kind}, doc {documented[name]}"


def documented_sweep() -> list[dict]:
    """full_sweep() with every run field the trainer sends, so the file has every documented name."""
    events = full_sweep()
    for event in events:
        if event["type"] == RUN_STARTED:
            event.update(nice=0, engine="loop", sync="every_step", fetch_overhead_s=0.0003)
            event.update(flops_per_sample=6.0e5, forward_flops_per_sample=2.0e5, flops_uncounted="")
            event.update(accumulation_steps=1, effective_batch_size=event["batch_size"])
            event.update(steps_per_call=1, step_timing="per step", xla=0, precision="float32", xla_choice="off")
            event.update(tf_threads=0)  # TensorFlow's threads as it reports them (execution_fields)
            event.update(strategy="none", replicas=1, per_replica_batch=event["batch_size"])  # replication_fields
            event.update(workers=1, worker_addresses="localhost:1,localhost:2", cluster_join_s=0.5)  # --workers
            event.update(slot=0, runs_at_once=2, shared_cores=1, visible_gpu="0")  # --parallel's placement
            event.update(ray_node="6de08370", ray_node_ip="192.0.2.2", ray_host="vm", ray_nodes="6de08370,6de08370")
            event.update(planned_steps=128, budget="2 epochs", target="val_accuracy=0.9", eval_every=32)
            event.update(rss_before_training_bytes=600 << 20)
            event.update(lr=0.001)
            plan = LrPlan(0.01, 0.04, 12, "step", 120, 0.1, 24, 2, "linear", 16)
            event.update(plan.attrs())  # a spec with a learning rate records its rate plan
            event.update(BatchPlan("grow", event["batch_size"], 2.0, 1, 64).attrs())  # and a batch schedule its plan
            event.update(task="classification", targets="class indices")
            event.update(noise_scale_every=20, noise_scale_parts=4)
            event.update(StartupClock(launched_at=time.time() - 1.0).fields())  # child kind and start-up phases
        if event["type"] == RUN_ENDED:
            event.update(tracing_time_s=0.8)
            # the time account's measurements (HookList, GcWatch)
            event.update(run_span_s=2.5, hooks_run_begin_s=0.01, hooks_step_s=0.05, hooks_epoch_s=0.02)
            event.update(gc_time_s=0.03, gc_max_s=0.01, last_close_time_s=0.0)
    evaluation = {name: 1 for name in EVAL_COLUMN_NAMES}
    events.insert(4, make_event(EVALUATION, run=0, **evaluation))  # run 0 evaluates (a target), after its steps
    noise = {name: [1] for name in NOISE_SCALE_COLUMN_NAMES}
    events.insert(5, make_event(NOISE_SCALE, run=0, **noise))  # run 0 measures the gradient noise scale
    return events


def test_format_document_names_exactly_what_a_fresh_file_holds(tmp_path):
    """docs/runfile-format.md and a fresh file agree on every group, dataset and attribute, and their types."""
    tables = _doc_tables()
    path = write(tmp_path / "sweep.h5", documented_sweep())
    with h5py.File(path, "r") as f:
        assert set(f) == {"log", "runs"}
        _assert_attrs_documented(f.attrs, _doc_table(tables, "Root attributes"), "/")
        _assert_attrs_documented(f["runs"].attrs, _doc_table(tables, "The `runs` group"), "/runs")
        run = f["runs/run_000"]
        assert set(run) == {"steps", "epochs", "evals", "noise_scale"}
        _assert_attrs_documented(run.attrs, _doc_table(tables, "Run attributes"), "/runs/run_000")
        tables_and_headings = (("steps", "`steps/`"), ("epochs", "`epochs/`"), ("evals", "`evals/`"))
        for table, heading in (*tables_and_headings, ("noise_scale", "`noise_scale/`")):
            group = run[table]
            _assert_attrs_documented(group.attrs, _doc_table(tables, "Table groups"), group.name)
            columns = {name: str(ds.dtype) for name, ds in group.items()}
            assert columns == _doc_table(tables, heading), f"{group.name}: columns differ from the document"
        for name, ds in _datasets(f).items():
            _assert_attrs_documented(ds.attrs, _doc_table(tables, "Dataset attributes"), name)
    # the column tables also say what core/events.py says, units and meaning included
    text = DOC.read_text(encoding="utf-8")
    for column in (*STEP_COLUMNS, *EPOCH_COLUMNS, *EVAL_COLUMNS, *NOISE_SCALE_COLUMNS):
        row = f"| `{column.name}` | {column.dtype} | {column.units or '—'} | {column.long_name} |"
        assert row in text, f"docs/runfile-format.md lacks the row {row}"


def test_compiled_metrics_are_a_per_run_group_one_value_per_epoch(tmp_path):
    events = full_sweep()
    epochs = [e for e in events if e["type"] == EPOCH_ENDED and e["run"] == 0]
    assert len(epochs) >= 2
    epochs[0]["metrics"] = {"train_mae": 0.5, "val_mae": 0.75}
    epochs[1]["metrics"] = {"train_mae": 0.25, "train_auc": 0.9}  # no validation; a metric appears late
    path = write(tmp_path / "metrics.h5", events)
    run = read_run_file(path).runs[0]
    assert set(run.metrics) == {"train_mae", "val_mae", "train_auc"}
    assert run.metrics["train_mae"].tolist() == [0.5, 0.25]
    assert run.metrics["val_mae"][0] == 0.75 and np.isnan(run.metrics["val_mae"][1])
    assert np.isnan(run.metrics["train_auc"][0]) and run.metrics["train_auc"][1] == 0.9
    with h5py.File(path, "r") as f:
        ds = f["runs/run_000/metrics/val_mae"]
        assert ds.attrs["units"] == "" and "validation data" in ds.attrs["long_name"]
    assert read_run_file(path).runs[1].metrics == {}
