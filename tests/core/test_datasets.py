"""Data loading, validation and preparation: the bundled subset, user files, Keras sources and every refusal."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import h5py
import numpy as np
import pytest
from batchlab.core.datasets import (
    DataError,
    Dataset,
    bundled_extra_path,
    bundled_path,
    load_dataset,
    load_keras_dataset,
    prepare_arrays,
)
from batchlab.core.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parents[2]
FULL_MNIST = REPO_ROOT.parent / "shared" / "datasets" / "mnist.npz"
SUBSET_TRAIN_COUNTS = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
SUBSET_TEST_COUNTS = [175, 234, 219, 207, 217, 179, 178, 205, 192, 194]
EXTRA_TRAIN_COUNTS = [1960, 2296, 1957, 2041, 1946, 1846, 1961, 2037, 1931, 2025]  # MNIST train rows 10,000-29,999

UNPICKLED: list[str] = []


def _record_unpickle(tag: str) -> str:
    UNPICKLED.append(tag)
    return tag


class _Booby:
    """An object whose unpickling leaves a trace, to prove a file was never unpickled."""

    def __reduce__(self):
        return (_record_unpickle, ("unpickled",))


def _arrays(n_train: int = 12, n_test: int = 4, shape: tuple[int, ...] = (4, 5), dtype=np.uint8) -> dict:
    rng = np.random.default_rng(0)
    return {
        "x_train": rng.integers(0, 256, size=(n_train, *shape)).astype(dtype),
        "y_train": np.arange(n_train) % 3,
        "x_test": rng.integers(0, 256, size=(n_test, *shape)).astype(dtype),
        "y_test": np.arange(n_test) % 3,
    }


def _npz(tmp_path: Path, name: str = "data.npz", **arrays) -> Path:
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def _h5(tmp_path: Path, name: str = "data.h5", **arrays) -> Path:
    path = tmp_path / name
    with h5py.File(path, "w") as f:
        for key, value in arrays.items():
            f.create_dataset(key, data=value.astype("S") if value.dtype.kind == "U" else value)
    return path


def _refused(source: Path | str, phrase: str, field: str = "data") -> DataError:
    with pytest.raises(DataError) as info:
        load_dataset(str(source))
    assert info.value.field == field
    assert phrase in str(info.value)
    assert "\n" not in str(info.value)
    return info.value


# ---------------------------------------------------------------- bundled subset


def test_bundled_subset_shapes_dtypes_and_label_counts():
    data = load_dataset("bundled")
    assert bundled_path().is_file() and bundled_path().stat().st_size <= 3 * 1024 * 1024
    assert data.x_train.shape == (10000, 28, 28) and data.x_train.dtype == np.uint8
    assert data.x_test.shape == (2000, 28, 28) and data.x_test.dtype == np.uint8
    assert data.y_train.shape == (10000,) and data.y_test.shape == (2000,)
    assert np.bincount(data.y_train).tolist() == SUBSET_TRAIN_COUNTS
    assert np.bincount(data.y_test).tolist() == SUBSET_TEST_COUNTS
    assert data.num_classes == 10 and data.sample_shape == (28, 28)


@pytest.mark.skipif(not FULL_MNIST.is_file(), reason="full MNIST (../shared/datasets/mnist.npz) not present")
def test_bundled_subset_is_the_first_rows_of_full_mnist():
    data = load_dataset("bundled")
    with np.load(FULL_MNIST, allow_pickle=False) as full:
        assert np.array_equal(data.x_train, full["x_train"][:10000])
        assert np.array_equal(data.y_train, full["y_train"][:10000])
        assert np.array_equal(data.x_test, full["x_test"][:2000])
        assert np.array_equal(data.y_test, full["y_test"][:2000])


def test_bundled_large_is_the_subset_then_20000_more_training_images():
    small, large = load_dataset("bundled"), load_dataset("bundled-large")
    assert bundled_extra_path().is_file() and bundled_extra_path().stat().st_size <= 4 * 1024 * 1024
    assert large.x_train.shape == (30000, 28, 28) and large.y_train.shape == (30000,)
    assert large.x_train.dtype == np.uint8
    # the first 10,000 rows and the test split are bundled's, so "the first N samples" are the same images
    assert np.array_equal(large.x_train[:10000], small.x_train) and np.array_equal(large.y_train[:10000], small.y_train)
    assert np.array_equal(large.x_test, small.x_test) and np.array_equal(large.y_test, small.y_test)
    assert np.bincount(large.y_train[10000:]).tolist() == EXTRA_TRAIN_COUNTS
    assert large.num_classes == 10 and large.sample_shape == (28, 28)
    with pytest.raises(DataError) as info:
        prepare_arrays(large, "cnn", samples=30001, val_samples=0)
    assert info.value.field == "samples" and "has 30000" in str(info.value)


@pytest.mark.skipif(not FULL_MNIST.is_file(), reason="full MNIST (../shared/datasets/mnist.npz) not present")
def test_bundled_large_is_the_first_30000_rows_of_full_mnist():
    data = load_dataset("bundled-large")
    with np.load(FULL_MNIST, allow_pickle=False) as full:
        assert np.array_equal(data.x_train, full["x_train"][:30000])
        assert np.array_equal(data.y_train, full["y_train"][:30000])


def test_importing_datasets_does_not_import_tensorflow():
    code = "import sys, batchlab.core.datasets; sys.exit(int('tensorflow' in sys.modules or 'keras' in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT).returncode == 0


# ---------------------------------------------------------------- user files


@pytest.mark.parametrize("writer,name", [(_npz, "mine.npz"), (_h5, "mine.h5"), (_h5, "mine.hdf5")])
def test_user_file_round_trips(tmp_path, writer, name):
    arrays = _arrays()
    data = load_dataset(str(writer(tmp_path, name, **arrays)))
    assert data.name == "mine"
    for key, value in arrays.items():
        assert np.array_equal(getattr(data, key), value)
    assert data.x_train.dtype == np.uint8 and data.num_classes == 3


def test_optional_test_split_and_labels(tmp_path):
    x = np.zeros((5, 3, 3), np.float32)
    data = load_dataset(str(_npz(tmp_path, x_train=x)))
    assert data.y_train is None and data.x_test is None and data.num_classes is None


def test_targets_are_kept_as_stored_and_column_labels_flattened_for_the_classifiers(tmp_path):
    arrays = _arrays()
    arrays["y_train"] = arrays["y_train"].reshape(-1, 1).astype(np.float64)
    arrays["y_test"] = arrays["y_test"].reshape(-1, 1).astype(np.float64)
    data = load_dataset(str(_h5(tmp_path, **arrays)))
    assert data.y_train.shape == (12, 1) and data.y_train.dtype == np.float64  # the model's loss decides later
    assert data.num_classes == 3
    prep = prepare_arrays(data, "mlp", 12, 4)
    assert prep.y_train.shape == (12,) and prep.y_train.dtype == np.int32
    assert np.array_equal(prep.y_train, np.arange(12) % 3)


@pytest.mark.parametrize(
    "y,shape",
    [
        (np.eye(3, dtype=np.float32)[np.arange(12) % 3], (3,)),  # one-hot
        (np.linspace(-1, 1, 12), ()),  # regression values
        (np.zeros((12, 2, 2)), (2, 2)),  # targets of any trailing shape
    ],
)
def test_one_hot_regression_and_shaped_targets_load_for_a_users_model(tmp_path, y, shape):
    arrays = _arrays()
    arrays["y_train"], arrays["y_test"] = y, y[:4]
    data = load_dataset(str(_npz(tmp_path, **arrays)))
    assert data.y_train.shape[1:] == shape and data.num_classes is None
    prep = prepare_arrays(data, "keras-file", 12, 4)
    assert np.array_equal(prep.y_train, y) and prep.targets.shape == shape


CLASS_INDEX_REFUSALS = [
    ("fractional labels", np.full(12, 0.5), "not whole numbers"),
    ("negative labels", np.full(12, -1), "negative label (-1)"),
    ("one-hot labels", np.eye(12, 3), "not one-hot"),
]


@pytest.mark.parametrize("y,phrase", [c[1:] for c in CLASS_INDEX_REFUSALS], ids=[c[0] for c in CLASS_INDEX_REFUSALS])
def test_the_mnist_classifiers_need_class_indices(tmp_path, y, phrase):
    arrays = _arrays()
    arrays["y_train"], arrays["y_test"] = y, y[:4]
    path = _npz(tmp_path, **arrays)
    data = load_dataset(str(path))
    with pytest.raises(DataError) as info:
        prepare_arrays(data, "mlp", 12, 4)
    assert phrase in str(info.value) and str(path) in str(info.value) and info.value.field == "data"


def _with(**changes) -> dict:
    arrays = _arrays()
    arrays.update(changes)
    return {k: v for k, v in arrays.items() if v is not None}


BAD_ARRAYS = [
    ("no x_train", _with(x_train=None), "has no x_train"),
    ("1-D x_train", _with(x_train=np.arange(12.0)), "at least 2 dimensions"),
    ("empty x_train", _with(x_train=np.zeros((0, 4, 5)), y_train=np.zeros(0)), "x_train has no samples"),
    ("short y_train", _with(y_train=np.arange(11)), "y_train has 11 labels but x_train has 12 samples"),
    ("short y_test", _with(y_test=np.arange(3)), "y_test has 3 labels but x_test has 4 samples"),
    ("x_test shape", _with(x_test=np.zeros((4, 5, 4))), "must have the same sample shape"),
    ("y_test alone", _with(x_test=None), "has y_test but no x_test"),
    ("labels on one split", _with(y_test=None), "has y_train but no y_test"),
    ("string x", _with(x_train=np.array([["a", "b"]] * 12)), "not numeric"),
    ("complex x", _with(x_train=np.zeros((12, 2), np.complex64)), "not numeric"),
    ("string labels", _with(y_train=np.array(["cat"] * 12)), "not numeric"),
    ("NaN in x", _with(x_train=np.full((12, 2), np.nan)), "24 NaN or inf values"),
    ("inf in x_test", _with(x_test=np.array([[np.inf, 0.0]] * 4), x_train=np.zeros((12, 2))), "NaN or inf"),
    ("NaN labels", _with(y_train=np.full(12, np.nan)), "y_train contains 12 NaN or inf values"),
    ("y_test shape", _with(y_test=np.zeros((4, 2))), "both splits must have the same target shape"),
]


@pytest.mark.parametrize("writer", [_npz, _h5], ids=["npz", "h5"])
@pytest.mark.parametrize("arrays,phrase", [c[1:] for c in BAD_ARRAYS], ids=[c[0] for c in BAD_ARRAYS])
def test_bad_arrays_are_refused_naming_the_file(tmp_path, writer, arrays, phrase):
    path = writer(tmp_path, "bad" + (".npz" if writer is _npz else ".h5"), **arrays)
    assert str(path) in str(_refused(path, phrase))


def test_missing_file_and_unknown_source(tmp_path):
    _refused(tmp_path / "nothing.npz", "does not exist")
    _refused(tmp_path / "data.txt", "is not a data source")


def test_not_an_npz_or_hdf5(tmp_path):
    (tmp_path / "text.npz").write_text("x_train,y_train\n1,2\n")
    _refused(tmp_path / "text.npz", "is not a valid .npz archive")
    (tmp_path / "text.h5").write_text("not hdf5")
    _refused(tmp_path / "text.h5", "is not a valid HDF5 file")
    np.save(tmp_path / "plain.npy", np.zeros(3))
    (tmp_path / "plain.npy").rename(tmp_path / "plain.npz")
    _refused(tmp_path / "plain.npz", "is not a valid .npz archive")


def test_truncated_and_corrupt_files(tmp_path):
    npz = _npz(tmp_path, **_arrays())
    (tmp_path / "cut.npz").write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    _refused(tmp_path / "cut.npz", "is not a valid .npz archive")
    raw = bytearray(npz.read_bytes())
    raw[200:260] = bytes(60)  # inside x_train's data: the zip CRC check fails
    (tmp_path / "flipped.npz").write_bytes(bytes(raw))
    _refused(tmp_path / "flipped.npz", "corrupt or truncated")
    h5 = _h5(tmp_path, **_arrays(n_train=2000))
    (tmp_path / "cut.h5").write_bytes(h5.read_bytes()[: h5.stat().st_size // 2])
    _refused(tmp_path / "cut.h5", "is not a valid HDF5 file")


def test_hdf5_group_instead_of_dataset(tmp_path):
    path = tmp_path / "group.h5"
    with h5py.File(path, "w") as f:
        f.create_group("x_train")
    _refused(path, "'x_train' is a group")


def test_pickled_object_array_is_refused_without_unpickling(tmp_path):
    x = np.empty((2, 2), dtype=object)
    x[0, 0] = _Booby()
    path = tmp_path / "evil.npz"
    np.savez(path, x_train=x, y_train=np.arange(2))
    UNPICKLED.clear()
    _refused(path, "object arrays (pickled Python objects), which are not allowed")
    assert UNPICKLED == []


# ---------------------------------------------------------------- Keras sources (no TensorFlow: a stand-in module)


def _fake_keras(monkeypatch, load_data) -> None:
    datasets = types.SimpleNamespace(**{n: types.SimpleNamespace(load_data=load_data) for n in ("mnist", "cifar10")})
    monkeypatch.setitem(sys.modules, "keras", types.SimpleNamespace(datasets=datasets))


def test_keras_download_failure_is_one_line_data_error(monkeypatch):
    def offline():
        raise Exception("URL fetch failure on https://storage.googleapis.com/...: None -- [Errno -3]")

    _fake_keras(monkeypatch, offline)
    with pytest.raises(DataError) as info:
        load_dataset("keras:mnist")
    assert info.value.field == "data"
    assert "could not download Keras dataset 'mnist'" in str(info.value)
    assert "--data bundled" in str(info.value)


def test_keras_column_labels_are_flattened(monkeypatch):
    def cifar():
        x = np.zeros((6, 32, 32, 3), np.uint8)
        return (x, np.arange(6).reshape(6, 1)), (x[:2], np.arange(2).reshape(2, 1))

    _fake_keras(monkeypatch, cifar)
    data = load_keras_dataset("cifar10")
    assert data.y_train.shape == (6, 1) and data.sample_shape == (32, 32, 3) and data.num_classes == 6
    prep = prepare_arrays(data, "cnn", 6, 2)
    assert prep.y_train.shape == (6,) and prep.y_val.shape == (2,)


def test_unknown_keras_dataset():
    _refused("keras:imagenet", "not a Keras dataset BatchLab knows")


def test_data_error_is_a_spec_error():
    assert issubclass(DataError, SpecError)


# ---------------------------------------------------------------- prepare_arrays


@pytest.fixture(scope="module")
def bundled() -> Dataset:
    return load_dataset("bundled")


@pytest.mark.parametrize(
    "workload,shape,labels",
    [("autoencoder", (784,), False), ("mlp", (784,), True), ("cnn", (28, 28, 1), True), ("keras-file", (28, 28), True)],
)
def test_prepare_shapes_and_scaling(bundled, workload, shape, labels):
    # the MNIST workloads scale integer pixels by 1/255 themselves; a user's model needs --scale 255
    scale = 255.0 if workload == "keras-file" else None
    prep = prepare_arrays(bundled, workload, samples=300, val_samples=50, scale=scale)
    assert prep.x_train.shape == (300, *shape) and prep.x_val.shape == (50, *shape)
    assert prep.x_train.dtype == np.float32 and prep.input_shape == shape
    assert prep.x_train.min() == 0.0 and prep.x_train.max() == 1.0
    expected = bundled.x_train[:300].reshape(300, *shape).astype(np.float32) / 255
    assert np.array_equal(prep.x_train, expected)  # the first samples, in order, scaled by 1/255
    assert prep.has_labels and prep.num_classes == 10
    assert prep.target_is_input is (workload == "autoencoder")
    if labels:
        assert np.array_equal(prep.y_train, bundled.y_train[:300])
        assert np.array_equal(prep.y_val, bundled.y_test[:50])
    else:
        assert prep.y_train is prep.x_train and prep.y_val is prep.x_val


def test_a_users_model_gets_its_inputs_as_stored_unless_scale_is_given(bundled):
    prep = prepare_arrays(bundled, "keras-file", samples=20, val_samples=5)
    assert prep.x_train.dtype == np.uint8 and np.array_equal(prep.x_train, bundled.x_train[:20])
    assert prep.scale is None
    scaled = prepare_arrays(bundled, "keras-file", samples=20, val_samples=5, scale=2.0)
    assert scaled.x_train.dtype == np.float32 and np.array_equal(scaled.x_train, bundled.x_train[:20] / np.float32(2))
    assert scaled.scale == 2.0


def test_float_data_is_kept_and_column_images_get_a_channel(tmp_path):
    x = np.linspace(0, 1, 6 * 4 * 4, dtype=np.float64).reshape(6, 4, 4)
    data = load_dataset(str(_npz(tmp_path, x_train=x, y_train=np.arange(6))))
    prep = prepare_arrays(data, "cnn", samples=6, val_samples=10)
    assert prep.x_train.dtype == np.float32 and prep.x_train.shape == (6, 4, 4, 1)
    assert np.allclose(prep.x_train[..., 0], x) and prep.x_val is None and prep.y_val is None


def test_no_validation_when_val_samples_is_zero(bundled):
    prep = prepare_arrays(bundled, "mlp", samples=10, val_samples=0)
    assert prep.x_val is None and prep.y_val is None


def test_too_many_samples(bundled):
    with pytest.raises(DataError) as info:
        prepare_arrays(bundled, "mlp", samples=10001, val_samples=0)
    assert info.value.field == "samples" and "has 10000" in str(info.value)
    with pytest.raises(DataError) as info:
        prepare_arrays(bundled, "mlp", samples=100, val_samples=2001)
    assert info.value.field == "val_samples" and "has 2000" in str(info.value)


def test_classifiers_need_labels_and_cnn_needs_images(tmp_path):
    unlabelled = load_dataset(str(_npz(tmp_path, x_train=np.zeros((4, 9), np.uint8))))
    assert prepare_arrays(unlabelled, "autoencoder", 4, 0).x_train.shape == (4, 9)
    for workload in ("mlp", "cnn"):
        with pytest.raises(DataError, match="needs labels"):
            prepare_arrays(unlabelled, workload, 4, 0)
    flat = load_dataset(str(_npz(tmp_path, "flat.npz", x_train=np.zeros((4, 9)), y_train=np.zeros(4))))
    with pytest.raises(DataError, match="the CNN needs images"):
        prepare_arrays(flat, "cnn", 4, 0)


def test_autoencoder_refuses_float_pixels_outside_unit_range(tmp_path):
    data = load_dataset(str(_npz(tmp_path, x_train=np.full((4, 3, 3), 255.0))))
    with pytest.raises(DataError, match=r"needs pixels in \[0, 1\]") as info:
        prepare_arrays(data, "autoencoder", 4, 0)
    assert info.value.field == "data"
    assert prepare_arrays(data, "keras-file", 4, 0).x_train.max() == 255.0


def test_unknown_workload(bundled):
    with pytest.raises(SpecError) as info:
        prepare_arrays(bundled, "gan", 10, 0)
    assert info.value.field == "workload"


def test_probe_sample_keeps_shapes_and_the_largest_label(tmp_path):
    arrays = _arrays(n_train=12, n_test=4)
    arrays["y_train"][7] = 9  # the largest label, not in the first row
    data = prepare_arrays(load_dataset(str(_npz(tmp_path, **arrays))), "mlp", 12, 4)
    sample = data.probe_sample()
    assert len(sample.x_train) <= 2 and sample.x_train.shape[1:] == data.x_train.shape[1:]
    assert sample.y_train.max() == 9 and sample.num_classes == data.num_classes == 10
    assert sample.x_val is not None and len(sample.x_val) <= 2


def test_validation_asked_for_without_a_test_split_is_said(tmp_path):
    from batchlab.core.datasets import validation_note

    arrays = _arrays()
    del arrays["x_test"], arrays["y_test"]
    dataset = load_dataset(str(_npz(tmp_path, **arrays)))
    assert "val_samples=5 is ignored" in validation_note(dataset, 5)
    assert validation_note(dataset, 0) is None
    assert validation_note(load_dataset("bundled"), 5) is None


def test_home_relative_file_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    _npz(tmp_path, "mine.npz", **_arrays())
    assert load_dataset("~/mine.npz").name == "mine"


# ---------------------------------------------------------------- CSV tables


def _csv(tmp_path: Path, text: str, name: str = "table.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_columns_become_x_and_y_and_the_last_rows_validate(tmp_path):
    rows = "\n".join(f"{i},{i * 2},{i % 3}" for i in range(10))
    path = _csv(tmp_path, "size,rooms,price\n" + rows + "\n\n")
    data = load_dataset(str(path), target_column="price", val_fraction=0.2)
    assert data.x_train.shape == (8, 2) and data.y_train.shape == (8,) and data.x_test.shape == (2, 2)
    assert data.x_train[:, 0].tolist() == list(range(8)) and data.x_test[:, 0].tolist() == [8, 9]  # file order
    assert data.y_test.tolist() == [8 % 3, 9 % 3]
    two = load_dataset(str(path), target_column="rooms,price", val_fraction=0.0)
    assert two.x_train.shape == (10, 1) and two.y_train.shape == (10, 2) and two.x_test is None


@pytest.mark.parametrize(
    "text,target,field,phrase",
    [
        ("a,b\n1,2\n3,x\n", "b", "data", "line 3, column 'b' holds 'x', which is not a number"),
        ("a,b\n1,2\n3\n", "b", "data", "line 3 has 1 cells but the header names 2 columns"),
        ("a,b\n1,2\n", "c", "target_column", "has no column 'c'; its columns are a, b"),
        ("a,b\n1,2\n", "a,b", "target_column", "every column is a target"),
        ("a,b\n", "b", "data", "at least one row of numbers"),
    ],
)
def test_csv_mistakes_are_one_line_naming_the_cell(tmp_path, text, target, field, phrase):
    path = _csv(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_dataset(str(path), target_column=target)
    assert info.value.field == field and phrase in str(info.value) and "\n" not in str(info.value)


def test_csv_in_a_spec_needs_a_target_and_counts_its_split(tmp_path):
    from batchlab.core.spec import build_spec, spec_errors

    path = _csv(tmp_path, "a,b,y\n" + "\n".join(f"{i},{i},{i}" for i in range(50)))
    assert "CSV data needs the target column named" in spec_errors({"data": str(path)})["target_column"].message
    spec = build_spec({"workload": "autoencoder", "data": str(path), "target_column": "y", "batch_sizes": "8"})
    assert (spec.samples, spec.val_samples) == (40, 10)  # val_fraction 0.2 by default: the last 10 rows
    spec = build_spec(
        {"workload": "autoencoder", "data": str(path), "target_column": "y", "val_fraction": "0.5", "batch_sizes": "8"}
    )
    assert (spec.samples, spec.val_samples) == (25, 25)
    errors = spec_errors({"workload": "autoencoder", "data": str(path), "target_column": "y", "val_fraction": "1"})
    assert "out of range" in errors["val_fraction"].message
    assert "CSV data" in spec_errors({"target_column": "y"})["target_column"].message  # bundled data has labels
