"""Multi-worker runs (`workers`, core/sweep/multiworker.py, core/training/workers.py): two worker processes on
localhost under MultiWorkerMirroredStrategy train the loss curve of one device at the same global batch and the
run file says so; a worker lost mid-run gives a `crashed` run naming it and the sweep goes on; a stop ends every
process of the run; what cannot be combined with workers is refused in one line.

One sweep of two runs at workers 2 (run 0 trains; run 1 loses worker 1 after step 3 through the test seam,
core/training/faults.py) and one on one device, both in this process's scheduler (the training runs in spawned
children; this process never imports TensorFlow). The run's handle (WorkerGroup) is also driven with workers
that are plain processes, for what needs no TensorFlow: a stop, and a chief that never notices its lost worker."""

import json
import multiprocessing
import os
import time

import h5py
import numpy as np
import pytest
from batchlab.core.analysis.scaling import scaling_lines
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec, spec_errors
from batchlab.core.sweep import multiworker
from batchlab.core.sweep.multiworker import WorkerGroup, _Worker, free_ports, tf_config, worker_devices
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.faults import WORKER_EXIT_CODE, WORKER_EXIT_ENV

from tests.core.test_cli import assert_one_line_error, batchlab
from tests.core.test_scaling import _sweep

# Tolerance on each step's loss: the two workers' float32 shares are summed by a collective all-reduce in another
# order than one device sums the batch; measured max |difference| 2.4e-7 over 8 steps (mnist-mlp, 251 samples,
# batch 64, TF 2.21, as MirroredStrategy in tests/core/test_replicas.py, where unequal shares weighted equally
# (the last batch of 59: 29 + 30) differed by 2.7e-4: the tolerance tells the two apart).
LOSS_TOLERANCE = 2e-5
SPEC = {
    "preset": "mnist-mlp",
    "device": "cpu",
    "samples": 251,
    "val_samples": 64,
    "epochs": 2,
    "seeds": "0",
    "shuffle": False,
    "tf_threads": 1,
}
STEP_COLUMNS = ("step", "loss", "batch_size")
LOST_AFTER_STEP = 3  # run 1's worker 1 exits after this step


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """{"one": one device at batch 64, "two": workers 2 at batches 64 and 32 (run 1 loses worker 1)}."""
    folder = tmp_path_factory.mktemp("multiworker")
    for logs in ("one-logs", "logs"):
        (folder / logs).mkdir()
    one = build_spec({**SPEC, "batch_sizes": "64"})
    assert run_sweep(one, folder / "one.h5", runner=SweepRunner(one, folder / "one-logs")) == "complete"
    two = build_spec({**SPEC, "batch_sizes": "64,32", "workers": 2})
    os.environ[WORKER_EXIT_ENV] = f"1:1:{LOST_AFTER_STEP}"  # the workers inherit it when they start
    try:
        status = run_sweep(two, folder / "two.h5", runner=SweepRunner(two, folder / "logs"))
    finally:
        del os.environ[WORKER_EXIT_ENV]
    return {"one": folder / "one.h5", "two": folder / "two.h5", "status": status, "logs": folder / "logs"}


def _runs(path):
    with h5py.File(path, "r") as f:
        return [
            (dict(run.attrs), {k: run["steps"][k][:] for k in STEP_COLUMNS}, run["epochs"]["val_loss"][:])
            for run in f["runs"].values()
        ]


def test_two_workers_train_the_loss_curve_of_one_device(sweeps):
    (_, one, one_val), *_ = _runs(sweeps["one"])
    (attrs, two, two_val), *_ = _runs(sweeps["two"])
    assert attrs["status"] == "ok", attrs["message"]
    # 251 samples at 64: 4 steps an epoch, the last of 59 split 29 + 30; the global batch is recorded
    assert list(two["batch_size"]) == list(one["batch_size"]) == [64, 64, 64, 59] * 2
    assert np.max(np.abs(one["loss"] - two["loss"])) < LOSS_TOLERANCE
    assert two["loss"][-1] < two["loss"][0] - 0.3  # it trained: the curve compared is not a flat line
    # validation split over the workers (replication.evaluate) gives one device's validation loss
    assert np.allclose(one_val, two_val, atol=1e-5)


