"""Where the live plots' x axes end: the largest step, example count, time or epoch the shown runs plan.

The loss plots' x range goes straight to the planned end of the runs shown and stays there while they
train (growing with headroom, it changed ~10 times a run); the per-epoch plots end at the last epoch
planned. Plain arithmetic over the sweep model and the rows of the live plots' snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from batchlab.core.model import RunData, SweepData
from batchlab.gui.live_series import examples_done

# The time axis's planned end is a forecast: this much past it, for validation pauses and slower steps ahead.
TIME_SLACK = 1.15

Rows = Callable[[str, RunData, str], int]  # (source, run, table) -> rows in the snapshot


def planned_x(sources: Mapping[str, SweepData], rows: Rows, x_axis: str) -> float | None:
    """The largest x the shown runs plan on a loss plot: steps, examples seen (constant batch only), or on a
    time axis the time a running run will end at its pace so far (TIME_SLACK over); None while no shown
    run's plan is known."""
    ends = []
    for source, data in sources.items():
        for run in data.runs.values():
            steps = run.planned_steps()
            if x_axis == "wall_time":
                end = time_end(run, rows(source, run, "steps"), steps)
                if end is not None:
                    ends.append(end)
                continue
            if x_axis == "step" and steps:
                ends.append(float(steps))
            elif x_axis == "examples" and steps and run.attrs.get("batch_schedule") in (None, "constant"):
                samples, per_epoch = run.attrs.get("samples"), run.steps_per_epoch
                if samples and per_epoch:  # whole epochs of `samples`, and a part of the last one
                    epochs, within = divmod(steps, per_epoch)
                    ends.append(float(examples_done(epochs, within, run.batch_size, int(samples))))
    return max(ends) if ends else None


def time_end(run: RunData, n: int, planned: int | None) -> float | None:
    """When (run-relative seconds) a run's last step will be, from its first n step rows: its last step's time
    if it has ended, else its steps so far extrapolated to the planned steps (from the second step on: the
    first one traces)."""
    if not n:
        return None
    times = run.steps["wall_time"]
    last = float(times[n - 1])
    if run.status != "running":
        return last if math.isfinite(last) else None
    if not planned or n < 3 or planned <= n:
        return None
    pace = (last - float(times[0])) / (n - 1)
    end = last + (planned - n) * pace * TIME_SLACK
    return end if math.isfinite(end) and end > last else None


def planned_epochs(sources: Mapping[str, SweepData]) -> float | None:
    """The most epochs the shown runs plan (x of the per-epoch plots), over those whose plan is known (a run
    yet to start tells it at its start; one that plans more widens the range then); None if none is."""
    planned = [run.epochs_planned for data in sources.values() for run in data.runs.values()]
    known = [p for p in planned if p]
    return float(max(known)) if known else None
