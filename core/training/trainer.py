"""One training run, instrumented per step. Runs inside the training child; imports TensorFlow.

The loop calls the model's own `train_step` (the code `model.fit` runs), fed by a tf.data
pipeline shaped like fit's array adapter, so the optimizer semantics, loss scaling, XLA
choice and batching are those of the user's own `fit`. What it adds is a clock around
each step and the input wait before it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from batchlab.core.datasets import load_dataset, prepare_arrays
from batchlab.core.events import EPOCH_ENDED, RUN_ENDED, RUN_STARTED, STEPS, log_event, make_event, now_iso
from batchlab.core.spec import RunSpec
from batchlab.core.training import memory
from batchlab.core.training.workloads import build_model

Emit = Callable[[dict[str, Any]], None]
STEP_FLUSH_SECONDS = 0.25  # how often step records are sent to the parent


class StopRequested(Exception):
    """The parent asked this run to end; what was measured so far is kept."""


class Diverged(Exception):
    """The loss became NaN or infinite."""


def make_input_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """Batches of (x, y) as fit builds them from arrays: optional per-epoch shuffle, gather, prefetch."""
    x_t = tf.convert_to_tensor(x)
    y_t = tf.convert_to_tensor(y)
    indices = tf.data.Dataset.range(x.shape[0])
    if shuffle:
        indices = indices.shuffle(x.shape[0], seed=seed, reshuffle_each_iteration=True)
    batches = indices.batch(batch_size)
    batches = batches.map(lambda i: (tf.gather(x_t, i), tf.gather(y_t, i)), num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def make_step_function(model) -> Callable:
    """The model's own train_step, compiled like fit compiles it, returning this batch's metrics.

    Keras metrics are running means; resetting them after each step makes the returned
    loss the loss of this one mini-batch. The reset does not touch weights or optimizer.
    """

    def one_step(x, y):
        logs = model.train_step((x, y))
        for metric in model.metrics:
            metric.reset_state()
        return logs

    if model.jit_compile:
        one_step = tf.function(one_step, reduce_retracing=True, jit_compile=True)
    return tf.function(one_step, reduce_retracing=True)


class _MemoryProbe:
    """Peak memory per epoch: TF allocator peak on GPU, NVML process memory, host peak RSS."""

    def __init__(self, tf_device: str | None, nvml_index: int | None):
        self.tf_device = tf_device
        self.gpu = memory.GpuProcessMemory(nvml_index)

    def reset(self) -> None:
        if self.tf_device:
            tf.config.experimental.reset_memory_stats(self.tf_device)
        memory.reset_peak_rss()

    def read(self) -> dict[str, int]:
        tf_peak = memory.UNKNOWN
        if self.tf_device:
            tf_peak = int(tf.config.experimental.get_memory_info(self.tf_device)["peak"])
        return {
            "tf_peak_bytes": tf_peak,
            "device_memory_bytes": self.gpu.used_bytes(),
            "rss_peak_bytes": memory.peak_rss_bytes(),
        }


class _StepLog:
    """Collects per-step records and sends them in chunks so the pipe is never flooded."""

    def __init__(self, run_index: int, emit: Emit):
        self.run = run_index
        self.emit = emit
        self.rows: dict[str, list] = {
            k: [] for k in ("step", "epoch", "loss", "batch_size", "step_time", "input_wait", "wall_time")
        }
        self.last_sent = time.perf_counter()

    def add(self, **row: Any) -> None:
        for k, v in row.items():
            self.rows[k].append(v)
        if row["wall_time"] - self.last_sent >= STEP_FLUSH_SECONDS:
            self.send(row["wall_time"])

    def send(self, now: float | None = None) -> None:
        if self.rows["step"]:
            self.emit(make_event(STEPS, run=self.run, **self.rows))
            self.rows = {k: [] for k in self.rows}
        self.last_sent = now if now is not None else self.last_sent


def _validate(model, x_val, y_val, batch_size: int) -> tuple[float, float, float]:
    """Validation loss, accuracy (NaN without) and wall time, as fit's validation pass computes them."""
    if x_val is None:
        return math.nan, math.nan, 0.0
    t0 = time.perf_counter()
    logs = model.evaluate(x_val, y_val, batch_size=batch_size, verbose=0, return_dict=True)
    elapsed = time.perf_counter() - t0
    model.reset_metrics()  # evaluate leaves its totals in the trackers the train step reads
    return float(logs.get("loss", math.nan)), float(logs.get("accuracy", math.nan)), elapsed