def test_run_file_records_the_workers(sweeps):
    (attrs, _, _), *_ = _runs(sweeps["two"])
    recorded = (attrs["strategy"], int(attrs["workers"]), int(attrs["replicas"]), int(attrs["per_replica_batch"]))
    assert recorded == ("MultiWorkerMirroredStrategy", 2, 2, 32)
    assert len(str(attrs["worker_addresses"]).split(",")) == 2
    (one, _, _), *_ = _runs(sweeps["one"])
    assert (one["strategy"], int(one["workers"]), int(one["replicas"])) == ("none", 1, 1)
    # only the chief's events are recorded; the other worker's output is kept in the sweep's log folder
    assert (sweeps["logs"] / "run_000.worker1.log").exists() and (sweeps["logs"] / "run_000.log").exists()


def test_a_lost_worker_crashes_its_run_and_the_sweep_goes_on(sweeps):
    assert sweeps["status"] == "complete"
    attrs, steps, _ = _runs(sweeps["two"])[1]
    assert attrs["status"] == "crashed"
    message = str(attrs["message"])
    assert message.startswith("worker 1 of 2 (localhost:") and f"code {WORKER_EXIT_CODE}" in message, message
    assert "lost mid-run" in message and "\n" not in message
    # the chief's steps so far are kept: up to step 3, or step 2 when worker 1 left before serving the last
    # part of step 3's all-reduce to the chief (a worker exits once its own share of the step is done)
    assert list(steps["step"]) == list(range(len(steps["step"])))
    assert LOST_AFTER_STEP <= len(steps["step"]) <= LOST_AFTER_STEP + 1


def test_tf_config_names_each_worker_and_the_chief_first():
    addresses = [f"localhost:{p}" for p in free_ports(3)]
    assert len(set(addresses)) == 3
    configs = [json.loads(tf_config(addresses, i)) for i in range(3)]
    assert all(c["cluster"] == {"worker": addresses} for c in configs)
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    with pytest.raises(ValueError):
        tf_config(addresses, 3)


def test_each_local_worker_gets_its_own_gpu():
    spec = build_spec({"batch_sizes": "64", "workers": 2})
    gpus = {
        "devices": [{"name": "cpu", "kind": "CPU"}, {"name": "gpu:0", "kind": "GPU"}, {"name": "gpu:3", "kind": "GPU"}]
    }
    assert worker_devices(spec, gpus, 2) == ["0", "3"]
    assert worker_devices(spec, {"devices": [{"name": "cpu", "kind": "CPU"}]}, 2) == [None, None]
    with pytest.raises(SpecError, match="2 workers on this machine need 2 GPUs"):
        worker_devices(spec, {"devices": gpus["devices"][:2]}, 2)


@pytest.mark.parametrize(
    "changes, phrase",
    [
        ({"batch_sizes": "48,50"}, "the global batch size 50 does not divide by 4 workers"),
        ({"replicas": 2}, "workers x replicas is not wired"),
        ({"parallel": "2"}, "leave parallel empty"),
        ({"loop": "fit"}, "fit engine"),
        ({"fused": 4}, "fused"),
        ({"accumulate": 2}, "accumulation"),
        ({"noise_scale_every": 5}, "MultiWorkerMirroredStrategy"),
        ({"device": "gpu:1"}, "worker i on GPU i"),
        ({"xla": True}, "XLA"),
        ({"samples": 258}, "258 samples at batch 64 leave a last batch of 2, fewer than the 4 workers"),
    ],
)
def test_what_cannot_run_on_workers_is_refused(changes, phrase):
    errors = spec_errors({"batch_sizes": "64", "workers": 4, **changes})
    assert set(errors) == {"workers"} and phrase in str(errors["workers"])


def test_workers_refusal_is_one_line():
    result = batchlab("sweep", "--workers", "2", "--batch-sizes", "33", "--samples", "64", "--epochs", "1")
    assert_one_line_error(result, "workers", "33 does not divide by 2")
    assert_one_line_error(batchlab("sweep", "--workers", "0"), "workers", "from 1")
    assert build_spec({}).workers == 1


