"""Train to a target: Shallue's rule on synthetic metric sequences, budgets, the spec's checks and the CLI's
one-line errors. No TensorFlow here (the end-to-end runs are in test_train_to_target.py)."""

import math

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.events import EVALUATION, LOG
from batchlab.core.figures import run_figures
from batchlab.core.spec import Budget, SweepSpec, build_spec, spec_errors
from batchlab.core.table import NOT_REACHED_TEXT, format_table, summary_rows
from batchlab.core.targets import (
    NOT_REACHED,
    Target,
    TargetSyntaxError,
    first_reached,
    parse_target,
    target_result,
)
from batchlab.core.training.evaluation import Evaluations

from tests.core.test_cli import TINY, assert_one_line_error, batchlab

# ---------------------------------------------------------------------- the target syntax


@pytest.mark.parametrize(
    ("text", "metric", "value", "direction"),
    [
        ("val_accuracy=0.98", "val_accuracy", 0.98, "above"),
        (" val_error = 0.01 ", "val_error", 0.01, "below"),
        ("train_loss=45", "train_loss", 45.0, "below"),
        ("val_loss<0.2", "val_loss", 0.2, "below"),
        ("VAL_ACCURACY>0.5", "val_accuracy", 0.5, "above"),
        ("val_accuracy=0", "val_accuracy", 0.0, "above"),
        ("val_error=1", "val_error", 1.0, "below"),
    ],
)
def test_a_target_names_its_metric_and_the_metric_its_direction(text, metric, value, direction):
    target = parse_target(text)
    assert (target.metric, target.value, target.direction) == (metric, value, direction)
    assert parse_target(target.text) == target  # the canonical text the spec stores reads back the same


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("val_accuracy", "not a target"),
        ("accuracy=0.9", "not a target metric"),
        ("val_loss=abc", "not a number"),
        ("val_loss=nan", "not a finite number"),
        ("val_accuracy=1.5", "can never be exceeded"),
        ("val_accuracy=1", "can never be exceeded"),  # nothing is strictly above 100%
        ("val_accuracy=-0.1", "can never be exceeded"),
        ("val_error=0", "can never be undercut"),
        ("val_accuracy>=0.9", "strictly better"),
        ("val_loss>0.3", "met below"),
        ("val_accuracy<0.9", "met above"),
    ],
)
def test_targets_that_cannot_be_read_or_met_are_refused(text, phrase):
    with pytest.raises(TargetSyntaxError, match=phrase):
        parse_target(text)


# ---------------------------------------------------------------------- Shallue's rule, known answers


def test_the_first_strict_crossing_counts_for_a_loss():
    losses = [2.0, 1.2, 0.9, 1.1, 0.7, 0.5]
    assert first_reached(Target("val_loss", 1.0), losses) == 2  # 0.9 < 1.0; the later 0.7 is not the result
    assert first_reached(Target("val_loss", 0.9), losses) == 4  # equal to the target (index 2) does not count
    assert first_reached(Target("val_loss", 0.4), losses) is None  # never below: not reached


def test_the_first_strict_crossing_counts_for_an_accuracy():
    accuracy = [0.5, 0.97, 0.98, 0.985, 0.99]
    assert first_reached(Target("val_accuracy", 0.98), accuracy) == 3  # 0.98 itself is not strictly better
    assert first_reached(Target("val_accuracy", 0.99), accuracy) is None


def test_a_float32_metric_equal_to_the_target_is_not_better_than_it():
    # Keras's accuracy is float32: 1,960 of 2,000 right arrives as 0.98000002, 1,961 as 0.9805
    equal, better = np.float32(1960) / np.float32(2000), np.float32(1961) / np.float32(2000)
    assert float(equal) > 0.98  # the float32 nearest 0.98 lies above it
    assert first_reached(Target("val_accuracy", 0.98), [equal, better]) == 1
    # val_error = 1 - the float32 accuracy: 0.01999998 equals 0.02; 39 wrong (0.0195) is below it
    assert first_reached(Target("val_error", 0.02), [1.0 - float(equal), 1.0 - float(better)]) == 1
    assert first_reached(Target("val_error", 0.01), [1.0 - float(np.float32(0.99))]) is None
    # a loss: the float32 nearest 0.1 equals 0.1; one float32 step of 1e-4 below it is better
    assert not Target("train_loss", 0.1).met(np.float32(0.1))
    assert Target("train_loss", 0.1).met(0.1 - 1e-4) and Target("train_loss", 1e-6).met(np.float32(0.99e-6))


