"""The Keras learning-rate schedule that applies a run's plan (core/lr_rules.py). Training child only.

Keras's own classes where one fits: CosineDecay (it has warmup) and ExponentialDecay with
staircase=True (step decay without warmup). `WarmupThen` covers the rest: linear warmup, then a
constant rate, a step decay, or a plateau scale that the trainer lowers between epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
from batchlab.core.lr_rules import COSINE_ALPHA, LrPlan
from keras import ops


class WarmupThen(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from `start` to `peak` over `warmup_steps`, then `after(step)` (or the peak), all
    times `scale` (a variable the trainer sets for reduce-on-plateau; 1 otherwise)."""

    def __init__(self, start: float, peak: float, warmup_steps: int, after=None, scale=None):
        self.start = float(start)
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.after = after
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32")
        rest = self.after(step) if self.after is not None else ops.convert_to_tensor(self.peak, "float32")
        rest = ops.cast(rest, "float32")
        if self.warmup_steps > 0:
            ramp = self.start + (self.peak - self.start) * step / float(self.warmup_steps)
            rest = ops.where(step < float(self.warmup_steps), ramp, rest)
        if self.scale is not None:
            rest = rest * ops.cast(self.scale, "float32")
        return rest

    def get_config(self) -> dict[str, Any]:
        return {"start": self.start, "peak": self.peak, "warmup_steps": self.warmup_steps}


@dataclass
class RunSchedule:
    """What the optimizer is given (`learning_rate`: a float or a schedule) and how to lower a plateau scale."""

    plan: LrPlan
    learning_rate: Any
    scale: Any = None  # a keras.Variable for the plateau schedule

    def set_scale(self, value: float) -> None:
        if self.scale is not None:
            self.scale.assign(value)


def build_schedule(plan: LrPlan, scalable: bool = False) -> RunSchedule:
    """The Keras learning rate that gives `plan.rate(step)` at every step; `scalable`: a constant schedule
    gets a scale variable too (a batch schedule's rate decay past max_batch, core/batch_rules.py)."""
    w = plan.warmup_steps
    if plan.schedule == "cosine":
        span = max(1, plan.total_steps - w)
        if w > 0:
            lr = keras.optimizers.schedules.CosineDecay(
                plan.warmup_start, span, alpha=COSINE_ALPHA, warmup_target=plan.peak, warmup_steps=w
            )
        else:
            lr = keras.optimizers.schedules.CosineDecay(plan.peak, span, alpha=COSINE_ALPHA)
        return RunSchedule(plan, lr)
    if plan.schedule == "step":
        decay = keras.optimizers.schedules.ExponentialDecay(
            plan.peak, plan.decay_every_steps, plan.decay_factor, staircase=True
        )
        return RunSchedule(plan, decay if w == 0 else WarmupThen(plan.warmup_start, plan.peak, w, after=decay))
    if plan.schedule == "plateau":
        scale = keras.Variable(1.0, dtype="float32", trainable=False, name="lr_plateau_scale")
        return RunSchedule(plan, WarmupThen(plan.warmup_start, plan.peak, w, scale=scale), scale)
    if scalable:
        scale = keras.Variable(1.0, dtype="float32", trainable=False, name="lr_batch_scale")
        return RunSchedule(plan, WarmupThen(plan.warmup_start, plan.peak, w, scale=scale), scale)
    return RunSchedule(plan, plan.peak if w == 0 else WarmupThen(plan.warmup_start, plan.peak, w))
