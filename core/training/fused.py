"""Fused execution (`--fused K`): K training steps per call of one tf.function, every step's loss kept.

Like Keras's `steps_per_execution`, a call runs a `tf.while_loop` over K batches taken from the
input pipeline's iterator inside the graph, so Python, the tf.function call and the host sync are
paid once per K steps. Unlike `fit`, which then reports one mean loss per call, each iteration
writes its batch's loss and metrics (and its batch size) into a TensorArray, and the call returns
all K rows: the steps table still gets one row per step with that step's own loss.

What changes in the records, and why:

- **timed per call**: one clock around each call (it ends when the K rows are on the host, which
  waits for the device). Each of its steps gets `step_time` = the call's time / its steps, which
  includes taking the batches from the pipeline; `fetch_time` and `input_wait` are NaN (not
  measured on their own), and every step of a call has the call's end as `wall_time`. The run
  attributes `steps_per_call` and `step_timing = "per call"` say so.
- **call boundaries**: a call never crosses an epoch end, an evaluation point (`eval_every`) or
  the end of a steps/examples budget; it is cut short there, so evaluations, the epoch's
  validation and reduce-on-plateau happen at exactly the steps the one-step loop has them at.
- **the learning rate**: the optimizer's schedule reads its own step counter inside the graph, so
  every step of a call gets its own rate, as in the one-step loop.
- **tracing**: the first call traces (its K steps are marked `traced`); later calls, including a
  shorter last call or a short last batch, do not (the step count is a tensor, the batch shape is
  unknown to the graph).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.failures import StopRequested
from batchlab.core.training.fit_engine import FitTiming
from batchlab.core.training.hooks import HookList, TraceWatch
from batchlab.core.training.trainer import SYNC_EVERY_STEP, InstrumentedLoop, RunSetup

BATCH_SIZE = "batch_size"  # the first value of each row a call returns; the others are the step's logs


class FusedFunction:
    """`call(iterator, n)`: n training steps in one tf.function; returns (n, 1 + len(names)) float32 rows of
    [batch size, logs...], where `names` are the step's log names in row order (known after the first call)."""

    def __init__(self, model: Any):
        self.names: list[str] = []

        def one_step(x, y):
            logs = model.train_step((x, y))
            # Keras metrics are running means; reset after each step so the next step's logs are its own batch's.
            size = tf.cast(tf.shape(x)[0], tf.float32)
            values = tf.stack([size] + [tf.cast(logs[k], tf.float32) for k in sorted(logs)])
            for metric in model.metrics:
                metric.reset_state()
            self.names[:] = sorted(logs)  # at trace time: the row layout
            return values

        if model.jit_compile:  # XLA compiles the step; the loop and the iterator stay outside the cluster
            one_step = tf.function(one_step, jit_compile=True)

        def fused(iterator, n):
            def body(i, rows):
                x, y, _made = iterator.get_next()
                return i + 1, rows.write(i, one_step(x, y))

            rows = tf.TensorArray(tf.float32, size=n)
            # parallel_iterations=1: each step reads the weights the previous one wrote, in order
            _, rows = tf.while_loop(lambda i, _rows: i < n, body, (tf.constant(0), rows), parallel_iterations=1)
            return rows.stack()

        self.call = tf.function(fused, autograph=False)


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
        self.fused = FusedFunction(setup.model)
        self.trace = TraceWatch(self.fused.call)
        self.timing = FitTiming()  # tracing cost and throughput from whole calls
        hooks.hooks.insert(0, self.timing)  # first, so its run figures take precedence over step-based ones

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
        iterator = iter(self.pipeline)  # its start-up is on the epoch clock, as in the one-step loop
        i = 0
        while i < per_epoch:
            if self.should_stop():
                raise StopRequested()
            n = self._call_size(step0 + i, per_epoch - i)
            t0 = time.perf_counter()
            rows = self.fused.call(iterator, tf.constant(n, tf.int32)).numpy()  # the host copy waits for the device
            t1 = time.perf_counter()
            traced = self.trace.traced()
            self.timing.add_call(t1 - t0, int(rows[:, 0].sum()), traced)
            self._report_call(step0 + i, epoch, rows, (t1 - t0) / n, self._clock(t1), traced)
            i += n
            if i < per_epoch:
                done = step0 + i
                if done == self.max_steps:  # the budget ends inside this epoch: no epoch row
                    if self.evals is not None:
                        self._evaluate_mid_epoch([])
                    return True
                if self.evals is not None and self.evals.due(done) and self._evaluate_mid_epoch([]):
                    return True
        return self._finish_epoch(epoch, t_epoch0, paused0)

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
