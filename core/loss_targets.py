"""Targets as a user's model's loss needs them: class indices, one-hot or soft labels, 0/1 vectors, regression values.

`fit_targets` decides from the kind of the compiled loss (read in the training child, see
core.training.workloads.loss_kind) and the model's output shape what the stored targets must be,
converts them where that is unambiguous (class indices one-hot encoded for a categorical loss) and
otherwise refuses with one line naming the array, what it holds and what the loss needs. It is numpy
only, so every rule is tested without TensorFlow. The task kind it returns is recorded in the run
file (run attribute ``task``) and shown in the summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from batchlab.core.errors import SpecError

# What a run trains to do; the run file's `task` attribute holds one of these.
CLASSIFICATION = "classification"
BINARY = "binary classification"
MULTI_LABEL = "multi-label"
REGRESSION = "regression"
AUTOENCODER = "autoencoder"
OTHER = "other"
TASKS = (CLASSIFICATION, BINARY, MULTI_LABEL, REGRESSION, AUTOENCODER, OTHER)

# Loss kinds, as workloads.loss_kind reads them from the compiled loss.
SPARSE, CATEGORICAL, BINARY_LOSS, REGRESSION_LOSS, OTHER_LOSS = "sparse", "categorical", "binary", "regression", "other"


@dataclass(frozen=True)
class TargetSummary:
    """What the targets of all rows used hold: one row's shape, dtype, whole numbers or not, value range."""

    shape: tuple[int, ...]
    dtype: str
    whole: bool
    low: float
    high: float
    fraction: float | None = None  # a value that is not a whole number, to quote in messages


def summarize_targets(*arrays: np.ndarray | None) -> TargetSummary | None:
    """The summary over the given target arrays (train and validation); None if there are none."""
    ys = [y for y in arrays if y is not None and y.size]
    if not ys:
        return None
    fraction = None
    for y in ys:
        if y.dtype.kind == "f":
            off = y[y != np.round(y)]
            if off.size:
                fraction = float(off.flat[0])
                break
    return TargetSummary(
        shape=tuple(ys[0].shape[1:]),
        dtype=str(ys[0].dtype),
        whole=fraction is None,
        low=float(min(y.min() for y in ys)),
        high=float(max(y.max() for y in ys)),
        fraction=fraction,
    )


@dataclass
class FittedTargets:
    """Targets ready for the model, the task they make and how they are laid out (e.g. "one-hot")."""

    y_train: np.ndarray
    y_val: np.ndarray | None
    task: str
    layout: str
    notes: list[str] = field(default_factory=list)


def _matches(rows: tuple, out_shape: tuple) -> bool:
    """Target rows fit the output shape (None in the output: any size)."""
    return len(rows) == len(out_shape) and all(o is None or o == r for r, o in zip(rows, out_shape, strict=True))