def train_run(
    run: RunSpec,
    emit: Emit,
    should_stop: Callable[[], bool],
    tf_device: str | None,
    nvml_index: int | None,
    device_name: str,
) -> None:
    """Train one run, emitting run_started, steps, epoch_ended and finally run_ended."""
    spec = run.sweep
    tf.keras.utils.set_random_seed(run.seed)
    data = prepare_arrays(load_dataset(spec.data), spec.workload, spec.samples, spec.val_samples)
    model, x_train, y_train, x_val, y_val, notes = build_model(run, data)
    for note in notes:
        emit(log_event("info", note, run=run.index))
    n = x_train.shape[0]
    steps_per_epoch = math.ceil(n / run.batch_size)
    pipeline = make_input_pipeline(x_train, y_train, run.batch_size, spec.shuffle, run.seed)
    step_fn = make_step_function(model)
    probe = _MemoryProbe(tf_device, nvml_index)
    emit(
        make_event(
            RUN_STARTED,
            run=run.index,
            batch_size=run.batch_size,
            seed=run.seed,
            pid=os.getpid(),
            nice=os.getpriority(os.PRIO_PROCESS, 0),
            device=device_name,
            steps_per_epoch=steps_per_epoch,
            epochs=spec.epochs,
            samples=n,
            started=now_iso(),
        )
    )
    steps = _StepLog(run.index, emit)
    state = {"status": "ok", "message": "", "last_epoch_loss": math.nan, "samples": 0, "train_time": 0.0}
    t_run0 = time.perf_counter()
    try:
        for epoch in range(spec.epochs):
            _train_epoch(
                epoch,
                steps_per_epoch,
                model,
                pipeline,
                step_fn,
                steps,
                probe,
                state,
                should_stop,
                t_run0,
                run,
                emit,
                x_val,
                y_val,
            )
    except StopRequested:
        state.update(status="interrupted", message="stopped by the user; measurements so far are kept")
    except Diverged as e:
        state.update(status="diverged", message=str(e))
    except Exception as e:  # OOM and any other failure end this run only; the sweep goes on
        state.update(status=classify_failure(e), message=_first_line(e))
    finally:
        steps.send()
    total = time.perf_counter() - t_run0
    emit(
        make_event(
            RUN_ENDED,
            run=run.index,
            status=state["status"],
            message=state["message"],
            ended=now_iso(),
            final_loss=state["last_epoch_loss"],
            total_time=total,
            samples_per_s=(state["samples"] / state["train_time"]) if state["train_time"] > 0 else math.nan,
        )
    )


def _train_epoch(
    epoch, steps_per_epoch, model, pipeline, step_fn, steps, probe, state, should_stop, t_run0, run, emit, x_val, y_val
):
    """One pass over the data; raises StopRequested or Diverged, keeping what was recorded."""
    probe.reset()
    compute = wait = loss_sum = acc_sum = 0.0
    seen = 0
    has_acc = False
    step0 = epoch * steps_per_epoch
    t_epoch0 = time.perf_counter()
    # Starting the pipeline (threads, first prefetch) costs ~5 ms an epoch; fit pays it inside its
    # epoch too, so it is on the epoch clock and counted as the first step's input wait.
    iterator = iter(pipeline)
    for i in range(1 << 62):
        if should_stop():
            raise StopRequested()
        t0 = time.perf_counter() if i else t_epoch0
        try:
            xb, yb = next(iterator)
        except StopIteration:
            break
        t1 = time.perf_counter()
        logs = step_fn(xb, yb)
        # Reading the loss copies it to the host, which waits for the step's kernels: GPU work
        # is asynchronous, so without this sync the clock would time the launch, not the step.
        loss = float(logs["loss"])
        t2 = time.perf_counter()
        b = int(xb.shape[0])
        steps.add(
            step=step0 + i,
            epoch=epoch,
            loss=loss,
            batch_size=b,
            step_time=t2 - t1,
            input_wait=t1 - t0,
            wall_time=t2 - t_run0,
        )
        if not math.isfinite(loss):
            raise Diverged(f"loss became {loss} at step {step0 + i} (epoch {epoch}); try a smaller learning rate")
        compute += t2 - t1
        wait += t1 - t0
        loss_sum += loss * b
        if "accuracy" in logs:
            acc_sum += float(logs["accuracy"]) * b
            has_acc = True
        seen += b
    epoch_time = time.perf_counter() - t_epoch0
    mem = probe.read()  # read before validation so the peak is the training step's
    steps.send()
    val_loss, val_acc, val_time = _validate(model, x_val, y_val, run.batch_size)
    train_loss = loss_sum / seen if seen else math.nan
    if epoch > 0 or run.sweep.epochs == 1:
        # Epoch 0 includes tracing and compiling the step; throughput is steady-state when it can be.
        state["samples"] += seen
        state["train_time"] += epoch_time
    state["last_epoch_loss"] = train_loss
    emit(
        make_event(
            EPOCH_ENDED,
            run=run.index,
            epoch=epoch,
            epoch_time=epoch_time,
            compute_time=compute,
            input_wait_time=wait,
            train_loss=train_loss,
            train_accuracy=(acc_sum / seen) if has_acc and seen else math.nan,
            val_loss=val_loss,
            val_accuracy=val_acc,
            val_time=val_time,
            samples_per_s=seen / epoch_time if epoch_time > 0 else math.nan,
            wall_time=time.perf_counter() - t_run0,
            **mem,
        )
    )


def classify_failure(e: BaseException) -> str:
    """'oom' for any allocator exhaustion (TF, XLA or cuDNN word it differently), else 'error'."""
    if isinstance(e, tf.errors.ResourceExhaustedError):
        return "oom"
    text = str(e)
    if "RESOURCE_EXHAUSTED" in text or "OOM when allocating" in text or "out of memory" in text.lower():
        return "oom"
    return "error"


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "message", "") or e).strip()
    for line in text.splitlines():
        if "OOM" in line or "out of memory" in line.lower():
            return line.strip()[:300]
    return (text.splitlines()[0] if text else type(e).__name__)[:300]
