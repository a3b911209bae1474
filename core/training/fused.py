"""Fused execution (`--fused K`): K training steps per call of one tf.function, every step's loss kept.

Like Keras's `steps_per_execution`, a call runs a `tf.while_loop` over K batches, so Python, the
tf.function call and the host sync are paid once per K steps. The training arrays are held as
tensors on the device and each step gathers its batch from them by index (the epoch's sample order
comes from the same seeded shuffle as the one-step loop's pipeline), so no input pipeline runs
between steps either; with `--xla` the whole call is one XLA cluster (bench/bench_step_cost.py
measures what each of these saves). Unlike `fit`, which then reports one mean loss per call, each
iteration writes its batch's loss and metrics (and its batch size) into a TensorArray, and the call
returns all K rows: the steps table still gets one row per step with that step's own loss.

What changes in the records, and why:

- **timed per call**: one clock around each call (it ends when the K rows are on the host, which
  waits for the device). Each of its steps gets `step_time` = the call's time / its steps, which
  includes gathering the batches; `fetch_time` and `input_wait` are NaN (not
  measured on their own), and every step of a call has the call's end as `wall_time`. The run
  attributes `steps_per_call` and `step_timing = "per call"` say so.
- **call boundaries**: a call never crosses an epoch end, an evaluation point (`eval_every`) or
  the end of a steps/examples budget; it is cut short there, so evaluations, the epoch's
  validation and reduce-on-plateau happen at exactly the steps the one-step loop has them at.
- **the learning rate**: the optimizer's schedule reads its own step counter inside the graph, so
  every step of a call gets its own rate, as in the one-step loop.
- **tracing**: the first call traces (its K steps are marked `traced`); later calls, including a
  shorter last call or a short last batch, do not (the step count and batch are tensors). With XLA
  the call is compiled for the run's batch size from that same trace (a thin jit_compile wrapper
  with the batch as a constant, so Keras's train_step is traced once); an epoch's short last batch
  runs in the graph function, already traced, as a second XLA compile would cost seconds of CPU.
- **memory**: the training arrays are on the device for the whole run (on a GPU: samples x
  features x 4 bytes, 16 MB for 5,000 MNIST images), which the run's memory figures include.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.failures import StopRequested
from batchlab.core.training.fit_engine import FitTiming
from batchlab.core.training.hooks import HookList, TraceWatch
from batchlab.core.training.input_pipeline import sample_order
from batchlab.core.training.trainer import SYNC_EVERY_STEP, InstrumentedLoop, RunSetup

BATCH_SIZE = "batch_size"  # the first value of each row a call returns; the others are the step's logs


class FusedFunction:
    """`call(order, start, n, batch)`: n training steps in one call over the training arrays, held as tensors
    on the device; step i trains on samples order[start + i x batch : + batch]. Returns the n steps'
    (n, 1 + len(names)) float32 rows of [batch size, logs...]; `names` are the step's log names in row
    order (known after the first call).

    Without XLA the call is one graph for every batch size (traced once). With the model's jit_compile
    (--xla) the whole call, loop, batch gathers and K train steps, is one XLA cluster, which leaves no
    per-step executor, Python or host work. XLA compiles for one batch shape (seconds of CPU on a CPU),
    so only the run's batch size uses it; another one (an epoch's short last batch) runs in the graph.
    Both run the graph function's one trace.
    """

    def __init__(self, model: Any, x, y, steps_per_call: int):
        self.names: list[str] = []
        if not model.optimizer.built:
            # its slots made now, not inside the first trace, which tf.function would then trace a second time
            model.optimizer.build(model.trainable_variables)
        x_t = tf.convert_to_tensor(x)  # on the default device: the GPU when there is one
        y_t = tf.convert_to_tensor(y)

        def one_step(xb, yb):
            logs = model.train_step((xb, yb))
            # Keras metrics are running means; reset after each step so the next step's logs are its own batch's.
            size = tf.cast(tf.shape(xb)[0], tf.float32)
            values = tf.stack([size] + [tf.cast(logs[k], tf.float32) for k in sorted(logs)])
            for metric in model.metrics:
                metric.reset_state()
            self.names[:] = sorted(logs)  # at trace time: the row layout
            return values

        def fused(order, start, n, batch):
            def body(i, rows):
                # a gather, not tf.slice: XLA takes a slice's begin as a compile-time constant and would
                # compile the call again for every start
                indices = tf.gather(order, start + i * batch + tf.range(batch))
                return i + 1, rows.write(i, one_step(tf.gather(x_t, indices), tf.gather(y_t, indices)))

            rows = tf.TensorArray(tf.float32, size=steps_per_call)  # a static size, as XLA needs
            # parallel_iterations=1: each step reads the weights the previous one wrote, in order
            _, rows = tf.while_loop(lambda i, _rows: i < n, body, (tf.constant(0), rows), parallel_iterations=1)
            return rows.stack()

        self._graph = tf.function(fused, autograph=False)  # batch as a tensor: one trace for every batch size
        self.xla = bool(model.jit_compile)
        self._xla: Any = None  # built at the first call of the run's batch size, the one shape XLA compiles for
        self._xla_batch: int | None = None

    def call(self, order, start: int, n: int, batch: int) -> np.ndarray:
        start_t, n_t = tf.constant(start, tf.int32), tf.constant(n, tf.int32)
        if self.xla and self._xla_batch in (None, batch):
            if self._xla is None:
                self._xla = self._compiled(order, start_t, n_t, batch)
            rows = self._xla(order, start_t, n_t)
        else:
            rows = self._graph(order, start_t, n_t, tf.constant(batch, tf.int32))
        return rows.numpy()[:n]  # the host copy waits for the device

    def _compiled(self, order, start_t, n_t, batch: int):
        """The XLA function for `batch`: a thin jit_compile wrapper calling the graph function's one trace
        with the batch as a constant, which XLA folds into static shapes. Tracing Keras's train_step is
        about a second of CPU; a jit_compile tf.function of `fused` itself would trace it again, and the
        epoch's short last batch (the graph function) once more (bench/bench_xla_compile.py)."""
        self._xla_batch = batch
        graph = self._graph.get_concrete_function(order, start_t, n_t, tf.constant(batch, tf.int32))
        # the constant made inside the wrapper's graph (a captured eager tensor would be a runtime argument)
        return tf.function(
            lambda o, s, k: graph(o, s, k, tf.constant(batch, tf.int32)), autograph=False, jit_compile=True
        )

    def experimental_get_tracing_count(self) -> int:
        """Traces so far of both functions (each trace of the XLA one is followed by its compile), for
        hooks.TraceWatch."""
        functions = [f for f in (self._graph, self._xla) if f is not None]  # the XLA one: its thin wrapper
        return sum(int(f.experimental_get_tracing_count()) for f in functions)


