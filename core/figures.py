"""Every per-run figure BatchLab shows, from a run's step and epoch columns and its run attributes.

One set of rules for every consumer: the sweep model (batchlab.core.model, live and from files),
the run-file reader's RunRecord, the CLI table and `batchlab report`, the window's views.
numpy only. The rules (docs/runfile-format.md, *Figures*, says the same for readers of the file):

- final loss: the ``train_loss`` of the last finished epoch; when no epoch finished (or its
  loss is not finite), the sample-weighted mean of the finite step losses after it.
- total time (s): run_ended's ``total_time`` when it came, else the last recorded ``wall_time``.
- steady throughput (samples/s; its name in every view): samples over wall time of the untraced steps, each step's
  wall time being the gap to the step before it (for the first step of a later epoch: its own
  fetch_time + step_time, timed from the start of the epoch's clock; where those are not measured,
  the gap to the end of the previous epoch, validation included, so validation is left out). Files without a
  ``traced`` column: the steps of the epochs after the first, or all steps when the run has no
  later epoch.
- steady step time (s): median ``step_time`` of the same steps (compute time only).
- steady epoch time (s): mean ``epoch_time`` of the epochs without a traced step (without a
  ``traced_steps`` column: the epochs after the first).
- tracing cost (s): ``sum(step_time[traced]) - n_traced * median(step_time[untraced])``; without
  a ``traced`` column, run_ended's ``tracing_time_s`` if it came, else NaN.
- train to target (Shallue's rule, core/targets.py): the first evaluation point (``evals`` table)
  whose metric is strictly better than the run's ``target`` attribute; its ``steps``,
  ``examples``, ``epochs`` and ``train_wall_time`` (training time without evaluation passes) are
  steps/examples/epochs/time to target; NaN and ``target_reached`` = 0 when none is (not reached
  within the budget), -1 when the run has no target.
- evaluation points on a loss plot (the live window's markers, evaluation_points): per evaluation
  its steps, examples and wall_time and one loss-scale value: the target's metric when it is
  ``train_loss`` or ``val_loss``, else ``val_loss``, else (no validation) ``train_loss``; and the
  row that met the target by the rule above, with the text "met val_accuracy>0.98 at step 1,350".
- running epoch (the live window's provisional points, not a run figure): the epoch of the last
  step while no epoch row has ended it; the sample-weighted mean loss of its steps so far and
  their samples over their step durations, traced ones included (its epoch throughput so far, as the
  epoch row's samples_per_s = samples / epoch_time will give it); its time so far (the sum of
  those durations) split as the epoch row splits its epoch_time: compute (sum of step_time),
  input wait (sum of input_wait) and the rest. The steps of earlier epochs are not needed:
  running_epoch_rows gives the first row a caller has to pass (the one before the running
  epoch's first step, for that step's duration), so the work follows the epoch, not the run.
- peak memory (bytes, -1 unknown): from ``tf_peak_bytes``, else ``device_memory_bytes``, else
  ``rss_peak_bytes``: the largest over all epochs, the first epoch's, and the largest over the
  epochs after the first (steady state, without the first epoch's autotuning scratch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from batchlab.core import events as ev
from batchlab.core.targets import NOT_REACHED, TargetSyntaxError, first_reached, parse_target, target_result

# Memory columns in the order they are preferred (see peak_memory_source).
MEMORY_SOURCES = ("tf_peak_bytes", "device_memory_bytes", "rss_peak_bytes")

Table = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class RunFigures:
    """Every per-run number BatchLab shows; NaN (or -1 for bytes) where the run has none."""

    final_loss: float
    total_time: float  # s
    samples_per_s: float  # steady throughput, samples/s (untraced steps; not the epochs' epoch throughput)
    step_time: float  # steady-state median step compute time, s
    epoch_time: float  # steady-state mean epoch time, s
    tracing_time: float  # one-time tracing/compiling cost, s
    peak_memory_bytes: int  # largest over all epochs
    first_epoch_peak_bytes: int  # the first epoch's (includes autotuning scratch)
    steady_peak_bytes: int  # largest over the epochs after the first
    peak_memory_source: str | None  # the epoch column the three peaks come from
    target_reached: int = -1  # 1 reached, 0 not reached (within the budget so far), -1 the run has no target
    steps_to_target: float = math.nan  # optimizer steps before the evaluation that met the target
    examples_to_target: float = math.nan  # training examples seen by then
    epochs_to_target: float = math.nan  # fractional epochs by then
    time_to_target: float = math.nan  # s of training (evaluation and validation passes left out)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FIGURE_NAMES = tuple(RunFigures.__dataclass_fields__)
# Figures computed from the per-step table. A summary-only export (core/export/hdf5.py) leaves the table out and
# keeps these as run attributes `summary_NAME`, computed here from the steps it left out, with the attribute
# SUMMARY_STEPS_ATTR (the step rows left out): run_figures gives them back, so the file shows the source's numbers.
STEP_FIGURES = ("final_loss", "total_time", "samples_per_s", "step_time", "tracing_time")
SUMMARY_STEPS_ATTR = "steps_left_out"


def summary_attr(name: str) -> str:
    """The run attribute holding figure `name` of a run whose steps were left out (a summary-only export)."""
    return f"summary_{name}"


def steps_left_out(steps: Table, attrs: Mapping[str, Any] | None) -> bool:
    """True for a run of a summary-only export: its file has no steps but says how many it had."""
    return not len(_column(steps, "step")) and SUMMARY_STEPS_ATTR in (attrs or {})


def run_figures(
    steps: Table, epochs: Table, attrs: Mapping[str, Any] | None = None, evals: Table | None = None
) -> RunFigures:
    """All figures of one run from its step, epoch and evaluation columns and run attributes (module docstring)."""
    attrs = attrs or {}
    reached, to_target = target_figures(evals or {}, attrs)
    source = peak_memory_source(epochs)
    first_peak, steady_peak, peak = _peaks(epochs, source)
    steady = _steady_steps(steps)
    step_time = _column(steps, "step_time")
    figures = RunFigures(
        final_loss=final_loss(steps, epochs),
        total_time=total_time(steps, epochs, attrs),
        samples_per_s=_throughput(steps, epochs, steady),
        step_time=_median(step_time[steady]) if len(step_time) else math.nan,
        epoch_time=steady_epoch_time(epochs),
        tracing_time=tracing_cost(steps, attrs),
        peak_memory_bytes=peak,
        first_epoch_peak_bytes=first_peak,
        steady_peak_bytes=steady_peak,
        peak_memory_source=source,
        target_reached=reached,
        steps_to_target=to_target.steps,
        examples_to_target=to_target.examples,
        epochs_to_target=to_target.epochs,
        time_to_target=to_target.time,
    )
    if steps_left_out(steps, attrs):
        kept = {name: _float(attrs.get(summary_attr(name))) for name in STEP_FIGURES}
        figures = replace(figures, **kept)
    return figures


def final_metrics(metrics: Table) -> dict[str, float]:
    """The model's compiled metrics at the end of a run: per name (train_NAME, val_NAME, one value per
    epoch as in the run's metrics/ group), the last finite value; NaN when it has none. Train names
    first, then validation, each sorted."""
    names = sorted(metrics, key=lambda n: (not n.startswith("train_"), n))
    out = {}
    for name in names:
        values = np.asarray(metrics[name], dtype=np.float64)
        finite = values[np.isfinite(values)]
        out[name] = float(finite[-1]) if len(finite) else math.nan
    return out


def target_figures(evals: Table, attrs: Mapping[str, Any]):
    """(target_reached: 1/0/-1, TargetResult) of a run from its evaluation points and its `target` attribute."""
    text = attrs.get("target")
    if not text:
        return -1, NOT_REACHED
    try:
        target = parse_target(str(text))
    except TargetSyntaxError:
        return -1, NOT_REACHED
    result = target_result(target, evals)
    return int(result.reached), result


LOSS_SCALE_METRICS = ("val_loss", "train_loss")  # evaluation metrics drawn on a loss axis, in preference order


@dataclass(frozen=True)
class EvaluationPoints:
    """A run's evaluation points as a loss plot shows them, and where it met its target."""

    metric: str  # the evals column in `values` (a loss: val_loss or train_loss)
    steps: np.ndarray  # optimizer steps before each evaluation
    examples: np.ndarray  # training examples seen by then
    wall_time: np.ndarray  # s, the run's clock when each evaluation began
    values: np.ndarray  # the metric at each evaluation (NaN where the row has none)
    met_row: int | None  # the evaluation that met the target (Shallue's rule); None: not met or no target
    met_text: str  # "met val_accuracy>0.98 at step 1,350", "" when not met


