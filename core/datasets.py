"""Training data: load the bundled MNIST subset, a user's .npz/.h5 file or a Keras dataset, check it, shape it.

Everything a user can get wrong in a data file is caught here and reported as one line naming the
file, what is wrong and what is allowed; core/data_files.py reads the files (never unpickling). Keras is
imported inside `load_keras_dataset`, which only the training child process calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from batchlab.core.csv_table import read_csv_arrays
from batchlab.core.data_files import (
    DataError,
    _check_numeric,
    _hdf5_shapes,
    _npz_shapes,
    _read_hdf5,
    _read_npz,
)
from batchlab.core.errors import SpecError
from batchlab.core.loss_targets import TargetSummary, summarize_targets
from batchlab.core.presets import WORKLOADS
from batchlab.core.settings.data import BUNDLED_DATA, BUNDLED_LARGE_DATA, CSV_SUFFIXES, KERAS_PREFIX, NPZ_SUFFIXES
from batchlab.core.settings.data import checked_data_file as parse_data

# The installed package keeps the repository's layout: batchlab/core/ beside batchlab/resources/
# (package data in the wheel, the folder itself in a clone).
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_FILE = PACKAGE_ROOT / "resources" / "mnist_subset.npz"
BUNDLED_NAME = "bundled MNIST subset"
# bundled-large: the subset's rows, then 20,000 more training images (MNIST rows 10,000 to 29,999), same test rows
BUNDLED_EXTRA_FILE = PACKAGE_ROOT / "resources" / "mnist_extra.npz"
BUNDLED_LARGE_NAME = "bundled MNIST, 30,000 training images"
PIXEL_MAX = 255.0  # integer pixels are scaled by this into [0, 1]
FLAT_WORKLOADS = ("autoencoder", "mlp")
LABELLED_WORKLOADS = ("cnn", "mlp")
FILE_HINT = "use the bundled default (--data bundled) or a file (--data my.npz with x_train, y_train)"


@dataclass
class Dataset:
    """Validated arrays as stored: x_* and y_* keep their dtype and shape (y_* None without targets)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray | None
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    origin: str = ""

    @property
    def num_classes(self) -> int | None:
        """Largest class index + 1 over train and test; None without targets or when they are not class indices."""
        labels = [y for y in (self.y_train, self.y_test) if y is not None and y.size]
        if not labels or not all(_looks_like_indices(y) for y in labels):
            return None
        return int(max(y.max() for y in labels)) + 1

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one training sample, e.g. (28, 28)."""
        return tuple(self.x_train.shape[1:])


@dataclass
class PreparedData:
    """Arrays ready for training: x float32 in model layout, labels int32, or targets equal to the inputs.

    `has_labels` says the dataset carries class labels; `target_is_input` says y_* are the inputs
    themselves (autoencoder), not labels. x_val/y_val are None when validation is off.
    """

    x_train: np.ndarray
    y_train: np.ndarray | None
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    input_shape: tuple[int, ...]
    num_classes: int | None
    has_labels: bool
    target_is_input: bool
    targets: TargetSummary | None = None  # over all rows used, so a few-row probe sample still checks their range
    scale: float | None = None

    def probe_sample(self) -> PreparedData:
        """A few rows per split, enough for the probe child to build and check the model: the first row
        and the row with the largest label, so the model's checks see the label range the data has."""

        def rows(x: np.ndarray | None, y: np.ndarray | None):
            if x is None:
                return None, None
            keep = {0}
            if y is not None and y.ndim == 1 and len(y):
                keep.add(int(np.argmax(y)))
            index = sorted(keep)
            return x[index], (None if y is None else y[index])

        x_train, y_train = rows(self.x_train, self.y_train)
        x_val, y_val = rows(self.x_val, self.y_val)
        return replace(self, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val)


def _looks_like_indices(y: np.ndarray) -> bool:
    """Whole, non-negative numbers of shape (N,) or (N, 1)."""
    if not (y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)):
        return False
    return bool(y.min() >= 0 and (y.dtype.kind in "iu" or np.array_equal(y, np.round(y))))


def validation_note(dataset: Dataset, val_samples: int) -> str | None:
    """Why no validation will run though `val_samples` asks for it (the data has no test split); None if it will."""
    if val_samples > 0 and dataset.x_test is None:
        return (
            f"val_samples={val_samples} is ignored: dataset '{dataset.name}' has no test split (x_test), "
            "so runs are not validated; add x_test (and y_test) to the file to validate"
        )
    return None


def bundled_path() -> Path:
    """The MNIST subset shipped with BatchLab (10,000 train, 2,000 test images, uint8)."""
    return BUNDLED_FILE