def test_nan_and_infinite_values_never_reach_a_target():
    target = Target("train_loss", 1.0)
    assert first_reached(target, [math.nan, -math.inf, 3.0, 0.5]) == 3  # -inf (a broken loss) does not count
    assert first_reached(target, [2.0, math.nan, math.nan]) is None  # diverged: never reached
    assert first_reached(Target("val_accuracy", 0.5), [math.inf, math.nan]) is None
    assert not target.met(None)


def test_the_result_is_read_at_the_first_crossing_of_an_evals_table():
    evals = {
        "steps": np.array([100, 200, 300, 400]),
        "examples": np.array([3200, 6400, 9600, 12800]),
        "epochs": np.array([0.32, 0.64, 0.96, 1.28]),
        "train_wall_time": np.array([1.5, 2.9, 4.4, 5.8]),
        "val_error": np.array([0.2, math.nan, 0.009, 0.005]),
    }
    result = target_result(Target("val_error", 0.01), evals)
    assert result.reached and (result.steps, result.examples, result.epochs, result.time) == (300, 9600, 0.96, 4.4)
    assert target_result(Target("val_error", 0.001), evals) == NOT_REACHED
    assert target_result(Target("val_loss", 1.0), evals) == NOT_REACHED  # a metric the table does not have


def test_run_figures_say_reached_not_reached_or_no_target():
    evals = {"steps": np.array([10, 20]), "train_wall_time": np.array([0.4, 0.9]), "val_accuracy": [0.3, 0.6]}
    reached = run_figures({}, {}, {"target": "val_accuracy=0.5"}, evals)
    assert (reached.target_reached, reached.steps_to_target, reached.time_to_target) == (1, 20, 0.9)
    missed = run_figures({}, {}, {"target": "val_accuracy=0.6"}, evals)  # 0.6 equals, never exceeds
    assert missed.target_reached == 0 and math.isnan(missed.steps_to_target)
    assert run_figures({}, {}, {"target": ""}, evals).target_reached == -1
    assert run_figures({}, {}, {}, None).target_reached == -1  # files from before targets


def test_the_table_says_not_reached_within_budget():
    rows = [
        {
            "batch_size": 32,
            "seed": 0,
            "status": "ok",
            "target_reached": 1,
            "steps_to_target": 120,
            "time_to_target": 2.5,
        },
        {"batch_size": 64, "seed": 0, "status": "ok", "target_reached": 0},
        {"batch_size": 128, "seed": 0, "status": "diverged", "target_reached": 0, "message": "loss became nan"},
    ]
    lines = format_table(rows).splitlines()
    assert "steps to target" in lines[0] and "time to target (s)" in lines[0]
    assert "120" in lines[1] and "2.50" in lines[1]
    assert NOT_REACHED_TEXT in lines[2]
    assert "not reached (diverged)" in lines[3]
    assert "steps to target" not in format_table([{"batch_size": 32, "seed": 0, "status": "ok"}])


