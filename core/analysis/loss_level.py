"""Loss and time together, after the fact: how long each run took to reach a loss every run reached. numpy only.

From the per-step losses a run already records (steps/loss, steps/batch_size, the step clock), with no
target needed:

- smoothing: each step's *smoothed loss* is the sample-weighted mean of the mini-batch losses over
  the last `window` training examples (the steps that end within `window` examples of it), so a
  batch of 8 and a batch of 512 are averaged over the same number of examples, not of steps. The
  window is SMOOTHING_BATCHES times the sweep's largest batch, at most MAX_WINDOW_SHARE of the
  shortest finished run's examples; before a run has seen a full window its smoothed loss is NaN
  (a window of a few early steps would be noise, and the first ones would count for more);
- the level: the highest final smoothed loss among the runs that finished ok (the worst run's
  end), so every finished run reaches it;
- per run, where its smoothed curve first is at or below the level: the training time (the sum of
  its steps' wall times, core.figures.step_durations: validation and evaluation passes left out,
  as in time to target), the optimizer steps and the examples; NaN ("never") for a run that did
  not get there (one that failed early, or is still running);
- the loss each run had at equal training time (when the first finished run ended, so every
  finished run got there) and at equal examples (the fewest any finished run saw).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import numpy as np
from batchlab.core.aggregate import Spread, spread
from batchlab.core.figures import step_durations
from batchlab.core.model import RunData, SweepData
from batchlab.core.text_width import text_width

SMOOTHING_BATCHES = 4  # the smoothing window is this many of the sweep's largest batch (examples) ...
MAX_WINDOW_SHARE = 0.5  # ... and at most this share of the shortest finished run's examples


@dataclass(frozen=True)
class RunLevel:
    """One run against the common level: when it got there, and its loss at equal time and examples."""

    index: int
    batch_size: int
    seed: int
    status: str
    final_loss: float  # smoothed loss at the run's last step (NaN: no full window)
    end_time: float  # s of training the run recorded
    end_steps: int
    end_examples: int
    time: float  # s of training until the smoothed loss first was at or below the level; NaN: never
    steps: float  # optimizer steps until then (NaN: never)
    examples: float  # training examples until then (NaN: never)
    loss_at_time: float  # smoothed loss at the common time (NaN: not reached or no full window by then)
    loss_at_examples: float  # smoothed loss at the common examples


@dataclass(frozen=True)
class BatchLevel:
    """One batch size: its runs' figures as mean and min-max over the seeds that have them."""

    batch_size: int
    runs: int
    reached: int  # runs whose smoothed loss got to the level
    time: Spread  # s
    steps: Spread
    examples: Spread
    final_loss: Spread
    loss_at_time: Spread
    loss_at_examples: Spread


@dataclass(frozen=True)
class LossLevel:
    """The common loss level of a sweep and every run against it (see the module docstring)."""

    level: float  # the highest final smoothed loss of the finished runs (NaN: none finished with one)
    level_batch: int  # the batch size of the run that set it (0: none)
    window: int  # examples the smoothed loss averages over
    common_time: float  # s of training every finished run reached (the first to finish ended there)
    common_examples: int  # examples every finished run saw
    finished: int  # runs that finished ok and have a smoothed loss
    runs: tuple[RunLevel, ...]

    def by_batch(self) -> list[BatchLevel]:
        """Per batch size, ascending: the runs' figures over the seeds."""
        sizes = sorted({r.batch_size for r in self.runs})
        out = []
        for b in sizes:
            rs = [r for r in self.runs if r.batch_size == b]
            out.append(
                BatchLevel(
                    batch_size=b,
                    runs=len(rs),
                    reached=sum(math.isfinite(r.time) for r in rs),
                    time=spread(r.time for r in rs),
                    steps=spread(r.steps for r in rs),
                    examples=spread(r.examples for r in rs),
                    final_loss=spread(r.final_loss for r in rs),
                    loss_at_time=spread(r.loss_at_time for r in rs),
                    loss_at_examples=spread(r.loss_at_examples for r in rs),
                )
            )
        return out


def smoothed_loss(loss: np.ndarray, batch: np.ndarray, window: float) -> np.ndarray:
    """Per step, the sample-weighted mean loss of the steps ending within `window` examples of it (that step
    included); NaN before the run has seen `window` examples and where the window holds a non-finite loss."""
    loss = np.asarray(loss, dtype=np.float64)
    weight = np.asarray(batch, dtype=np.float64)
    n = len(loss)
    if n == 0:
        return np.zeros(0)
    bad = ~np.isfinite(loss)
    seen = np.concatenate(([0.0], np.cumsum(weight)))  # examples before step i: seen[i]; through it: seen[i + 1]
    total = np.concatenate(([0.0], np.cumsum(np.where(bad, 0.0, loss * weight))))
    bads = np.concatenate(([0], np.cumsum(bad)))
    # the first step in step i's window: the first k whose end seen[k + 1] is above seen[i + 1] - window
    first = np.searchsorted(seen[1:], seen[1:] - window, side="right")
    examples = seen[1:] - seen[first]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total[1:] - total[first]) / examples
    full = (seen[1:] >= window) & (bads[1:] - bads[first] == 0) & (examples > 0)
    return np.where(full, mean, np.nan)