def evaluation_points(evals: Table, attrs: Mapping[str, Any] | None = None) -> EvaluationPoints | None:
    """The evaluation points of a run for a loss plot (module docstring); None when it has none."""
    steps = _column(evals, "steps")
    if not len(steps):
        return None
    attrs = attrs or {}
    target = None
    if attrs.get("target"):
        try:
            target = parse_target(str(attrs["target"]))
        except TargetSyntaxError:
            target = None
    n = len(steps)
    candidates = [m for m in LOSS_SCALE_METRICS if target is not None and m == target.metric]
    candidates += [m for m in LOSS_SCALE_METRICS if m not in candidates]
    metric = next((m for m in candidates if np.isfinite(_column(evals, m, n).astype(np.float64)).any()), candidates[0])
    met_row, met_text = None, ""
    if target is not None and evals.get(target.metric) is not None:
        met_row = first_reached(target, np.asarray(evals[target.metric], dtype=np.float64).tolist())
        if met_row is not None:
            met_text = f"met {target.describe().replace(' ', '')} at step {int(steps[met_row]):,}"
    return EvaluationPoints(
        metric=metric,
        steps=np.asarray(steps, dtype=np.float64),
        examples=_column(evals, "examples", n).astype(np.float64),
        wall_time=_column(evals, "wall_time", n).astype(np.float64),
        values=_column(evals, metric, n).astype(np.float64),
        met_row=met_row,
        met_text=met_text,
    )


