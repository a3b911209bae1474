"""Does the data fit the model a preset names? One check, run with the spec's data checks (CLI and window).

A preset built on a workload promises a model of a given shape (its description names it: the
784-128-32-128-784 autoencoder, 10 classes of 28x28 images). The workloads themselves size their
model from the data (input width, image shape, largest label + 1), so data of another shape would
silently train another model. A preset whose promise the data contradicts is refused in one line
naming what the preset expects and the alternatives: the same workload sized from the data (the
presets `autoencoder`, `cnn`, `mlp`; `--workload NAME` without `--preset`) or the user's own model.
Shapes come from file headers; labels are read (one array) only for presets that name classes.
numpy and h5py only, and no other BatchLab module than the presets: core.spec calls it and turns the
problem into its SpecError (importing spec here made the two a cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from batchlab.core.presets import PRESETS

MNIST_IMAGE = (28, 28)
MNIST_CLASSES = 10
# What the Keras datasets hold (sample shape, classes), so a check never downloads one.
KERAS_DATA = {"mnist": ((28, 28), 10), "fashion_mnist": ((28, 28), 10), "cifar10": ((32, 32, 3), 10)}


@dataclass(frozen=True)
class PresetShape:
    """The model a preset promises: its words, the sample shape it takes, the classes it has (None: no labels)."""

    words: str  # as its description says it, e.g. "784-128-32-128-784 dense autoencoder"
    values: int | None = None  # values per sample (flat workloads), any layout with that many
    image: tuple[int, ...] | None = None  # (H, W): samples (H, W) or (H, W, 1)
    classes: int | None = None  # labels 0 to classes - 1


# The presets that name their model's shape; any other (keras-file, the sized-from-data presets) fits any data.
PRESET_SHAPES = {
    "mnist-autoencoder": PresetShape("784-128-32-128-784 dense autoencoder", values=784),
    "mnist-mlp": PresetShape("784-256-10 classifier", values=784, classes=MNIST_CLASSES),
    "golmant-lsr": PresetShape("784-256-10 MLP classifier", values=784, classes=MNIST_CLASSES),
    "mnist-cnn": PresetShape("CNN for 10 classes of 28x28 images", image=MNIST_IMAGE, classes=MNIST_CLASSES),
    "mnist-cnn-98": PresetShape("CNN for 10 classes of 28x28 images", image=MNIST_IMAGE, classes=MNIST_CLASSES),
    "shallue-mnist": PresetShape("CNN for 10 classes of 28x28 images", image=MNIST_IMAGE, classes=MNIST_CLASSES),
}

_LABELS_CACHE: dict[tuple, tuple[int, int] | None] = {}


def promises_shape(preset: str, workload: str) -> bool:
    """True when the run's model is the one `preset` names (its own workload), so the data must fit it."""
    return preset in PRESET_SHAPES and workload == PRESETS[preset].defaults["workload"]


def preset_problem(preset: str, workload: str, data: str, shapes: dict[str, tuple[int, ...]] | None) -> str | None:
    """What in the data contradicts the model `preset` names, in one line (core.spec says it under "data"); None
    when it fits.

    Applies only while the run's workload is the preset's own (another workload is sized from the
    data). `shapes`: the data file's array shapes (core.datasets.array_shapes); None for a Keras dataset.
    """
    if not promises_shape(preset, workload):
        return None
    expected = PRESET_SHAPES[preset]
    name, sample, classes = _data_facts(data, shapes)
    problem = _sample_problem(expected, sample)
    if problem is None and expected.classes is not None:
        problem = _label_problem(expected, data, classes)
    if problem is None:
        return None
    return (
        f"preset {preset} trains a {expected.words} but data '{name}' has {problem}; use data that fits it, "
        f"the {workload} preset whose model is sized from the data (--workload {workload} without --preset), "
        "or your own model (--model FILE)"
    )


def _data_facts(data: str, shapes):
    """(name, sample shape, (lowest, highest) label or None if unknown yet) of a data source."""
    if data.startswith("keras:"):
        sample, classes = KERAS_DATA.get(data[len("keras:") :], (None, None))
        return data, sample, (0, classes - 1) if classes else None
    shapes = shapes or {}
    sample = shapes.get("x_train")
    return Path(data).stem, tuple(sample[1:]) if sample else None, None


def _sample_problem(expected: PresetShape, sample: tuple[int, ...] | None) -> str | None:
    if not sample:
        return None  # missing, or 1-D x_train: the data checks say what is wrong
    if expected.values is not None and int(np.prod(sample)) != expected.values:
        return f"{int(np.prod(sample))} values per sample (shape {sample}), not {expected.values}"
    if expected.image is not None and sample not in (expected.image, (*expected.image, 1)):
        h, w = expected.image
        return f"samples of shape {sample}, not {h}x{w} images ({h}, {w}) or ({h}, {w}, 1)"
    return None


def _label_problem(expected: PresetShape, data: str, known: tuple[int, int] | None) -> str | None:
    span = known if known is not None else _label_span(data)
    if span is None:
        return None  # no labels, or not class indices: the data checks refuse those
    low, high = span
    if low < 0:
        return None  # negative labels: the data checks refuse them, for every workload
    if high >= expected.classes:
        return f"labels {low} to {high}, not 0 to {expected.classes - 1} ({expected.classes} classes)"
    return None


def _label_span(data: str) -> tuple[int, int] | None:
    """Lowest and highest whole-number label over y_train and y_test of a data file (cached by path and mtime)."""
    path = Path(data).expanduser()
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _LABELS_CACHE:
        _LABELS_CACHE[key] = _read_label_span(path)
    return _LABELS_CACHE[key]


def _read_label_span(path: Path) -> tuple[int, int] | None:
    labels = []
    try:
        if path.suffix.lower() == ".npz":  # as core.spec.NPZ_SUFFIXES (not imported: spec imports this module)
            with np.load(path, allow_pickle=False) as archive:
                labels = [archive[k] for k in ("y_train", "y_test") if k in archive.files]
        elif path.suffix.lower() in (".h5", ".hdf5"):  # as core.spec.HDF5_SUFFIXES
            import h5py

            with h5py.File(path, "r") as f:
                labels = [f[k][()] for k in ("y_train", "y_test") if k in f]
        else:
            return None  # CSV: a table's target is a column the user names; no preset classifies it
    except (OSError, ValueError, KeyError):
        return None  # unreadable: the data checks say why
    values = [np.asarray(y).ravel() for y in labels if np.asarray(y).size]
    if not values or not all(
        v.dtype.kind in "iub" or (v.dtype.kind == "f" and np.all(v == np.round(v))) for v in values
    ):
        return None
    if any(v.dtype.kind == "f" and not np.isfinite(v).all() for v in values):
        return None
    return int(min(v.min() for v in values)), int(max(v.max() for v in values))
