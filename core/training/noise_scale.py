"""Measuring the gradient noise scale during a run (`noise_scale_every`); runs in the training child.

At a measured step the instrumented loop hands the step's batch to `NoiseScaleProbe.measure` before
the step: the batch's first k x (B // k) samples are split into k micro-batches (k =
`noise_scale_parts`; the B mod k left over are not measured), and each micro-batch's gradient of the
model's compiled loss is taken at the same weights. Their mean squared norm is |G_s|^2, the squared
norm of their mean |G_b|^2; core/analysis/noise_scale.py turns the two into B_simple.

The measurement never changes the training trajectory: it applies no update, puts back every
non-trainable variable the forward passes moved (BatchNormalization statistics, dropout seed
generators) and clears the metrics; then the model's own train_step runs on the whole batch as on
any other step. So a measured step costs the k micro-batch passes on top of the ordinary step. (Using
the micro-batch gradients' mean as the update instead would save about one pass but change what the
step computes for models with batch statistics or dropout, and skip the model's own train_step.)
The loop keeps the measurement off the run's clock, like an evaluation point.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from batchlab.core.analysis.noise_scale import NoiseScaleEMA, unbiased_estimates
from batchlab.core.events import NOISE_SCALE, NOISE_SCALE_COLUMN_NAMES, STEP_FLUSH_SECONDS, make_event
from batchlab.core.training.hooks import Hook, TraceWatch

Emit = Callable[[dict[str, Any]], None]


def make_micro_gradient_function(model, parts: int) -> Callable:
    """A tf.function (x, y) -> (|G_s|^2, |G_b|^2, mean gradient per trainable weight) over `parts` micro-batches
    of len(x) // parts samples at the current weights (the rest of the batch is left out).

    Each micro-batch's loss is the model's compiled loss as train_step computes it (a mean over its
    samples, plus the layers' regularisation losses), so its gradient is the batch gradient at B_s.
    With mixed precision's loss-scaling optimizer the loss is scaled as train_step scales it (so small
    float16 gradients do not underflow) and the gradients are divided by the same factor.
    """
    weights = model.trainable_weights
    has_training_arg = getattr(model, "_call_has_training_arg", True)
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)

    def micro(x, y):
        saved = [tf.identity(v) for v in model.non_trainable_variables]
        size = tf.shape(x)[0] // parts
        total = [tf.zeros(w.shape, tf.float32) for w in weights]
        small_sq = tf.constant(0.0, tf.float32)
        for i in tf.range(parts):
            xs, ys = x[i * size : (i + 1) * size], y[i * size : (i + 1) * size]
            with tf.GradientTape() as tape:
                y_pred = model(xs, training=True) if has_training_arg else model(xs)
                loss = model.compute_loss(x=xs, y=ys, y_pred=y_pred, training=True)
                target = model.optimizer.scale_loss(loss) if scaled else loss
            grads = tape.gradient(target, weights)
            factor = tf.cast(target / loss, tf.float32) if scaled else 1.0  # the loss scale (NaN for a 0 loss)
            grads = [
                tf.zeros(w.shape, tf.float32) if g is None else tf.cast(tf.convert_to_tensor(g), tf.float32) / factor
                for g, w in zip(grads, weights, strict=True)
            ]
            small_sq += tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads])
            total = [t + g for t, g in zip(total, grads, strict=True)]
        mean = [t / parts for t in total]
        big_sq = tf.add_n([tf.reduce_sum(tf.square(m)) for m in mean])
        for variable, value in zip(model.non_trainable_variables, saved, strict=True):
            variable.assign(value)
        return small_sq / parts, big_sq, mean

    return tf.function(micro, reduce_retracing=True)


class NoiseScaleProbe(Hook):
    """Measures the noise scale every `every` steps and sends the rows as ``noise_scale`` events.

    A hook too (placed before RunEvents): it sends what it holds at every epoch end and at the run's
    end, and otherwise at most every STEP_FLUSH_SECONDS, so the pipe is never flooded.
    """

    def __init__(self, model, parts: int, every: int, run_index: int, emit: Emit):
        self.model = model
        self.parts = parts
        self.every = every
        self.run = run_index
        self.emit = emit
        self.function = make_micro_gradient_function(model, parts)
        self.trace = TraceWatch(self.function)
        self.ema = NoiseScaleEMA()
        self.rows: dict[str, list] = {k: [] for k in NOISE_SCALE_COLUMN_NAMES}
        self.last_sent = time.perf_counter()

    def run_fields(self) -> dict[str, int]:
        """What run_started records about the measurement."""
        return {"noise_scale_every": self.every, "noise_scale_parts": self.parts}

    def due(self, step: int, batch_size: int) -> bool:
        """True when this step is measured: every `every` steps, for a batch of at least one sample per part."""
        return step % self.every == 0 and batch_size >= self.parts

    def measure(self, step: int, x, y) -> dict[str, Any]:
        """Measure this batch at the current weights (no update); return its row, `step_time` still NaN."""
        t0 = time.perf_counter()
        small_sq, big_sq, _ = self.function(x, y)
        small_sq, big_sq = float(small_sq), float(big_sq)  # host copies: wait for the device
        measure_time = time.perf_counter() - t0
        for metric in self.model.metrics:  # the forward passes may have fed the compiled loss's trackers
            metric.reset_state()
        b_small = int(x.shape[0]) // self.parts
        b_big = b_small * self.parts
        g2, trace = (float(v) for v in unbiased_estimates(small_sq, big_sq, b_small, b_big))
        ema_g2, ema_trace, b_simple = self.ema.update(g2, trace)
        return {
            "step": step,
            "small_batch": b_small,
            "big_batch": b_big,
            "g_small_sq": small_sq,
            "g_big_sq": big_sq,
            "g2_est": g2,
            "trace_est": trace,
            "ema_g2": ema_g2,
            "ema_trace": ema_trace,
            "b_simple": b_simple,
            "measure_time": measure_time,
            "step_time": math.nan,
            "traced": int(self.trace.traced()),
        }

    def record(self, row: dict[str, Any]) -> None:
        """Keep a measured row (its step_time filled in) and send the rows when it is time."""
        for k in NOISE_SCALE_COLUMN_NAMES:
            self.rows[k].append(row.get(k))
        if time.perf_counter() - self.last_sent >= STEP_FLUSH_SECONDS:
            self.send()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        self.send()

    def on_run_end(self, logs: dict[str, Any]) -> None:
        self.send()

    def send(self) -> None:
        self.last_sent = time.perf_counter()
        if self.rows["step"]:
            self.emit(make_event(NOISE_SCALE, run=self.run, **self.rows))
            self.rows = {k: [] for k in NOISE_SCALE_COLUMN_NAMES}


def make_noise_probe(setup, emit: Emit) -> NoiseScaleProbe | None:
    """The probe the spec asks for (`noise_scale_every`), or None when the run does not measure."""
    spec = setup.run.sweep
    every = spec.noise_scale_every
    if not every:
        return None
    return NoiseScaleProbe(setup.model, int(spec.noise_scale_parts), int(every), setup.run.index, emit)


def noise_scale_hook_for(setup, emit: Emit, built: dict) -> NoiseScaleProbe | None:
    """The measurement group's hook (core/settings/measurement.py)."""
    return make_noise_probe(setup, emit)
