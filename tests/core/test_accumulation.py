"""Gradient accumulation: k micro-batches then one update give the weights of one batch k times as large.

The training runs in a fresh Python (this test process never imports TensorFlow), through BatchLab's
own optimizer factory and step function."""

import json
import subprocess
import sys

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import run_sweep

SCRIPT = """
import os, json
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras, tensorflow as tf
from batchlab.core.training.trainer import make_step_function
from batchlab.core.training.workloads import make_optimizer

K, MICRO, UPDATES = 4, 8, 3
rng = np.random.default_rng(0)
x = rng.normal(size=(K * MICRO * UPDATES, 6)).astype("float32")
y = rng.normal(size=(K * MICRO * UPDATES, 2)).astype("float32")

def model(name, accumulate):
    keras.utils.set_random_seed(0)  # the same initial weights for both
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(2)(keras.layers.Dense(5, activation="tanh")(inputs))
    m = keras.Model(inputs, outputs)
    m.compile(optimizer=make_optimizer(name, 0.05, 0.9, accumulate), loss="mse")
    return m

out = {}
for name in ("sgd", "adam", "rmsprop"):
    big, acc = model(name, 1), model(name, K)
    big_step, acc_step = make_step_function(big), make_step_function(acc)
    for u in range(UPDATES):
        s = u * K * MICRO
        big_step(tf.constant(x[s : s + K * MICRO]), tf.constant(y[s : s + K * MICRO]))
        for i in range(K):
            part = slice(s + i * MICRO, s + (i + 1) * MICRO)
            acc_step(tf.constant(x[part]), tf.constant(y[part]))
    out[name] = {
        "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(big.get_weights(), acc.get_weights())),
        "moved": max(float(np.abs(a - b).max()) for a, b in zip(big.get_weights(), model(name, 1).get_weights())),
        "iterations": [int(big.optimizer.iterations.numpy()), int(acc.optimizer.iterations.numpy())],
    }
print(json.dumps(out))
"""


def test_k_micro_batches_give_the_weights_of_one_batch_k_times_as_large():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for name, o in out.items():
        assert o["moved"] > 1e-2, name  # training changed the weights, so equality means something
        assert o["max_weight_diff"] < 1e-5, name  # float32 rounding only
        # Keras counts updates, not micro-batches: a learning-rate schedule sees real updates.
        assert o["iterations"] == [3, 3], name


def test_accumulation_is_recorded_in_the_run_file(tmp_path):
    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 128, "val_samples": 0, "epochs": 1, "batch_sizes": "16", "device": "cpu"}
        | {"accumulate": "4"}
    )
    assert run_sweep(spec, tmp_path / "acc.h5") == "complete"
    run = read_run_file(tmp_path / "acc.h5").runs[0]
    assert run.status == "ok"
    assert (run.attrs["accumulation_steps"], run.attrs["effective_batch_size"]) == (4, 64)
    assert len(run.steps["step"]) == 8  # every micro-batch is a recorded step


@pytest.mark.parametrize(
    "values, phrase",
    [
        ({"accumulate": "0"}, "from 1"),
        ({"accumulate": "two"}, "not an integer"),
        ({"accumulate": "4", "budget_unit": "steps", "epochs": "10"}, "steps budget"),
    ],
)
def test_bad_accumulation_is_one_clear_error(values, phrase):
    with pytest.raises(SpecError, match=phrase) as e:
        build_spec({"preset": "mnist-mlp", **values})
    assert e.value.field == "accumulate"
