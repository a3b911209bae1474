"""The learning-rate range test as pure math: the rates to try, the smoothed loss, when to stop, what to suggest.

Free of TensorFlow and Qt, so it is tested on synthetic loss curves with known answers; the training
child (core/training/lr_find.py) feeds it one loss per step. The method (Smith 2017, as fastai runs it):

- The rate grows exponentially from lr_min to lr_max over lr_steps steps:
  lr(i) = lr_min * (lr_max / lr_min) ** (i / (lr_steps - 1)), i = 0 .. lr_steps - 1.
- The loss is smoothed with an exponential moving average, bias-corrected as Adam corrects its moments:
  avg(i) = beta * avg(i-1) + (1 - beta) * loss(i), avg(-1) = 0; smoothed(i) = avg(i) / (1 - beta ** (i + 1)).
- The test stops at the first step whose loss is not finite or whose smoothed loss exceeds
  STOP_FACTOR (4) times the best smoothed loss so far ("diverged"), or after lr_steps steps ("end of range").
- Suggestion ("steepest"): the rate where the smoothed loss falls fastest per unit of log(lr), i.e. the
  minimum of d smoothed / d ln(lr) (numpy.gradient, second-order central differences), over the points
  before the stop, after skipping the first SKIP_FRACTION (10%) of them (the smoothing's start-up and the
  rates too small to move the loss). Also "min/10": the rate of the lowest smoothed loss divided by 10.

The point that triggered a stop (a NaN or an exploded loss) is kept in the curve but left out of both
suggestions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_LR_MIN = 1e-6
DEFAULT_LR_MAX = 10.0
DEFAULT_LR_STEPS = 200
MIN_LR_STEPS = 10  # fewer leave too few points after the skip for a derivative
MAX_LR_STEPS = 100_000
SMOOTHING_BETA = 0.98  # fastai's value: about the last 50 steps weigh in
STOP_FACTOR = 4.0  # stop once the smoothed loss exceeds this times its best
SKIP_FRACTION = 0.1  # the first 10% of the points are not considered for the steepest descent
MIN_POINTS = 3  # points a derivative needs after the skip

STOP_DIVERGED = "diverged"  # smoothed loss above STOP_FACTOR x best
STOP_NAN = "loss not finite"
STOP_END = "end of range"  # lr_max reached
STOP_REASONS = (STOP_DIVERGED, STOP_NAN, STOP_END)


def exponential_rates(lr_min: float, lr_max: float, steps: int) -> np.ndarray:
    """The rate of each step: geometric from lr_min (step 0) to lr_max (step steps-1)."""
    if steps < 2:
        return np.array([lr_min], dtype=float)[:steps]
    return lr_min * (lr_max / lr_min) ** (np.arange(steps) / (steps - 1))


def smooth(losses, beta: float = SMOOTHING_BETA) -> np.ndarray:
    """Bias-corrected exponential moving average of `losses` (see the module docstring)."""
    out = np.empty(len(losses), dtype=float)
    avg = 0.0
    for i, loss in enumerate(losses):
        avg = beta * avg + (1.0 - beta) * float(loss)
        out[i] = avg / (1.0 - beta ** (i + 1))
    return out


@dataclass(frozen=True)
class Suggestion:
    """What a range test suggests: NaN where the curve was too short to say."""

    steepest_lr: float  # rate of the steepest descent of the smoothed loss w.r.t. log(lr)
    steepest_index: int  # its point (-1 when none)
    loss_at_steepest: float  # smoothed loss there
    min10_lr: float  # rate of the lowest smoothed loss, divided by 10
    min_index: int  # the point of the lowest smoothed loss (-1 when none)


def suggest(lrs, smoothed, skip_fraction: float = SKIP_FRACTION) -> Suggestion:
    """Both suggestions from the points of a curve that are to be considered (the stop point left out)."""
    lrs = np.asarray(lrs, dtype=float)
    smoothed = np.asarray(smoothed, dtype=float)
    n = len(lrs)
    finite = np.isfinite(smoothed)
    if not finite.any():
        return Suggestion(math.nan, -1, math.nan, math.nan, -1)
    min_index = int(np.nanargmin(np.where(finite, smoothed, np.nan)))
    min10 = float(lrs[min_index] / 10.0)
    skip = int(math.floor(skip_fraction * n))
    x, y = np.log(lrs[skip:]), smoothed[skip:]
    if len(x) < MIN_POINTS or not np.isfinite(y).all():
        return Suggestion(math.nan, -1, math.nan, min10, min_index)
    slope = np.gradient(y, x)
    i = skip + int(np.argmin(slope))
    return Suggestion(float(lrs[i]), i, float(smoothed[i]), min10, min_index)


@dataclass
class RangeTest:
    """Takes one (rate, loss) per step and says when to stop; `result()` gives the suggestions.

    `lrs`, `losses` and `smoothed` hold every point recorded, the stop point included.
    """

    beta: float = SMOOTHING_BETA
    stop_factor: float = STOP_FACTOR
    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)
    stop_reason: str = ""
    _avg: float = 0.0
    _best: float = math.inf

    def add(self, lr: float, loss: float) -> bool:
        """Record one step; True when the test should stop here (the point is recorded either way)."""
        loss = float(loss)
        self.lrs.append(float(lr))
        self.losses.append(loss)
        if not math.isfinite(loss):
            self.smoothed.append(math.nan)
            self.stop_reason = STOP_NAN
            return True
        i = len(self.losses) - 1
        self._avg = self.beta * self._avg + (1.0 - self.beta) * loss
        value = self._avg / (1.0 - self.beta ** (i + 1))
        self.smoothed.append(value)
        if value > self.stop_factor * self._best:
            self.stop_reason = STOP_DIVERGED
            return True
        self._best = min(self._best, value)
        return False

    def finish(self) -> None:
        """Mark a test that ran its whole range."""
        if not self.stop_reason:
            self.stop_reason = STOP_END

    def result(self) -> Suggestion:
        """Suggestions over the points before the stop point (all points when it reached lr_max)."""
        n = len(self.lrs) - (1 if self.stop_reason in (STOP_DIVERGED, STOP_NAN) else 0)
        return suggest(self.lrs[:n], self.smoothed[:n])


@dataclass(frozen=True)
class RangeSettings:
    """The range of one `batchlab lr-find`: rates from lr_min to lr_max over lr_steps steps per batch size."""

    lr_min: float = DEFAULT_LR_MIN
    lr_max: float = DEFAULT_LR_MAX
    lr_steps: int = DEFAULT_LR_STEPS

    def rates(self) -> np.ndarray:
        return exponential_rates(self.lr_min, self.lr_max, self.lr_steps)

    def to_dict(self) -> dict[str, float | int]:
        return {"lr_min": self.lr_min, "lr_max": self.lr_max, "lr_steps": self.lr_steps}


def _positive_rate(name: str, value, default: float) -> float:
    from batchlab.core.errors import SpecError

    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = math.nan
    if not math.isfinite(rate) or rate <= 0:
        raise SpecError(name, f"{value!r} is not allowed; use a learning rate above 0, e.g. {default:g}")
    return rate


def range_defaults(preset: str | None = None) -> RangeSettings:
    """The range lr-find tries when none is given: the preset's (core/presets.py LR_FIND_RANGES), else the defaults."""
    from batchlab.core.presets import LR_FIND_RANGES

    return RangeSettings(**{**RangeSettings().to_dict(), **LR_FIND_RANGES.get(preset or "", {})})


