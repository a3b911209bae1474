"""One training run, instrumented per step. Runs inside the training child; imports TensorFlow.

The instrumented loop calls the model's own `train_step` (the code `model.fit` runs), fed by a
tf.data pipeline shaped like fit's array adapter, so the optimizer semantics, loss scaling, XLA
choice and batching are those of the user's own `fit`. What it adds is a clock around each step
and around the fetch of its batch; every measurement made from those clocks is a hook (hooks.py).

`prepare_run` prepares a run (data, model, pipeline; the pipeline is input_pipeline.py) and
`InstrumentedLoop` trains it ("loop"); core/training/run.py builds the hooks, picks the engine (this loop,
fused.py, fit_engine.py) and is the child's entry, `train_run`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from batchlab.core import batch_rules
from batchlab.core.datasets import load_spec_data, prepare_arrays
from batchlab.core.events import log_event
from batchlab.core.lr_rules import plan_for
from batchlab.core.spec import RunSpec
from batchlab.core.training.batch_schedule import BatchSchedule
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.execution import apply_xla
from batchlab.core.training.failures import (
    StopRequested,
)
from batchlab.core.training.hooks import (
    HookList,
    TraceWatch,
)
from batchlab.core.training.input_pipeline import (
    _starvation,
    calibrate_fetch_overhead,
    make_input_pipeline,
)
from batchlab.core.training.noise_scale import NoiseScaleProbe
from batchlab.core.training.replication import (
    build_variables,
    check_batches,
    evaluate,
    make_strategy,
    replicated_step,
    scope,
)
from batchlab.core.training.schedules import RunSchedule, build_schedule
from batchlab.core.training.workloads import build_model

Emit = Callable[[dict[str, Any]], None]

SYNC_EVERY_STEP = "every_step"
SYNC_SAMPLED = "sampled"
SAMPLED_SYNC_EVERY = 10  # sampled sync: wait for the device on every 10th step (timed) and at epoch end


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
    logs = evaluate(model, x_val, y_val, batch_size)  # model.evaluate, or split over a multi-worker run's workers
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
        check_batches(data.x_train.shape[0], run.batch_size, strategy.num_replicas_in_sync)
    with scope(strategy):
        built = build_model(run, data, learning_rate)
    xla_choice = apply_xla(built.model, spec, total_steps, run.batch_size)
    if strategy is not None:
        built.model.jit_compile = False
        xla_choice = f"off: the step is not compiled with XLA across {strategy.num_replicas_in_sync} replicas"
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
