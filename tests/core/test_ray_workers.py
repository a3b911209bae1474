"""A run's MultiWorkerMirroredStrategy workers placed by Ray (`--workers 2 --ray local`,
core/sweep/ray_workers.py): on the one local test instance (tests/core/ray_session.py, 2 CPU slots, so one
2-worker run at a time) a 2-worker run trains the loss curve of one device at the same global batch and the
run file records its workers, their addresses and nodes; a worker lost mid-run (the test seam
BATCHLAB_TEST_WORKER_EXIT, core/training/faults.py, which a Ray sweep hands to its workers) gives a `crashed`
run naming it and its node, and the sweep goes on; Stop ends the chief after its step and the other worker is
cancelled; a cluster that cannot hold one run's workers is refused in
one line."""

from __future__ import annotations

import os

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.events import STEPS
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.ray_workers import RayWorkersLauncher
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.faults import INPUT_DELAY_ENV, WORKER_EXIT_ENV

from tests.core.ray_session import local_ray
from tests.core.test_multiworker import LOSS_TOLERANCE
from tests.core.test_multiworker import SPEC as LOCAL_SPEC

# The local two-worker test's run and tolerance (tests/core/test_multiworker.py: the all-reduce sums the workers'
# float32 shares in another order than one device sums the batch), here with the workers placed by Ray.
SPEC = {**LOCAL_SPEC, "ray": "local"}
LOST_AFTER_STEP = 3  # run 1's worker 1 exits after this step


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """{"two": workers 2 on Ray at batches 64 and 32 (run 1 loses worker 1), "one": one device at 64 (on this
    machine: a Ray worker it left behind would be the next Ray test's probe, not a fresh one)}."""
    local_ray()
    folder = tmp_path_factory.mktemp("ray-workers")
    two = build_spec({**SPEC, "batch_sizes": "64,32", "workers": 2})
    runner = SweepRunner(two, folder)
    assert isinstance(runner.launcher, RayWorkersLauncher)
    os.environ[WORKER_EXIT_ENV] = f"1:1:{LOST_AFTER_STEP}"  # handed to the Ray workers in their runtime environment
    try:
        status = run_sweep(two, folder / "two.h5", runner=runner)
    finally:
        del os.environ[WORKER_EXIT_ENV]
    one = build_spec({**SPEC, "batch_sizes": "64", "ray": ""})
    assert run_sweep(one, folder / "one.h5") == "complete"
    return {"two": read_run_file(folder / "two.h5"), "one": read_run_file(folder / "one.h5"), "status": status}


def test_two_workers_on_ray_train_the_loss_curve_of_one_device(sweeps):
    run, one = sweeps["two"].runs[0], sweeps["one"].runs[0]
    assert run.status == "ok", run.message
    # 251 samples at 64: 4 steps an epoch, the last of 59 split 29 + 30; the global batch is recorded
    assert list(run.steps["batch_size"]) == list(one.steps["batch_size"]) == [64, 64, 64, 59] * 2
    assert np.max(np.abs(run.steps["loss"] - one.steps["loss"])) < LOSS_TOLERANCE
    assert run.steps["loss"][-1] < run.steps["loss"][0] - 0.3  # it trained: the curve compared is not flat
    np.testing.assert_allclose(run.epochs["val_loss"], one.epochs["val_loss"], atol=1e-5)


def test_the_run_file_records_two_workers_their_addresses_and_nodes(sweeps):
    ray = local_ray()
    attrs = sweeps["two"].runs[0].attrs
    recorded = (attrs["strategy"], int(attrs["workers"]), int(attrs["replicas"]), int(attrs["per_replica_batch"]))
    assert recorded == ("MultiWorkerMirroredStrategy", 2, 2, 32)
    node = ray.nodes()[0]
    addresses = str(attrs["worker_addresses"]).split(",")
    assert len(set(addresses)) == 2  # two workers, each listening on a port of its own
    assert all(a.startswith(f"{node['NodeManagerAddress']}:") for a in addresses)  # the node Ray placed it on
    assert str(attrs["ray_nodes"]).split(",") == [node["NodeID"]] * 2  # one node here: PACK keeps them together
    assert attrs["ray_node"] == node["NodeID"]  # the chief's node, as any Ray run records it


def test_a_worker_lost_mid_run_crashes_its_run_names_it_and_the_sweep_goes_on(sweeps):
    assert sweeps["status"] == "complete" and sweeps["two"].status == "complete"
    lost = sweeps["two"].runs[1]
    assert lost.status == "crashed"
    address = str(lost.attrs["worker_addresses"]).split(",")[1]
    node_ip = local_ray().nodes()[0]["NodeManagerAddress"]
    assert lost.message.startswith(f"worker 1 of 2 ({address}) on node {node_ip} ("), lost.message
    assert "was lost mid-run" in lost.message and "\n" not in lost.message
    # what the chief streamed is kept: its steps up to step 3 (or 2 when worker 1 left before serving the end of
    # step 3's all-reduce); the epoch never ended
    steps = list(lost.steps["step"])
    assert steps == list(range(len(steps))) and LOST_AFTER_STEP <= len(steps) <= LOST_AFTER_STEP + 1
    assert len(lost.epochs["train_loss"]) == 0


def test_stop_ends_the_chief_after_its_step_and_cancels_the_other_worker(tmp_path, monkeypatch):
    ray = local_ray()
    monkeypatch.setenv(INPUT_DELAY_ENV, "0.3")  # every batch held up: the run still trains when the stop comes
    spec = build_spec({**SPEC, "val_samples": 0, "epochs": 4, "batch_sizes": "64,32", "workers": 2})
    runner = SweepRunner(spec, tmp_path)

    def sink(event):
        if event["type"] == STEPS:
            runner.stop()

    assert run_sweep(spec, tmp_path / "stopped.h5", sink=sink, runner=runner) == "interrupted"
    record = read_run_file(tmp_path / "stopped.h5")
    assert [r.status for r in record.runs] == ["interrupted", "skipped"]
    stopped = record.runs[0]
    assert stopped.message == "stopped by the user; measurements so far are kept"  # the chief ended by itself
    assert 1 <= len(stopped.steps["loss"]) < 16
    handles = runner.launcher.submitted
    assert len(handles) == 1  # the next run was never submitted
    ended, _ = ray.wait(handles[0].refs, num_returns=2, timeout=60)
    assert len(ended) == 2  # both workers' tasks are over: the chief's ended, the other's was cancelled


def test_a_cluster_that_cannot_hold_one_runs_workers_is_refused_in_one_line(tmp_path):
    local_ray()
    spec = build_spec({**SPEC, "samples": 240, "val_samples": 0, "batch_sizes": "48", "workers": 3})
    launcher = RayWorkersLauncher(spec, tmp_path)
    try:
        with pytest.raises(SpecError) as refused:
            launcher.prepare(spec.runs(), lambda: False)
    finally:
        launcher.close()
    assert refused.value.field == "workers"
    assert "each run's 3 workers ask for 1 CPU each and the cluster holds 2 such worker(s) at once" in str(
        refused.value
    )
    assert "\n" not in str(refused.value)
