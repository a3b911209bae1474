"""Train to a target: the target syntax and Shallue's rule for when a run reached it. numpy only.

A target is one metric and a value, written ``METRIC=VALUE`` (``val_accuracy=0.98``); the metric
says which way is better, so the text never has to: losses and the error are met *below* the
value, accuracy *above* it. ``METRIC<VALUE`` or ``METRIC>VALUE`` is accepted too when the sign is
the metric's own direction.

Shallue et al. (2018): the result of a run is the first evaluation at which the metric is
**strictly** better than the target. An evaluation whose metric is NaN or infinite (a diverged
run, or a metric the run does not have) never counts. A run with no such evaluation did not reach
the target within its budget.

The metrics, as the evaluation points (the ``evals/`` table of a run file) hold them:

- ``train_loss``: the sample-weighted mean of the mini-batch losses of the steps since the
  previous evaluation (each measured before its update): cheap, but a smoothed training loss, not
  a pass over the whole training set.
- ``val_loss``, ``val_accuracy``: a full pass over the validation samples, as fit's validation.
- ``val_error``: 1 - ``val_accuracy``.
- ``val_NAME``: every other compiled metric of the model (``val_mae``, ``val_auc``, ...), from the
  same validation pass. Which way is better follows from the name (``metric_direction``): a name
  with one of the words accuracy, auc, precision, recall, f1, fbeta, iou, r2 or cosine_similarity
  is met *above* the value; one with error, loss, mae, mse, rmse, mape, msle, crossentropy, hinge,
  huber, logcosh, poisson or kl *below* it. A name that says neither is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BELOW = "below"
ABOVE = "above"
# metric -> the direction that meets the target
TARGET_METRICS: dict[str, str] = {
    "train_loss": BELOW,
    "val_loss": BELOW,
    "val_accuracy": ABOVE,
    "val_error": BELOW,
}
ACCURACY_METRICS = ("val_accuracy", "val_error")  # need a model with an accuracy (a classifier)
FLOAT32_TOLERANCE = 2.0**-22  # two float32 steps at 1: metrics within it of the target equal it
VALIDATION_METRICS = ("val_loss", "val_accuracy", "val_error")  # need validation samples
_TARGET_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|=|<|>)\s*(.*)$")
SYNTAX = (
    "METRIC=VALUE, METRIC one of train_loss, val_loss, val_accuracy, val_error or val_NAME for a compiled "
    "metric of the model (e.g. val_accuracy=0.98, val_mae=0.1)"
)
# Words of a compiled metric's name that say which way it is better (higher checked first).
_HIGHER_IS_BETTER = ("accuracy", "auc", "precision", "recall", "f1", "fbeta", "iou", "r2", "cosine_similarity")
_LOWER_IS_BETTER = (
    "error",
    "loss",
    "mae",
    "mse",
    "rmse",
    "mape",
    "msle",
    "crossentropy",
    "hinge",
    "huber",
    "logcosh",
    "poisson",
    "kl",
)
_BOUNDED_BY_ONE = ("accuracy", "auc", "precision", "recall")  # never above 1


def metric_direction(metric: str) -> str | None:
    """BELOW or ABOVE for a target metric: the built-in ones, or a ``val_NAME`` of a compiled metric by
    its name's words (``val_mae``: BELOW, ``val_auc_1``: ABOVE); None when the name says neither."""
    if metric in TARGET_METRICS:
        return TARGET_METRICS[metric]
    if not metric.startswith("val_"):
        return None
    base = metric[4:].lower()
    words = set(base.split("_"))  # Keras names a second AUC "auc_1"
    for parts, direction in ((_HIGHER_IS_BETTER, ABOVE), (_LOWER_IS_BETTER, BELOW)):
        if any(part in words or ("_" in part and part in base) for part in parts):
            return direction
    return None


class TargetSyntaxError(ValueError):
    """A target text that is not METRIC=VALUE with a known metric and a value it can be met at."""


@dataclass(frozen=True)
class Target:
    """Train until `metric` is strictly better than `value` (below for losses and error, above for accuracy)."""

    metric: str
    value: float

    @property
    def direction(self) -> str:
        return metric_direction(self.metric) or BELOW

    @property
    def text(self) -> str:
        """The canonical form, as the spec stores it: ``val_accuracy=0.98``."""
        return f"{self.metric}={self.value!r}"

    def describe(self) -> str:
        """What meets it, for people: ``val_accuracy > 0.98``."""
        return f"{self.metric} {'<' if self.direction == BELOW else '>'} {self.value:g}"

    def met(self, value: float) -> bool:
        """True when `value` is finite and strictly better than the target (equality does not count)."""
        try:
            x = float(value)
        except (TypeError, ValueError):
            return False
        if not math.isfinite(x) or self._equal_in_float32(x):
            return False
        return x < self.value if self.direction == BELOW else x > self.value

    def _equal_in_float32(self, x: float) -> bool:
        """`x` is the target value up to float32 rounding. Keras computes metrics in float32: 1,960 right
        out of 2,000 arrives as 0.98000002 (the float32 nearest 0.98), and val_error = 1 - that as
        0.01999998; both are *equal* to the target, not better. Two float32 steps of the larger of the
        two values (of 1 for accuracy and error, which are fractions of 1 and 1 minus them)."""
        scale = 1.0 if self.metric in ACCURACY_METRICS else max(abs(x), abs(self.value))
        return abs(x - self.value) <= FLOAT32_TOLERANCE * scale


