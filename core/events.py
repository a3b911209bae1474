"""The event records a sweep emits, and the columns they carry.

Events are plain dicts with a "type" key, so they cross process boundaries,
queues and Qt signals unchanged. Every consumer (run file writer, live plots,
CLI progress, analysis) reads this one stream; nothing reaches back into the
trainer.

Event types, in the order a sweep emits them:

- ``sweep_started``: ``spec`` (dict), ``runs`` (list of {index, batch_size, seed}),
  ``environment`` (dict, see ``ENVIRONMENT_KEYS``), ``started`` (ISO time); optionally ``mode``
  (``lr_find``, ``profile``) and, from ``batchlab export`` only, ``export`` (its provenance root attributes)
- ``run_started``: ``run``, ``batch_size``, ``seed``, ``pid``, ``nice``, ``device``,
  ``steps_per_epoch``, ``epochs``, ``samples``, ``started`` (ISO time), ``engine`` ("loop" or
  "fit": what trained the run), ``sync`` ("every_step" or "sampled": how often the loop waited
  for the device, see ``STEP_COLUMNS``' step_time), ``fetch_overhead_s`` (s: the calibrated fixed
  cost of taking a ready batch from a full prefetch buffer; input_wait is fetch time beyond it)
  and, when the spec sets a learning rate, the run's rate plan (core/lr_rules.py LrPlan.attrs()):
  ``lr0``, ``lr_peak``, ``lr_rule``, ``lr_base_batch``, ``lr_warmup_steps``, ``lr_schedule``,
  ``lr_total_steps``, ``lr_decay_factor``, ``lr_decay_every_steps``, ``lr_patience``; with a batch
  schedule, its plan (core/batch_rules.py BatchPlan.attrs()): ``batch_schedule``,
  ``batch_growth_factor``, ``batch_growth_every``, ``max_batch``, ``batch_switch_to``,
  ``batch_patience``, ``batch_min_delta``
- ``steps``: ``run``, and one list per column of ``STEP_COLUMNS``; sent every
  ``STEP_FLUSH_SECONDS`` while a run trains; from the training child also ``memory``: the running
  epoch's memory peaks so far when it was sent ({``epoch``, ``tf_peak_bytes``,
  ``device_memory_bytes``, ``rss_peak_bytes``}, as the epoch row will hold them at its end), for the
  live plots only (the run file keeps the epoch rows)
- ``epoch_ended``: ``run``, and one value per column of ``EPOCH_COLUMNS``
- ``evaluation``: ``run``, and one value per column of ``EVAL_COLUMNS``: one evaluation point
  (runs with a target or ``eval_every``; see core/targets.py for the metrics)
- ``run_ended``: ``run``, ``status`` (one of ``RUN_STATUSES``), ``message``,
  ``ended`` (ISO time), plus ``final_loss``, ``total_time``, ``samples_per_s`` (the steady
  throughput; the parent sets it from the step rows by core.figures.steady_throughput before the file
  records it) and ``tracing_time_s`` (one-time cost of tracing: traced steps' time minus what
  as many untraced steps take at their median); the time account's measurements (s): ``run_span_s``
  (from the start of run_started's hooks to the start of run_ended's), ``hooks_run_begin_s``,
  ``hooks_step_s`` and ``hooks_epoch_s`` (time inside the hooks, see core/training/hooks.py HookList),
  ``gc_time_s`` and ``gc_max_s`` (Python garbage-collection pauses, wherever they fell) and
  ``last_close_time_s`` (closing the pipeline of an epoch the run ended inside)
- ``lr_range``: ``run``, and one list per column of ``LR_RANGE_COLUMNS``: points of an LR range
  test (``batchlab lr-find``, core/lr_range.py); its ``run_ended`` adds ``suggested_lr``,
  ``suggested_lr_min10``, ``loss_at_suggestion`` and ``stop_reason``
- ``noise_scale``: ``run``, and one list per column of ``NOISE_SCALE_COLUMNS``: gradient noise scale
  measurements (``noise_scale_every``; core/training/noise_scale.py measures, core/analysis/noise_scale.py
  holds the math); sent with the step records, at most every ``STEP_FLUSH_SECONDS``
- ``log``: ``level`` ("info", "warning", "error"), ``message``, optional ``run``
- ``sweep_ended``: ``status`` (one of ``SWEEP_STATUSES``), ``message``, ``ended``; runs still
  "pending" then become ``SKIPPED`` (in the run file and in the sweep model alike)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

SWEEP_STARTED = "sweep_started"
RUN_STARTED = "run_started"
STEPS = "steps"
EPOCH_ENDED = "epoch_ended"
RUN_ENDED = "run_ended"
LOG = "log"
SWEEP_ENDED = "sweep_ended"
EVALUATION = "evaluation"
LR_RANGE = "lr_range"
NOISE_SCALE = "noise_scale"

EVENT_TYPES = (
    SWEEP_STARTED,
    RUN_STARTED,
    STEPS,
    EPOCH_ENDED,
    RUN_ENDED,
    LOG,
    SWEEP_ENDED,
    EVALUATION,
    LR_RANGE,
    NOISE_SCALE,
)

# How often a training run sends its step records (seconds): often enough for live plots and for a
# killed child to lose at most this much, seldom enough that the pipe and the GUI are never flooded.
STEP_FLUSH_SECONDS = 0.25

# A run ends in exactly one of these.
# "aborted": stopped by the scheduler because it could no longer win (early abort, core/sweep/policies.py).
RUN_STATUSES = ("ok", "oom", "diverged", "crashed", "interrupted", "aborted", "error")
# "pending" and "running" only appear in a run file before a run ends. When the sweep ends (sweep_ended)
# with runs still "pending" (Stop, Ctrl-C, a failure), the writer and the sweep model mark them "skipped".
SKIPPED = "skipped"
SKIPPED_MESSAGE = "not run: the sweep was stopped before it"
RUN_FILE_STATUSES = ("pending", "running", *RUN_STATUSES, SKIPPED)
SWEEP_STATUSES = ("complete", "interrupted", "failed")

ENVIRONMENT_KEYS = (
    "app_version",
    "python_version",
    "platform",
    "tensorflow_version",
    "keras_version",
    "cuda_version",
    "cudnn_version",
    "devices",  # list of {"name", "kind", "description", "memory_bytes"}
    "device_description",
    "host",
)


@dataclass(frozen=True)
class Column:
    """One column of a per-step or per-epoch table: name, dtype, units and a human label."""

    name: str
    dtype: str
    units: str
    long_name: str


# Per-step record. `step` counts from 0 over the whole run.
STEP_COLUMNS = (
    Column("step", "int64", "", "global step index within the run, from 0"),
    Column("epoch", "int32", "", "epoch index, from 0"),
    Column("loss", "float32", "", "training loss of this mini-batch (before the update)"),
    Column("batch_size", "int32", "samples", "samples in this mini-batch (the last one may be smaller)"),
    Column(
        "step_time",
        "float64",
        "s",
        "compute time of the step, device synchronised (NaN where the step was not timed: "
        "sampled-sync mode or the fit engine)",
    ),
    Column("fetch_time", "float64", "s", "whole time spent getting this step's batch from the input pipeline (next())"),
    Column(
        "input_wait",
        "float64",
        "s",
        "part of fetch_time spent waiting for the pipeline to make the batch (0 when it was already buffered)",
    ),
    Column("traced", "int8", "", "1 if the step function was traced/compiled during this step, else 0"),
    Column("wall_time", "float64", "s", "time since the run's first step began, at the end of this step"),
    Column(
        "lr",
        "float64",
        "",
        "learning rate the optimizer applied in this step, from the run's rule and schedule "
        "(NaN where not known: the model file's own schedule)",
    ),
)

# Per-epoch record. Memory values are -1 where the device cannot report them.
EPOCH_COLUMNS = (
    Column("epoch", "int32", "", "epoch index, from 0"),
    Column("epoch_time", "float64", "s", "wall time of the epoch's training steps (validation excluded)"),
    Column("compute_time", "float64", "s", "sum of step compute times in the epoch (NaN if a step was not timed)"),
    Column("fetch_time", "float64", "s", "sum of step fetch_time in the epoch"),
    Column("input_wait_time", "float64", "s", "sum of step input_wait (pipeline starvation) in the epoch"),
    Column("train_loss", "float64", "", "sample-weighted mean of the epoch's mini-batch losses"),
    Column("train_accuracy", "float64", "", "sample-weighted mean training accuracy (NaN without labels)"),
    Column("val_loss", "float64", "", "validation loss after the epoch (NaN when validation is off)"),
    Column("val_accuracy", "float64", "", "validation accuracy after the epoch (NaN without labels)"),
    Column("val_time", "float64", "s", "wall time of the validation pass"),
    Column(
        "samples_per_s",
        "float64",
        "samples/s",
        "epoch throughput: training samples divided by epoch_time (every step, traced ones included); "
        "the run's steady throughput (run attribute samples_per_s) leaves traced steps out",
    ),
    Column("traced_steps", "int32", "", "steps in the epoch during which the step function was traced"),
    Column("tracing_time", "float64", "s", "sum of step_time of the epoch's traced steps"),
    Column(
        "close_time",
        "float64",
        "s",
        "time to close the epoch's input-pipeline iterator after its last step (tf.data stops its prefetch "
        "and map threads); in neither epoch_time nor val_time (NaN: not measured, the fit engine)",
    ),
    Column("tf_peak_bytes", "int64", "bytes", "TensorFlow allocator peak during the epoch (-1: not available)"),
    Column("device_memory_bytes", "int64", "bytes", "process memory on the GPU as nvidia-smi shows it (-1: no GPU)"),
    Column("rss_peak_bytes", "int64", "bytes", "peak resident host memory of the training process in the epoch"),
    Column("wall_time", "float64", "s", "time since the run's first step began, at the end of this epoch"),
)

# Per-evaluation record (train to target, eval_every): where the run stood and what the metrics were.
EVAL_COLUMNS = (
    Column("steps", "int64", "", "optimizer steps taken before this evaluation"),
    Column("examples", "int64", "samples", "training examples seen before this evaluation"),
    Column("epochs", "float64", "", "examples / training samples per epoch (fractional epochs)"),
    Column("wall_time", "float64", "s", "the run's clock (as steps/wall_time) when the evaluation began"),
    Column(
        "train_wall_time",
        "float64",
        "s",
        "training time when the evaluation began: time since the run's first step began, without any "
        "evaluation or validation pass",
    ),
    Column(
        "eval_time",
        "float64",
        "s",
        "wall time of this evaluation (its validation pass, in batches of at least 256 inside an epoch, "
        "of the run's batch size at an epoch end), not training time",
    ),
    Column("at_epoch_end", "int8", "", "1 if this evaluation is an epoch's end, else 0"),
    Column("train_loss", "float64", "", "sample-weighted mean of the mini-batch losses since the previous evaluation"),
    Column("val_loss", "float64", "", "validation loss (NaN when validation is off)"),
    Column("val_accuracy", "float64", "", "validation accuracy (NaN without labels)"),
    Column("val_error", "float64", "", "1 - val_accuracy"),
)

# Per-point record of an LR range test (`batchlab lr-find`): one row per step tried.
LR_RANGE_COLUMNS = (
    Column("step", "int64", "", "step of the range test, from 0 (a fresh model at step 0)"),
    Column("lr", "float64", "", "learning rate applied in this step (exponential from lr_min to lr_max)"),
    Column("loss", "float64", "", "training loss of this mini-batch (before the update)"),
    Column(
        "smoothed_loss",
        "float64",
        "",
        "bias-corrected exponential moving average of loss (beta 0.98; NaN after a non-finite loss)",
    ),
)

# Per-measurement record of the gradient noise scale (`noise_scale_every`): the step's batch split into
# `noise_scale_parts` micro-batches at the same weights, before the step's update (docs/runfile-format.md).
NOISE_SCALE_COLUMNS = (
    Column("step", "int64", "", "step whose batch was measured, before its update (as steps/step)"),
    Column("small_batch", "int32", "samples", "B_s: samples per micro-batch, batch_size // noise_scale_parts"),
    Column(
        "big_batch", "int32", "samples", "B_b: samples measured, B_s x noise_scale_parts (the remainder is left out)"
    ),
    Column("g_small_sq", "float64", "", "|G_s|^2: mean over the micro-batches of their gradient's squared norm"),
    Column("g_big_sq", "float64", "", "|G_b|^2: squared norm of the micro-batch gradients' mean"),
    Column("g2_est", "float64", "", "unbiased estimate of |G|^2: (B_b |G_b|^2 - B_s |G_s|^2) / (B_b - B_s)"),
    Column("trace_est", "float64", "", "unbiased estimate of tr(Sigma): (|G_s|^2 - |G_b|^2) / (1/B_s - 1/B_b)"),
    Column("ema_g2", "float64", "", "bias-corrected exponential moving average of g2_est"),
    Column("ema_trace", "float64", "", "bias-corrected exponential moving average of trace_est"),
    Column(
        "b_simple",
        "float64",
        "samples",
        "gradient noise scale B_simple = ema_trace / ema_g2 (NaN while ema_g2 <= 0)",
    ),
    Column("measure_time", "float64", "s", "time of the micro-batch passes, device synchronised, off the run's clock"),
    Column("step_time", "float64", "s", "compute time of the same step's ordinary update (as steps/step_time)"),
    Column("traced", "int8", "", "1 if the measuring function was traced/compiled during this measurement, else 0"),
)

STEP_COLUMN_NAMES = tuple(c.name for c in STEP_COLUMNS)
NOISE_SCALE_COLUMN_NAMES = tuple(c.name for c in NOISE_SCALE_COLUMNS)
EVAL_COLUMN_NAMES = tuple(c.name for c in EVAL_COLUMNS)
EPOCH_COLUMN_NAMES = tuple(c.name for c in EPOCH_COLUMNS)


def now_iso() -> str:
    """Current UTC time as an ISO 8601 string with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def make_event(event_type: str, **fields: Any) -> dict[str, Any]:
    """Build an event dict; raises ValueError for an unknown type (a programming error)."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    return {"type": event_type, **fields}


def log_event(level: str, message: str, run: int | None = None) -> dict[str, Any]:
    event = make_event(LOG, level=level, message=message)
    if run is not None:
        event["run"] = run
    return event
