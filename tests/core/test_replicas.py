"""Data-parallel runs (replicas, core/training/replication.py): two logical CPU devices under MirroredStrategy
train the same loss curve as one device at the same global batch; the run file says how a run was replicated;
`report` compares replicas; what cannot be replicated is refused in one line.

The training runs in `batchlab sweep` children (this test process never imports TensorFlow)."""

import json

import h5py
import numpy as np
import pytest
from batchlab.core.spec import build_spec, spec_errors

from tests.core.test_cli import assert_one_line_error, batchlab

# Tolerance on each step's loss: the two replicas' float32 reductions are summed in another order than one
# device's; measured max |difference| 2.4e-7 over 8 steps (mnist-mlp, 251 samples, batch 64, TF 2.21). Without
# the sample weight of unequal shares (replication.py) the steps after the last batch of 59 (29 + 30) differed
# by 2.7e-4: the tolerance tells the two apart.
LOSS_TOLERANCE = 2e-5
SWEEP = (
    "sweep --preset mnist-mlp --device cpu --samples 251 --val-samples 64 --epochs 2 --batch-sizes 64 "
    "--seeds 0 --no-shuffle --quiet --overwrite"
).split()


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The same sweep on one device and on 2 logical CPU devices: {replicas: run file}."""
    folder = tmp_path_factory.mktemp("replicas")
    files = {}
    for replicas in (1, 2):
        files[replicas] = folder / f"replicas{replicas}.h5"
        result = batchlab(*SWEEP, "--replicas", replicas, "--out", files[replicas])
        assert result.returncode == 0, result.stderr
    return files


def _run(path):
    with h5py.File(path, "r") as f:
        run = next(iter(f["runs"].values()))
        return dict(run.attrs), run["steps"]["loss"][:], run["steps"]["batch_size"][:]


def _accuracy(path):
    with h5py.File(path, "r") as f:
        return next(iter(f["runs"].values()))["metrics"]["train_accuracy"][:]


def test_two_replicas_train_the_loss_curve_of_one_device(sweeps):
    _, one, one_batches = _run(sweeps[1])
    _, two, two_batches = _run(sweeps[2])
    # 251 samples at 64: 4 steps an epoch, the last of 59 split 29 + 30; the global batch is recorded
    assert list(two_batches) == list(one_batches) == [64, 64, 64, 59] * 2
    assert np.all(np.isfinite(two))
    assert np.max(np.abs(one - two)) < LOSS_TOLERANCE
    assert two[-1] < two[0] - 0.3  # it trained: the curve compared is not a flat line
    # each epoch's train accuracy, the replicas' shares weighted by their samples
    assert np.allclose(_accuracy(sweeps[1]), _accuracy(sweeps[2]), atol=1e-6)


def test_run_file_records_the_strategy(sweeps):
    one, _, _ = _run(sweeps[1])
    two, _, _ = _run(sweeps[2])
    assert (one["strategy"], int(one["replicas"]), int(one["per_replica_batch"])) == ("none", 1, 64)
    assert (two["strategy"], int(two["replicas"]), int(two["per_replica_batch"])) == ("MirroredStrategy", 2, 32)
    assert "across 2 replicas" in str(two["xla_choice"])


def test_report_prints_the_scaling_line(sweeps):
    result = batchlab("report", sweeps[2], "--scaling-with", sweeps[1], env={"COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "2 replicas at global batch 64" in line]
    assert len(lines) == 1 and "efficient" in lines[0], result.stdout
    as_json = json.loads(batchlab("report", sweeps[2], "--json", "--scaling-with", sweeps[1]).stdout)
    assert as_json["scaling"] == [lines[0].removeprefix("- ")]
    alone = batchlab("report", sweeps[2], env={"COLUMNS": "400"})
    assert "add replicas 1 to the comparison" in alone.stdout
    assert "replicas at global batch" not in batchlab("report", sweeps[1]).stdout


@pytest.mark.parametrize(
    "changes, phrase",
    [
        ({"batch_sizes": "48,50"}, "the global batch size 50 does not divide by 4 replicas"),
        ({"loop": "fit"}, "fit engine"),
        ({"fused": 4}, "fused"),
        ({"accumulate": 2}, "accumulation"),
        ({"noise_scale_every": 5}, "noise_scale_every"),
        ({"device": "gpu:1"}, "names one GPU"),
        ({"xla": True}, "XLA"),
        ({"samples": 258}, "258 samples at batch 64 leave a last batch of 2, fewer than the 4 replicas"),
    ],
)
def test_what_cannot_be_replicated_is_refused(changes, phrase):
    errors = spec_errors({"batch_sizes": "64", "replicas": 4, **changes})
    assert set(errors) == {"replicas"} and phrase in str(errors["replicas"])


def test_replicas_refusal_is_one_line():
    result = batchlab("sweep", "--replicas", "2", "--batch-sizes", "33", "--samples", "64", "--epochs", "1")
    assert_one_line_error(result, "replicas", "33 does not divide by 2")
    assert_one_line_error(batchlab("sweep", "--replicas", "0"), "replicas", "from 1")


def test_one_replica_is_the_default():
    spec = build_spec({})
    assert spec.replicas == 1 and spec.group("execution").replicas == 1
