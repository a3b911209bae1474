"""Train to a target end to end: real sweeps on the bundled data, their evals/ table, and the report."""

import json

import h5py
import numpy as np
from batchlab.core import cli
from batchlab.core.events import EVAL_COLUMN_NAMES
from batchlab.core.table import NOT_REACHED_TEXT

from tests.core.helpers import save_keras_model
from tests.core.test_cli import assert_one_line_error, batchlab

SMALL = ["--preset", "mnist-mlp", "--samples", "1000", "--val-samples", "300", "--device", "cpu"]


def test_a_run_stops_at_the_first_evaluation_that_beats_the_target_and_the_report_says_where(tmp_path, capsys):
    out = tmp_path / "target.h5"
    args = ["--batch-sizes", "32", "--target", "val_accuracy=0.5", "--eval-every", "10", "--max-epochs", "2"]
    result = batchlab("sweep", *SMALL, *args, "--out", out)
    assert result.returncode == 0, result.stderr
    with h5py.File(out, "r") as f:
        run = f["runs/run_000"]
        assert run.attrs["status"] == "ok" and run.attrs["target"] == "val_accuracy=0.5"
        evals = {name: run["evals"][name][()] for name in run["evals"]}
        steps_taken = len(run["steps/step"])
        last_step_wall = run["steps/wall_time"][-1]
    assert set(evals) == set(EVAL_COLUMN_NAMES)
    # Shallue's rule, worked out here from the stored metric: the first evaluation strictly above 0.5
    above = np.flatnonzero(evals["val_accuracy"] > 0.5)
    assert len(above) == 1 and above[0] == len(evals["steps"]) - 1  # it is the last: the run stopped there
    reached_at = int(evals["steps"][-1])
    assert steps_taken == reached_at  # no step was trained after it
    assert "run 1/1: ok final loss" in result.stderr and f"target met at step {reached_at} (" in result.stderr
    # evaluation points: every 10 steps, or an epoch's end (32 steps an epoch)
    assert all(s % 10 == 0 or end for s, end in zip(evals["steps"], evals["at_epoch_end"], strict=True))
    full_epochs, into_epoch = np.divmod(evals["steps"], 32)
    assert np.array_equal(evals["examples"], full_epochs * 1000 + into_epoch * 32)
    # evaluation is timed on its own and is not training time
    assert (evals["eval_time"] > 0).all()
    assert (evals["train_wall_time"] <= evals["wall_time"] + 1e-9).all()
    assert evals["wall_time"][-1] >= last_step_wall  # the step clock never counted the evaluation passes

    report = batchlab("report", out)
    assert report.returncode == 0, report.stderr
    assert "target: val_accuracy > 0.5" in report.stdout
    lines = report.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("batch"))
    header, row = lines[at], lines[at + 1]
    assert "steps to target" in header and "time to target (s)" in header
    cells = row.split()
    assert cells[0] == "32" and str(reached_at) in cells and cells[-1] == "ok"
    assert f"{evals['train_wall_time'][-1]:.2f}" in cells
    # the analysis section: the measured fastest batch with its numbers, and why there is no critical batch yet
    text = " ".join(report.stdout.split())
    assert f"Fastest to the target on this device (measured): batch 32, {evals['train_wall_time'][-1]:.3g} s" in text
    assert f"(one run, {reached_at:,} steps)" in text
    needs = "Critical batch: not fitted; it needs steps to target at 3 or more batch sizes (runs met the target at 1)"
    assert needs in text
    assert "Not measured: one run per batch size" in text
    assert cli.main(["report", str(out), "--json"]) == 0
    analysis = json.loads(capsys.readouterr().out)["analysis"]
    assert analysis["target"] == "val_accuracy=0.5" and analysis["best_measured"] == 32
    steps = analysis["batches"][0]["steps_to_target"]
    assert steps == {"mean": reached_at, "low": reached_at, "high": reached_at, "n": 1}
    assert analysis["critical"] is None and analysis["noise_scale"] is None