def parse_target(text: str) -> Target:
    """``METRIC=VALUE`` (or ``<`` / ``>`` in the metric's own direction) as a Target; TargetSyntaxError if not.

    Values a metric can never be strictly better than are refused: an accuracy outside [0, 1)
    and an error outside (0, 1].
    """
    raw = str(text).strip()
    match = _TARGET_RE.match(raw)
    if match is None:
        raise TargetSyntaxError(f"{raw!r} is not a target; write {SYNTAX}")
    metric, sign, number = match.group(1).lower(), match.group(2), match.group(3).strip()
    direction = metric_direction(metric)
    if direction is None:
        if metric.startswith("train_"):
            raise TargetSyntaxError(
                f"{metric!r}: the training side of an evaluation has only train_loss; name the validation "
                f"metric (val_{metric[6:]}) or write {SYNTAX}"
            )
        if metric.startswith("val_"):
            raise TargetSyntaxError(
                f"{metric!r}: cannot tell from its name whether higher or lower is better (names with "
                f"{', '.join(_HIGHER_IS_BETTER)} are met above, with {', '.join(_LOWER_IS_BETTER)} below)"
            )
        raise TargetSyntaxError(f"{metric!r} is not a target metric; write {SYNTAX}")
    if sign in ("<=", ">="):
        raise TargetSyntaxError(
            f"{raw!r}: a target is met only when strictly better than its value (Shallue's rule); "
            f"write {metric}={number}"
        )
    if sign != "=" and (sign == "<") != (direction == BELOW):
        better = "below" if direction == BELOW else "above"
        raise TargetSyntaxError(
            f"{raw!r} asks for {metric} {sign} a value, but a {metric} target is met {better} it; "
            f"write {metric}={number}"
        )
    try:
        value = float(number)
    except ValueError:
        raise TargetSyntaxError(f"{number!r} is not a number; write {SYNTAX}") from None
    if not math.isfinite(value):
        raise TargetSyntaxError(f"{number!r} is not a finite number; write {SYNTAX}")
    if metric == "val_accuracy" and not 0.0 <= value < 1.0:
        raise TargetSyntaxError(
            f"val_accuracy={value:g} can never be exceeded (accuracy lies in 0..1); use a value from 0 to below 1"
        )
    if metric == "val_error" and not 0.0 < value <= 1.0:
        raise TargetSyntaxError(
            f"val_error={value:g} can never be undercut (error lies in 0..1); use a value above 0 and up to 1"
        )
    bounded = metric not in TARGET_METRICS and direction == ABOVE
    if bounded and set(metric[4:].lower().split("_")) & set(_BOUNDED_BY_ONE) and value >= 1.0:
        raise TargetSyntaxError(
            f"{metric}={value:g} can never be exceeded ({metric[4:]} lies in 0..1); use a value below 1"
        )
    return Target(metric, value)


def first_reached(target: Target, values: Sequence[float]) -> int | None:
    """Index of the first value strictly better than the target (NaN and inf never count); None if none is."""
    for i, value in enumerate(values):
        if target.met(value):
            return i
    return None


@dataclass(frozen=True)
class TargetResult:
    """Where a run met its target (Shallue's rule), or reached=False with NaN figures."""

    reached: bool
    steps: float  # optimizer steps taken before the evaluation that met it
    examples: float  # training examples seen by then
    epochs: float  # examples / training samples per epoch (fractional)
    time: float  # s of training: wall time without evaluation and validation passes


NOT_REACHED = TargetResult(False, math.nan, math.nan, math.nan, math.nan)


def target_result(target: Target, evals: Mapping[str, Any]) -> TargetResult:
    """The first evaluation row of an evals table (steps, examples, epochs, train_wall_time and the
    metric columns) that meets the target; NOT_REACHED when none does."""
    values = evals.get(target.metric)
    if values is None or len(values) == 0:
        return NOT_REACHED
    i = first_reached(target, np.asarray(values, dtype=np.float64).tolist())
    if i is None:
        return NOT_REACHED

    def at(name: str) -> float:
        column = evals.get(name)
        return float(column[i]) if column is not None and i < len(column) else math.nan

    return TargetResult(True, at("steps"), at("examples"), at("epochs"), at("train_wall_time"))
