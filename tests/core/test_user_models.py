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
