"""Several runs at once on this machine (core/sweep/parallel_launcher.py): GPU slots without GPUs, a stop,
a crash, and the one-line refusals. Children here are real spawned processes running a fake entry (no
TensorFlow); the real CPU sweep is tests/core/test_parallel_sweep.py."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.events import make_event
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.parallel_launcher import NO_GPU, ParallelLauncher, gpu_ids
from batchlab.core.sweep.runner import SweepRunner, make_launcher, run_sweep

REPO = Path(__file__).resolve().parents[2]
SPEC = {"workload": "mlp", "batch_sizes": "16,32,64,128", "epochs": 1, "samples": 256}
TWO_GPUS = {
    "device_description": "gpu:0: fake GPU",
    "devices": [
        {"name": "cpu", "kind": "CPU", "description": "fake CPU"},
        {"name": "gpu:0", "kind": "GPU", "description": "fake GPU"},
        {"name": "gpu:1", "kind": "GPU", "description": "fake GPU"},
    ],
}
CPU = {"device_description": "cpu: fake CPU", "devices": [{"name": "cpu", "kind": "CPU", "description": "fake"}]}


def fake_child(run_dict, mode, conn, stop, log_path, niceness):
    """A training child that trains nothing: it reports the GPU it was shown, waits a moment (or until stopped,
    with mode "wait"; run 1 dies at once with mode "crash") and ends its run."""
    index = run_dict["index"]
    started = make_event(
        "run_started", run=index, batch_size=run_dict["batch_size"], seed=run_dict["seed"], epochs=1,
        steps_per_epoch=1, samples=256, pid=os.getpid(), device="fake",
        saw_gpus=os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)"),
    )  # fmt: skip
    conn.send(started)
    if mode == "crash" and index == 1:
        os._exit(3)
    # Each run waits until a second run has started (a marker file each, beside the logs), then 0.5 s more, so
    # that two runs are in flight together however slowly a loaded machine spawns the second child.
    here = Path(log_path).parent
    (here / f"started-{index}").touch()
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline and not stop.is_set():
        if mode != "wait" and len(list(here.glob("started-*"))) >= 2:
            time.sleep(0.5)
            break
        time.sleep(0.02)
    status = "interrupted" if stop.is_set() else "ok"
    conn.send(make_event("run_ended", run=index, status=status, message="stopped" if stop.is_set() else ""))


def _entry(mode):
    return lambda run: (fake_child, (run.to_dict(), mode))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _sweep(tmp_path, environment, mode="", on_event=None, **values):
    spec = build_spec({**SPEC, **values})
    launcher = ParallelLauncher(spec, tmp_path, entry=_entry(mode), environment_probe=lambda stop, data: environment)
    runner = SweepRunner(spec, launcher=launcher)
    seen, most, pids = SweepData(), [], {}

    def sink(event):
        seen.handle(event)
        most.append(len(seen.in_flight))
        if event["type"] == "run_started" and "visible_gpu" in event:  # who is in flight now, and where
            gpus = [seen.runs[i].attrs["visible_gpu"] for i in seen.in_flight]
            assert len(set(gpus)) == len(gpus), f"two runs in flight on one GPU: {gpus}"
            # every earlier run's process on this GPU had exited (and was reaped) before this run's started
            assert all(_gone(pid) for pid in pids.get(event["visible_gpu"], [])), "a GPU shared by two processes"
            pids.setdefault(event["visible_gpu"], []).append(event["pid"])
        if on_event is not None:
            on_event(event, seen, runner)

    status = run_sweep(spec, tmp_path / "sweep.h5", sink=sink, runner=runner)
    return status, read_run_file(tmp_path / "sweep.h5"), max(most)


def test_gpus_gives_each_run_one_gpu_of_its_own_and_records_it(tmp_path):
    status, record, most = _sweep(tmp_path, TWO_GPUS, parallel="gpus")
    assert status == "complete" and most == 2  # two runs were in flight at once
    for run in record.runs:
        assert run.status == "ok"
        assert run.attrs["saw_gpus"] == run.attrs["visible_gpu"]  # the child saw only the GPU recorded
        assert run.attrs["visible_gpu"] in ("0", "1") and run.attrs["runs_at_once"] == 2
        assert "shared_cores" not in run.attrs
    assert {run.attrs["visible_gpu"] for run in record.runs} == {"0", "1"}
    assert not [line for line in record.log if "mean little" in line]  # GPUs of their own: no warning


def test_parallel_n_on_gpus_takes_n_of_them(tmp_path):
    status, record, most = _sweep(tmp_path, TWO_GPUS, parallel="2")
    assert status == "complete" and most == 2
    assert {run.attrs["saw_gpus"] for run in record.runs} == {"0", "1"}


def test_a_stop_ends_every_run_in_flight_and_skips_the_rest(tmp_path):
    def stop_when_two_fly(event, seen, runner):
        if event["type"] == "run_started" and len(seen.in_flight) == 2:
            runner.stop()

    status, record, most = _sweep(tmp_path, CPU, mode="wait", on_event=stop_when_two_fly, parallel="2")
    assert status == "interrupted" and most == 2
    assert [run.status for run in record.runs] == ["interrupted", "interrupted", "skipped", "skipped"]
    assert not multiprocessing.active_children()  # every child exited and was reaped


def test_a_crashed_run_leaves_the_others_going(tmp_path):
    status, record, _ = _sweep(tmp_path, CPU, mode="crash", parallel="2")
    assert status == "complete"
    assert [run.status for run in record.runs] == ["ok", "crashed", "ok", "ok"]
    assert "exited unexpectedly with code 3" in record.runs[1].message


def test_cpu_runs_at_once_each_carry_the_warning_and_their_slot(tmp_path):
    status, record, _ = _sweep(tmp_path, CPU, parallel="2")
    assert status == "complete"
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)")  # the launcher sets nothing on a CPU
    for run in record.runs:
        assert (run.attrs["shared_cores"], run.attrs["runs_at_once"], run.attrs["saw_gpus"]) == (1, 2, inherited)
        assert run.attrs["slot"] in (0, 1)
        assert [line for line in record.log if f"[run {run.index}] run {run.index} trained at the same time" in line]
    assert len([line for line in record.log if "2 runs train at once" in line]) == 1  # the sweep's one warning


def test_more_slots_than_runs_train_as_many_at_once_as_there_are_runs(tmp_path):
    status, record, most = _sweep(tmp_path, CPU, parallel="4", batch_sizes="16,32")
    assert status == "complete" and most == 2
    assert [run.attrs["runs_at_once"] for run in record.runs] == [2, 2]
    assert [line for line in record.log if "parallel 4: 2 runs train at once" in line]
    assert [line for line in record.log if "[run 1] run 1 trained at the same time as up to 1 other run " in line]


@pytest.mark.parametrize(
    ("values", "environment", "message"),
    [
        ({"parallel": "gpus"}, CPU, NO_GPU),
        ({"parallel": "3"}, TWO_GPUS, "3 runs at once need 3 GPUs (two runs never share one) and TensorFlow sees 2"),
        ({"parallel": "gpus", "replicas": 2}, TWO_GPUS, "gpus with replicas 2: each run at once gets one GPU"),
        ({"parallel": "2", "device": "gpu:1"}, {**TWO_GPUS, "devices": TWO_GPUS["devices"][:2]}, "on one GPU"),
    ],
)
def test_runs_that_cannot_be_placed_are_refused_in_one_line(tmp_path, values, environment, message):
    spec = build_spec({**SPEC, **values})
    launcher = ParallelLauncher(spec, tmp_path, entry=_entry(""), environment_probe=lambda stop, data: environment)
    with pytest.raises(SpecError, match="parallel") as error:
        launcher.probe(lambda: False, None)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_make_launcher_picks_the_parallel_launcher(tmp_path):
    assert isinstance(make_launcher(build_spec({**SPEC, "parallel": "2"}), tmp_path), ParallelLauncher)


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    named = {"devices": [{"name": "gpu:2", "kind": "GPU"}, {"name": "gpu:3", "kind": "GPU"}]}
    assert gpu_ids(named) == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")  # UUIDs: the probe names them by position
    assert gpu_ids({"devices": [{"name": "gpu:0", "kind": "GPU"}, {"name": "gpu:1", "kind": "GPU"}]}) == [
        "GPU-aa",
        "GPU-bb",
    ]


def test_parallel_gpus_without_a_gpu_is_a_one_line_error_from_the_cli(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, str(REPO / "main.py"), "sweep", "--workload", "mlp", "--samples", "256"]
    command += ["--epochs", "1", "--batch-sizes", "16,32", "--parallel", "gpus", "--out", str(tmp_path / "x.h5")]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"batchlab: parallel: {NO_GPU}"
    assert "Traceback" not in result.stderr and not (tmp_path / "x.h5").exists()
