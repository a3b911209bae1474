"""A user's .keras model trains with the settings it was saved with, or the run's log says which were not.

Models are saved in a subprocess (tests/core/helpers.py) and trained through the real sweep runner,
so these tests exercise loading, label preparation and recompiling exactly as `batchlab sweep` does.
"""

import numpy as np
import pytest
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import run_sweep

from tests.core.helpers import save_keras_model

CLASSIFIER = """
inputs = keras.Input((784,))
hidden = keras.layers.Dense(32, activation="relu")(inputs)
model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
model.compile(optimizer="adam", loss={loss}{extra})
"""


def _model(tmp_path, name: str, loss: str, extra: str = "") -> str:
    path = tmp_path / f"{name}.keras"
    save_keras_model(CLASSIFIER.format(loss=loss, extra=extra), path)
    return str(path)


def _sweep(tmp_path, model_file: str, **values):
    spec = build_spec(
        {
            "preset": "keras-file",
            "model_file": model_file,
            "samples": 256,
            "val_samples": 64,
            "epochs": 1,
            "batch_sizes": "64",
            "device": "cpu",
            "shuffle": False,
            **values,
        }
    )
    out = tmp_path / f"{tmp_path.name}-{values.get('loop', 'loop')}.h5"
    assert run_sweep(spec, out) == "complete"
    return read_run_file(out)


def test_a_model_compiled_with_a_loss_function_gets_one_hot_labels_and_trains(tmp_path):
    # keras.losses.categorical_crossentropy is a plain function: its type says only "function".
    record = _sweep(tmp_path, _model(tmp_path, "fn", "keras.losses.categorical_crossentropy"))
    (run,) = record.runs
    assert run.status == "ok", run.message
    assert len(run.steps["loss"]) == 4 and np.all(np.isfinite(run.steps["loss"]))
    assert 0 <= run.epochs["val_accuracy"][0] <= 1
    assert any("one-hot encoded to 10 classes" in line and "categorical_crossentropy" in line for line in record.log)


@pytest.mark.parametrize(
    "loss",
    ["keras.losses.sparse_categorical_crossentropy", "'sparse_categorical_crossentropy'"],
)
def test_a_sparse_loss_keeps_integer_labels(tmp_path, loss):
    record = _sweep(tmp_path, _model(tmp_path, "sparse", loss))
    assert record.runs[0].status == "ok", record.runs[0].message
    assert not any("one-hot" in line for line in record.log)


def test_jit_compile_is_kept_and_the_loop_says_it_runs_one_step_per_execution(tmp_path):
    model_file = _model(
        tmp_path,
        "jit",
        "keras.losses.CategoricalCrossentropy(name='my_loss')",
        ", jit_compile=True, steps_per_execution=4",
    )
    record = _sweep(tmp_path, model_file)
    (run,) = record.runs
    assert run.status == "ok", run.message
    assert len(run.steps["loss"]) == 4  # one row per step, each timed on its own
    log = "\n".join(record.log)
    assert "one-hot encoded to 10 classes for the model's my_loss loss" in log  # the class, not the name, decides
    assert "jit_compile=True kept from the model file" in log
    assert "steps_per_execution=4 from the model file is overridden" in log and "--loop fit" in log


def test_the_fit_engine_keeps_steps_per_execution_and_shares_each_calls_mean_loss(tmp_path):
    model_file = _model(
        tmp_path, "spe", "keras.losses.categorical_crossentropy", ", jit_compile=True, steps_per_execution=2"
    )
    record = _sweep(tmp_path, model_file, loop="fit")
    (run,) = record.runs
    assert run.status == "ok", run.message
    assert run.attrs["engine"] == "fit"
    loss = run.steps["loss"]
    assert len(loss) == 4 and loss[0] == loss[1] and loss[2] == loss[3] and loss[1] != loss[2]
    log = "\n".join(record.log)
    assert "steps_per_execution=2 kept from the model file" in log
    assert "jit_compile=True kept from the model file" in log


# ---------------------------------------------------------------- every model/data pair, in one child process