def test_a_run_that_misses_its_target_uses_its_whole_steps_budget_and_says_not_reached(tmp_path):
    out = tmp_path / "missed.h5"
    # 16 steps an epoch at batch 64: a 15-step budget ends inside the first epoch; sampled sync reads losses late
    args = ["--batch-sizes", "64", "--target", "val_accuracy=0.99", "--eval-every", "10", "--steps", "15"]
    result = batchlab("sweep", *SMALL, *args, "--sync", "sampled", "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    assert NOT_REACHED_TEXT in result.stdout  # the end-of-sweep table
    with h5py.File(out, "r") as f:
        run = f["runs/run_000"]
        assert run.attrs["status"] == "ok" and run.attrs["planned_steps"] == 15
        assert len(run["steps/step"]) == 15 and np.isfinite(run["steps/loss"][()]).all()
        assert len(run["epochs/epoch"]) == 0  # the partial epoch has no epoch row
        assert run["evals/steps"][()].tolist() == [10, 15]  # every 10 steps, and where the budget ended
        assert run["evals/examples"][()].tolist() == [640, 960]
        assert (run["evals/val_accuracy"][()] <= 0.99).all()
    report = batchlab("report", out)
    assert NOT_REACHED_TEXT in report.stdout
    narrow = batchlab("report", out, env={"COLUMNS": "80"})  # issue 29: the target line and table fit 80
    assert NOT_REACHED_TEXT in narrow.stdout and "target: val_accuracy > 0.99" in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines() if str(out) not in line) <= 80  # but the path


def test_an_accuracy_target_for_a_users_autoencoder_is_refused_before_training(tmp_path):
    model = save_keras_model(
        """
        inputs = keras.Input((784,))
        model = keras.Model(inputs, keras.layers.Dense(784, activation="sigmoid")(inputs))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        """,
        tmp_path / "autoencoder.keras",
    )
    args = ["--preset", "keras-file", "--model", model, "--samples", "64", "--batch-sizes", "32"]
    result = batchlab("sweep", *args, "--target", "val_accuracy=0.5", "--out", tmp_path / "x.h5")
    assert_one_line_error(result, "target", "no accuracy", "val_loss")
    assert not (tmp_path / "x.h5").exists()


def test_a_validation_target_on_data_without_a_test_split_is_refused_before_training(tmp_path):
    rng = np.random.default_rng(0)
    data = tmp_path / "train_only.npz"
    np.savez(data, x_train=rng.random((100, 28, 28)).astype("float32"), y_train=rng.integers(0, 10, 100))
    args = ["--preset", "mnist-mlp", "--data", data, "--samples", "100", "--batch-sizes", "10"]
    result = batchlab("sweep", *args, "--target", "val_loss=0.5", "--out", tmp_path / "x.h5")
    assert_one_line_error(result, "target", "no test split", "train_loss")
    assert not (tmp_path / "x.h5").exists()


def test_keep_training_trains_the_whole_budget_and_keeps_the_first_crossing(tmp_path):
    out = tmp_path / "keep.h5"
    # a train loss below 100 is met at the first evaluation; the run trains on to its 20 steps
    args = ["--batch-sizes", "32", "--target", "train_loss=100", "--eval-every", "10", "--steps", "20"]
    result = batchlab("sweep", *SMALL, *args, "--keep-training", "--val-samples", "0", "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    with h5py.File(out, "r") as f:
        run = f["runs/run_000"]
        assert len(run["steps/step"]) == 20
        assert run["evals/steps"][()].tolist() == [10, 20]
        assert np.isnan(run["evals/val_loss"][()]).all()  # no validation: a train-loss target needs none
        assert (run["evals/eval_time"][()] >= 0).all()
    row = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("32 "))
    assert row.split()[-5] == "10"  # steps to target: the first crossing, not the last evaluation
