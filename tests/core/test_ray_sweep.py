"""A sweep on a local Ray instance (core/sweep/ray_launcher.py) gives the file the same sweep gives one run at a
time on this machine, plus the node each run trained on. Two tiny 4-run sweeps shared by the tests: one through
Ray (2 CPU slots, the one instance of tests/core/ray_session.py), one with the local launcher."""

from __future__ import annotations

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.ray_launcher import RayLauncher
from batchlab.core.sweep.runner import SweepRunner, run_sweep

from tests.core.ray_session import TINY_RAY, local_ray

BATCH_SIZES = "16,32,64,128"
# The same run trains the same numbers in a Ray worker and in a local child (same seed, one thread, the same
# data and ops); what can differ is the summation order of a reused process's kernels, so losses are compared
# to a relative 1e-5 (float32 round-off), not bit for bit.
LOSS_RTOL = 1e-5


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """(the Ray sweep's file, the sequential sweep's file, the Ray runner's launcher)."""
    ray = local_ray()
    folder = tmp_path_factory.mktemp("ray")
    spec = build_spec({**TINY_RAY, "batch_sizes": BATCH_SIZES, "ray": "local"})
    runner = SweepRunner(spec)
    assert isinstance(runner.launcher, RayLauncher)
    assert run_sweep(spec, folder / "ray.h5", runner=runner) == "complete"
    assert ray.is_initialized()  # the sweep used this process's instance and left it running
    plain = build_spec({**TINY_RAY, "batch_sizes": BATCH_SIZES})
    assert run_sweep(plain, folder / "plain.h5") == "complete"
    return folder / "ray.h5", folder / "plain.h5", runner.launcher


def test_a_ray_sweep_records_the_same_runs_as_a_sequential_one(sweeps):
    on_ray, plain = (read_run_file(path) for path in sweeps[:2])
    assert on_ray.status == plain.status == "complete"
    assert [(r.index, r.batch_size, r.seed, r.status) for r in on_ray.runs] == [
        (r.index, r.batch_size, r.seed, r.status) for r in plain.runs
    ]
    assert [r.status for r in on_ray.runs] == ["ok"] * 4
    for ray_run, run in zip(on_ray.runs, plain.runs, strict=True):
        assert set(ray_run.steps) == set(run.steps) and set(ray_run.epochs) == set(run.epochs)
        for table in ("steps", "epochs"):
            for name, column in getattr(run, table).items():
                assert getattr(ray_run, table)[name].shape == column.shape, (ray_run.index, table, name)
        np.testing.assert_allclose(ray_run.steps["loss"], run.steps["loss"], rtol=LOSS_RTOL)
        np.testing.assert_allclose(ray_run.epochs["train_loss"], run.epochs["train_loss"], rtol=LOSS_RTOL)
        np.testing.assert_array_equal(ray_run.steps["batch_size"], run.steps["batch_size"])


def test_each_run_records_the_ray_node_it_trained_on_and_two_trained_at_once(sweeps):
    on_ray = read_run_file(sweeps[0])
    ray = local_ray()
    node = ray.nodes()[0]
    for run in on_ray.runs:
        assert run.attrs["ray_node"] == node["NodeID"]
        assert run.attrs["ray_node_ip"] == node["NodeManagerAddress"]
        assert run.attrs["ray_host"]
        assert run.attrs["child"] in ("fresh", "probe", "standby", "reused")
    # two CPU slots: the first two runs were submitted together and trained in two worker processes at once
    assert sweeps[2].slots == 2
    first, second = on_ray.runs[0].attrs, on_ray.runs[1].attrs
    assert first["pid"] != second["pid"]
    # the first two runs took the workers the probe and the standby readied while the probe ran (TensorFlow
    # imported, the data loaded, before the runs were submitted); the later ones reused them: no import paid
    assert sorted(r.attrs["child"] for r in on_ray.runs[:2]) == ["probe", "standby"]
    for run in on_ray.runs[:2]:
        assert run.attrs["startup_import_s"] > 0 and run.attrs["startup_prepared_s"] > 0
    assert [r.attrs["child"] for r in on_ray.runs[2:]] == ["reused", "reused"]
    for run in on_ray.runs[2:]:
        assert run.attrs["startup_import_s"] == 0.0 and run.attrs["pid"] in (first["pid"], second["pid"])
    cluster = on_ray.environment["ray_cluster"]
    assert cluster.startswith("Ray ") and "at local: 1 CPU per run, 2 at once on 1 node (2 CPUs, 0 GPUs)" in cluster


def test_the_probe_checks_the_spec_on_the_cluster_and_a_file_it_cannot_read_is_one_line(tmp_path):
    """A data file the workers cannot read is refused by the probe on the cluster, in one line naming the node
    and what a remote cluster needs (the parent read it fine: its check passed)."""
    local_ray()
    data = tmp_path / "mine.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x_train=rng.random((64, 8), dtype=np.float32), y_train=rng.integers(0, 2, 64))
    values = {**TINY_RAY, "preset": "mlp", "data": str(data), "samples": 64, "batch_sizes": "16", "ray": "local"}
    spec = build_spec(values)
    runner = SweepRunner(spec)
    runner.check_data()  # read here, in the parent
    data.unlink()  # and gone where the runs train (the same path on this one-node cluster)
    try:
        with pytest.raises(SpecError) as error:
            runner.prepare_first_run()
            runner.preflight()
    finally:
        runner.close()
    text = f"{error.value.field}: {error.value.message}"
    assert "\n" not in text and text.startswith("data: ") and "cannot be read on Ray node" in text
    assert "same path on every node" in text


def test_a_check_alone_on_ray_leaves_nothing_running(sweeps):
    """The max-batch search checks the spec with the sweep's probe and never closes the launcher: on Ray the probe
    lets go of the cluster itself (no pump thread or mailbox left behind; a local instance it started shuts down)."""
    import threading

    spec = build_spec({**TINY_RAY, "batch_sizes": "16", "ray": "local"})
    runner = SweepRunner(spec)
    environment = runner.preflight()
    assert "at local: 1 CPU per run" in environment["ray_cluster"]
    assert not [t for t in threading.enumerate() if t.name == "batchlab-ray-pump"]
    assert runner.launcher.environment is environment and local_ray().is_initialized()  # the shared one stays
