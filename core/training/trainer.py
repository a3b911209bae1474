"""One training run, instrumented per step. Runs inside the training child; imports TensorFlow.

The instrumented loop calls the model's own `train_step` (the code `model.fit` runs), fed by a
tf.data pipeline shaped like fit's array adapter, so the optimizer semantics, loss scaling, XLA
choice and batching are those of the user's own `fit`. What it adds is a clock around each step
and around the fetch of its batch; every measurement made from those clocks is a hook (hooks.py).

`train_run` is the child's entry: it prepares the run (data, model, pipeline), builds the hooks
and hands them to an engine: `InstrumentedLoop` ("loop"), or the fit engine ("fit", fit_engine.py).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from batchlab.core import batch_rules
from batchlab.core.datasets import load_spec_data, prepare_arrays
from batchlab.core.events import log_event, now_iso
from batchlab.core.lr_rules import plan_for
from batchlab.core.spec import RunSpec
from batchlab.core.training import faults
from batchlab.core.training.batch_schedule import BatchSchedule
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.execution import apply_xla, execution_fields
from batchlab.core.training.failures import (
    Diverged,
    StopRequested,
    classify_failure,
    first_line,
    traceback_text,
)
from batchlab.core.training.flops import flops_fields
from batchlab.core.training.gc_watch import GcWatch
from batchlab.core.training.hooks import (
    EpochSummary,
    HookList,
    NanCheck,
    RunEvents,
    RunSummary,
    StepLog,
    TraceWatch,
    TracingCounter,
)
from batchlab.core.training.memory import MemoryProbe, current_rss_bytes
from batchlab.core.training.noise_scale import NoiseScaleProbe
from batchlab.core.training.replication import (
    build_variables,
    check_batches,
    make_strategy,
    replicated_step,
    replication_fields,
    scope,
)
from batchlab.core.training.schedules import RunSchedule, build_schedule
from batchlab.core.training.settings_hooks import add_settings_hooks
from batchlab.core.training.startup import StartupClock
from batchlab.core.training.workloads import accumulation_fields, build_model

Emit = Callable[[dict[str, Any]], None]

SYNC_EVERY_STEP = "every_step"
SYNC_SAMPLED = "sampled"
SAMPLED_SYNC_EVERY = 10  # sampled sync: wait for the device on every 10th step (timed) and at epoch end

CALIBRATION_WARMUP = 5  # next() calls that start the calibration pipeline's threads, not timed
CALIBRATION_FETCHES = 20  # timed next() calls; their median is the fetch overhead
CALIBRATION_PAUSE_S = 0.002  # time given to the prefetch thread to refill the buffer before each timed call


def sample_order(samples: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """The sample indices in training order: 0..samples-1, or a new seeded shuffle on each iteration
    (each epoch's `iter`), the same orders wherever this dataset is built with the same seed."""
    indices = tf.data.Dataset.range(samples)
    if shuffle:
        indices = indices.shuffle(samples, seed=seed, reshuffle_each_iteration=True)
    return indices


def make_input_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """Batches of (x, y, made) as fit builds them from arrays (optional per-epoch shuffle, gather, prefetch);
    `made` is the wall-clock time (s since the epoch) the pipeline finished the batch."""
    x_t = tf.convert_to_tensor(x)
    y_t = tf.convert_to_tensor(y)
    batches = sample_order(x.shape[0], shuffle, seed).batch(batch_size)
    batches = batches.map(lambda i: (tf.gather(x_t, i), tf.gather(y_t, i)), num_parallel_calls=tf.data.AUTOTUNE)
    delay = faults.input_delay()
    if delay > 0:

        def slow(xb, yb):
            done = tf.py_function(lambda: time.sleep(delay) or 0, [], tf.int32)
            with tf.control_dependencies([done]):
                return tf.identity(xb), tf.identity(yb)

        batches = batches.map(slow)  # sequential on purpose: one batch per `delay`
    # The last stage stamps each batch with the wall-clock time it was made (tf.timestamp: seconds since
    # the Unix epoch, as time.time()). A batch made before the loop asked for it was waiting in the
    # prefetch buffer: only a batch made after the ask made the step wait (input_wait).
    batches = batches.map(lambda xb, yb: (xb, yb, tf.timestamp()))
    return batches.prefetch(tf.data.AUTOTUNE)


def _starvation(fetch: float, asked: float, made) -> float:
    """Seconds of a fetch spent waiting for the pipeline to make the batch (s): from the ask (wall clock)
    to the batch's `made` stamp, at most the whole fetch; 0 for a batch already in the prefetch buffer.
    The rest of the fetch is next()'s own cost. Read after the step's clock stopped (a host copy)."""
    return min(fetch, max(0.0, float(made) - asked))


def calibrate_fetch_overhead(x: np.ndarray, y: np.ndarray, batch_size: int) -> float:
    """Fixed cost (s) of next() on a prefetch buffer that already holds the batch: the median over
    CALIBRATION_FETCHES calls on a pipeline of one repeated batch of the run's element spec.

    Recorded for reference (run_started's fetch_overhead_s); input_wait is measured per step from the
    batches' stamps instead (_starvation), since next()'s cost while training differs from this by up to
    3x on a busy 2-core machine. The real pipeline is not used, so its shuffle order stays the run's.
    """
    b = min(batch_size, x.shape[0])
    x_t = tf.convert_to_tensor(x[:b])
    y_t = tf.convert_to_tensor(y[:b])
    # The run's own stages (index batches, a parallel gather, prefetch) over one batch of its data,
    # repeated: the gather threads work while next() runs, as they do in training.
    indices = tf.data.Dataset.range(b).batch(b).repeat()
    data = indices.map(lambda i: (tf.gather(x_t, i), tf.gather(y_t, i)), num_parallel_calls=tf.data.AUTOTUNE)
    iterator = iter(data.prefetch(tf.data.AUTOTUNE))
    for _ in range(CALIBRATION_WARMUP):
        next(iterator)
    times = []
    for _ in range(CALIBRATION_FETCHES):
        time.sleep(CALIBRATION_PAUSE_S)
        t0 = time.perf_counter()
        next(iterator)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_step_function(model, strategy=None) -> Callable:
    """The model's own train_step, compiled like fit compiles it, returning this batch's metrics.

    Keras metrics are running means; resetting them after each step makes the returned
    loss the loss of this one mini-batch. The reset does not touch weights or optimizer.
    With a tf.distribute `strategy` the batch is split over its replicas (replication.py).
    """
    if strategy is not None:
        return tf.function(replicated_step(model, strategy), reduce_retracing=True)

    def one_step(x, y):
        logs = model.train_step((x, y))
        for metric in model.metrics:
            metric.reset_state()
        return logs

    if model.jit_compile:
        one_step = tf.function(one_step, reduce_retracing=True, jit_compile=True)
    return tf.function(one_step, reduce_retracing=True)


# Batch of the validation passes at evaluation points inside an epoch (eval_every), when the run's is smaller.
EVAL_POINT_BATCH = 256


def validate(model, x_val, y_val, batch_size: int) -> dict[str, Any]:
    """val_loss, val_accuracy (NaN without), val_time (s) and `metrics` (val_NAME for every compiled
    metric), as fit's validation pass computes them."""
    t0 = time.perf_counter()
    logs = model.evaluate(x_val, y_val, batch_size=batch_size, verbose=0, return_dict=True)
    elapsed = time.perf_counter() - t0
    model.reset_metrics()  # evaluate leaves its totals in the trackers the train step reads
    return {
        "val_loss": float(logs.get("loss", math.nan)),
        "val_accuracy": float(logs.get("accuracy", math.nan)),
        "val_time": elapsed,
        "metrics": {f"val_{k}": float(v) for k, v in logs.items() if k != "loss"},
    }


@dataclass
class RunSetup:
    """What every engine trains: the run, its compiled model and its arrays (validation may be None)."""

    run: RunSpec
    model: Any
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    schedule: RunSchedule | None = None  # the learning rate per step; None when the spec sets no rate
    task: str = ""  # core.loss_targets.TASKS: recorded as the run's `task` attribute
    targets: str = ""  # how the targets are laid out, e.g. "one-hot"
    batch_plan: batch_rules.BatchPlan | None = None  # a batch-size schedule; None: batch_size throughout
    xla_choice: str = ""  # whether and why the train step is compiled with XLA (execution.apply_xla)
    strategy: Any = None  # tf.distribute.MirroredStrategy with replicas > 1 (replication.py); None: one device

    @property
    def samples(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.samples / self.run.batch_size)


def load_run_data(run: RunSpec):
    """The run's arrays (core.datasets.PreparedData): the same for every run of a sweep."""
    spec = run.sweep
    return prepare_arrays(load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale)


def prepare_run(run: RunSpec, emit: Emit, data=None) -> RunSetup:
    """Seed, load the data (unless given, from load_run_data) and build the model; the notes on how data
    was fitted to it go to the log."""
    spec = run.sweep
    tf.keras.utils.set_random_seed(run.seed)
    data = load_run_data(run) if data is None else data
    steps_per_epoch = math.ceil(data.x_train.shape[0] / run.batch_size)
    total_steps = spec.budget.steps(data.x_train.shape[0], run.batch_size)  # with a target: the most it may train
    # run.lr: the spec's lr, or with lr_from the lr-find suggestion for this batch size
    plan = plan_for(spec, run.batch_size, steps_per_epoch, total_steps, lr0=run.lr)
    batch_plan = batch_rules.plan_for(spec, run.batch_size, data.x_train.shape[0])
    if batch_plan is not None:  # the steps a schedule trains: the budget counts real batches
        total_steps = len(
            batch_rules.step_batches(
                batch_plan, run.batch_size, data.x_train.shape[0], spec.budget.unit, spec.budget.amount
            )[1]
        )
        plan = plan_for(spec, run.batch_size, steps_per_epoch, total_steps, lr0=run.lr)
    scalable = batch_plan is not None and batch_plan.schedule == "grow"  # its rate decays past max_batch
    schedule = build_schedule(plan, scalable=scalable) if plan is not None else None
    learning_rate = schedule.learning_rate if schedule is not None else None
    strategy = make_strategy(spec.replicas)
    if strategy is not None:
        check_batches(data.x_train.shape[0], run.batch_size, spec.replicas)
    with scope(strategy):
        built = build_model(run, data, learning_rate)
    xla_choice = apply_xla(built.model, spec, total_steps, run.batch_size)
    if strategy is not None:
        built.model.jit_compile = False
        xla_choice = f"off: the step is not compiled with XLA across {spec.replicas} replicas"
        build_variables(built.model, strategy, built.x_train[: run.batch_size], built.y_train[: run.batch_size])
    for note in built.notes:
        emit(log_event("info", note, run=run.index))
    return RunSetup(
        run,
        built.model,
        built.x_train,
        built.y_train,
        built.x_val,
        built.y_val,
        schedule,
        built.task,
        built.targets,
        batch_plan,
        xla_choice,
        strategy,
    )


class InstrumentedLoop:
    """BatchLab's own loop: every step's fetch and compute timed, every measurement a hook.

    sync="every_step" reads each step's loss right after the step, which waits for the device, so
    step_time is the step's compute time. sync="sampled" does that only on every
    SAMPLED_SYNC_EVERY-th step (after first letting the device finish the steps before it) and on
    traced steps, so the device queue keeps the overlap `fit` has; the other steps' losses are read
    at the next sync point (their step_time is NaN, their wall_time the time their launch returned).

    With `evaluations` (a target or eval_every), it evaluates every eval_every steps, at every
    epoch end and where a steps/examples budget ends inside an epoch. A mid-epoch evaluation
    pauses the run's clock: the wall_time of later step and epoch rows leaves it out, so step
    durations and throughput are unchanged. Epoch-end validation stays on that clock, as before.
    Each evaluation's train_wall_time leaves out every evaluation and validation pass before it.
    """

    engine = "loop"

    def __init__(
        self,
        setup: RunSetup,
        hooks: HookList,
        should_stop: Callable[[], bool],
        sync: str = SYNC_EVERY_STEP,
        evaluations: Evaluations | None = None,
        noise: NoiseScaleProbe | None = None,
        batches: BatchSchedule | None = None,
    ):
        self.setup = setup
        self.evals = evaluations
        self.noise = noise  # gradient noise scale, measured before the steps it is due at (noise_scale.py)
        self.batches = batches  # a batch-size schedule: each epoch's batch; None: run.batch_size throughout
        self.max_steps: int | None = None
        self.max_examples: int | None = None  # an examples budget under a batch schedule: real examples count
        self.steps_done = 0
        self.examples_done = 0
        self.paused = 0.0  # s of mid-epoch evaluations: off the clock of step and epoch rows
        self.eval_total = 0.0  # s of every evaluation and validation pass: off the training time
        self.last_close_time = 0.0  # s closing the input pipeline of an epoch the run ended inside (run_ended)
        self.hooks = hooks
        self.should_stop = should_stop
        self.sync = sync
        run = setup.run
        # Inside the caller's try: copying the data into tensors can run out of memory.
        self.pipeline = make_input_pipeline(setup.x_train, setup.y_train, run.batch_size, run.sweep.shuffle, run.seed)
        self.batch = run.batch_size  # the batch the pipeline makes now
        self.fetch_overhead = calibrate_fetch_overhead(setup.x_train, setup.y_train, run.batch_size)
        self.step_fn = make_step_function(setup.model, setup.strategy)
        self.trace = TraceWatch(self.step_fn)
        self.t_run0 = math.nan

    def run_fields(self) -> dict[str, Any]:
        """What run_started records about this engine."""
        fields = {"engine": self.engine, "sync": self.sync, "fetch_overhead_s": self.fetch_overhead}
        return {**fields, **(self.noise.run_fields() if self.noise is not None else {})}

    def elapsed(self) -> float:
        """Seconds since the run's first step began (NaN before training)."""
        return time.perf_counter() - self.t_run0

    def train(self, epochs: int, max_steps: int | None = None, max_examples: int | None = None) -> None:
        """Train `epochs` epochs, ending after `max_steps` steps if given (a steps/examples budget), after
        the step that reaches `max_examples` examples, or at the first evaluation that meets the target."""
        self.t_run0 = time.perf_counter()
        self.max_steps = max_steps
        self.max_examples = max_examples
        for epoch in range(epochs):
            if self._epoch(epoch):
                break

    def _budget_used(self) -> bool:
        """True once the steps or examples budget is used up (steps and examples so far)."""
        return (self.max_steps is not None and self.steps_done >= self.max_steps) or (
            self.max_examples is not None and self.examples_done >= self.max_examples
        )

    def _rebatch(self, epoch: int) -> int:
        """The batch this epoch trains at; a batch schedule's change rebuilds the input pipeline (the step
        function retraces for the new shape, and its `traced` rows say so)."""
        if self.batches is None:
            return self.batch
        batch = self.batches.batch_for_epoch(epoch, self.steps_done)
        if batch != self.batch:
            setup = self.setup
            run = setup.run
            # seeded per epoch: a new pipeline would otherwise repeat the first epoch's shuffle order
            seed = run.seed + epoch
            self.pipeline = make_input_pipeline(setup.x_train, setup.y_train, batch, run.sweep.shuffle, seed)
            self.batch = batch
        return batch

    def _clock(self, t: float) -> float:
        """The run's clock at perf_counter time t: since the first step began, mid-epoch evaluations left out."""
        return t - self.t_run0 - self.paused

    def _evaluate_mid_epoch(self, pending: list) -> bool:
        """Evaluate inside an epoch, off the clock; True when the run should stop (target met)."""
        self._read_pending(pending)  # every step so far reported, so the counts and train loss are current
        t0 = time.perf_counter()
        wall, train_wall = self._clock(t0), t0 - self.t_run0 - self.eval_total
        setup = self.setup
        if setup.x_val is not None:
            # an evaluation point's figures do not depend on the batch it is computed in; at batch 1 a pass
            # over 2,000 images took 10-20 s here, so these off-the-clock passes use at least EVAL_POINT_BATCH
            val_logs = validate(setup.model, setup.x_val, setup.y_val, max(self.batch, EVAL_POINT_BATCH))
        else:
            val_logs = {"val_loss": math.nan, "val_accuracy": math.nan}
        spent = time.perf_counter() - t0
        self.paused += spent
        self.eval_total += spent
        if self.batches is not None:  # two_phase counts every evaluation's validation loss
            self.batches.observe(float(val_logs["val_loss"]))
        return self.evals.record(wall, train_wall, spent, val_logs, at_epoch_end=False)

    def _epoch(self, epoch: int) -> bool:
        """One epoch; True when the run ends inside or right after it (budget used up, target met)."""
        hooks = self.hooks
        batch = self._rebatch(epoch)
        per_epoch = math.ceil(self.setup.samples / batch)
        hooks.on_epoch_begin(epoch)
        step0 = self.steps_done  # epoch x steps_per_epoch at one batch size
        pending: list[tuple[dict, Any]] = []  # steps launched whose loss is not read yet (sampled sync)
        t_epoch0, t_epoch0_wall = time.perf_counter(), time.time()
        paused0 = self.paused
        # Starting the pipeline (threads, first prefetch) costs ~5 ms an epoch; fit pays it inside its
        # epoch too, so it is on the epoch clock and counted in the first step's fetch time.
        iterator = iter(self.pipeline)
        ended_inside = False  # the run ends inside this epoch (a budget, a target met at an evaluation point)
        for i in range(1 << 62):
            if self.should_stop():
                self._read_pending(pending)
                raise StopRequested()
            t0 = time.perf_counter() if i else t_epoch0
            asked = time.time() if i else t_epoch0_wall
            try:
                xb, yb, made = next(iterator)
            except StopIteration:
                break
            t1 = time.perf_counter()
            fetch = t1 - t0
            step = step0 + i
            measured = self.noise is not None and self.noise.due(step, int(xb.shape[0]))
            timed = self.sync == SYNC_EVERY_STEP or step % SAMPLED_SYNC_EVERY == 0 or measured
            if timed and pending:
                self._read_pending(pending)  # let the device finish earlier steps: this step's time is its own
                t1 = time.perf_counter()
            if measured:
                noise_row = self._measure_noise(step, xb, yb)
                t1 = time.perf_counter()
            logs = self.step_fn(xb, yb)
            traced = self.trace.traced()
            self.steps_done = step + 1
            self.examples_done += int(xb.shape[0])
            row = {
                "step": step,
                "epoch": epoch,
                "batch_size": int(xb.shape[0]),
                "fetch_time": fetch,
                "traced": int(traced),
            }
            if timed or traced:
                # Reading the loss copies it to the host, which waits for the step's kernels: GPU work
                # is asynchronous, so without this sync the clock would time the launch, not the step.
                loss = float(logs["loss"])
                t2 = time.perf_counter()
                row.update(loss=loss, step_time=t2 - t1, wall_time=self._clock(t2))
                row["input_wait"] = _starvation(fetch, asked, made)
                self._read_pending(pending)
                self._report(row, logs)
                if measured:
                    self.noise.record({**noise_row, "step_time": row["step_time"]})
            else:
                row.update(step_time=math.nan, wall_time=self._clock(time.perf_counter()))
                row["input_wait"] = _starvation(fetch, asked, made)
                pending.append((row, logs))
            if i < per_epoch - 1:  # the epoch's last step is evaluated at its end, below
                if self._budget_used():  # the budget ends inside this epoch: no epoch row
                    self._read_pending(pending)
                    if self.evals is not None:
                        self._evaluate_mid_epoch(pending)
                    ended_inside = True
                    break
                if self.evals is not None and self.evals.due(step + 1):
                    if self._evaluate_mid_epoch(pending):
                        ended_inside = True
                        break
        if ended_inside:  # no epoch row: its pipeline's closing goes to run_ended (last_close_time_s)
            t_close = time.perf_counter()
            del iterator
            self.last_close_time = time.perf_counter() - t_close
            return True
        self._read_pending(pending)  # the epoch's clock stops when the device is done
        t_close = time.perf_counter()
        epoch_time = t_close - t_epoch0 - (self.paused - paused0)  # mid-epoch evaluations are not training time
        # Closing the iterator stops tf.data's prefetch and map threads; it waits for any batch they are making.
        # Timed on its own (close_time): on a busy 2-core machine it took up to 4.4 s, between two epochs.
        del iterator
        return self._finish_epoch(epoch, t_epoch0, paused0, epoch_time, time.perf_counter() - t_close)

    def _finish_epoch(
        self, epoch: int, t_epoch0: float, paused0: float, epoch_time: float | None = None, close_time: float = 0.0
    ) -> bool:
        """Stop the epoch's clock (unless stopped at `epoch_time`, s), validate, send the epoch row and evaluate;
        True when the target was met. `close_time`: seconds spent closing the epoch's input pipeline."""
        hooks = self.hooks
        if epoch_time is None:  # mid-epoch evaluations are not the epoch's training time
            epoch_time = time.perf_counter() - t_epoch0 - (self.paused - paused0)
        epoch_logs = {"epoch": epoch, "epoch_time": epoch_time, "close_time": close_time}
        setup = self.setup
        t_val0 = time.perf_counter()
        if setup.x_val is not None:
            hooks.on_test_begin()  # the memory probe reads the training steps' peak here
            val_logs = validate(setup.model, setup.x_val, setup.y_val, self.batch)
            hooks.on_test_end(val_logs)
            epoch_logs.update(val_logs)
        else:
            epoch_logs.update(val_loss=math.nan, val_accuracy=math.nan, val_time=0.0)
        epoch_logs["wall_time"] = self._clock(time.perf_counter())
        hooks.on_epoch_end(epoch, epoch_logs)
        train_wall = t_val0 - self.t_run0 - self.eval_total
        self.eval_total += epoch_logs["val_time"]
        if self.evals is None:
            return self._budget_used()
        met = self.evals.record(self._clock(t_val0), train_wall, epoch_logs["val_time"], epoch_logs, at_epoch_end=True)
        return met or self._budget_used()

    def _measure_noise(self, step: int, xb, yb) -> dict:
        """The noise-scale measurement of this step's batch (before its update), off the run's clock and
        off the training time, like an evaluation point: the step's own row times only its update."""
        t0 = time.perf_counter()
        row = self.noise.measure(step, xb, yb)
        spent = time.perf_counter() - t0
        self.paused += spent
        self.eval_total += spent
        return row

    def _read_pending(self, pending: list) -> None:
        """Read the losses of launched steps (waits for the device) and report their rows, in order."""
        while pending:
            row, logs = pending.pop(0)
            row["loss"] = float(logs["loss"])
            self._report(row, logs)

    def _report(self, row: dict, logs: dict) -> None:
        if "accuracy" in logs:
            row["accuracy"] = float(logs["accuracy"])
        row["metrics"] = {k: float(v) for k, v in logs.items() if k != "loss"}  # every compiled metric, this batch
        self.hooks.on_train_batch_end(row["step"], row)


def standard_hooks(run_index: int, emit: Emit, tf_device: str | None, nvml_index: int | None) -> HookList:
    """The measurements every engine makes, each placed by its priority (hooks.PRIORITY; RunEvents last: it sends)."""
    memory = MemoryProbe(tf_device, nvml_index)
    hooks = HookList()
    # each batch of steps carries the epoch's memory peaks so far, so the live memory plot moves within an epoch
    hooks.add(StepLog(run_index, emit, memory=memory.read), "step_log")
    for hook, name in (
        (GcWatch(), "gc_watch"),
        (EpochSummary(), "epoch_summary"),
        (TracingCounter(), "tracing"),
        (memory, "memory"),
        (RunSummary(), "run_summary"),
        (NanCheck(), "nan_check"),
        (RunEvents(run_index, emit), "run_events"),
    ):
        hooks.add(hook, name)
    return hooks


def make_engine(
    setup: RunSetup,
    hooks: HookList,
    should_stop: Callable[[], bool],
    evaluations: Evaluations | None = None,
    noise: NoiseScaleProbe | None = None,
    batches: BatchSchedule | None = None,
):
    """The engine the spec asks for: the instrumented loop (default) or model.fit (fit_engine.py).

    The spec refuses targets, eval_every, steps/examples budgets and noise_scale_every with the fit engine."""
    spec = setup.run.sweep
    if spec.loop == "fit":
        from batchlab.core.training.fit_engine import FitEngine

        return FitEngine(setup, hooks, should_stop)
    if spec.fused > 1:  # K steps per call (fused.py); the spec allows it with this loop only
        from batchlab.core.training.fused import FusedLoop

        return FusedLoop(setup, hooks, should_stop, spec.fused, evaluations=evaluations)
    return InstrumentedLoop(
        setup,
        hooks,
        should_stop,
        sync=spec.sync,
        evaluations=evaluations,
        noise=noise,
        batches=batches,
    )


@dataclass
class BuiltRun:
    """A run ready to train: its measurements (hooks), its model and data (setup) and its engine."""

    hooks: HookList
    setup: RunSetup
    engine: Any


def build_run(
    run: RunSpec,
    emit: Emit,
    should_stop: Callable[[], bool],
    hooks: HookList,
    data=None,
    clock: StartupClock | None = None,
) -> BuiltRun:
    """Seed, build the model (the clock's `model` phase) and the engine with its hooks (`pipeline`)."""
    clock = clock if clock is not None else StartupClock()
    with clock.phase("model"):
        setup = prepare_run(run, emit, data)
    built = add_settings_hooks(setup, emit, hooks)
    with clock.phase("pipeline"):
        engine = make_engine(
            setup,
            hooks,
            should_stop,
            built.get("evaluations"),
            built.get("noise_scale"),
            built.get("batch_schedule"),
        )
    return BuiltRun(hooks, setup, engine)


def train_run(
    run: RunSpec,
    emit: Emit,
    should_stop: Callable[[], bool],
    tf_device: str | None,
    nvml_index: int | None,
    device_name: str,
    data=None,
    startup: StartupClock | None = None,
    built: BuiltRun | None = None,
) -> str:
    """Train one run, emitting run_started, steps, epoch_ended and finally run_ended (also on failure);
    returns the run's status ("ok", "error", "oom", "diverged", "interrupted").

    `data`: the run's arrays if the child loaded them already (load_run_data); `startup`: the child's
    start-up clock, which times the model build and the pipeline here and goes into run_started; `built`:
    the run already built (build_run) and prepared ahead (core/training/ahead.py), whose emit and should_stop
    must be this call's."""
    clock = startup if startup is not None else StartupClock()
    hooks = built.hooks if built is not None else standard_hooks(run.index, emit, tf_device, nvml_index)
    end: dict[str, Any] = {"status": "ok", "message": ""}
    engine = None
    try:
        # Loading, building and copying the data are inside: their failures (a data file removed
        # mid-sweep, memory exhausted while copying) are this run's status, not a crash.
        if built is None:
            built = build_run(run, emit, should_stop, hooks, data, clock)
        setup, engine = built.setup, built.engine
        budget = run.sweep.budget
        planned_steps = budget.steps(setup.samples, run.batch_size)
        planned_epochs = budget.epochs(setup.samples, run.batch_size)
        bounds: tuple[int, int | None, int | None] = (planned_epochs, planned_steps, None)
        if setup.batch_plan is not None:  # the steps and epochs of the schedule (two_phase: before its switch)
            epochs_of_steps, _ = batch_rules.step_batches(
                setup.batch_plan, run.batch_size, setup.samples, budget.unit, budget.amount
            )
            planned_steps, planned_epochs = len(epochs_of_steps), epochs_of_steps[-1] + 1
            bounds = batch_rules.training_bounds(setup.batch_plan, setup.samples, budget.unit, budget.amount)
        hooks.on_run_begin(
            {
                "run": run.index,
                "batch_size": run.batch_size,
                "seed": run.seed,
                "pid": os.getpid(),
                "nice": os.getpriority(os.PRIO_PROCESS, 0),
                "device": device_name,
                "steps_per_epoch": setup.steps_per_epoch,
                "epochs": planned_epochs,
                "planned_steps": planned_steps,
                "budget": f"{budget.amount} {budget.unit}",
                "target": run.sweep.target or "",
                "eval_every": run.sweep.eval_every or -1,
                "samples": setup.samples,
                "lr": run.lr if run.lr is not None else math.nan,
                "started": now_iso(),
                "rss_before_training_bytes": current_rss_bytes(),
                "task": setup.task,
                "targets": setup.targets,
                **engine.run_fields(),
                **flops_fields(setup.model),
                **accumulation_fields(run),
                **execution_fields(run, setup.model, setup.xla_choice),
                **replication_fields(run.sweep.replicas, run.batch_size),
                **(setup.schedule.plan.attrs() if setup.schedule is not None else {}),
                **(setup.batch_plan.attrs() if setup.batch_plan is not None else {}),
                **(startup.fields() if startup is not None else {}),
            }
        )
        faults.fail_if_injected(faults.FAIL_RUN_ENV, run.index)
        if setup.batch_plan is None:
            engine.train(planned_epochs, max_steps=planned_steps)
        else:
            epochs, max_steps, max_examples = bounds
            engine.train(epochs, max_steps=max_steps, max_examples=max_examples)
    except StopRequested:
        end.update(status="interrupted", message="stopped by the user; measurements so far are kept")
    except Diverged as e:
        end.update(status="diverged", message=str(e))
    except Exception as e:  # OOM and any other failure end this run only; the sweep goes on
        end.update(status=classify_failure(e), message=first_line(e))
        emit(log_event("error", traceback_text(e), run=run.index))
    end["total_time"] = engine.elapsed() if engine is not None else math.nan
    end["last_close_time_s"] = float(getattr(engine, "last_close_time", math.nan))  # the fit engine: not measured
    hooks.on_run_end(end)
    return end["status"]
