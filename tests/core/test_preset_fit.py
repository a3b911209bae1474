"""Presets keep their promise: data that contradicts the model a preset names is refused in one line
(core/preset_fit.py, with the spec's data checks); the workloads sized from the data take it and say what they built."""

import numpy as np
import pytest
from batchlab.core.errors import SpecError
from batchlab.core.presets import PRESETS
from batchlab.core.spec import build_spec, spec_errors

from tests.core.test_cli import assert_one_line_error, batchlab

RNG = np.random.default_rng(0)


def _images(n: int, shape=(28, 28)) -> np.ndarray:
    return RNG.integers(0, 256, (n, *shape), dtype=np.uint8)


def _save(path, x_train, y_train=None, x_test=None, y_test=None):
    arrays = {"x_train": x_train}
    for key, value in (("y_train", y_train), ("x_test", x_test), ("y_test", y_test)):
        if value is not None:
            arrays[key] = value
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture
def files(tmp_path):
    labels = np.arange(64) % 10
    return {
        "mnist": _save(tmp_path / "mnist_like.npz", _images(64), labels, _images(16), labels[:16]),
        "flat784": _save(tmp_path / "flat784.npz", _images(64, (784,)), labels, _images(16, (784,)), labels[:16]),
        "wide5": _save(tmp_path / "wide5.npz", RNG.random((64, 5)).astype("float32")),
        "labels50": _save(tmp_path / "labels50.npz", _images(64), labels + 50, _images(16), labels[:16] + 50),
        "images32": _save(
            tmp_path / "images32.npz", _images(64, (32, 32, 3)), labels, _images(16, (32, 32, 3)), labels[:16]
        ),
        "wide5_labelled": _save(tmp_path / "wide5_labelled.npz", RNG.random((64, 5)).astype("float32"), labels),
    }


# (preset, data that contradicts it, what the message says the data has, what it says the preset trains)
REFUSED = [
    ("mnist-autoencoder", "wide5", "5 values per sample (shape (5,)), not 784", "784-128-32-128-784 dense autoencoder"),
    ("mnist-mlp", "wide5_labelled", "5 values per sample", "784-256-10 classifier"),
    ("mnist-mlp", "labels50", "labels 50 to 59, not 0 to 9 (10 classes)", "784-256-10 classifier"),
    ("golmant-lsr", "labels50", "labels 50 to 59", "784-256-10 MLP classifier"),
    ("mnist-cnn", "labels50", "labels 50 to 59, not 0 to 9 (10 classes)", "CNN for 10 classes of 28x28 images"),
    ("mnist-cnn", "images32", "samples of shape (32, 32, 3), not 28x28 images", "CNN for 10 classes of 28x28 images"),
    ("mnist-cnn-98", "labels50", "labels 50 to 59", "CNN for 10 classes of 28x28 images"),
    ("shallue-mnist", "images32", "samples of shape (32, 32, 3)", "CNN for 10 classes of 28x28 images"),
]


@pytest.mark.parametrize(("preset", "data", "has", "trains"), REFUSED)
def test_each_preset_refuses_data_that_contradicts_its_model(files, preset, data, has, trains):
    with pytest.raises(SpecError) as raised:
        build_spec({"preset": preset, "data": files[data]})
    error = raised.value
    workload = PRESETS[preset].defaults["workload"]
    assert error.field == "data"
    assert f"preset {preset} trains a {trains} but data '{data}' has {has}" in error.message
    assert "; use data that fits it, the " in error.message
    assert f"--workload {workload} without --preset" in error.message and "--model FILE" in error.message
    assert "\n" not in str(error)
    # the workload sized from the data takes it (the preset of that name, which --workload alone implies)
    sized = build_spec({"workload": workload, "data": files[data]})
    assert (sized.preset, sized.workload) == (workload, workload)
    assert "data" not in spec_errors({"preset": workload, "data": files[data]})


@pytest.mark.parametrize(
    ("preset", "data"),
    [
        ("mnist-autoencoder", "mnist"),
        ("mnist-autoencoder", "flat784"),
        ("mnist-mlp", "mnist"),
        ("mnist-mlp", "flat784"),
        ("golmant-lsr", "flat784"),
        ("mnist-cnn", "mnist"),
        ("mnist-cnn-98", "mnist"),
        ("shallue-mnist", "mnist"),
    ],
)
def test_data_that_fits_a_preset_is_still_accepted(files, preset, data):
    spec = build_spec({"preset": preset, "data": files[data]})
    assert spec.preset == preset and spec.samples == 64


def test_the_default_preset_keeps_its_promise_and_keras_datasets_are_checked_without_a_download(files):
    assert "784-128-32-128-784" in str(spec_errors({"data": files["wide5"]})["data"])
    assert "(32, 32, 3)" in str(spec_errors({"preset": "mnist-cnn", "data": "keras:cifar10"})["data"])
    assert "data" not in spec_errors({"preset": "mnist-cnn", "data": "keras:fashion_mnist"})
    # another workload than the preset's is sized from the data: the preset's promise is about its own model
    assert "data" not in spec_errors({"preset": "mnist-autoencoder", "workload": "cnn", "data": files["labels50"]})


def test_each_preset_s_description_names_its_shape_or_says_it_sizes_itself():
    assert "784-128-32-128-784" in PRESETS["mnist-autoencoder"].description
    assert "784-256-10" in PRESETS["mnist-mlp"].description
    assert "10 classes (labels 0-9) of 28x28 images" in PRESETS["mnist-cnn"].description
    for name in ("autoencoder", "cnn", "mlp"):
        assert "Sized from the data: the run's log says the model it built." in PRESETS[name].description


def test_the_cli_refuses_in_one_line_with_exit_2(files):
    assert_one_line_error(
        batchlab("sweep", "--preset", "mnist-cnn", "--data", files["labels50"], "--device", "cpu"),
        "data: preset mnist-cnn trains a CNN for 10 classes of 28x28 images but data 'labels50' has labels 50 to 59",
        "--workload cnn without --preset",
    )


def test_a_workload_sized_from_the_data_says_in_the_log_and_file_what_it_built(files, tmp_path):
    from batchlab.core.runfile.reader import read_run_file

    out = tmp_path / "wide5.h5"
    result = batchlab(
        "sweep",
        "--workload",
        "autoencoder",
        "--data",
        files["wide5"],
        "--epochs",
        "1",
        "--batch-sizes",
        "32",
        "--device",
        "cpu",
        "--out",
        out,
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    record = read_run_file(out)
    assert record.spec["preset"] == "autoencoder"
    assert any("model: dense autoencoder 5-128-32-128-5 (5 values per sample)" in line for line in record.log)