def final_loss(steps: Table, epochs: Table) -> float:
    """The last finished epoch's train_loss, else the sample-weighted mean loss of the steps after it."""
    train_loss = _column(epochs, "train_loss")
    if len(train_loss) and math.isfinite(train_loss[-1]):
        return float(train_loss[-1])
    loss = _column(steps, "loss").astype(np.float64)
    epoch = _column(steps, "epoch", len(loss))
    finished = _column(epochs, "epoch")
    after = epoch > finished[-1] if len(finished) and len(epoch) else np.ones(len(loss), dtype=bool)
    return _mean_step_loss(steps, after)


def _mean_step_loss(steps: Table, rows: np.ndarray) -> float:
    """Sample-weighted mean of the finite step losses in these rows (a boolean mask); NaN if none."""
    loss = _column(steps, "loss").astype(np.float64)
    keep = rows & np.isfinite(loss)
    if not keep.any():
        return math.nan
    weights = _column(steps, "batch_size", len(loss)).astype(np.float64)[keep]
    if not (weights > 0).all():
        weights = np.ones(int(keep.sum()))
    return float(np.average(loss[keep], weights=weights))


@dataclass(frozen=True)
class RunningEpoch:
    """Provisional figures of the epoch in progress, from its steps so far (its epoch row replaces them)."""

    epoch: int  # 0-based index of the running epoch
    steps: int  # its steps so far
    train_loss: float  # sample-weighted mean loss of those steps
    samples_per_s: float  # epoch throughput so far: their samples over their wall time (step_durations)
    elapsed_s: float = math.nan  # s: their wall time so far (sum of step_durations)
    compute_s: float = math.nan  # s: sum of their step_time (NaN if a step was not timed)
    input_wait_s: float = math.nan  # s: sum of their input_wait


def running_epoch_rows(epoch: np.ndarray) -> int:
    """First step row running_epoch needs: the row before the last step's epoch began (0 for the first epoch).

    `epoch` is the steps' epoch column (non-decreasing); a binary search, so the cost does not grow with the run.
    """
    if not len(epoch):
        return 0
    return max(0, int(np.searchsorted(epoch, epoch[-1], side="left")) - 1)