def bundled_extra_path() -> Path:
    """The 20,000 training images `bundled-large` appends to the subset's 10,000 (x_train, y_train only)."""
    return BUNDLED_EXTRA_FILE


# ---------------------------------------------------------------- loading


def _checked_source(source: str) -> str:
    """The source as core.settings.data.checked_data_file accepts it (the one check of names and suffixes,
    and that the file is there)."""
    try:
        return parse_data(source)
    except SpecError as e:
        raise DataError(e.message) from None


def load_spec_data(spec) -> Dataset:
    """The data a SweepSpec names, loaded and checked (CSV split by its target and val_fraction)."""
    return load_dataset(spec.data, target_column=spec.target_column, val_fraction=spec.val_fraction)


def load_dataset(source: str, target_column: str | None = None, val_fraction: float = 0.0) -> Dataset:
    """Load and check "bundled", "keras:NAME" or a path to a .npz / .h5 / .hdf5 / .csv file (~ expanded).

    A CSV file needs `target_column` (its target column, or several comma-separated); its last
    `val_fraction` of rows become the validation split (see csv_table.py)."""
    text = _checked_source(source)
    if text == BUNDLED_DATA:
        if not bundled_path().is_file():
            raise DataError(
                f"the bundled file '{bundled_path()}' is missing; regenerate it with "
                "python resources/make_mnist_subset.py or use --data my.npz"
            )
        return _validated(BUNDLED_NAME, f"the bundled file '{bundled_path()}'", _read_npz(bundled_path()))
    if text == BUNDLED_LARGE_DATA:
        return _bundled_large()
    if text.startswith(KERAS_PREFIX):
        return load_keras_dataset(text[len(KERAS_PREFIX) :])
    path = Path(text)
    if path.suffix.lower() in CSV_SUFFIXES:
        arrays = read_csv_arrays(path, target_column or "", val_fraction)
    else:
        arrays = _read_npz(path) if path.suffix.lower() in NPZ_SUFFIXES else _read_hdf5(path)
    return _validated(path.stem, f"file '{path}'", arrays)


def _bundled_large() -> Dataset:
    """The bundled subset with the extra file's training rows appended: its first 10,000 rows are
    `bundled`'s, so "the first N samples" means the same images in both."""
    for path in (bundled_path(), bundled_extra_path()):
        if not path.is_file():
            raise DataError(
                f"the bundled file '{path}' is missing; regenerate it with "
                "python resources/make_mnist_subset.py or use --data my.npz"
            )
    arrays = _read_npz(bundled_path())
    extra = _read_npz(bundled_extra_path())
    for key in ("x_train", "y_train"):
        arrays[key] = np.concatenate([arrays[key], extra[key]])
    origin = f"the bundled files '{bundled_path()}' + '{bundled_extra_path().name}'"
    return _validated(BUNDLED_LARGE_NAME, origin, arrays)


def load_keras_dataset(name: str) -> Dataset:
    """Load keras.datasets.NAME (cached in ~/.keras/datasets, downloaded on first use) and check it."""
    _checked_source(f"{KERAS_PREFIX}{name}")
    try:
        import keras  # deferred: only the training child process may import TensorFlow/Keras
    except ImportError as e:
        raise DataError(f"'keras:{name}' needs Keras, which is not installed; {FILE_HINT}") from e
    try:
        (x_train, y_train), (x_test, y_test) = getattr(keras.datasets, name).load_data()
    except Exception as e:  # Keras raises a bare Exception for URL fetch failures
        raise DataError(
            f"could not download Keras dataset '{name}' (offline and not cached in ~/.keras/datasets); {FILE_HINT}"
        ) from e
    arrays = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    return _validated(name, f"Keras dataset '{name}'", arrays)


# ---------------------------------------------------------------- validation


def _check_inputs(origin: str, key: str, x: np.ndarray) -> None:
    """x_* must be numeric, (samples, ...) with at least one sample, and finite."""
    _check_numeric(origin, key, x.dtype)
    if x.ndim < 2:
        raise DataError(f"{origin}: {key} has shape {x.shape}; it needs at least 2 dimensions (samples, features...)")
    if x.shape[0] == 0:
        raise DataError(f"{origin}: {key} has no samples; give at least one")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise DataError(f"{origin}: {key} contains {bad} NaN or inf values; all inputs must be finite numbers")