def parse_range_settings(lr_min=None, lr_max=None, lr_steps=None, preset: str | None = None) -> RangeSettings:
    """Validated settings (None = the preset's range, see `range_defaults`); SpecError naming the field otherwise."""
    from batchlab.core.errors import SpecError

    defaults = range_defaults(preset)
    low = _positive_rate("lr_min", lr_min, defaults.lr_min)
    high = _positive_rate("lr_max", lr_max, defaults.lr_max)
    if high <= low:
        raise SpecError("lr_max", f"{high:g} is not above lr_min {low:g}; the range test needs lr_max > lr_min")
    steps = defaults.lr_steps
    if lr_steps is not None:
        try:
            steps = int(str(lr_steps).strip())
        except ValueError:
            steps = -1
        if not MIN_LR_STEPS <= steps <= MAX_LR_STEPS:
            raise SpecError(
                "lr_steps",
                f"{lr_steps!r} is not allowed; use a whole number of steps from {MIN_LR_STEPS} to {MAX_LR_STEPS}",
            )
    return RangeSettings(low, high, steps)


# ---------------------------------------------------------------- lr-find files (batchlab lr-find writes them)

LR_FIND_MODE = "lr_find"  # the root attribute `mode` of an lr-find run file


def range_rows(record) -> list[dict[str, Any]]:
    """One row per run of an lr-find file (core.runfile.reader.SweepRecord): what the table shows."""
    rows = []
    for run in record.runs:
        a = run.attrs
        rows.append(
            {
                "batch_size": run.batch_size,
                "seed": run.seed,
                "status": run.status,
                "suggested_lr": float(a.get("suggested_lr", math.nan)),
                "suggested_lr_min10": float(a.get("suggested_lr_min10", math.nan)),
                "loss_at_suggestion": float(a.get("loss_at_suggestion", math.nan)),
                "stop_reason": str(a.get("stop_reason", "")),
                "points": len(run.lr_range.get("lr", ())),
            }
        )
    return rows