def test_on_80_columns_the_target_figures_become_a_second_table_keyed_by_batch_and_seed():
    """Issue 29: with target columns the runs table was 135 columns even with two-line headers."""
    rows = [
        {"batch_size": 32, "seed": 0, "status": "ok", "final_loss": 0.26, "total_time": 3.2, "samples_per_s": 7022.0}
        | {"tracing_time": 0.95, "first_epoch_peak_bytes": 615 << 20, "steady_peak_bytes": 625 << 20}
        | {"target_reached": 1, "steps_to_target": 189, "epochs_to_target": 3, "examples_to_target": 6000}
        | {"time_to_target": 1.85},
        {"batch_size": 512, "seed": 1, "status": "ok", "final_loss": 0.99, "total_time": 1.7, "target_reached": 0},
    ]
    wide = format_table(rows, width=200)
    assert len(wide.splitlines()) == 3  # one table, one-line headers: it fits
    text = format_table(rows, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    runs, targets = text.split("\n\n")
    assert "steady" in runs and "target" not in runs and "status" in runs
    assert "target" in targets and "status" not in targets
    assert [line.split()[:2] for line in targets.splitlines()[2:]] == [["32", "0"], ["512", "1"]]
    assert "189" in targets.splitlines()[2] and "1.85" in targets.splitlines()[2]
    assert NOT_REACHED_TEXT in targets.splitlines()[3]


# ---------------------------------------------------------------------- the evaluation hook on synthetic rows


def _rows(losses, batch=10):
    return [{"batch_size": batch, "loss": loss} for loss in losses]


def test_evaluations_average_the_losses_since_the_last_one_and_stop_at_the_target():
    events = []
    evals = Evaluations(0, events.append, samples=40, target=Target("train_loss", 1.0), eval_every=2)
    for step, row in enumerate(_rows([4.0, 2.0])):
        evals.on_train_batch_end(step, row)
    assert evals.due(2) and not evals.due(3)
    assert evals.record(1.0, 0.8, 0.1, {}, at_epoch_end=False) is False  # mean 3.0: not below 1.0
    assert not evals.due(2)  # evaluated once per point
    for step, row in enumerate(_rows([1.0, 0.9, 1.1]), start=2):  # sample-weighted mean 1.0: equal, not met
        evals.on_train_batch_end(step, row)
    assert evals.record(2.0, 1.6, 0.1, {}, at_epoch_end=True) is False
    evals.on_train_batch_end(5, {"batch_size": 10, "loss": 0.5})
    assert evals.record(2.5, 2.0, 0.1, {"val_accuracy": 0.75}, at_epoch_end=False) is True  # met: stop
    rows = [e for e in events if e["type"] == EVALUATION]
    assert [r["train_loss"] for r in rows] == [3.0, 1.0, 0.5]
    assert [r["steps"] for r in rows] == [2, 5, 6] and [r["examples"] for r in rows] == [20, 50, 60]
    assert [r["epochs"] for r in rows] == [0.5, 1.25, 1.5]
    assert rows[2]["val_error"] == 0.25 and rows[1]["at_epoch_end"] == 1
    assert any(e["type"] == LOG and "met at step 6" in e["message"] for e in events)


def test_keep_training_records_the_first_crossing_and_trains_on():
    events = []
    evals = Evaluations(0, events.append, samples=10, target=Target("val_loss", 1.0), keep_training=True)
    evals.on_train_batch_end(0, {"batch_size": 10, "loss": 2.0})
    assert evals.record(1.0, 1.0, 0.1, {"val_loss": 0.5}, at_epoch_end=True) is False
    assert evals.reached_steps == 1
    evals.on_train_batch_end(1, {"batch_size": 10, "loss": 2.0})
    evals.record(2.0, 2.0, 0.1, {"val_loss": 0.4}, at_epoch_end=True)
    assert evals.reached_steps == 1  # the first crossing stays the result


# ---------------------------------------------------------------------- budgets


@pytest.mark.parametrize(
    ("unit", "amount", "samples", "batch", "steps", "examples", "epochs"),
    [
        ("epochs", 3, 100, 32, 12, 300, 3),  # 4 steps an epoch, the last of 4 samples
        ("steps", 10, 100, 32, 10, 264, 3),  # 2 full epochs (8 steps, 200) + 2 batches of 32
        ("steps", 4, 100, 32, 4, 100, 1),
        ("examples", 250, 100, 32, 10, 264, 3),  # 2 epochs + ceil(50/32) = 2 steps: 64 more examples
        ("examples", 64, 100, 32, 2, 64, 1),
    ],
)
def test_budgets_in_steps_and_examples(unit, amount, samples, batch, steps, examples, epochs):
    budget = Budget(unit, amount)
    assert budget.steps(samples, batch) == steps
    assert budget.examples(samples, batch) == examples
    assert budget.epochs(samples, batch) == epochs


# ---------------------------------------------------------------------- the spec's checks


def test_a_target_spec_round_trips_through_the_run_file_json():
    spec = build_spec(
        {"preset": "mnist-mlp", "target": "val_accuracy>0.9", "eval_every": "50", "budget_unit": "steps", "epochs": 500}
    )
    assert (spec.target, spec.eval_every, spec.budget) == ("val_accuracy=0.9", 50, Budget("steps", 500))
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    assert build_spec({"preset": "mnist-mlp"}).target is None  # no target: train the whole budget


@pytest.mark.parametrize(
    ("values", "field", "phrase"),
    [
        ({"target": "val_accuracy=0.9"}, "target", "autoencoder has no accuracy"),
        ({"target": "val_error=0.1"}, "target", "autoencoder has no accuracy"),
        ({"preset": "mnist-mlp", "target": "val_accuracy=1.2"}, "target", "can never be exceeded"),
        ({"preset": "mnist-mlp", "val_samples": 0, "target": "val_loss=0.3"}, "target", "val_samples is 0"),
        ({"preset": "mnist-mlp", "target": "train_loss=0"}, "target", "never below 0"),
        ({"preset": "mnist-mlp", "eval_every": 0}, "eval_every", "too small"),
        ({"preset": "mnist-mlp", "eval_every": "x"}, "eval_every", "not an integer"),
        ({"preset": "mnist-mlp", "budget_unit": "steps", "epochs": 0}, "steps", "steps budget"),
        ({"preset": "mnist-mlp", "budget_unit": "examples", "epochs": -5}, "examples", "examples budget"),
        ({"preset": "mnist-mlp", "budget_unit": "minutes"}, "budget_unit", "epochs, steps, examples"),
        ({"preset": "mnist-mlp", "loop": "fit", "target": "val_loss=0.3"}, "loop", "--loop loop"),
        ({"preset": "mnist-mlp", "loop": "fit", "budget_unit": "steps"}, "loop", "steps budget"),
        ({"preset": "mnist-mlp", "keep_training": True}, "keep_training", "only applies with a target"),
    ],
)
def test_targets_and_budgets_that_cannot_work_are_refused(values, field, phrase):
    errors = spec_errors(values)
    assert len(errors) == 1, errors
    error = next(iter(errors.values()))
    assert isinstance(error, SpecError) and error.field == field and phrase in error.message, error


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--target", "val_accuracy=1.5"], ["target", "can never be exceeded"]),
        (["--target", "val_accuracy=0.9", "--val-samples", "0"], ["target", "val_samples is 0"]),
        (["--preset", "mnist-autoencoder", "--target", "val_accuracy=0.9"], ["target", "no accuracy"]),
        (["--eval-every", "0"], ["eval_every", "too small"]),
        (["--steps", "0"], ["steps", "too small"]),
        (["--steps", "10", "--max-epochs", "2"], ["budget", "--epochs"]),
        (["--target", "val_loss=0.2", "--loop", "fit"], ["loop", "--loop loop"]),
    ],
)
def test_bad_target_options_give_one_line_and_exit_2(args, phrases):
    # TINY sets --epochs 1; these are given without it, so a budget option is the only one
    tiny = [a for i, a in enumerate(TINY) if a != "--epochs" and (i == 0 or TINY[i - 1] != "--epochs")]
    assert_one_line_error(batchlab("sweep", *tiny, *args), *phrases)