def _fake_worker(index, conn, stop_flag, lose_after):
    """A worker without TensorFlow: run_started, then a step every 20 ms. The chief (0) ends "interrupted" at a
    stop and lingers; worker `lose_after[0]` sends an error line and exits with code 3 after step `lose_after[1]`;
    otherwise it steps on
    (as a chief on one host whose all-reduce waits for a worker lost on another host)."""
    conn.send({"type": "run_started", "run": 0})
    for step in range(100_000):
        if index == 0 and stop_flag.is_set():
            conn.send({"type": "run_ended", "run": 0, "status": "interrupted", "message": "stopped by the user"})
            time.sleep(60)
        if lose_after is not None and index == lose_after[0] and step > lose_after[1]:
            conn.send({"type": "log", "run": 0, "level": "error", "message": "Traceback: the last words"})
            os._exit(WORKER_EXIT_CODE)
        conn.send({"type": "steps", "run": 0, "step": [step]})
        time.sleep(0.02)


def _fake_group(tmp_path, lose_after=None):
    ctx = multiprocessing.get_context("spawn")
    stop, never = ctx.Event(), ctx.Event()
    workers = []
    for i in range(2):
        receiver, sender = ctx.Pipe(duplex=False)
        args = (i, sender, stop if i == 0 else never, lose_after)
        process = ctx.Process(target=_fake_worker, args=args, daemon=True)
        process.start()
        sender.close()
        workers.append(_Worker(i, f"localhost:{4000 + i}", process, receiver, tmp_path / f"worker{i}.log"))
    group = WorkerGroup(build_spec({"batch_sizes": "64", "workers": 2}).runs()[0], workers, stop)
    group.keep = never
    return group


def _events(group, seconds=60.0):
    """The chief's events until its run_ended or its end of file (the scheduler's view)."""
    events, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if group.poll(0.1):
                events.append(group.recv())
                if events[-1]["type"] == "run_ended":
                    return events
            elif not group.is_alive() and not group.poll(0):
                return events
        except EOFError:
            return events
    raise AssertionError(f"the run did not end in {seconds} s: {events[-3:]}")


def test_a_stop_ends_every_process_of_the_run(tmp_path):
    group = _fake_group(tmp_path)
    assert group.poll(30) and group.recv()["type"] == "run_started"
    group.stop()
    ended = _events(group)[-1]
    assert (ended["type"], ended["status"]) == ("run_ended", "interrupted")
    group.close(ended["status"])
    assert [w.process.exitcode for w in group.workers] == [-9, -9]  # the lingering chief and the waiting worker


def test_a_chief_waiting_for_a_lost_worker_is_ended(tmp_path, monkeypatch):
    monkeypatch.setattr(multiworker, "WORKER_LOST_GRACE_S", 0.5)
    group = _fake_group(tmp_path, lose_after=(1, 2))
    events = _events(group)
    assert events and all(e["type"] != "run_ended" for e in events)
    # its error line reaches the run's log, named; its steps do not (only the chief's are recorded)
    relayed = [e for e in events if e["type"] == "log"]
    assert [e["message"] for e in relayed] == ["worker 1 of 2 (localhost:4001): Traceback: the last words"]
    assert len([e for e in events if e["type"] == "steps"]) == len(
        {e["step"][0] for e in events if e["type"] == "steps"}
    )
    message = group.death_message()  # the scheduler asks at the chief's end of file
    assert message.startswith(
        f"worker 1 of 2 (localhost:4001) was lost mid-run: the training process exited "
        f"unexpectedly with code {WORKER_EXIT_CODE}"
    ), message
    group.close(None)
    assert group.workers[0].process.exitcode == -9


@pytest.mark.parametrize(
    "addresses, said",
    [("localhost:4000,localhost:4001", "(worker processes on one host: the replicas share"), ("a:1,b:1", None)],
)
def test_the_scaling_line_says_what_shared_the_cores(addresses, said):
    """Two workers on one CPU host compete for its cores (the line says so, not "logical CPU devices"); on two
    hosts they do not, and the longer step is the all-reduce and the waits."""
    data = _sweep([(1, 64, 0, 0.010), (2, 128, 0, 0.0125)])
    for run in data.ordered_runs():
        run.attrs["device"] = "cpu"
        if int(run.attrs.get("replicas", 1)) > 1:
            run.attrs.update(workers=2, strategy="MultiWorkerMirroredStrategy", worker_addresses=addresses)
    line = scaling_lines(data.ordered_runs())[0]
    assert line.startswith("2 replicas at per-replica batch 64")
    if said:
        assert "a step took 2.5 ms longer than one replica's " + said in line, line
    else:
        assert "(the all-reduce and the replicas' waits)" in line and "share" not in line, line
