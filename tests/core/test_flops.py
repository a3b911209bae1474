"""FLOPs per training sample counted from a real Keras model equal the hand count.

The model is built in a fresh Python (this test process never imports TensorFlow)."""

import json
import subprocess
import sys

from batchlab.core.training.flops import TRAINING_FACTOR, FlopCount

COUNT_SCRIPT = """
import os, json
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras
from keras import layers
from batchlab.core.training.flops import model_flops, layer_flops

inputs = keras.Input(shape=(28, 28, 3))
a = layers.Conv2D(8, 3, name="conv_valid")(inputs)  # 26x26x8
b = layers.Conv2D(16, 5, strides=2, padding="same", name="conv_strided")(a)  # 13x13x16
c = layers.MaxPooling2D(name="pool")(b)  # 6x6x16
d = layers.Flatten(name="flatten")(c)  # 576
e = layers.Dense(10, name="dense")(d)
seq = keras.Input(shape=(7, 20))
f = layers.Dense(4, name="dense_per_position")(seq)  # applied at 7 positions
g = layers.LSTM(3, name="lstm")(f)
model = keras.Model([inputs, seq], [e, g])
print(json.dumps({
    "layers": {l.name: layer_flops(l) for l in model.layers},
    "forward": model_flops(model).forward,
    "uncounted": model_flops(model).uncounted,
    "fields": model_flops(model).run_fields(),
}))
"""


def _count():
    out = subprocess.run([sys.executable, "-c", COUNT_SCRIPT], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dense_and_conv_flops_per_sample_equal_the_hand_count():
    counted = _count()
    hand = {
        "conv_valid": 2 * 3 * 3 * 3 * 8 * 26 * 26,  # 2 * kh * kw * cin * cout * H_out * W_out
        "conv_strided": 2 * 5 * 5 * 8 * 16 * 13 * 13,
        "dense": 2 * 576 * 10,  # 2 * in * out
        "dense_per_position": 2 * 20 * 4 * 7,
        "pool": 0,
        "flatten": 0,
    }
    for name, flops in hand.items():
        assert counted["layers"][name] == flops, name
    assert counted["layers"]["lstm"] is None  # a layer the rules do not know is not guessed
    assert counted["forward"] == sum(hand.values())
    assert counted["uncounted"] == ["lstm (LSTM)"]
    assert counted["fields"]["flops_per_sample"] == TRAINING_FACTOR * sum(hand.values())
    assert counted["fields"]["flops_uncounted"] == "lstm (LSTM)"


def test_training_is_three_forward_passes():
    assert FlopCount(forward=1000, uncounted=()).training == 3000