def test_the_evals_table_gives_the_same_target_figures_live_and_from_the_file(tmp_path):
    """One evaluation stream into the live model and through the one writer: the same rows and figures."""
    from batchlab.core.events import RUN_ENDED, RUN_STARTED, make_event
    from batchlab.core.model import SweepData
    from batchlab.core.runfile import RunFileWriter

    events = [make_event(RUN_STARTED, run=0, batch_size=32, seed=0, target="val_error=0.2", eval_every=10)]
    for i, error in enumerate([0.5, 0.25, 0.2, 0.15, 0.1]):  # 0.2 equals the target: the result is the 4th point
        row = {"steps": 10 * (i + 1), "examples": 320 * (i + 1), "epochs": 0.32 * (i + 1), "wall_time": 1.0 + i}
        row.update(train_wall_time=0.9 + i, eval_time=0.1, at_epoch_end=0, train_loss=2.0 - 0.3 * i)
        row.update(val_loss=1.0 - 0.1 * i, val_accuracy=1.0 - error, val_error=error)
        events.append(make_event(EVALUATION, run=0, **row))
    events.append(make_event(RUN_ENDED, run=0, status="ok", message="", total_time=6.0))
    live = SweepData()
    with RunFileWriter(tmp_path / "t.h5") as writer:
        for event in events:
            live.handle(event)
            writer.handle(event)
    reopened = SweepData.from_file(tmp_path / "t.h5")
    for data in (live, reopened):
        figures = data.runs[0].figures
        assert (figures.target_reached, figures.steps_to_target, figures.examples_to_target) == (1, 40, 1280)
        assert figures.time_to_target == pytest.approx(3.9) and figures.epochs_to_target == pytest.approx(1.28)
    assert np.array_equal(live.runs[0].evals["val_error"], reopened.runs[0].evals["val_error"])


# ---------------------------------------------------------------------- the model's own compiled metrics


