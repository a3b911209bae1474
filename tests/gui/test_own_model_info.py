"""The setup panel describes a chosen model and data file, fills in the data's counts, and shows a
shape mismatch under the data field before Run, all without importing TensorFlow in the window."""

from __future__ import annotations

import sys

import numpy as np
from PySide6.QtWidgets import QFileDialog

from tests.core.helpers import save_keras_model

MODEL = """
inputs = keras.Input((5,))
hidden = keras.layers.Dense(4, activation="relu")(inputs)
model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
"""


def test_model_and_data_are_described_and_a_mismatch_shows_before_run(main_window, tmp_path, monkeypatch):
    w = main_window
    model = save_keras_model(MODEL, tmp_path / "m.keras")
    good, wide = tmp_path / "good.npz", tmp_path / "wide.npz"
    classes = np.arange(30) % 3
    np.savez(good, x_train=np.zeros((30, 5), "float32"), y_train=classes, x_test=np.zeros((6, 5)), y_test=classes[:6])
    np.savez(wide, x_train=np.zeros((30, 4), "float32"), y_train=classes)

    w.setup.set_values({"preset": "keras-file", "model_file": str(model), "batch_sizes": "8"})
    assert w.setup.model_info.isVisible()
    # 5*4+4 + 4*3+3 = 39 parameters, read from the weights file's shapes
    assert w.setup.model_info.text() == "input (5,) float32 → output (3,); loss sparse_categorical_crossentropy; " + (
        "metrics accuracy; 39 parameters"
    )

    # choosing a data file fills in everything it holds
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(good), ""))
    choose = w.setup.data.findData("__choose__")
    w.setup.data.setCurrentIndex(choose)
    w.setup.data.activated.emit(choose)
    assert (w.setup.samples.text(), w.setup.val_samples.text()) == ("30", "6")
    assert w.setup.data_info.text() == "x_train (30, 5); y_train (30,); x_test (6, 5); y_test (6,)"
    assert w.setup.valid, w.setup.errors

    # samples of another width: said under the data field, and Run stays off
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(wide), ""))
    choose = w.setup.data.findData("__choose__")
    w.setup.data.setCurrentIndex(choose)
    w.setup.data.activated.emit(choose)
    assert w.setup.errors["data"] == "x samples have shape (4,) but the model's input has shape (5,)"
    assert w.setup._error_labels["data"].isVisible() and not w.actions["run"].isEnabled()
    assert "tensorflow" not in sys.modules


def test_a_csv_file_shows_its_fields_fills_counts_from_the_target_column_and_flags_a_bad_column(
    main_window, tmp_path, monkeypatch
):
    w = main_window
    table = tmp_path / "table.csv"
    rows = ["a,b,price"] + [f"{i},{2 * i},{3 * i + 1}" for i in range(20)]
    table.write_text("\n".join(rows) + "\n")
    w.setup.set_values({"preset": "keras-file", "batch_sizes": "4"})
    assert not w.setup.target_column.isVisible() and not w.setup.val_fraction.isVisible()  # no CSV yet

    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(table), ""))
    choose = w.setup.data.findData("__choose__")
    w.setup.data.setCurrentIndex(choose)
    w.setup.data.activated.emit(choose)
    assert w.setup.target_column.isVisible() and w.setup.val_fraction.isVisible()
    assert "needs the target column named" in w.setup.errors["target_column"]

    # naming the column fills in the counts (the last fifth validates) and validates the rest
    w.setup.val_fraction.setText("")  # blank: the default 0.2, as on the command line
    w.setup.target_column.setText("price")
    assert (w.setup.samples.text(), w.setup.val_samples.text()) == ("16", "4")
    assert "target_column" not in w.setup.errors and "val_fraction" not in w.setup.errors
    assert w.setup.values()["target_column"] == "price"

    # a column the file lacks, and a fraction out of range: said under their fields, as the CLI says them
    w.setup.samples.clear()
    w.setup.target_column.setText("prize")
    assert w.setup.errors["target_column"].endswith("has no column 'prize'; its columns are a, b, price")
    assert w.setup._error_labels["target_column"].isVisible()
    assert "samples" not in w.setup.errors  # blank counts follow the file once its column is named
    assert not w.actions["run"].isEnabled()
    w.setup.target_column.setText("price")
    w.setup.val_fraction.setText("1.5")
    assert w.setup.errors["val_fraction"].startswith("'1.5' is out of range")
    assert w.setup._error_labels["val_fraction"].isVisible()
    w.setup.scale.setText("-1")
    assert "scale" in w.setup.errors


def _choose_data(w, monkeypatch, path) -> None:
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(path), ""))
    choose = w.setup.data.findData("__choose__")
    w.setup.data.setCurrentIndex(choose)
    w.setup.data.activated.emit(choose)


def test_data_that_contradicts_the_preset_s_model_is_refused_beside_the_data_field(main_window, tmp_path, monkeypatch):
    """The window uses the spec's check: the CLI's one line beside the data field, Run off; the preset of the
    workload sized from the data takes the same file."""
    from batchlab.core.spec import spec_errors

    w = main_window
    labels = np.arange(40) % 10 + 50  # labels 50-59: mnist-cnn would build 60 outputs
    path = tmp_path / "labels50.npz"
    images = np.zeros((40, 28, 28), np.uint8)
    np.savez(path, x_train=images, y_train=labels, x_test=images[:8], y_test=labels[:8])
    w.setup.apply_preset("mnist-cnn")
    _choose_data(w, monkeypatch, path)
    expected = spec_errors({"preset": "mnist-cnn", "data": str(path)})["data"].message
    assert w.setup.errors["data"] == expected
    assert expected.startswith("preset mnist-cnn trains a CNN for 10 classes of 28x28 images but data 'labels50' has")
    assert w.setup._error_labels["data"].isVisible() and not w.actions["run"].isEnabled()
    w.setup.apply_preset("cnn")  # "Small CNN sized from the data"
    _choose_data(w, monkeypatch, path)
    w.setup.batch_sizes.setText("8, 16")  # the preset's reach 1,024; the file has 40 samples
    assert "data" not in w.setup.errors and w.setup.valid, w.setup.errors
    assert "Sized from the data" in w.setup.preset_description.text()
    assert "tensorflow" not in sys.modules