def _checked_targets(origin: str, key: str, y: np.ndarray, samples: int, x_key: str) -> np.ndarray:
    """Targets as stored: numeric, finite, one row per sample, any trailing shape (class indices,
    one-hot or soft labels, 0/1 vectors, regression values). What the model needs is checked later,
    against its loss (core.loss_targets)."""
    _check_numeric(origin, key, y.dtype)
    if y.ndim == 0:
        raise DataError(f"{origin}: {key} is a single number; give one target (row) per sample")
    if len(y) != samples:
        raise DataError(
            f"{origin}: {key} has {len(y)} labels but {x_key} has {samples} samples; give one label per sample"
        )
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        bad = int(np.count_nonzero(~np.isfinite(y)))
        raise DataError(f"{origin}: {key} contains {bad} NaN or inf values; all targets must be finite numbers")
    return y


def class_indices(origin: str, key: str, y: np.ndarray) -> np.ndarray:
    """Targets as 1-D int64 class indices ((N, 1) is flattened), or DataError saying why they are not."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1)
    if y.ndim != 1:
        raise DataError(
            f"{origin}: {key} has shape {y.shape}; labels must be class indices of shape (N,) or (N, 1), not one-hot"
        )
    if y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
        raise DataError(
            f"{origin}: {key} has labels that are not whole numbers; labels must be class indices 0, 1, 2, ..."
        )
    if y.size and y.min() < 0:
        raise DataError(f"{origin}: {key} has a negative label ({y.min()}); labels must be class indices 0, 1, 2, ...")
    return y.astype(np.int64)


def _validated(name: str, origin: str, arrays: dict[str, np.ndarray]) -> Dataset:
    """Check the arrays of one source against each other and build a Dataset."""
    if "x_train" not in arrays:
        raise DataError(f"{origin} has no x_train; store the training inputs as x_train (and labels as y_train)")
    x_train, x_test = arrays["x_train"], arrays.get("x_test")
    y_train, y_test = arrays.get("y_train"), arrays.get("y_test")
    _check_inputs(origin, "x_train", x_train)
    if y_train is not None:
        y_train = _checked_targets(origin, "y_train", y_train, len(x_train), "x_train")
    if x_test is None and y_test is not None:
        raise DataError(f"{origin} has y_test but no x_test; store both or neither")
    if x_test is not None:
        _check_inputs(origin, "x_test", x_test)
        if x_test.shape[1:] != x_train.shape[1:]:
            raise DataError(
                f"{origin}: x_test samples have shape {x_test.shape[1:]} but x_train samples have "
                f"{x_train.shape[1:]}; both splits must have the same sample shape"
            )
        if (y_test is None) != (y_train is None):
            have, lack = ("y_train", "y_test") if y_test is None else ("y_test", "y_train")
            raise DataError(f"{origin} has {have} but no {lack}; give labels for both splits or for neither")
        if y_test is not None:
            y_test = _checked_targets(origin, "y_test", y_test, len(x_test), "x_test")
            if y_test.shape[1:] != y_train.shape[1:]:
                raise DataError(
                    f"{origin}: y_test rows have shape {y_test.shape[1:]} but y_train rows have "
                    f"{y_train.shape[1:]}; both splits must have the same target shape"
                )
    return Dataset(name=name, origin=origin, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


# ---------------------------------------------------------------- preparation


def prepare_arrays(
    dataset: Dataset, workload: str, samples: int, val_samples: int, scale: float | None = None
) -> PreparedData:
    """The first `samples` training and first `val_samples` test samples (never shuffled), shaped for `workload`.

    With `scale`, inputs become float32 divided by it. Without, the MNIST workloads scale integer
    pixels by 1/255 (their published setup) and a user's model (keras-file) gets its inputs as stored.
    Targets: class indices (int32) for the MNIST classifiers; as stored for a user's model, whose
    loss decides what they must be (core.loss_targets.fit_targets, in the training child).
    """
    if workload not in WORKLOADS:
        raise SpecError("workload", f"{workload!r} is not known; choose one of {', '.join(WORKLOADS)}")
    available = len(dataset.x_train)
    if not 1 <= samples <= available:
        raise DataError(
            f"{samples} training samples asked for but dataset '{dataset.name}' has {available}; use 1 to {available}",
            field_name="samples",
        )
    has_labels = dataset.y_train is not None
    if workload in LABELLED_WORKLOADS and not has_labels:
        raise DataError(
            f"the {workload} workload needs labels but dataset '{dataset.name}' has no y_train; "
            "add y_train or use the autoencoder workload"
        )

    def targets(y: np.ndarray | None, key: str, n: int) -> np.ndarray | None:
        if y is None:
            return None
        if workload in LABELLED_WORKLOADS:
            return class_indices(dataset.origin or f"dataset '{dataset.name}'", key, y[:n]).astype(np.int32)
        return y[:n]

    x_train = _shaped(dataset, workload, dataset.x_train[:samples], scale)
    y_train = targets(dataset.y_train, "y_train", samples)
    x_val, y_val = None, None
    if val_samples > 0 and dataset.x_test is not None:
        test_available = len(dataset.x_test)
        if val_samples > test_available:
            raise DataError(
                f"{val_samples} validation samples asked for but the test split of '{dataset.name}' has "
                f"{test_available}; use 0 to {test_available}",
                field_name="val_samples",
            )
        x_val = _shaped(dataset, workload, dataset.x_test[:val_samples], scale)
        y_val = targets(dataset.y_test, "y_test", val_samples)
    target_is_input = workload == "autoencoder"
    if target_is_input:
        y_train, y_val = x_train, x_val
    return PreparedData(
        x_train=x_train,
        y_train=y_train,
        x_val=x_val,
        y_val=y_val,
        input_shape=tuple(x_train.shape[1:]),
        num_classes=dataset.num_classes,
        has_labels=has_labels,
        target_is_input=target_is_input,
        targets=summarize_targets(y_train, y_val) if has_labels and not target_is_input else None,
        scale=scale,
    )


def _scaled(x: np.ndarray, workload: str, scale: float | None) -> np.ndarray:
    """float32 divided by `scale`; without one, integer pixels divided by 255 for the MNIST workloads,
    and a user's model's inputs as stored (no silent rescaling)."""
    if scale is not None:
        return x.astype(np.float32) / np.float32(scale)
    if workload == "keras-file":
        return x
    out = x.astype(np.float32)
    if x.dtype.kind in "iu":
        out /= np.float32(PIXEL_MAX)
    return out


def _shaped(dataset: Dataset, workload: str, x: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Scale and lay out samples: flat vectors, (H, W, C) images, or as stored (keras-file)."""
    out = _scaled(x, workload, scale)
    if workload in FLAT_WORKLOADS:
        out = out.reshape(len(out), -1)
    elif workload == "cnn":
        if out.ndim == 2:
            raise DataError(
                f"the CNN needs images but dataset '{dataset.name}' has 1-D samples of shape {out.shape[1:]}; "
                "store x_train as (N, H, W) or (N, H, W, C)"
            )
        if out.ndim == 3:
            out = out[..., np.newaxis]
        if out.ndim != 4:
            raise DataError(
                f"the CNN needs (H, W) or (H, W, C) images but dataset '{dataset.name}' has samples of shape "
                f"{out.shape[1:]}"
            )
    if workload == "autoencoder" and out.size and (out.min() < 0.0 or out.max() > 1.0):
        raise DataError(
            f"the autoencoder needs pixels in [0, 1] (sigmoid output, binary cross-entropy) but "
            f"dataset '{dataset.name}' has {x.dtype} values from {x.min()} to {x.max()}; "
            "store uint8 pixels (0-255) or floats in [0, 1]"
        )
    return out