class FusedLoop(InstrumentedLoop):
    """The instrumented loop with K steps per call (FusedFunction); same hooks, events and evaluations."""

    def __init__(
        self,
        setup: RunSetup,
        hooks: HookList,
        should_stop: Callable[[], bool],
        steps_per_call: int,
        evaluations: Evaluations | None = None,
    ):
        super().__init__(setup, hooks, should_stop, sync=SYNC_EVERY_STEP, evaluations=evaluations)
        self.steps_per_call = steps_per_call
        run = setup.run
        self.fused = FusedFunction(setup.model, setup.x_train, setup.y_train, steps_per_call)
        # each epoch's sample order, the one the one-step loop's pipeline trains in (same shuffle, same seed)
        self.orders = sample_order(setup.samples, run.sweep.shuffle, run.seed).batch(setup.samples)
        self.trace = TraceWatch(self.fused)
        self.timing = FitTiming()  # tracing cost and throughput from whole calls
        hooks.add(self.timing, "timing")  # first: its run figures take precedence over step-based ones

    def warm_up(self) -> None:
        """Trace (and with XLA compile) the fused call now, with real calls on the run's data: one step of the
        run's batch size and, if an epoch ends with a short batch, one of that; then every model, optimizer and
        metric variable is set back to its value before them, so the run trains from exactly where it would
        have without this (its losses are the same). The epoch orders are not touched (their shuffle draws
        stay the run's). Its first call then does not trace: the cost was paid here, ahead (core/training/ahead.py)."""
        model = self.setup.model
        variables = list({id(v): v for v in _state_variables(model)}.values())
        saved = [v.numpy() for v in variables]
        samples, batch = self.setup.samples, self.setup.run.batch_size
        order = tf.range(samples, dtype=tf.int32)
        if samples >= batch:
            self.fused.call(order, 0, 1, batch)
        if samples % batch:
            self.fused.call(order, samples - samples % batch, 1, samples % batch)
        for variable, value in zip(variables, saved, strict=True):
            variable.assign(value)
        self.trace.traced()  # what traced is counted here, not in the run's first call

    def _call_size(self, done: int, left_in_epoch: int) -> int:
        """Steps of the next call: at most K, never past the epoch's end, the next evaluation point or the budget."""
        n = min(self.steps_per_call, left_in_epoch)
        if self.max_steps is not None:
            n = min(n, self.max_steps - done)
        if self.evals is not None and self.evals.eval_every:
            n = min(n, self.evals.eval_every - done % self.evals.eval_every)
        return max(1, n)

    def _epoch(self, epoch: int) -> bool:
        """One epoch in calls of up to K steps; True when the run ends inside or right after it."""
        self.hooks.on_epoch_begin(epoch)
        per_epoch = self.setup.steps_per_epoch
        step0 = epoch * per_epoch
        t_epoch0 = time.perf_counter()
        paused0 = self.paused
        order = tf.cast(next(iter(self.orders)), tf.int32)  # on the epoch clock, as the pipeline's start is
        i = 0
        while i < per_epoch:
            if self.should_stop():
                raise StopRequested()
            n = self._call_size(step0 + i, per_epoch - i)
            t0 = time.perf_counter()
            rows, traced = self._steps(order, i, n)  # the host copy of the rows waits for the device
            t1 = time.perf_counter()
            self.timing.add_call(t1 - t0, int(rows[:, 0].sum()), traced)
            self._report_call(step0 + i, epoch, rows, (t1 - t0) / n, self._clock(t1), traced)
            i += n
            self.steps_done = step0 + i
            self.examples_done += int(rows[:, 0].sum())
            if i < per_epoch:
                done = step0 + i
                if done == self.max_steps:  # the budget ends inside this epoch: no epoch row
                    if self.evals is not None:
                        self._evaluate_mid_epoch([])
                    return True
                if self.evals is not None and self.evals.due(done) and self._evaluate_mid_epoch([]):
                    return True
        return self._finish_epoch(epoch, t_epoch0, paused0)

    def _steps(self, order, first: int, n: int):
        """Steps first..first+n-1 of the epoch as one call, or two when the last is the epoch's short batch
        (another shape for XLA); the (n, columns) rows and whether a function traced for them."""
        batch = self.setup.run.batch_size
        full = min(n, (self.setup.samples - first * batch) // batch)  # steps with a whole batch
        parts = []
        if full:
            parts.append(self.fused.call(order, first * batch, full, batch))
        if full < n:  # the epoch's short last batch
            start = (first + full) * batch
            parts.append(self.fused.call(order, start, 1, self.setup.samples - start))
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), self.trace.traced()

    def _report_call(self, first: int, epoch: int, rows, step_time: float, wall: float, traced: bool) -> None:
        names = self.fused.names
        for j, values in enumerate(rows):
            logs = {name: float(v) for name, v in zip(names, values[1:], strict=True)}
            row = {
                "step": first + j,
                "epoch": epoch,
                "batch_size": int(values[0]),
                "fetch_time": math.nan,
                "input_wait": math.nan,
                "traced": int(traced),
                "loss": logs.get("loss", math.nan),
                "step_time": step_time,
                "wall_time": wall,
            }
            self._report(row, logs)


def _state_variables(model: Any) -> list:
    """Every variable a training step may change: the model's (weights, non-trainable state, random seeds),
    the optimizer's (its step counter, moments, a loss scale) and the metrics' running totals."""
    return [*model.variables, *model.optimizer.variables, *model.metrics_variables]