@pytest.mark.parametrize(
    ("metric", "direction"),
    [
        ("val_mae", "below"),
        ("val_mse", "below"),
        ("val_root_mean_squared_error", "below"),
        ("val_mean_absolute_percentage_error", "below"),
        ("val_binary_crossentropy", "below"),
        ("val_kl_divergence", "below"),
        ("val_auc", "above"),
        ("val_auc_1", "above"),  # Keras names a second AUC so
        ("val_precision", "above"),
        ("val_recall", "above"),
        ("val_sparse_categorical_accuracy", "above"),
        ("val_top_k_categorical_accuracy", "above"),
        ("val_r2_score", "above"),
        ("val_cosine_similarity", "above"),
        ("val_f1_score", "above"),
    ],
)
def test_a_compiled_metric_target_takes_its_direction_from_the_metric_name(metric, direction):
    target = parse_target(f"{metric}=0.5")
    assert (target.metric, target.value, target.direction) == (metric, 0.5, direction)
    better, worse = (0.49, 0.51) if direction == "below" else (0.51, 0.49)
    assert target.met(better) and not target.met(worse) and not target.met(0.5)


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("val_foo=1", "cannot tell from its name whether higher or lower is better"),
        ("train_mae=0.1", "has only train_loss; name the validation metric (val_mae)"),
        ("val_mae>0.1", "a val_mae target is met below it"),
        ("val_auc=1", "val_auc=1 can never be exceeded (auc lies in 0..1)"),
        ("val_precision=1.5", "can never be exceeded"),
    ],
)
def test_compiled_metric_targets_that_cannot_be_read_or_met_are_refused(text, phrase):
    with pytest.raises(TargetSyntaxError) as info:
        parse_target(text)
    assert phrase in str(info.value) and "\n" not in str(info.value)


def _keras_file(path, metrics):
    """A .keras file as model.save() lays out its config.json (what core.model_file reads; no weights)."""
    import json
    import zipfile

    config = {
        "class_name": "Sequential",
        "config": {
            "name": "tiny",
            "layers": [
                {"class_name": "InputLayer", "config": {"name": "x", "batch_shape": [None, 5], "dtype": "float32"}},
                {
                    "class_name": "Dense",
                    "config": {"name": "d", "units": 1},
                    "build_config": {"input_shape": [None, 5]},
                },
            ],
        },
        "compile_config": {"loss": "mse", "metrics": metrics},
    }
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
    return str(path)


def test_a_compiled_metric_target_must_be_one_of_the_models_metrics(tmp_path):
    model = _keras_file(tmp_path / "m.keras", ["mae", {"class_name": "AUC", "config": {"name": "auc"}}])
    np.savez(
        tmp_path / "d.npz", x_train=np.zeros((8, 5)), y_train=np.zeros(8), x_test=np.zeros((4, 5)), y_test=np.zeros(4)
    )
    values = {"model_file": model, "data": str(tmp_path / "d.npz"), "batch_sizes": "4", "device": "cpu"}
    assert build_spec({**values, "target": "val_mae=0.1"}).target == "val_mae=0.1"
    assert build_spec({**values, "target": "val_auc=0.9"}).target_spec.direction == "above"
    error = spec_errors({**values, "target": "val_mse=0.1"})["target"]
    assert str(error).endswith(
        "val_mse is not a metric of model 'tiny': its compiled metrics are val_mae, val_auc "
        "(besides train_loss, val_loss, val_accuracy, val_error)"
    )
    # a built-in workload has no compiled metrics of the user's
    builtin = spec_errors({"preset": "mnist-mlp", "target": "val_mae=0.1"})["target"]
    assert "val_mae would be a compiled metric of your own model (--model)" in str(builtin)
    # a validation metric needs validation samples
    no_val = spec_errors({**values, "val_samples": 0, "target": "val_mae=0.1"})["target"]
    assert "needs validation, but val_samples is 0" in str(no_val)


def test_evaluations_record_the_models_metrics_and_stop_when_one_meets_the_target():
    events = []
    evals = Evaluations(0, events.append, samples=10, target=Target("val_mae", 0.2))
    evals.on_train_batch_end(0, {"batch_size": 10, "loss": 1.0})
    assert evals.record(1.0, 0.9, 0.1, {"val_loss": 0.5, "metrics": {"val_mae": 0.2}}, at_epoch_end=True) is False
    evals.on_train_batch_end(1, {"batch_size": 10, "loss": 0.5})
    assert evals.record(2.0, 1.8, 0.1, {"val_loss": 0.4, "metrics": {"val_mae": 0.15}}, at_epoch_end=True) is True
    rows = [e for e in events if e["type"] == EVALUATION]
    assert [r["metrics"] for r in rows] == [{"val_mae": 0.2}, {"val_mae": 0.15}]
    assert any(e["type"] == LOG and "target val_mae < 0.2 met at step 2" in e["message"] for e in events)