def suggested_rates(path: str | os.PathLike, pick: str = "steepest") -> dict[int, float]:
    """Each batch size's suggested rate in an lr-find file; several seeds: their geometric mean.

    `pick` says which suggestion: "steepest" (the steepest fall of the smoothed loss per unit of log(lr)) or
    "min10" (the rate of the lowest smoothed loss / 10); core/lr_find.py.

    Raises SpecError (field lr_from) for a file that is not an lr-find file or holds no usable suggestion.
    """
    from batchlab.core.errors import SpecError
    from batchlab.core.runfile.reader import read_run_file

    path = Path(path)
    try:
        record = read_run_file(path)
    except SpecError as e:
        raise SpecError("lr_from", e.message) from None
    if record.attrs.get("mode") != LR_FIND_MODE:
        raise SpecError("lr_from", f"{path} is a sweep's run file, not an lr-find file; run batchlab lr-find first")
    key = {"steepest": "suggested_lr", "min10": "suggested_lr_min10"}[pick]
    found: dict[int, list[float]] = {}
    for row in range_rows(record):
        if row["status"] == "ok" and math.isfinite(row[key]) and row[key] > 0:
            found.setdefault(row["batch_size"], []).append(row[key])
    return {b: math.exp(sum(map(math.log, v)) / len(v)) if len(v) > 1 else v[0] for b, v in sorted(found.items())}


def format_range_table(rows: list[dict[str, Any]]) -> str:
    """The lr-find table: batch size, suggested lr (steepest), min/10, smoothed loss there, why it stopped."""

    def num(v: float) -> str:
        return f"{v:.3g}" if math.isfinite(v) else "—"

    seeds = len({r["seed"] for r in rows}) > 1
    header = ["batch"] + (["seed"] if seeds else []) + ["suggested lr", "min/10", "loss there", "steps", "stopped"]
    lines = [header]
    for r in rows:
        stop = r["stop_reason"] if r["status"] == "ok" else f"{r['status']}: {r['stop_reason'] or '-'}"
        lines.append(
            [str(r["batch_size"])]
            + ([str(r["seed"])] if seeds else [])
            + [num(r["suggested_lr"]), num(r["suggested_lr_min10"]), num(r["loss_at_suggestion"])]
            + [str(r["points"]), stop]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    last = len(header) - 1  # the stop reason: left-aligned, free width
    out = []
    for line in lines:
        cells = [c if i == last else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells))
    return "\n".join(out)