# Runs in one fresh Python (TensorFlow imported once for all cases): builds each tiny model and data
# file, trains it one epoch through the trainer's own entry (train_run: load, check, fit targets,
# train, validate) into a run file per case, and records the message of each pair that must be refused.
CASES_SCRIPT = r"""
import json, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from pathlib import Path
import numpy as np
import keras
from batchlab.core.runfile.writer import RunFileWriter
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec
from batchlab.core.training.run import train_run

root = Path(sys.argv[1])
rng = np.random.default_rng(0)
N, V = 24, 8


def dense(inputs, outputs, loss, metrics=None, activation=None, shape=(5,)):
    i = keras.Input(shape)
    h = keras.layers.Dense(6, activation="relu")(keras.layers.Flatten()(i) if len(shape) > 1 else i)
    m = keras.Model(i, keras.layers.Dense(outputs, activation=activation)(h))
    m.compile(optimizer="adam", loss=loss, metrics=metrics)
    return m


def cnn():
    i = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, activation="relu")(i)
    h = keras.layers.GlobalAveragePooling2D()(h)
    m = keras.Model(i, keras.layers.Dense(3, activation="softmax")(h))
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def tokens():
    i = keras.Input((6,), dtype="int32")
    h = keras.layers.Embedding(20, 4)(i)
    h = keras.layers.GlobalAveragePooling1D()(h)
    m = keras.Model(i, keras.layers.Dense(2, activation="softmax")(h))
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return m


def autoencoder():
    i = keras.Input((5,))
    m = keras.Model(i, keras.layers.Dense(5)(keras.layers.Dense(2)(i)))
    m.compile(optimizer="adam", loss="mse")
    return m


x = rng.normal(size=(N + V, 5)).astype("float32")
classes = rng.integers(0, 3, N + V)
one_hot = np.eye(3, dtype="float32")[classes]
cases = {
    # name: (model, x, y, extra spec values)
    "sparse": (dense(5, 3, "sparse_categorical_crossentropy", ["accuracy"], "softmax"), x, classes, {}),
    "one_hot": (dense(5, 3, "categorical_crossentropy", ["accuracy", "auc"], "softmax"), x, one_hot, {}),
    "multi_label": (
        dense(5, 4, "binary_crossentropy", [keras.metrics.AUC(name="auc")], "sigmoid"),
        x, (rng.random((N + V, 4)) > 0.5).astype("uint8"), {},
    ),
    "regression": (dense(5, 1, "mse", ["mae"]), x, rng.normal(size=N + V).astype("float64"), {}),
    "vector_regression": (dense(5, 3, keras.losses.Huber()), x, rng.normal(size=(N + V, 3)), {}),
    "image_cnn": (cnn(), rng.integers(0, 256, (N + V, 8, 8, 3)).astype("uint8"), classes, {"scale": "255"}),
    "tokens": (tokens(), rng.integers(0, 20, (N + V, 6)).astype("int64"), classes % 2, {}),
    "autoencoder": (autoencoder(), x, None, {}),
    # pairs that must be refused
    "one_hot_with_sparse_loss": (dense(5, 3, "sparse_categorical_crossentropy", None, "softmax"), x, one_hot, {}),
    "floats_with_classifier": (
        dense(5, 3, "categorical_crossentropy", None, "softmax"), x, rng.normal(size=N + V), {},
    ),
    "wrong_input_width": (dense(5, 3, "sparse_categorical_crossentropy", None, "softmax"), x[:, :4], classes, {}),
}
# a regression that learns y = x @ w, trained to a target on its compiled mae (val_mae, met below the value)
linear = keras.Input((5,))
regressor = keras.Model(linear, keras.layers.Dense(1)(linear))
regressor.compile(optimizer="adam", loss="mse", metrics=["mae"])
cases["regression_to_target"] = (
    regressor, x, x @ np.array([1, -1, 0.5, 2, 0], "float32"),
    {"target": "val_mae=0.3", "epochs": 200, "batch_sizes": "8", "lr": "0.05"},
)
results = {}
for name, (model, xs, ys, extra) in cases.items():
    model_file = root / f"{name}.keras"
    model.save(model_file)
    arrays = {"x_train": xs[:N], "x_test": xs[N:]}
    if ys is not None:
        arrays.update(y_train=ys[:N], y_test=ys[N:])
    np.savez(root / f"{name}.npz", **arrays)
    # --model and --data only, as a user types them: the workload and the sample counts follow
    spec = build_spec(
        {"model_file": str(model_file), "data": str(root / f"{name}.npz"), "epochs": 1, "batch_sizes": "16",
         "device": "cpu", **extra}
    )
    events = []
    train_run(spec.runs()[0], events.append, lambda: False, None, None, "cpu")
    with RunFileWriter(root / f"{name}.h5") as writer:
        writer.handle({"type": "sweep_started", "spec": spec.to_dict(), "runs": [{"index": 0, "batch_size": 16}]})
        for event in events:
            writer.handle(event)
    if name == "regression_to_target":  # the event stream too, for the live model's test
        (root / f"{name}.events.json").write_text(json.dumps(events, default=float))
    results[name] = {"workload": spec.workload, "samples": spec.samples, "val_samples": spec.val_samples}
    results[name]["keras"] = {  # what Keras says of the model, for the TensorFlow-free reader's test
        "input": list(model.input_shape[1:]), "output": list(model.output_shape[1:]), "params": model.count_params()
    }
print(json.dumps(results))
"""

