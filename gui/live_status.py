"""The status bar's account of the main sweep as the live plots show it.

While a run trains: run, batch, epoch, step and loss of the plots' snapshot, so the status bar never
names an epoch the plots do not show yet. Between runs: what the window is waiting for, with the time
so far ("starting TensorFlow / building the model… 4 s", then "first step (tracing the model)… 1 s").
"""

from __future__ import annotations

import time
from collections.abc import Callable

from batchlab.core.model import SweepData


def main_phase(data: SweepData | None, steps_of: Callable[[int], int]) -> tuple:
    """(run index, phase) of a running sweep: "starting", "first step" or "training"; () otherwise.

    steps_of(run index): the run's step rows in the plots' snapshot.
    """
    if data is None or data.status != "running":
        return ()
    for run in data.ordered_runs():
        if run.status == "running":
            return (run.index, "training" if steps_of(run.index) else "first step")
    pending = [r for r in data.ordered_runs() if r.status == "pending"]
    return (pending[0].index, "starting") if pending else ()


class SweepPosition:
    """What the main sweep was doing at the last snapshot, and since when (seconds of `clock`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.phase: tuple = ()
        self.since = 0.0

    def note(self, data: SweepData | None, steps_of: Callable[[int], int]) -> None:
        """At each snapshot: the sweep's phase now; the time it started if it is a new one."""
        phase = main_phase(data, steps_of)
        if phase != self.phase:
            self.phase, self.since = phase, self.clock()

    def text(self, data: SweepData | None, steps_of: Callable[[int], int]) -> str:
        """The status bar's text for the last snapshot ("" when the sweep is not running)."""
        if not self.phase or data is None or self.phase[0] not in data.runs:
            return ""
        index, phase = self.phase
        run = data.runs[index]
        head = f"Run {index + 1}/{len(data.runs)} · batch {run.batch_size} · "
        waited = f"{self.clock() - self.since:.0f} s"
        if phase == "starting":
            return head + f"starting TensorFlow / building the model… {waited}"
        if phase == "first step":
            return head + f"first step (tracing the model)… {waited}"
        rows = steps_of(index)
        epoch = int(run.steps["epoch"][rows - 1])
        text = head + f"epoch {epoch + 1}/{run.epochs_planned or '?'} · step {rows}"
        return text + f" · loss {float(run.steps['loss'][rows - 1]):.4g}"
