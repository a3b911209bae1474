"""The fit engine (`--loop fit`): the model's own fit, timed by a callback, recorded like the instrumented loop."""

import math

import numpy as np
import pytest
from batchlab.core import cli
from batchlab.core.errors import SpecError
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep

TINY = {
    "preset": "mnist-mlp",
    "samples": 250,  # 4 steps of 64, the last one short (58 samples)
    "val_samples": 64,
    "epochs": 2,
    "batch_sizes": "64",
    "device": "cpu",
    "shuffle": False,
}


def _run(tmp_path, **values):
    spec = build_spec({**TINY, **values})
    out = tmp_path / f"{spec.loop}.h5"
    assert run_sweep(spec, out) == "complete"
    record = read_run_file(out)
    (run,) = record.runs
    assert run.status == "ok", run.message
    return record, run


def test_fit_engine_records_steps_and_epochs_with_the_loops_losses(tmp_path):
    _, fit = _run(tmp_path, loop="fit")
    _, loop = _run(tmp_path, loop="loop")

    assert fit.attrs["engine"] == "fit" and loop.attrs["engine"] == "loop"
    steps = fit.steps
    assert steps["step"].tolist() == list(range(8))
    assert steps["epoch"].tolist() == [0] * 4 + [1] * 4
    assert steps["batch_size"].tolist() == [64, 64, 64, 58] * 2
    # fit does not expose a step's compute or fetch time; it does say when it traced
    assert np.all(np.isnan(steps["step_time"])) and np.all(np.isnan(steps["fetch_time"]))
    assert steps["traced"][0] == 1 and steps["traced"][1:].sum() == 0  # fit traces once, for any batch shape
    assert np.all(np.diff(steps["wall_time"]) > 0)

    epochs = fit.epochs
    assert epochs["epoch"].tolist() == [0, 1]
    assert np.all(epochs["epoch_time"] > 0) and np.all(epochs["val_time"] > 0)
    assert epochs["traced_steps"].tolist() == [1, 0]
    assert np.all((epochs["val_accuracy"] >= 0) & (epochs["val_accuracy"] <= 1))
    assert epochs["wall_time"][-1] >= steps["wall_time"][-1]
    # per-batch losses recovered from fit's running means: the epoch mean is their sample-weighted mean
    first = slice(0, 4)
    weighted = np.sum(steps["loss"][first] * steps["batch_size"][first]) / 250
    assert math.isclose(epochs["train_loss"][0], weighted, rel_tol=1e-5)

    # same seed, same batches in the same order: the same training as the instrumented loop
    assert fit.epochs["train_loss"][0] == pytest.approx(loop.epochs["train_loss"][0], rel=1e-4)
    assert fit.steps["loss"] == pytest.approx(loop.steps["loss"], rel=1e-4)
    assert fit.epochs["val_loss"] == pytest.approx(loop.epochs["val_loss"], rel=1e-4)


def test_fit_engine_says_that_sampled_sync_is_for_the_loop_only(tmp_path):
    record, run = _run(tmp_path, loop="fit", sync="sampled", epochs=1, val_samples=0)
    assert run.attrs["sync"] == "every_step"  # what fit does, not what was asked for
    assert any("sync=sampled applies to the instrumented loop only" in line for line in record.log)
    assert np.all(np.isnan(run.epochs["val_loss"]))


def test_fit_engine_runs_end_as_diverged_or_interrupted_keeping_their_steps(tmp_path):
    spec = build_spec({**TINY, "loop": "fit", "optimizer": "sgd", "lr": "1e12", "epochs": 1, "val_samples": 0})
    run_sweep(spec, tmp_path / "nan.h5")
    diverged = read_run_file(tmp_path / "nan.h5").runs[0]
    assert diverged.status == "diverged" and "loss became" in diverged.message
    assert not np.isfinite(diverged.steps["loss"][-1])  # the step that went bad is kept

    spec = build_spec({**TINY, "loop": "fit", "samples": 2048, "batch_sizes": "8", "epochs": 3, "val_samples": 0})
    runner = SweepRunner(spec)

    def sink(event):
        if event["type"] == "steps":
            runner.stop()  # as the window's Stop button: fit is asked to end before its next step

    assert run_sweep(spec, tmp_path / "stop.h5", sink=sink, runner=runner) == "interrupted"
    stopped = read_run_file(tmp_path / "stop.h5").runs[0]
    assert stopped.status == "interrupted"
    assert 0 < len(stopped.steps["loss"]) < 3 * 256


@pytest.mark.parametrize(
    "values, field, phrase",
    [
        ({"loop": "keras"}, "loop", "choose one of loop, fit"),
        ({"sync": "never"}, "sync", "choose one of every_step, sampled"),
    ],
)
def test_engine_settings_are_validated_with_the_field_named(values, field, phrase):
    with pytest.raises(SpecError) as e:
        build_spec(values)
    assert e.value.field == field and phrase in e.value.message
    assert build_spec({}).loop == "loop" and build_spec({}).sync == "every_step"
    assert build_spec({"loop": " FIT ", "sync": "every-step"}).loop == "fit"


def test_cli_loop_option_reaches_the_spec(capsys):
    assert cli.main(["sweep", "--loop", "keras", "--device", "cpu"]) == cli.EXIT_USAGE
    assert "loop: 'keras' is not known" in capsys.readouterr().err
