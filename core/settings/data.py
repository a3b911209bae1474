"""Data and workload: the preset, the model, the data source and how much of it, seeds and order.

The parsers check names and numbers only; whether a named file exists and what it holds is checked
above the groups (core/spec_checks.py).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, PRESETS, WORKLOADS, preset_defaults
from batchlab.core.settings.base import (
    Setting,
    SettingsGroup,
    blank,
    boolean,
    choice,
    fail,
    user_path,
    whole,
    whole_list,
)

BUNDLED_DATA = "bundled"
BUNDLED_LARGE_DATA = "bundled-large"  # the bundled subset and 20,000 more training images (mnist-cnn-98)
BUNDLED_SOURCES = (BUNDLED_DATA, BUNDLED_LARGE_DATA)
KERAS_PREFIX = "keras:"
KERAS_DATASETS = ("mnist", "fashion_mnist", "cifar10")
NPZ_SUFFIXES = (".npz",)
HDF5_SUFFIXES = (".h5", ".hdf5")
CSV_SUFFIXES = (".csv",)
DATA_FILE_SUFFIXES = NPZ_SUFFIXES + HDF5_SUFFIXES + CSV_SUFFIXES
SEED_LIMIT = 1 << 32  # TensorFlow and numpy take unsigned 32-bit seeds
USER_MODEL_PRESET = "keras-file"  # what --model FILE implies when no preset / workload is named
USER_MODEL_WORKLOAD = "keras-file"
DEFAULTS = preset_defaults(DEFAULT_PRESET)


@dataclass(frozen=True)
class DataSettings:
    preset: str = DEFAULT_PRESET
    workload: str = DEFAULTS["workload"]
    model_file: str | None = DEFAULTS["model_file"]
    data: str = DEFAULTS["data"]
    samples: int = DEFAULTS["samples"]
    val_samples: int = DEFAULTS["val_samples"]
    seeds: tuple[int, ...] = DEFAULTS["seeds"]
    shuffle: bool = DEFAULTS["shuffle"]
    scale: float | None = DEFAULTS["scale"]  # inputs divided by this (e.g. 255 for uint8 pixels); None: as stored
    target_column: str | None = DEFAULTS["target_column"]  # CSV data: the target column(s), comma-separated
    val_fraction: float = DEFAULTS["val_fraction"]  # CSV data: the last this fraction of rows validate


def parse_preset(value: Any) -> str:
    return choice("preset", value, tuple(PRESETS))


def parse_workload(value: Any) -> str:
    return choice("workload", value, WORKLOADS)


def parse_data(value: Any) -> str:
    """`bundled`, `bundled-large`, `keras:NAME`, or a .npz / .h5 / .hdf5 / .csv file (an absolute path).

    The one check of a data source's name; whether the file is there is checked_data_file's question."""
    text = BUNDLED_DATA if blank(value) else str(value).strip()
    if text in BUNDLED_SOURCES:
        return text
    if text.startswith(KERAS_PREFIX):
        if text[len(KERAS_PREFIX) :] not in KERAS_DATASETS:
            allowed = ", ".join(f"{KERAS_PREFIX}{n}" for n in KERAS_DATASETS)
            raise SpecError("data", f"{text!r} is not a Keras dataset BatchLab knows; choose {allowed}")
        return text
    if not text.lower().endswith(DATA_FILE_SUFFIXES):
        raise SpecError(
            "data",
            f"{text!r} is not a data source; use bundled, bundled-large, keras:mnist, keras:fashion_mnist, "
            "keras:cifar10, a .npz/.h5/.hdf5 file with x_train and y_train, or a .csv table",
        )
    return os.path.abspath(user_path(text))


def is_data_file(data: str | None) -> bool:
    return data is not None and data not in BUNDLED_SOURCES and not data.startswith(KERAS_PREFIX)


def checked_data_file(value: Any) -> str:
    """parse_data, and for a file: SpecError(data) when there is none at that path."""
    path = parse_data(value)
    if is_data_file(path) and not os.path.isfile(path):
        raise SpecError("data", f"file {path!r} does not exist; use bundled or an existing .npz/.h5 file")
    return path


def parse_model_file(value: Any) -> str | None:
    if blank(value):
        return None
    text = str(value).strip()
    if not text.lower().endswith(".keras"):
        raise SpecError("model_file", f"{text!r} is not a .keras file; save your model with model.save('name.keras')")
    return os.path.abspath(user_path(text))


def parse_samples(value: Any) -> int:
    return whole("samples", value, 1, "the number of training samples must be a whole number >= 1")


def parse_val_samples(value: Any) -> int:
    return whole("val_samples", value, 0, "validation samples must be a whole number >= 0 (0 = none)")


def parse_seeds(value: Any) -> tuple[int, ...]:
    what = f"seeds must be whole numbers from 0 to {SEED_LIMIT - 1} (2**32 - 1), e.g. 0,1,2"
    seeds = whole_list("seeds", value, 0, what)
    for s in seeds:
        if s >= SEED_LIMIT:
            raise SpecError("seeds", f"{s} is too large; {what}")
    return seeds


def parse_shuffle(value: Any) -> bool:
    return boolean("shuffle", value)


def parse_scale(value: Any) -> float | None:
    """Divide the inputs by this number (e.g. 255 for uint8 pixels); empty or "none": use them as stored."""
    if blank(value) or str(value).strip().lower() == "none":
        return None
    what = "the input scale must be a number > 0 that inputs are divided by, e.g. 255, or none"
    try:
        scale = float(value)
    except (TypeError, ValueError):
        raise SpecError("scale", f"{value!r} is not a number; {what}") from None
    if not math.isfinite(scale) or scale <= 0:
        raise SpecError("scale", f"{value!r} is not allowed; {what}")
    return scale


def parse_target_column(value: Any) -> str | None:
    """CSV data: the name of the target column, or several comma-separated for vector targets."""
    if blank(value):
        return None
    names = [n.strip() for n in str(value).split(",")]
    if any(not n for n in names):
        raise SpecError("target_column", f"{value!r} has an empty column name; name CSV columns, e.g. price or x,y")
    if len(set(names)) != len(names):
        raise SpecError("target_column", f"{value!r} names a column twice; list each target column once")
    return ",".join(names)


def parse_val_fraction(value: Any) -> float:
    """CSV data: the fraction of rows, taken from the end of the file, used for validation."""
    what = "the validation fraction must be a number from 0 to 0.9 (0 = no validation), e.g. 0.2"
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        raise SpecError("val_fraction", f"{value!r} is not a number; {what}") from None
    if not (0.0 <= fraction <= 0.9):
        raise SpecError("val_fraction", f"{value!r} is out of range; {what}")
    return fraction


def _check_data(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """The user's model needs its file (what a data file holds is core/spec_checks.py's question)."""
    if p.get("workload") == "keras-file" and p.get("model_file") is None:
        fail(errors, "model_file", "the keras-file workload needs a .keras model file")


def _add_arguments(group) -> None:
    group.add_argument("--shuffle", dest="shuffle", action="store_true", default=None, help="reshuffle every epoch")
    group.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="consecutive slices, fixed order")


def _read_arguments(args) -> dict[str, Any]:
    return {"shuffle": getattr(args, "shuffle", None)}


GROUP = SettingsGroup(
    name="data",
    title="Data and workload",
    values=DataSettings,
    settings=(
        Setting(
            "preset",
            "choice",
            parse_preset,
            f"named experiment: {', '.join(PRESETS)} (default {DEFAULT_PRESET})",
            "Preset",
            "--preset",
        ),
        Setting(
            "workload",
            "choice",
            parse_workload,
            "autoencoder, cnn, mlp or keras-file (default: the preset's); without --preset, the preset of that "
            "name, its model sized from the data",
            "Workload",
            "--workload",
            tuple((w, w) for w in WORKLOADS),
        ),
        Setting(
            "model_file",
            "text",
            parse_model_file,
            "a .keras model file (loaded in safe mode); implies --preset keras-file; ~ allowed",
            "Model file",
            "--model",
            placeholder="a .keras model (keras-file workload)",
        ),
        Setting(
            "data",
            "choice",
            parse_data,
            "bundled (default), bundled-large, keras:mnist, keras:fashion_mnist, keras:cifar10, a .npz/.h5 or "
            ".csv file",
            "Dataset",
            "--data",
        ),
        Setting(
            "samples",
            "int",
            parse_samples,
            "training samples used, the first N of the data (a data file: default all it holds)",
            "Samples",
            "--samples",
        ),
        Setting(
            "val_samples",
            "int",
            parse_val_samples,
            "validation samples from the test split (0 = none; a data file: default all)",
            "Validation samples",
            "--val-samples",
        ),
        Setting(
            "seeds",
            "text",
            parse_seeds,
            "comma-separated seeds from 0 to 2**32-1; each batch size runs once per seed",
            "Seeds",
            "--seeds",
        ),
        Setting("shuffle", "bool", parse_shuffle, "reshuffle every epoch", check_text="shuffle batches each epoch"),
        Setting(
            "scale",
            "float",
            parse_scale,
            "divide the inputs by this, e.g. 255 for uint8 pixels (default: none, inputs as stored)",
            "Scale inputs by",
            "--scale",
            placeholder="none: inputs as stored (e.g. 255 for uint8 pixels)",
        ),
        Setting(
            "target_column",
            "text",
            parse_target_column,
            "CSV data: the target column(s), comma-separated; the others are inputs",
            "Target column",
            "--target-column",
            placeholder="the column to predict, e.g. price (several: x,y)",
        ),
        Setting(
            "val_fraction",
            "float",
            parse_val_fraction,
            "CSV data: the last this fraction of rows validate (default 0.2)",
            "Validation fraction",
            "--val-fraction",
        ),
    ),  # fmt: skip
    checks=(_check_data,),
    add_arguments=_add_arguments,
    read_arguments=_read_arguments,
)