WORKING = {
    # case: (task, target layout, metrics the file must hold per epoch)
    "sparse": ("classification", "class indices", {"train_accuracy", "val_accuracy"}),
    "one_hot": ("classification", "one-hot", {"train_accuracy", "val_accuracy", "train_auc", "val_auc"}),
    "multi_label": ("multi-label", "0/1 vectors", {"train_auc", "val_auc"}),
    "regression": ("regression", "float", {"train_mae", "val_mae"}),
    "vector_regression": ("regression", "float", set()),
    "image_cnn": ("classification", "class indices", {"train_accuracy", "val_accuracy"}),
    "tokens": ("classification", "class indices", {"train_accuracy", "val_accuracy"}),
    "autoencoder": ("autoencoder", "inputs", set()),
}
REFUSED = {
    "one_hot_with_sparse_loss": "y_train rows have shape (3,), like one-hot or soft labels, but the model's "
    "sparse_categorical_crossentropy loss needs class indices",
    "floats_with_classifier": "y_train holds values that are not whole numbers (e.g.",
    "wrong_input_width": "x samples have shape (4,) but the model's input has shape (5,)",
}


@pytest.fixture(scope="module")
def every_pair(tmp_path_factory):
    import json
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("pairs")
    done = subprocess.run(
        [sys.executable, "-c", CASES_SCRIPT, str(root)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(WORKING))
def test_each_model_and_data_pair_trains_and_records_its_task_and_metrics(every_pair, case):
    root, results = every_pair
    # --model alone chose the user's-model workload; the counts are everything the file holds
    assert {k: results[case][k] for k in ("workload", "samples", "val_samples")} == {
        "workload": "keras-file",
        "samples": 24,
        "val_samples": 8,
    }
    record = read_run_file(root / f"{case}.h5")
    (run,) = record.runs
    assert run.status == "ok", run.message
    task, layout, metrics = WORKING[case]
    assert (run.attrs["task"], run.attrs["targets"]) == (task, layout)
    assert len(run.steps["loss"]) == 2 and np.all(np.isfinite(run.steps["loss"]))
    assert np.isfinite(run.epochs["val_loss"][0])
    assert set(run.metrics) == metrics
    for name in metrics:
        assert run.metrics[name].shape == (1,) and np.isfinite(run.metrics[name][0]), name
    if "train_accuracy" in metrics:  # the existing column and the metrics group agree
        assert run.metrics["train_accuracy"][0] == pytest.approx(run.epochs["train_accuracy"][0])
    assert any(f"task: {task} ({layout} targets" in line for line in record.log)


def test_a_regression_model_trains_until_its_compiled_mae_meets_a_val_mae_target(every_pair):
    root, _ = every_pair
    (run,) = read_run_file(root / "regression_to_target.h5").runs
    assert run.status == "ok", run.message
    val_mae = run.evals["val_mae"]  # the compiled metric, measured at every evaluation point
    assert len(val_mae) == len(run.evals["steps"]) and np.all(np.isfinite(val_mae))
    # Shallue's rule: the run stops at the first evaluation strictly below 0.3, and no earlier one was
    assert val_mae[-1] < 0.3 and np.all(val_mae[:-1] >= 0.3)
    assert run.figures.target_reached == 1
    assert run.figures.steps_to_target == run.evals["steps"][-1]
    assert run.evals["steps"][-1] < 200 * 3  # stopped well before its 200-epoch budget (3 steps an epoch)
    # live (the window's model fed the run's events) and from the file: the same figures
    import json

    from batchlab.core.model import SweepData

    live = SweepData()
    for event in json.loads((root / "regression_to_target.events.json").read_text()):
        live.handle(event)
    assert live.runs[0].eval_metrics["val_mae"] == pytest.approx(list(val_mae))
    assert live.runs[0].figures.steps_to_target == run.figures.steps_to_target
    from_file = SweepData.from_record(read_run_file(root / "regression_to_target.h5")).runs[0]
    assert from_file.figures.steps_to_target == run.figures.steps_to_target


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_each_mismatch_is_refused_with_one_clear_line(every_pair, case):
    root, _ = every_pair
    (run,) = read_run_file(root / f"{case}.h5").runs
    assert run.status == "error"
    assert REFUSED[case] in run.message and "\n" not in run.message


@pytest.mark.parametrize("case", sorted(WORKING) + sorted(REFUSED))
def test_the_window_reads_shapes_loss_and_parameters_without_tensorflow(every_pair, case):
    from batchlab.core.datasets import array_shapes
    from batchlab.core.model_file import mismatch, read_model_file

    root, results = every_pair
    info = read_model_file(root / f"{case}.keras")
    keras_says = results[case]["keras"]
    assert info.params == keras_says["params"]
    assert [list(s) for s in info.input_shapes] == [keras_says["input"]]
    if info.output_shapes[0] is not None:  # Dense outputs are read; other last layers may be unknown
        assert list(info.output_shapes[0]) == keras_says["output"]
    assert info.loss and "parameters" in info.summary()
    problem = mismatch(info, array_shapes(str(root / f"{case}.npz")))
    if case == "wrong_input_width":
        assert problem == "x samples have shape (4,) but the model's input has shape (5,)"
    elif case == "one_hot_with_sparse_loss":
        assert "like one-hot labels" in problem
    else:
        assert problem is None, problem
