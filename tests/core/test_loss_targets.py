"""Targets as the loss needs them (core.loss_targets): every accepted layout and every refusal, numpy only."""

from __future__ import annotations

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.loss_targets import (
    BINARY,
    CLASSIFICATION,
    MULTI_LABEL,
    OTHER,
    REGRESSION,
    fit_targets,
    summarize_targets,
)

RNG = np.random.default_rng(0)
INDICES = np.array([0, 2, 1, 2, 0, 1])
ONE_HOT = np.eye(3, dtype="float32")[INDICES]
SOFT = np.full((6, 3), 1 / 3, dtype="float32")
MULTI = (RNG.random((6, 4)) > 0.5).astype("float32")
FLOATS = RNG.normal(size=6).astype("float32")
VECTORS = RNG.normal(size=(6, 2)).astype("float32")


def fit(kind: str, out_shape: tuple, y: np.ndarray, y_val: np.ndarray | None = None, loss: str = "the_loss"):
    return fit_targets(kind, loss, out_shape, y, y_val, summarize_targets(y, y_val))


def test_summary_knows_whole_numbers_range_and_a_fraction_to_quote():
    s = summarize_targets(np.array([0.0, 2.0]), np.array([1.5]))
    assert (s.shape, s.whole, s.low, s.high, s.fraction) == ((), False, 0.0, 2.0, 1.5)
    assert summarize_targets(None, None) is None
    assert summarize_targets(INDICES).whole


@pytest.mark.parametrize(
    "kind,out_shape,y,task,layout,shape,dtype",
    [
        ("sparse", (3,), INDICES, CLASSIFICATION, "class indices", (6,), "int32"),
        ("sparse", (3,), INDICES.reshape(-1, 1).astype("float64"), CLASSIFICATION, "class indices", (6,), "int32"),
        ("categorical", (3,), ONE_HOT, CLASSIFICATION, "one-hot", (6, 3), "float32"),
        ("categorical", (3,), SOFT, CLASSIFICATION, "soft labels", (6, 3), "float32"),
        ("categorical", (3,), INDICES, CLASSIFICATION, "class indices, one-hot encoded", (6, 3), "float32"),
        ("binary", (4,), MULTI, MULTI_LABEL, "0/1 vectors", (6, 4), "float32"),
        ("binary", (1,), INDICES % 2, BINARY, "0/1", (6, 1), "float32"),
        ("regression", (1,), FLOATS, REGRESSION, "float", (6, 1), "float32"),
        ("regression", (2,), VECTORS, REGRESSION, "float", (6, 2), "float32"),
        ("regression", (None, 2), VECTORS.reshape(6, 1, 2), REGRESSION, "float", (6, 1, 2), "float32"),
        ("regression", (1,), INDICES, REGRESSION, "float", (6, 1), "float32"),  # whole-number regression targets
        ("other", (3,), INDICES, CLASSIFICATION, "class indices, one-hot encoded", (6, 3), "float32"),
        ("other", (2,), VECTORS, OTHER, "float", (6, 2), "float32"),
    ],
)
def test_accepted_layouts(kind, out_shape, y, task, layout, shape, dtype):
    fitted = fit(kind, out_shape, y, y[:2])
    assert (fitted.task, fitted.layout) == (task, layout)
    assert fitted.y_train.shape == shape and str(fitted.y_train.dtype) == dtype
    assert fitted.y_val.shape == (2, *shape[1:])


def test_one_hot_encoding_puts_each_label_in_its_column_and_says_so():
    fitted = fit("categorical", (3,), INDICES, loss="categorical_crossentropy")
    assert np.array_equal(fitted.y_train.argmax(axis=1), INDICES) and fitted.y_train.sum() == 6
    assert fitted.notes == [
        "labels one-hot encoded to 3 classes for the model's categorical_crossentropy loss (it compares whole rows)"
    ]


@pytest.mark.parametrize(
    "kind,out_shape,y,phrases",
    [
        # one-hot data with a sparse loss
        (
            "sparse",
            (3,),
            ONE_HOT,
            ["y_train rows have shape (3,), like one-hot or soft labels", "needs class indices", "np.argmax"],
        ),
        # float targets with a classifier
        ("sparse", (3,), FLOATS, ["not whole numbers (e.g.", "needs class indices 0 to 2", "regression loss"]),
        ("categorical", (3,), FLOATS, ["not whole numbers", "class indices 0 to 2"]),
        # labels the output cannot hold
        ("sparse", (3,), INDICES + 3, ["labels go up to 5 but the model has 3 outputs; labels must be 0 to 2"]),
        ("categorical", (3,), INDICES * 2, ["labels go up to 4 but the model has 3 outputs"]),
        ("binary", (1,), INDICES, ["labels go up to 2", "needs labels 0 or 1"]),
        ("binary", (4,), MULTI * 3, ["values go from 0 to 3", "0/1"]),
        ("categorical", (3,), ONE_HOT * 5, ["values go from 0 to 5", "one-hot or soft labels"]),
        ("sparse", (3,), INDICES - 1, ["negative label (-1)"]),
        # shapes that do not fit the output
        ("regression", (3,), VECTORS, ["y_train rows have shape (2,) but the model's output has shape (3,)"]),
        ("regression", (2,), FLOATS, ["rows have shape () but the model's output has shape (2,)"]),
        ("categorical", (4,), ONE_HOT, ["rows have shape (3,)", "output has shape (4,)"]),
    ],
)
def test_mismatches_are_one_line_on_the_data_field(kind, out_shape, y, phrases):
    with pytest.raises(SpecError) as info:
        fit(kind, out_shape, y, loss="the_loss")
    message = str(info.value)
    assert info.value.field == "data" and "\n" not in message
    for phrase in phrases:
        assert phrase in message, message