def running_epoch(steps: Table, epochs: Table) -> RunningEpoch | None:
    """The epoch the last step belongs to when no epoch row has ended it yet; None when every step's epoch ended.

    The live window's provisional points: the mean loss and the throughput of the running epoch's
    steps so far. At the epoch's end its epoch row (train_loss, samples_per_s) takes their place.
    """
    epoch = _column(steps, "epoch")
    if not len(epoch):
        return None
    current = int(epoch[-1])
    if current in set(_column(epochs, "epoch").tolist()):
        return None
    rows = epoch == current
    durations = step_durations(steps, epochs)[rows]
    return RunningEpoch(
        epoch=current,
        steps=int(rows.sum()),
        train_loss=_mean_step_loss(steps, rows),
        samples_per_s=_throughput(steps, epochs, rows),
        elapsed_s=float(np.nansum(durations)) if np.isfinite(durations).any() else math.nan,
        compute_s=float(_column(steps, "step_time", len(epoch)).astype(np.float64)[rows].sum()),
        input_wait_s=float(_column(steps, "input_wait", len(epoch)).astype(np.float64)[rows].sum()),
    )


def total_time(steps: Table, epochs: Table, attrs: Mapping[str, Any]) -> float:
    """run_ended's total_time (s) when it came, else the last recorded wall_time of a step or an epoch."""
    ended = _float(attrs.get("total_time"))
    if math.isfinite(ended):
        return ended
    last = [_last_finite(_column(t, "wall_time")) for t in (steps, epochs)]
    finite = [v for v in last if math.isfinite(v)]
    return max(finite) if finite else math.nan


def traced_known(steps: Table) -> bool:
    """True when the steps say which of them traced the step function (files before that column: False)."""
    traced = _column(steps, "traced")
    return bool(len(traced)) and bool((traced >= 0).any())


def _steady_steps(steps: Table) -> np.ndarray:
    """Mask of the steps steady-state figures use: untraced ones, else those of epochs after the first."""
    n = len(_column(steps, "step"))
    if traced_known(steps):
        return _column(steps, "traced", n) == 0
    epoch = _column(steps, "epoch", n)
    later = epoch > epoch.min() if n else np.zeros(0, dtype=bool)
    return later if later.any() else np.ones(n, dtype=bool)


def step_durations(steps: Table, epochs: Table | None = None) -> np.ndarray:
    """Wall time (s) of each step, from the run-relative wall_time at the end of each step; NaN where unknown.

    A step takes the gap to the step before it. The first step of the run takes its own
    wall_time (the clock starts as it begins). The first step of a later epoch takes its own
    fetch_time + step_time, which the trainer times from the start of the epoch's clock, so the
    epoch's start-up cost (a fresh input iterator) counts and neither the validation pass nor
    anything between the epochs does (seen: a 1 s gap after the first epoch while the window drew
    its first plots, which made batch 512 look 9x slower); where those are not measured (the fit
    engine, sampled sync) it takes the gap to the end of the previous epoch's row (whose wall_time
    includes the validation pass), NaN when that row is missing.
    """
    wall = _column(steps, "wall_time").astype(np.float64)
    n = len(wall)
    out = np.full(n, np.nan)
    if n == 0:
        return out
    step = _column(steps, "step", n)
    epoch = _column(steps, "epoch", n)
    contiguous = np.diff(step) == 1
    out[1:] = np.where(contiguous & (np.diff(epoch) == 0), np.diff(wall), np.nan)
    if step[0] == 0:
        out[0] = wall[0]
    ends = dict(zip(_column(epochs or {}, "epoch").tolist(), _column(epochs or {}, "wall_time").tolist(), strict=False))
    own = _column(steps, "fetch_time", n).astype(np.float64) + _column(steps, "step_time", n).astype(np.float64)
    for i in np.flatnonzero(contiguous & (np.diff(epoch) != 0)) + 1:
        out[i] = own[i] if math.isfinite(own[i]) else wall[i] - ends.get(int(epoch[i - 1]), math.nan)
    out[out < 0] = np.nan  # clocks that disagree: no duration rather than a wrong one
    return out