# ---------------------------------------------------------------- counts without loading


@dataclass(frozen=True)
class DataCounts:
    """Rows a data file holds: training (x_train) and validation (x_test; 0 without a test split)."""

    train: int
    validation: int


_COUNTS_CACHE: dict[tuple, DataCounts] = {}


def data_counts(source: str, target_column: str | None = None, val_fraction: float = 0.0) -> DataCounts:
    """How many training and validation rows a data file holds, read from its headers (the window asks
    on every edit, so arrays are not loaded; a CSV file is read once per change). DataError if the file
    cannot be read."""
    path = Path(_checked_source(source))
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size, target_column, val_fraction)
    if key not in _COUNTS_CACHE:
        shapes = array_shapes(str(path), target_column, val_fraction)
        if "x_train" not in shapes:
            raise DataError(
                f"file '{path}' has no x_train; store the training inputs as x_train (and labels as y_train)"
            )
        test = shapes.get("x_test")
        _COUNTS_CACHE[key] = DataCounts(
            train=int(shapes["x_train"][0]) if shapes["x_train"] else 0,
            validation=int(test[0]) if test else 0,
        )
    return _COUNTS_CACHE[key]


def array_shapes(
    source: str, target_column: str | None = None, val_fraction: float = 0.0
) -> dict[str, tuple[int, ...]]:
    """The shapes of a data file's known arrays, from its headers (for the window's data info line)."""
    path = Path(_checked_source(source))
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES:
        return {k: v.shape for k, v in read_csv_arrays(path, target_column or "", val_fraction).items()}
    return _npz_shapes(path) if suffix in NPZ_SUFFIXES else _hdf5_shapes(path)
