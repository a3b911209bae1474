"""The training loop's measurements as small hooks, in the shape of Keras callbacks.

An engine (the instrumented loop in trainer.py, or `model.fit` in fit_engine.py) drives a
`HookList` and every measurement is one hook: the step log that streams step records, the NaN
check, the epoch summary, the tracing counter, the run summary, the memory probe (memory.py) and
the events sender. A new measurement is a new hook, not a new parameter threaded through a loop.

What an engine calls, in order, and what it puts in `logs`:

- ``on_run_begin(logs)``: the run_started fields (run, batch_size, ..., engine, sync,
  fetch_overhead_s); `RunEvents` emits them.
- ``on_epoch_begin(epoch)``
- ``on_train_batch_end(step, logs)``: one row per step, with every name of ``STEP_COLUMNS``
  (floats already read from the device; NaN where not measured) plus ``accuracy`` when the model
  has it and ``metrics`` ({name: this batch's value} for every compiled metric). Rows arrive in
  step order, possibly a few steps late (sampled sync reads losses in groups).
- ``on_test_begin()`` / ``on_test_end(logs)``: around validation, when there is one.
- ``on_epoch_end(epoch, logs)``: the engine gives ``epoch``, ``epoch_time``, ``val_loss``,
  ``val_accuracy``, ``val_time`` and ``wall_time`` (and ``metrics``: val_NAME per compiled metric);
  hooks add the other ``EPOCH_COLUMNS`` in list order and train_NAME to ``metrics``, and
  `RunEvents` (last) emits the row.
- ``on_run_end(logs)``: the engine gives ``status``, ``message`` and ``total_time``; hooks add
  the run figures and `RunEvents` emits run_ended. Called also when the run failed.

Hooks never import TensorFlow, so they can be checked on synthetic rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from batchlab.core.events import (
    EPOCH_COLUMN_NAMES,
    EPOCH_ENDED,
    RUN_ENDED,
    RUN_STARTED,
    STEP_COLUMN_NAMES,
    STEP_FLUSH_SECONDS,
    STEPS,
    make_event,
    now_iso,
)
from batchlab.core.figures import tracing_excess as tracing_cost
from batchlab.core.lr_rules import Plateau
from batchlab.core.training.failures import Diverged

# run_ended fields of the time account: what HookList and GcWatch measure (s)
TIME_ACCOUNT_FIELDS = (
    "run_span_s",
    "hooks_run_begin_s",
    "hooks_step_s",
    "hooks_epoch_s",
    "gc_time_s",
    "gc_max_s",
    "last_close_time_s",  # the engine's (trainer.py)
)

Emit = Callable[[dict[str, Any]], None]
Logs = dict[str, Any]

# Where each hook of a run goes (lower first; HookList.add): a hook says where it belongs by name and
# number, never by a list position. The settings groups' hooks (core/settings/) carry their own number.
PRIORITY = {
    "timing": 0,  # the fused and fit engines' timing: its run figures take precedence over step-based ones
    "learning_rate": 10,  # before StepLog, which copies the rows it adds the rate to
    "batch_schedule": 20,
    "step_log": 30,  # a diverging step is recorded before NanCheck ends the run
    "gc_watch": 40,
    "epoch_summary": 50,
    "tracing": 60,
    "memory": 70,
    "run_summary": 80,
    "nan_check": 90,
    "noise_scale": 100,
    "evaluations": 110,
    "run_events": 1000,  # last: it sends what the others put in the logs
}
DEFAULT_PRIORITY = 500  # a hook added without a number: after the measurements, before RunEvents


class Hook:
    """Base class: every method does nothing. Override the ones a measurement needs."""

    def on_run_begin(self, logs: Logs) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        pass

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        pass

    def on_test_begin(self, logs: Logs | None = None) -> None:
        pass

    def on_test_end(self, logs: Logs | None = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        pass

    def on_run_end(self, logs: Logs) -> None:
        pass


class HookList(Hook):
    """Calls its hooks in order; later hooks see what earlier ones added to `logs`.

    It also times the hooks it calls, for the run's time account (core/analysis/time_account.py): seconds
    inside on_run_begin (sending run_started), inside every on_train_batch_end (on the epochs' clock),
    inside the epoch-boundary calls (on_epoch_begin, on_test_begin/end, on_epoch_end: the epoch's metrics,
    memory readings and the rows sent to the writer; on neither the epoch's nor validation's clock), and
    the run's span from on_run_begin to on_run_end. on_run_end puts them in `logs` (RUN_ENDED_FIELDS).
    """

    def __init__(self, hooks: Iterable[Hook] = ()):
        self.hooks = list(hooks)
        self.run_begin_s = 0.0
        self.step_s = 0.0
        self.epoch_s = 0.0
        self.t_begin = math.nan  # perf_counter() when on_run_begin was called

    def add(self, hook: Hook, name: str, priority: int | None = None) -> Hook:
        """Put `hook` (called `name`) after every hook of the same or a lower priority (PRIORITY[name] unless
        given), before the higher ones; returns it."""
        hook.hook_name = name
        hook.priority = PRIORITY.get(name, DEFAULT_PRIORITY) if priority is None else priority
        at = next(
            (i for i, h in enumerate(self.hooks) if getattr(h, "priority", DEFAULT_PRIORITY) > hook.priority),
            len(self.hooks),
        )
        self.hooks.insert(at, hook)
        return hook

    def names(self) -> list[str]:
        """The hooks' names in calling order (a hook added without one: its class name)."""
        return [getattr(h, "hook_name", type(h).__name__) for h in self.hooks]

    def on_run_begin(self, logs: Logs) -> None:
        self.t_begin = t0 = time.perf_counter()
        for h in self.hooks:
            h.on_run_begin(logs)
        self.run_begin_s += time.perf_counter() - t0

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        t0 = time.perf_counter()
        for h in self.hooks:
            h.on_epoch_begin(epoch, logs)
        self.epoch_s += time.perf_counter() - t0

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        t0 = time.perf_counter()
        for h in self.hooks:
            h.on_train_batch_end(step, logs)
        self.step_s += time.perf_counter() - t0

    def on_test_begin(self, logs: Logs | None = None) -> None:
        t0 = time.perf_counter()
        for h in self.hooks:
            h.on_test_begin(logs)
        self.epoch_s += time.perf_counter() - t0

    def on_test_end(self, logs: Logs | None = None) -> None:
        t0 = time.perf_counter()
        for h in self.hooks:
            h.on_test_end(logs)
        self.epoch_s += time.perf_counter() - t0

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        t0 = time.perf_counter()
        for h in self.hooks:
            h.on_epoch_end(epoch, logs)
        self.epoch_s += time.perf_counter() - t0

    def on_run_end(self, logs: Logs) -> None:
        logs.setdefault("run_span_s", time.perf_counter() - self.t_begin)  # NaN: on_run_begin never ran
        logs.setdefault("hooks_run_begin_s", self.run_begin_s)
        logs.setdefault("hooks_step_s", self.step_s)
        logs.setdefault("hooks_epoch_s", self.epoch_s)
        # Every hook gets the end of the run, even if one fails, so the events still go out.
        error: BaseException | None = None
        for h in self.hooks:
            try:
                h.on_run_end(logs)
            except Exception as e:  # re-raised below, after the others ran
                error = error or e
        if error is not None:
            raise error


class StepLog(Hook):
    """Collects step rows and sends them every `flush_seconds` of run time, so the pipe is never flooded
    and a killed child loses at most that much. Sending happens after the step's clock was read."""

    def __init__(
        self,
        run_index: int,
        emit: Emit,
        flush_seconds: float = STEP_FLUSH_SECONDS,
        memory: Callable[[], dict[str, int]] | None = None,
    ):
        self.run = run_index
        self.emit = emit
        self.flush_seconds = flush_seconds
        # the epoch's memory peaks so far (MemoryProbe.read), sent with each batch of steps for the live plots
        self.memory = memory
        self.rows: dict[str, list] = {k: [] for k in STEP_COLUMN_NAMES}
        self.last_sent = 0.0  # run-relative seconds, the same time base as the rows' wall_time

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        for k in STEP_COLUMN_NAMES:
            self.rows[k].append(logs.get(k))
        wall = logs.get("wall_time", math.nan)
        if wall - self.last_sent >= self.flush_seconds:
            self.send()
            self.last_sent = wall

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        self.send()

    def on_run_end(self, logs: Logs) -> None:
        self.send()

    def send(self) -> None:
        if self.rows["step"]:
            event = make_event(STEPS, run=self.run, **self.rows)
            if self.memory is not None:
                event["memory"] = {"epoch": self.rows["epoch"][-1], **self.memory()}
            self.emit(event)
            self.rows = {k: [] for k in STEP_COLUMN_NAMES}


class LearningRateLog(Hook):
    """Puts each step's learning rate in its row (`lr`) and applies reduce-on-plateau at epoch ends.

    The rate comes from the run's plan (core/lr_rules.py), the same numbers the optimizer's schedule
    computes, so no step waits for the device to read the optimizer. Without a plan (blank lr) the
    rate is `constant`, read from the optimizer once before training (NaN: not known). Goes before
    StepLog, which copies the rows. `set_scale` gives the optimizer a new plateau scale.
    """

    def __init__(self, plan: Any = None, constant: float = math.nan, set_scale: Callable[[float], None] | None = None):
        self.plan = plan
        self.constant = constant
        self.set_scale = set_scale
        self.scale = 1.0
        self.plateau = None
        if plan is not None and plan.schedule == "plateau":
            self.plateau = Plateau(plan.decay_factor, plan.patience)

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        logs["lr"] = self.plan.rate(step, self.scale) if self.plan is not None else self.constant

    def set_rate_scale(self, scale: float) -> None:
        """Multiply the plan's rate by `scale` from the next step on (a batch schedule's decay past its
        largest batch; core/training/batch_schedule.py), in the `lr` column and the optimizer alike."""
        if scale != self.scale:
            self.scale = scale
            if self.set_scale is not None:
                self.set_scale(scale)

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        if self.plateau is None:
            return
        scale = self.plateau.update(logs.get("val_loss", math.nan))
        if scale != self.scale:
            self.scale = scale
            if self.set_scale is not None:
                self.set_scale(scale)


class NanCheck(Hook):
    """Ends the run as diverged at the first step whose loss is NaN or infinite (that step is kept)."""

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        loss = logs["loss"]
        if not math.isfinite(loss):
            raise Diverged(
                f"loss became {loss} at step {step} (epoch {logs.get('epoch')}); try a smaller learning rate"
            )


class EpochSummary(Hook):
    """Per-epoch sums and means of the step rows: time split, training loss/accuracy, throughput."""

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self.compute = self.fetch = self.wait = self.loss_sum = self.acc_sum = 0.0
        self.seen = 0
        self.has_acc = False
        self.metric_sums: dict[str, float] = {}
        self.metric_seen: dict[str, int] = {}

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        b = int(logs["batch_size"])
        self.compute += logs["step_time"]  # NaN once a step was not timed: the sum is then unknown
        self.fetch += logs["fetch_time"]
        self.wait += logs["input_wait"]
        self.loss_sum += logs["loss"] * b
        if "accuracy" in logs:
            self.acc_sum += logs["accuracy"] * b
            self.has_acc = True
        for name, value in (logs.get("metrics") or {}).items():
            self.metric_sums[name] = self.metric_sums.get(name, 0.0) + value * b
            self.metric_seen[name] = self.metric_seen.get(name, 0) + b
        self.seen += b

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        seen = self.seen
        epoch_time = logs.get("epoch_time", math.nan)
        logs.setdefault("samples", seen)
        logs.setdefault("compute_time", self.compute)
        logs.setdefault("fetch_time", self.fetch)
        logs.setdefault("input_wait_time", self.wait)
        logs.setdefault("train_loss", self.loss_sum / seen if seen else math.nan)
        logs.setdefault("train_accuracy", self.acc_sum / seen if self.has_acc and seen else math.nan)
        logs.setdefault("samples_per_s", seen / epoch_time if epoch_time > 0 else math.nan)
        # Every compiled metric: train_NAME, the sample-weighted mean of its per-batch values (an engine
        # that knows the epoch's own value, fit, gives it instead), beside the val_NAME validation gave.
        train = {f"train_{k}": total / self.metric_seen[k] for k, total in self.metric_sums.items()}
        logs["metrics"] = {**train, **(logs.get("metrics") or {})}


class TracingCounter(Hook):
    """Counts the steps during which the step function was traced, per epoch and for the run."""

    def __init__(self) -> None:
        self.traced_times: list[float] = []
        self.untraced_times: list[float] = []

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self.epoch_traced = 0
        self.epoch_time = 0.0

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        t = logs["step_time"]
        if logs.get("traced"):
            self.epoch_traced += 1
            self.epoch_time += t if math.isfinite(t) else 0.0
            self.traced_times.append(t)
        elif math.isfinite(t):
            self.untraced_times.append(t)

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        logs.setdefault("traced_steps", self.epoch_traced)
        logs.setdefault("tracing_time", self.epoch_time)

    def on_run_end(self, logs: Logs) -> None:
        logs.setdefault("tracing_time_s", tracing_cost(self.traced_times, self.untraced_times))


class RunSummary(Hook):
    """The run's reference figures: final loss and steady throughput, leaving out traced steps.

    Throughput comes from the finished epochs without a traced step; a run that has none (one
    epoch, or stopped early) uses its timed untraced steps: samples over (fetch + compute) time.
    """

    def __init__(self) -> None:
        self.final_loss = math.nan
        self.epoch_samples = 0
        self.epoch_time = 0.0
        self.step_samples = 0
        self.step_time = 0.0

    def on_train_batch_end(self, step: int, logs: Logs) -> None:
        t = logs["step_time"] + logs["fetch_time"]
        if not logs.get("traced") and math.isfinite(t):
            self.step_samples += int(logs["batch_size"])
            self.step_time += t

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        self.final_loss = logs.get("train_loss", math.nan)
        traced = logs.get("traced_steps")
        steady = traced == 0 if traced is not None else epoch > 0  # unknown tracing: epochs after the first
        if steady and logs.get("epoch_time", 0) > 0:
            self.epoch_samples += int(logs.get("samples", 0))
            self.epoch_time += logs["epoch_time"]

    def on_run_end(self, logs: Logs) -> None:
        logs.setdefault("final_loss", self.final_loss)
        if self.epoch_time > 0:
            rate = self.epoch_samples / self.epoch_time
        elif self.step_time > 0:
            rate = self.step_samples / self.step_time
        else:
            rate = math.nan
        logs.setdefault("samples_per_s", rate)


RUN_ENDED_FIELDS = (
    "status",
    "message",
    "final_loss",
    "total_time",
    "samples_per_s",
    "tracing_time_s",
    *TIME_ACCOUNT_FIELDS,  # HookList and GcWatch (gc_watch.py)
)


class RunEvents(Hook):
    """Sends run_started, epoch_ended and run_ended from the logs; goes last in the list."""

    def __init__(self, run_index: int, emit: Emit):
        self.run = run_index
        self.emit = emit

    def on_run_begin(self, logs: Logs) -> None:
        self.emit(make_event(RUN_STARTED, **{**logs, "run": self.run}))

    def on_epoch_end(self, epoch: int, logs: Logs) -> None:
        row = {k: logs.get(k, math.nan) for k in EPOCH_COLUMN_NAMES}
        if logs.get("metrics"):
            row["metrics"] = dict(logs["metrics"])
        self.emit(make_event(EPOCH_ENDED, run=self.run, **row))

    def on_run_end(self, logs: Logs) -> None:
        fields = {k: logs[k] for k in RUN_ENDED_FIELDS if k in logs}
        self.emit(make_event(RUN_ENDED, run=self.run, ended=now_iso(), **fields))


class TraceWatch:
    """Tells whether a tf.function traced since the last look, from its tracing count."""

    def __init__(self, function: Any):
        self.function = function
        self.count = self._read()

    def _read(self) -> int:
        return int(self.function.experimental_get_tracing_count())

    def traced(self) -> bool:
        """True if the function traced (compiled a new graph) since the previous call."""
        count = self._read()
        changed = count != self.count
        self.count = count
        return changed
