"""Reduce-on-plateau's test, shared by the learning-rate schedule (core/lr_rules.py) and the two-phase batch
schedule (core/batch_rules.py): when has a validation loss stopped improving."""

from __future__ import annotations

import math

PLATEAU_MIN_DELTA = 1e-4  # a validation loss must fall by more than this to count as better (Keras's default)


class Plateau:
    """Reduce-on-plateau as Keras's ReduceLROnPlateau (mode min, cooldown 0): after `patience`
    validation losses in a row that are not below the best by more than `min_delta`, the scale is
    multiplied by `factor` and the count starts again. NaN counts as no improvement."""

    def __init__(self, factor: float, patience: int, min_delta: float = PLATEAU_MIN_DELTA):
        self.factor = factor
        self.patience = patience
        self.min_delta = min_delta
        self.best = math.inf
        self.wait = 0
        self.scale = 1.0

    def update(self, val_loss: float) -> float:
        """Take one epoch's validation loss; return the scale for the epochs that follow."""
        if val_loss < self.best - self.min_delta:
            self.best = val_loss
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.scale *= self.factor
                self.wait = 0
        return self.scale
