"""Per-run loss noise and generalization gap, from a run's own columns. numpy only.

- loss noise: the standard deviation of the step-to-step changes of the mini-batch loss over the
  first LOSS_NOISE_STEPS steps (fewer when the run has fewer; NaN under 3 finite steps). Smaller
  batches average fewer samples per step, so their loss jumps more from one step to the next (the
  published MNIST study plotted the first 1,000 iterations per batch size for the same reason).
- generalization gap: validation loss minus training loss, at the evaluation that met the target
  (its train_loss is the mean of the mini-batch losses since the previous evaluation), else at the
  last epoch (its train_loss and val_loss), else at the last evaluation. Positive: the model does
  better on what it trained on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from batchlab.core.targets import TargetSyntaxError, first_reached, parse_target

LOSS_NOISE_STEPS = 1000


def loss_noise(losses) -> float:
    """Standard deviation of the step-to-step loss changes over the first LOSS_NOISE_STEPS steps."""
    loss = np.asarray(losses, dtype=np.float64)[:LOSS_NOISE_STEPS]
    loss = loss[np.isfinite(loss)]
    if len(loss) < 3:
        return math.nan
    return float(np.std(np.diff(loss), ddof=1))


def _last_pair(table: Mapping[str, Any]) -> tuple[float, float] | None:
    """(train_loss, val_loss) of the last row where both are finite."""
    train, val = table.get("train_loss"), table.get("val_loss")
    if train is None or val is None:
        return None
    train, val = np.asarray(train, dtype=np.float64), np.asarray(val, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(train) & np.isfinite(val))
    return (float(train[ok[-1]]), float(val[ok[-1]])) if len(ok) else None


def generalization_gap(evals: Mapping[str, Any], epochs: Mapping[str, Any], target: str | None) -> tuple[float, str]:
    """(val_loss - train_loss, where: "target", "end" or "" when unknown); see the module docstring."""
    if target:
        try:
            parsed = parse_target(target)
        except TargetSyntaxError:
            parsed = None
        values = evals.get(parsed.metric) if parsed is not None else None
        if values is not None and len(values):
            i = first_reached(parsed, np.asarray(values, dtype=np.float64).tolist())
            if i is not None:
                train = float(np.asarray(evals["train_loss"], dtype=np.float64)[i])
                val = float(np.asarray(evals["val_loss"], dtype=np.float64)[i])
                if math.isfinite(train) and math.isfinite(val):
                    return val - train, "target"
    for table in (epochs, evals):
        pair = _last_pair(table)
        if pair is not None:
            return pair[1] - pair[0], "end"
    return math.nan, ""