def _number(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else f"{value:g}"


def _error(message: str) -> SpecError:
    return SpecError("data", message)


def fit_targets(
    kind: str,
    loss_name: str,
    out_shape: tuple,
    y_train: np.ndarray,
    y_val: np.ndarray | None,
    summary: TargetSummary,
) -> FittedTargets:
    """The stored targets shaped for a loss of `kind` ("sparse", "categorical", "binary", "regression",
    "other") on a model whose output (without the batch axis) is `out_shape`; SpecError on field
    "data" when they cannot be."""
    fit = _Fit(kind, loss_name, tuple(out_shape), y_train, y_val, summary)
    if kind == SPARSE:
        return fit.sparse()
    if kind == CATEGORICAL:
        return fit.categorical()
    if kind == BINARY_LOSS:
        return fit.binary()
    return fit.regression_or_other()


class _Fit:
    """One fit of stored targets to a model's output: the shared facts and the error messages, then one
    method per loss kind."""

    def __init__(self, kind, loss_name, out_shape, y_train, y_val, summary: TargetSummary):
        self.kind, self.loss_name, self.out_shape, self.summary = kind, loss_name, out_shape, summary
        self.y_train, self.y_val = y_train, y_val
        self.rows = summary.shape
        self.where = f"the model's {loss_name} loss"
        self.units = out_shape[-1] if out_shape else None
        self.flat_rows = self.rows in ((), (1,))
        self.one_output = len(out_shape) == 1
        self.index_like = self.flat_rows and summary.whole and summary.low >= 0

    def both(self, fn) -> tuple[np.ndarray, np.ndarray | None]:
        return fn(self.y_train), (None if self.y_val is None else fn(self.y_val))

    def not_whole(self) -> SpecError:
        return _error(
            f"y_train holds values that are not whole numbers (e.g. {self.summary.fraction:g}) but {self.where} needs "
            f"class indices 0 to {(self.units or 1) - 1}; for regression compile the model with a regression loss "
            "such as mse"
        )

    def too_high(self) -> SpecError:
        return _error(
            f"labels go up to {_number(self.summary.high)} but the model has {self.units} outputs; "
            f"labels must be 0 to {self.units - 1}"
        )

    def negative(self) -> SpecError:
        return _error(f"y_train has a negative label ({_number(self.summary.low)}); labels must be class indices")

    def mismatch(self, expected: str) -> SpecError:
        return _error(
            f"y_train rows have shape {self.rows} but the model's output has shape {self.out_shape} and {self.where} "
            f"needs {expected}"
        )

    def one_hot(self) -> FittedTargets:
        units = self.units
        if self.summary.high >= units:
            raise self.too_high()
        eye = np.eye(units, dtype="float32")
        y_t, y_v = self.both(lambda y: eye[y.reshape(-1).astype(np.int64)])
        note = (
            f"labels one-hot encoded to {units} classes for the model's {self.loss_name} loss (it compares whole rows)"
        )
        return FittedTargets(y_t, y_v, CLASSIFICATION, "class indices, one-hot encoded", [note])

    def sparse(self) -> FittedTargets:
        rows, out_shape, summary = self.rows, self.out_shape, self.summary
        expected_rows = tuple(out_shape[:-1])
        squeezed = rows[:-1] if len(rows) == len(out_shape) and rows[-1:] == (1,) else rows
        if _matches(squeezed, expected_rows):
            if not summary.whole:
                raise self.not_whole()
            if summary.low < 0:
                raise self.negative()
            if self.units is not None and summary.high >= self.units:
                raise self.too_high()
            y_t, y_v = self.both(lambda y: y.reshape((len(y), *squeezed)).astype(np.int32))
            return FittedTargets(y_t, y_v, CLASSIFICATION, "class indices")
        if _matches(rows, out_shape):
            raise _error(
                f"y_train rows have shape {rows}, like one-hot or soft labels, but {self.where} needs class indices "
                f"(one whole number per sample, shape (N,)); compile the model with categorical_crossentropy, "
                f"or store np.argmax(y, axis=-1)"
            )
        raise self.mismatch(f"class indices of shape (N, {', '.join(map(str, expected_rows))})".replace(", )", ")"))

    def categorical(self) -> FittedTargets:
        summary = self.summary
        if _matches(self.rows, self.out_shape):
            if summary.low < 0 or summary.high > 1:
                raise _error(
                    f"y_train values go from {_number(summary.low)} to {_number(summary.high)} but {self.where} needs "
                    "one-hot or soft labels (each row's values from 0 to 1)"
                )
            y_t, y_v = self.both(lambda y: y.astype(np.float32))
            return FittedTargets(y_t, y_v, CLASSIFICATION, "one-hot" if summary.whole else "soft labels")
        if self.flat_rows and self.one_output and self.units and self.units > 1:
            if not summary.whole:
                raise self.not_whole()
            if summary.low < 0:
                raise self.negative()
            return self.one_hot()
        raise self.mismatch(f"one-hot rows of shape {self.out_shape} or class indices")

    def binary(self) -> FittedTargets:
        summary, loss_name = self.summary, self.loss_name
        if self.one_output and self.units == 1 and self.flat_rows:
            if summary.low < 0 or summary.high > 1:
                raise _error(
                    f"labels go up to {_number(summary.high)} but the model's {loss_name} loss needs labels 0 or 1"
                    if summary.high > 1
                    else f"y_train has a negative label ({_number(summary.low)}); {self.where} needs labels 0 or 1"
                )
            y_t, y_v = self.both(lambda y: y.astype(np.float32).reshape(-1, 1))
            note = f"labels given as one float column for the model's single output ({loss_name} loss)"
            return FittedTargets(y_t, y_v, BINARY, "0/1", [note])
        if _matches(self.rows, self.out_shape):
            if summary.low < 0 or summary.high > 1:
                raise _error(
                    f"y_train values go from {_number(summary.low)} to {_number(summary.high)} but {self.where} needs "
                    "0/1 (or probability) targets"
                )
            y_t, y_v = self.both(lambda y: y.astype(np.float32))
            return FittedTargets(y_t, y_v, MULTI_LABEL, "0/1 vectors" if summary.whole else "probabilities")
        if self.index_like and self.one_output and self.units and self.units > 1:
            return self.one_hot()
        raise self.mismatch(f"0/1 rows of shape {self.out_shape}")

    def regression_or_other(self) -> FittedTargets:
        """Regression losses, and losses BatchLab does not know: targets of the output's shape, as floats."""
        task = REGRESSION if self.kind == REGRESSION_LOSS else OTHER
        if _matches(self.rows, self.out_shape):
            y_t, y_v = self.both(lambda y: y.astype(np.float32))
            return FittedTargets(y_t, y_v, task, "float")
        if self.one_output and self.units == 1 and self.rows == ():
            y_t, y_v = self.both(lambda y: y.astype(np.float32).reshape(-1, 1))
            return FittedTargets(y_t, y_v, task, "float")
        if self.kind == OTHER_LOSS and self.index_like and self.one_output and self.units and self.units > 1:
            return self.one_hot()
        raise self.mismatch(f"targets of shape (N, {', '.join(map(str, self.out_shape))})")