def _throughput(steps: Table, epochs: Table, steady: np.ndarray) -> float:
    durations = step_durations(steps, epochs)
    batch = _column(steps, "batch_size", len(durations))
    keep = steady & np.isfinite(durations) & (batch > 0)
    seconds = float(durations[keep].sum())
    return float(batch[keep].sum()) / seconds if seconds > 0 else math.nan


def steady_throughput(steps: Table, epochs: Table | None = None) -> float:
    """Samples per second over the steady-state steps (see module docstring)."""
    return _throughput(steps, epochs or {}, _steady_steps(steps))


def steady_epoch_time(epochs: Table) -> float:
    """Mean epoch_time (s) of the epochs without a traced step, or of those after the first."""
    epoch_time = _column(epochs, "epoch_time").astype(np.float64)
    n = len(epoch_time)
    traced = _column(epochs, "traced_steps", n)
    if n and (traced >= 0).any():
        keep = traced == 0
    else:
        keep = np.arange(n) > 0
    values = epoch_time[keep & np.isfinite(epoch_time)]
    return float(values.mean()) if len(values) else math.nan


def tracing_cost(steps: Table, attrs: Mapping[str, Any] | None = None) -> float:
    """One-time tracing cost (s): traced steps' time minus what as many untraced steps take (median).

    0 when no step traced; run_ended's tracing_time_s (else NaN) when the steps do not say.
    """
    step_time = _column(steps, "step_time").astype(np.float64)
    traced = _column(steps, "traced", len(step_time))
    fallback = _float((attrs or {}).get("tracing_time_s"))
    if not traced_known(steps):
        return fallback
    timed = np.isfinite(step_time)
    if not (traced == 1).any():
        return 0.0
    hit, plain = timed & (traced == 1), timed & (traced == 0)
    if not hit.any() or not plain.any():
        return fallback
    return tracing_excess(step_time[hit], step_time[plain])


def tracing_excess(traced_times: Sequence[float], untraced_times: Sequence[float]) -> float:
    """Seconds the traced steps took beyond as many typical (median untraced) steps; 0 with none traced.

    The one formula for the tracing cost: the trainer's run_ended figure and tracing_cost() both use it.
    """
    traced = np.asarray(traced_times, dtype=np.float64)
    untraced = np.asarray(untraced_times, dtype=np.float64)
    traced, untraced = traced[np.isfinite(traced)], untraced[np.isfinite(untraced)]
    if not len(traced):
        return 0.0
    typical = float(np.median(untraced)) if len(untraced) else 0.0
    return float(traced.sum() - len(traced) * typical)


def peak_memory_source(epochs: Table) -> str | None:
    """The epoch column peak memory comes from, or None when no epoch reported memory.

    On a GPU the TensorFlow allocator peak is preferred: it is the memory the tensors of this
    batch size needed. nvidia-smi's figure comes next: it adds the CUDA context and the
    allocator's cached pool, which hide the batch-size effect. Host RSS is the CPU fallback.
    """
    for name in MEMORY_SOURCES:
        values = _column(epochs, name)
        if len(values) and (values >= 0).any():
            return name
    return None


def _peaks(epochs: Table, source: str | None) -> tuple[int, int, int]:
    """(first epoch's, largest after the first, largest overall) of the source column; -1 unknown."""
    if source is None:
        return -1, -1, -1
    values = _column(epochs, source).astype(np.int64)
    first = int(values[0]) if values[0] >= 0 else -1
    later = values[1:][values[1:] >= 0]
    return first, int(later.max()) if len(later) else -1, int(values.max())


def _column(table: Table, name: str, n: int | None = None) -> np.ndarray:
    """A column of a steps/epochs table; all-missing (-1 / NaN) of length n when the table lacks it."""
    values = table.get(name)
    if values is not None:
        return np.asarray(values)
    if n is None:
        n = len(next(iter(table.values()))) if len(table) else 0
    return np.full(n, -1, dtype=np.int64) if name in _INT_COLUMNS else np.full(n, np.nan)


_INT_COLUMNS = frozenset(
    c.name for c in (*ev.STEP_COLUMNS, *ev.EPOCH_COLUMNS) if np.dtype(c.dtype).kind in "iu"
) | frozenset(("traced", "traced_steps"))


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else math.nan


def _last_finite(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if len(finite) else math.nan


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