def test_the_models_metrics_are_evals_columns_live_and_in_the_file_nan_where_missing(tmp_path):
    """A metric missing at an evaluation (no validation pass) or appearing late is NaN in that row."""
    from batchlab.core.events import RUN_ENDED, RUN_STARTED, make_event
    from batchlab.core.model import SweepData
    from batchlab.core.runfile import RunFileWriter
    from batchlab.core.runfile.reader import read_run_file

    events = [make_event(RUN_STARTED, run=0, batch_size=8, seed=0, target="val_mae=0.2", eval_every=5)]
    for i, metrics in enumerate([{}, {"val_mae": 0.3}, {"val_mae": 0.25, "val_mse": 0.1}, {"val_mae": 0.1}]):
        row = {"steps": 5 * (i + 1), "examples": 40 * (i + 1), "epochs": 0.5 * (i + 1), "wall_time": 1.0 + i}
        row.update(train_wall_time=0.5 + i, eval_time=0.1, at_epoch_end=0, train_loss=1.0, val_loss=0.5)
        events.append(make_event(EVALUATION, run=0, **row, **({"metrics": metrics} if metrics else {})))
    events.append(make_event(RUN_ENDED, run=0, status="ok", message="", total_time=5.0))
    live = SweepData()
    with RunFileWriter(tmp_path / "m.h5") as writer:
        for event in events:
            live.handle(event)
            writer.handle(event)
    (run,) = read_run_file(tmp_path / "m.h5").runs
    nan = math.nan
    np.testing.assert_array_equal(run.evals["val_mae"], [nan, 0.3, 0.25, 0.1])
    np.testing.assert_array_equal(run.evals["val_mse"], [nan, nan, 0.1, nan])
    import h5py

    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert list(f["runs/run_000/evals"].attrs["columns"])[-2:] == ["val_mae", "val_mse"]
    np.testing.assert_array_equal(live.runs[0].eval_metrics["val_mae"], run.evals["val_mae"])
    np.testing.assert_array_equal(live.runs[0].eval_metrics["val_mse"], run.evals["val_mse"])
    for figures in (run.figures, live.runs[0].figures, SweepData.from_file(tmp_path / "m.h5").runs[0].figures):
        assert (figures.target_reached, figures.steps_to_target, figures.examples_to_target) == (1, 20, 160)


def test_final_metrics_are_the_last_finite_value_per_name_live_in_the_report_and_from_the_file(tmp_path):
    """The model's compiled metrics at a run's end: the same numbers live, from the file, in the report."""
    from batchlab.core.events import EPOCH_ENDED, RUN_ENDED, RUN_STARTED, make_event
    from batchlab.core.figures import final_metrics
    from batchlab.core.model import SweepData
    from batchlab.core.runfile import RunFileWriter
    from batchlab.core.table import format_metrics_table

    # known answers: the last finite value; NaN when none; train names first
    nan = math.nan
    got = final_metrics({"val_mae": [0.5, 0.25, nan], "train_mae": [0.4, 0.2, 0.1], "val_auc": [nan]})
    assert list(got) == ["train_mae", "val_auc", "val_mae"]
    assert got["train_mae"] == 0.1 and got["val_mae"] == 0.25 and math.isnan(got["val_auc"])

    events = [make_event(RUN_STARTED, run=0, batch_size=8, seed=0)]
    for epoch, metrics in enumerate([{"train_mae": 0.4, "val_mae": 0.5}, {"train_mae": 0.2, "val_mae": 0.3}]):
        events.append(make_event(EPOCH_ENDED, run=0, epoch=epoch, train_loss=1.0, metrics=metrics))
    events.append(make_event(RUN_ENDED, run=0, status="ok", message="", total_time=2.0))
    live = SweepData()
    with RunFileWriter(tmp_path / "f.h5") as writer:
        for event in events:
            live.handle(event)
            writer.handle(event)
    from_file = SweepData.from_file(tmp_path / "f.h5")
    assert live.runs[0].final_metrics == from_file.runs[0].final_metrics == {"train_mae": 0.2, "val_mae": 0.3}
    text = format_metrics_table(summary_rows(from_file))
    assert text.splitlines()[0].split() == ["batch", "seed", "final", "train_mae", "final", "val_mae"]
    assert text.splitlines()[1].split() == ["8", "0", "0.2", "0.3"]
    assert format_metrics_table([{"batch_size": 8, "seed": 0, "metrics": {}}]) is None