def training_clock(run: RunData) -> np.ndarray:
    """Per step, the run's training time (s) at its end: the sum of the step wall times so far
    (core.figures.step_durations; a step whose duration is not known adds nothing)."""
    durations = step_durations(run.steps.as_dict(), run.epochs.as_dict())
    return np.cumsum(np.nan_to_num(durations, nan=0.0))


def _step_batches(run: RunData) -> np.ndarray:
    """Samples in each step: the steps' batch_size column, the run's batch size where a row lacks it."""
    batch = run.steps["batch_size"].astype(np.float64)
    return np.where(batch > 0, batch, float(run.batch_size))


def _at(values: np.ndarray, axis: np.ndarray, where: float) -> float:
    """The value at the last step whose `axis` (non-decreasing) is at or before `where`; NaN if none, or if the
    run ended before `where` (it never got there)."""
    if not len(axis) or not math.isfinite(where) or axis[-1] < where * (1 - 1e-9):
        return math.nan
    i = int(np.searchsorted(axis, where * (1 + 1e-12), side="right")) - 1
    return float(values[i]) if i >= 0 else math.nan


def _first_at_or_below(values: np.ndarray, level: float) -> int | None:
    hits = np.flatnonzero(values <= level)
    return int(hits[0]) if len(hits) else None


def loss_level(sweep: SweepData) -> LossLevel | None:
    """The common loss level and every run against it; None when no run recorded a step."""
    runs = [r for r in sweep.ordered_runs() if r.batch_size > 0 and len(r.steps)]
    if not runs:
        return None
    batches = {r.index: _step_batches(r) for r in runs}
    seen = {r.index: np.cumsum(batches[r.index]) for r in runs}
    ok = [r for r in runs if r.status == "ok"]
    largest = max(r.batch_size for r in (ok or runs))
    shortest = min(float(seen[r.index][-1]) for r in (ok or runs))
    window = max(1, int(min(SMOOTHING_BATCHES * largest, MAX_WINDOW_SHARE * shortest)))
    curves = {r.index: smoothed_loss(r.steps["loss"], batches[r.index], window) for r in runs}
    clocks = {r.index: training_clock(r) for r in runs}
    finals = [(float(curves[r.index][-1]), r.batch_size) for r in ok if math.isfinite(curves[r.index][-1])]
    level, level_batch = max(finals) if finals else (math.nan, 0)
    done = [r for r in ok if math.isfinite(curves[r.index][-1])]
    common_time = min((float(clocks[r.index][-1]) for r in done), default=math.nan)
    common_examples = int(min((float(seen[r.index][-1]) for r in done), default=0))
    out = []
    for r in runs:
        curve, clock, examples = curves[r.index], clocks[r.index], seen[r.index]
        hit = _first_at_or_below(curve, level) if math.isfinite(level) else None
        step = r.steps["step"]
        out.append(
            RunLevel(
                index=r.index,
                batch_size=r.batch_size,
                seed=r.seed,
                status=r.status,
                final_loss=float(curve[-1]),
                end_time=float(clock[-1]),
                end_steps=int(step[-1]) + 1,
                end_examples=int(examples[-1]),
                time=float(clock[hit]) if hit is not None else math.nan,
                steps=float(step[hit] + 1) if hit is not None else math.nan,
                examples=float(examples[hit]) if hit is not None else math.nan,
                loss_at_time=_at(curve, clock, common_time),
                loss_at_examples=_at(curve, examples, common_examples) if done else math.nan,
            )
        )
    return LossLevel(
        level=level,
        level_batch=level_batch,
        window=window,
        common_time=common_time,
        common_examples=common_examples,
        finished=len(done),
        runs=tuple(out),
    )


def _cell(value: float, fmt: str) -> str:
    return fmt.format(value) if math.isfinite(value) else "-"


def loss_level_rows(result: LossLevel) -> list[tuple[str, ...]]:
    """The table's header and one row per batch size (seed means), as text: the one source of the report's
    table and the window's."""
    rows = [
        (
            "batch",
            "level at (s)",
            "steps",
            "examples",
            f"loss at {result.common_time:.3g} s",
            f"loss at {result.common_examples:,} ex.",
        )
    ]
    for b in result.by_batch():
        never = "never" if b.reached == 0 else "-"
        rows.append(
            (
                f"{b.batch_size:,}",
                _cell(b.time.mean, "{:.3g}") if b.time.n else never,
                _cell(b.steps.mean, "{:,.0f}") if b.steps.n else never,
                _cell(b.examples.mean, "{:,.0f}") if b.examples.n else never,
                _cell(b.loss_at_time.mean, "{:.3g}"),
                _cell(b.loss_at_examples.mean, "{:.3g}"),
            )
        )
    return rows


def describe_level(result: LossLevel) -> str:
    """How the level and the smoothing were chosen, in one line with their numbers."""
    return (
        f"Loss and time together: level {result.level:.3g}, the highest final smoothed training loss of the "
        f"{result.finished} finished runs (batch {result.level_batch:,}'s); smoothed over the last {result.window:,} "
        f"examples; times are training time without validation; '-': no full window or never reached."
    )


def format_loss_level(result: LossLevel | None) -> str:
    """`batchlab report`'s table: per batch size, when it reached the level (s, steps, examples) and its loss at
    equal time and at equal examples; "" when there is no level."""
    if result is None or not math.isfinite(result.level):
        return ""
    rows = loss_level_rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return textwrap.fill(describe_level(result), text_width()) + "\n" + table
