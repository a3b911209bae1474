"""Optimizers Keras 3 lacks. Imported only in the training child.

LARS (You, Gitman and Ginsburg 2017, "Large Batch Training of Convolutional Networks", Algorithm 1),
for each weight matrix or kernel w (a variable with 2 or more dimensions) with gradient g:

    trust  = eta * ||w|| / (||g|| + wd * ||w||)      (1 where ||w|| or ||g|| is 0)
    v      = momentum * v + lr * trust * (g + wd * w)
    w      = w - v

||.|| is the L2 norm over the whole variable, lr the (scheduled) global rate, eta the trust
coefficient and wd the weight decay. Biases and normalisation weights (1-D variables) are excluded
from both the adaptation and the weight decay: v = momentum * v + lr * g. With momentum 0 the
update is w = w - lr * trust * (g + wd * w).
"""

from __future__ import annotations

import keras
from keras import ops

LARS_TRUST_COEFFICIENT = 0.001  # eta, as in You et al.


class LARS(keras.optimizers.Optimizer):
    """Layer-wise adaptive rate scaling with momentum (see the module docstring for the exact update)."""

    def __init__(
        self,
        learning_rate: float = 1.0,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = LARS_TRUST_COEFFICIENT,
        name: str = "lars",
        **kwargs,
    ):
        # Keras's own weight_decay is a decoupled decay of every variable; LARS's decay is inside its update.
        kwargs.pop("weight_decay", None)
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.lars_weight_decay = float(weight_decay or 0.0)
        self.trust_coefficient = float(trust_coefficient)

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self.momentums = self.add_optimizer_variables(variables, "momentum") if self.momentum else []

    @staticmethod
    def adapted(variable) -> bool:
        """True for variables LARS adapts and decays: kernels, not biases or normalisation weights (1-D)."""
        return len(variable.shape) > 1

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        g = ops.cast(gradient, variable.dtype)
        if self.adapted(variable):
            wd = ops.cast(self.lars_weight_decay, variable.dtype)
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            g_norm = ops.sqrt(ops.sum(ops.square(g)))
            # Where a norm is 0 the ratio is 0/0 or 0 and `where` picks 1 instead (both branches are computed).
            ratio = self.trust_coefficient * w_norm / (g_norm + wd * w_norm)
            trust = ops.where(ops.logical_and(w_norm > 0, g_norm > 0), ratio, ops.ones_like(ratio))
            step = ops.multiply(lr * trust, ops.add(g, ops.multiply(wd, variable)))
        else:
            step = ops.multiply(lr, g)
        if self.momentum:
            v = self.momentums[self._get_variable_index(variable)]
            self.assign(v, ops.add(ops.multiply(v, ops.cast(self.momentum, variable.dtype)), step))
            self.assign_sub(variable, v)
        else:
            self.assign_sub(variable, step)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "momentum": self.momentum,
                "weight_decay": self.lars_weight_decay,
                "trust_coefficient": self.trust_coefficient,
            }
        )
        return config
