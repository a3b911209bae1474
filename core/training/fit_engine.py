"""The fit engine: trains with the model's own `model.fit`, so the clock is the one the user's fit runs on.

BatchLab's instrumented loop (trainer.py) is faster than `fit` on small models (docs/benchmarks.md),
so its absolute times are not what a user's own `fit` shows. This engine calls `fit` itself with one
Keras callback, `FitClock`, that turns fit's callbacks into BatchLab's hooks (hooks.py), so a fit run
emits the same events and columns as a loop run:

- epoch_time: fit's own epoch clock, read in on_epoch_begin and on_epoch_end, minus the validation
  pass that fit runs inside its epoch (read in on_test_begin / on_test_end and reported as val_time).
- loss per step: fit's logs in on_train_batch_end hold running means over the epoch, weighted by
  the samples of each batch; the loss of one batch is recovered from two successive means:
  (mean_now * seen_now - mean_before * seen_before) / batch_samples. With steps_per_execution = k,
  fit reports once per k steps, so the k rows of a call hold the mean loss of those k batches.
- step_time, fetch_time, input_wait: NaN, fit does not expose them. wall_time: the clock when fit
  hands over a step's logs (already read from the device: with the TensorFlow backend Keras converts
  every step's logs to Python floats before calling callbacks, which waits for the step).
- traced: 1 for steps during whose call fit's train_function traced (its tracing count rose).
  The tracing cost of a run is the traced calls' time minus as many untraced calls at their median,
  each call timed from the previous callback (or the epoch's start) to its on_train_batch_end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import keras
from batchlab.core.training.failures import StopRequested
from batchlab.core.training.hooks import Hook, HookList, TraceWatch, tracing_cost

SYNC_AS_FIT = "every_step"  # Keras's TF backend reads every step's logs to floats, which waits for the device


def traced_functions(train_function: Any) -> list[Any]:
    """The tf.functions behind fit's train_function, whose tracing counts tell when fit traced.

    Keras's TensorFlow trainer returns a plain Python function that calls a tf.function over the
    iterator (multi_step_on_iterator), held in its closure; an eager model has none.
    """
    if hasattr(train_function, "experimental_get_tracing_count"):
        return [train_function]
    cells = getattr(train_function, "__closure__", None) or ()
    found = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if hasattr(value, "experimental_get_tracing_count"):
            found.append(value)
    return found


class FitTiming(Hook):
    """The fit engine's own figures for run_ended, set before the standard hooks fill in theirs:
    the tracing cost from call durations, and a throughput from untraced calls when no epoch was
    free of tracing (a one-epoch run), since fit gives no step_time to fall back on."""

    def __init__(self) -> None:
        self.traced: list[float] = []
        self.untraced: list[float] = []
        self.untraced_samples = 0
        self.steady_epochs = 0

    def add_call(self, duration: float, samples: int, traced: bool) -> None:
        if traced:
            self.traced.append(duration)
        else:
            self.untraced.append(duration)
            self.untraced_samples += samples

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        if logs.get("traced_steps") == 0:
            self.steady_epochs += 1

    def on_run_end(self, logs: dict[str, Any]) -> None:
        logs.setdefault("tracing_time_s", tracing_cost(self.traced, self.untraced) if self.traced else math.nan)
        if self.steady_epochs == 0 and self.untraced:
            logs.setdefault("samples_per_s", self.untraced_samples / sum(self.untraced))


class FitClock(keras.callbacks.Callback):
    """Keras callback: fit's epochs, steps and validation pass, as rows for BatchLab's hooks."""

    def __init__(self, engine: FitEngine):
        super().__init__()
        self.engine = engine
        self.hooks = engine.hooks
        self.traces: list[TraceWatch] = []
        self.begin_step = 0

    def on_train_begin(self, logs=None):
        self.traces = [TraceWatch(f) for f in traced_functions(self.model.train_function)]

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.seen = 0
        self.means: dict[str, float] = {}
        self.traced_steps = 0
        self.tracing_time = 0.0
        self.val_t0 = math.nan
        self.val_time = 0.0
        self.hooks.on_epoch_begin(epoch)  # before the clock: the hooks' work (memory reset) is not fit's
        now = time.perf_counter()
        if epoch == 0:
            self.engine.t_run0 = now
        self.t_epoch0 = self.t_last = now

    def on_train_batch_begin(self, batch, logs=None):
        t0 = time.perf_counter()
        if self.engine.should_stop():
            raise StopRequested()
        self.begin_step = batch
        self.engine.callback_time += time.perf_counter() - t0

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        logs = logs or {}
        traced = any([w.traced() for w in self.traces])  # a list, not a generator: every count is updated
        steps = range(self.begin_step, batch + 1)
        sizes = [self.engine.batch_size_of(i) for i in steps]
        samples = sum(sizes)
        values = {k: self._batch_mean(k, float(v), samples) for k, v in logs.items()}
        self.seen += samples
        duration, self.t_last = now - self.t_last, now
        self.engine.timing.add_call(duration, samples, traced)
        if traced:
            self.traced_steps += len(sizes)
            self.tracing_time += duration
        first = self.epoch * self.engine.setup.steps_per_epoch
        for i, size in zip(steps, sizes, strict=True):
            row = {
                "step": first + i,
                "epoch": self.epoch,
                "loss": values.get("loss", math.nan),
                "batch_size": size,
                "step_time": math.nan,
                "fetch_time": math.nan,
                "input_wait": math.nan,
                "traced": int(traced),
                "wall_time": now - self.engine.t_run0,
            }
            if "accuracy" in values:
                row["accuracy"] = values["accuracy"]
            row["metrics"] = {k: v for k, v in values.items() if k != "loss"}
            self.hooks.on_train_batch_end(row["step"], row)
        self.engine.callback_time += time.perf_counter() - now

    def _batch_mean(self, key: str, running_mean: float, samples: int) -> float:
        """This call's mean of `key` from fit's running mean over the epoch (weighted by samples)."""
        before = self.means.get(key, 0.0)
        self.means[key] = running_mean
        if not math.isfinite(running_mean):
            return running_mean  # a NaN/inf step makes the running mean NaN/inf: report it as is
        return (running_mean * (self.seen + samples) - before * self.seen) / samples

    def on_test_begin(self, logs=None):
        self.val_t0 = time.perf_counter()
        self.hooks.on_test_begin()

    def on_test_end(self, logs=None):
        self.val_time = time.perf_counter() - self.val_t0
        logs = logs or {}
        self.hooks.on_test_end(
            {
                "val_loss": float(logs.get("loss", math.nan)),
                "val_accuracy": float(logs.get("accuracy", math.nan)),
                "val_time": self.val_time,
            }
        )

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        logs = logs or {}
        self.hooks.on_epoch_end(
            epoch,
            {
                "epoch": epoch,
                # fit's epoch clock runs over its validation pass too; the column excludes validation
                "epoch_time": now - self.t_epoch0 - self.val_time,
                "val_loss": float(logs.get("val_loss", math.nan)),
                "val_accuracy": float(logs.get("val_accuracy", math.nan)),
                "val_time": self.val_time,
                "wall_time": now - self.engine.t_run0,
                "traced_steps": self.traced_steps,
                "tracing_time": self.tracing_time,
                # fit's epoch logs hold each metric's value over the whole epoch (AUC too), and val_NAME
                "metrics": {
                    (k if k.startswith("val_") else f"train_{k}"): float(v)
                    for k, v in logs.items()
                    if k not in ("loss", "val_loss")
                },
            },
        )


class FitEngine:
    """Trains a prepared run (trainer.RunSetup) with `model.fit`; the same interface as InstrumentedLoop."""

    engine = "fit"

    def __init__(self, setup: Any, hooks: HookList, should_stop: Callable[[], bool]):
        self.setup = setup
        self.timing = FitTiming()
        hooks.add(self.timing, "timing")  # first: its run figures take precedence over step-based ones
        self.hooks = hooks
        self.should_stop = should_stop
        self.t_run0 = math.nan
        self.callback_time = 0.0  # s spent in FitClock's per-step callbacks: what this engine adds to fit's steps

    def run_fields(self) -> dict[str, Any]:
        """What run_started records about this engine (fit has no fetch clock, so no fetch overhead)."""
        return {"engine": self.engine, "sync": SYNC_AS_FIT, "fetch_overhead_s": math.nan}

    def elapsed(self) -> float:
        """Seconds since the run's first epoch began (NaN before training)."""
        return time.perf_counter() - self.t_run0

    def batch_size_of(self, step_in_epoch: int) -> int:
        """Samples in one batch of an epoch: fit slices the arrays in order, the last batch may be short."""
        b = self.setup.run.batch_size
        return max(0, min(b, self.setup.samples - step_in_epoch * b))

    def train(self, epochs: int, max_steps: int | None = None) -> None:
        """Whole epochs only: the spec refuses steps/examples budgets and targets with this engine, so
        `max_steps`, when given, is the steps of those epochs."""
        setup = self.setup
        run = setup.run
        validation = (setup.x_val, setup.y_val) if setup.x_val is not None else None
        self.t_run0 = time.perf_counter()  # until fit starts its first epoch
        setup.model.fit(
            setup.x_train,
            setup.y_train,
            batch_size=run.batch_size,
            epochs=epochs,
            shuffle=run.sweep.shuffle,
            validation_data=validation,
            validation_batch_size=run.batch_size,
            verbose=0,
            callbacks=[FitClock(self)],
        )
