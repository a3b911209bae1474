"""Scheduler policies: the order runs go in, and early abort of runs that cannot win (issue 28).

Pure bookkeeping on the event stream (no processes, no TensorFlow), so it holds for any launcher and can be
tested on a recorded or synthetic stream. docs/analysis.md ("Early abort") states the rule in words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from batchlab.core.events import EVALUATION, RUN_ENDED, RUN_STARTED, STEPS
from batchlab.core.spec import RunSpec
from batchlab.core.targets import Target

ABORTED = "aborted"  # the status of a run the scheduler stopped because it could not win


def small_batches_first(runs: list[RunSpec]) -> list[RunSpec]:
    """Runs by batch size, smallest first (seeds in their order): in a train-to-target sweep on one device the
    small batches usually reach the target soonest in wall time, so a best time exists early and the larger
    batches can be stopped once they pass it."""
    return sorted(runs, key=lambda r: (r.batch_size, r.index))


class AbortLosers:
    """Stop a run once it can no longer reach the target sooner than the best time to target so far.

    The rule: a run that has not met the target is stopped as soon as its training time (its clock without
    evaluation and validation passes, the clock time to target is measured on) has passed the best time to
    target of any run so far. Its next evaluation could only come later, so it cannot win. `observe` takes
    every event in order and returns the runs to stop now, each with its reason.
    """

    def __init__(self, target: Target):
        self.target = target
        self.best_s = math.inf  # the best time to target so far (s of training)
        self.best_run: int | None = None
        self.best_batch: int | None = None
        self._batch: dict[int, int] = {}  # run -> batch size (from run_started)
        self._running: set[int] = set()
        self._reached: set[int] = set()
        self._train_s: dict[int, float] = {}  # run -> its training time so far (s)
        self._offset_s: dict[int, float] = {}  # run -> s of evaluation on its step clock (wall_time - training)
        self.aborted: dict[int, str] = {}  # run -> why it was stopped

    def observe(self, event: Mapping[str, Any]) -> list[tuple[int, str]]:
        kind, run = event.get("type"), event.get("run")
        if run is None:
            return []
        run = int(run)
        if kind == RUN_STARTED:
            self._running.add(run)
            self._batch[run] = int(event.get("batch_size", 0))
        elif kind == RUN_ENDED:
            self._running.discard(run)
        elif kind == STEPS:
            walls = [float(w) for w in event.get("wall_time", []) if math.isfinite(w)]
            if walls:
                self._train_s[run] = max(self._train_s.get(run, 0.0), walls[-1] - self._offset_s.get(run, 0.0))
        elif kind == EVALUATION:
            self._evaluation(run, event)
        return self._losers()

    def _evaluation(self, run: int, event: Mapping[str, Any]) -> None:
        train = float(event.get("train_wall_time", math.nan))
        wall = float(event.get("wall_time", math.nan))
        if math.isfinite(train):
            self._train_s[run] = max(self._train_s.get(run, 0.0), train)
            if math.isfinite(wall):  # epoch-end validation stays on the step clock; mid-epoch evaluations do not
                spent = float(event.get("eval_time", 0.0)) if event.get("at_epoch_end") else 0.0
                self._offset_s[run] = wall - train + (spent if math.isfinite(spent) else 0.0)
        value = {**(event.get("metrics") or {}), **event}.get(self.target.metric, math.nan)
        if run in self._reached or not self.target.met(float(value)):
            return
        self._reached.add(run)
        if math.isfinite(train) and train < self.best_s:
            self.best_s, self.best_run, self.best_batch = train, run, self._batch.get(run)

    def _losers(self) -> list[tuple[int, str]]:
        if not math.isfinite(self.best_s):
            return []
        found = []
        for run in sorted(self._running):
            if run in self._reached or run in self.aborted or self._train_s.get(run, 0.0) <= self.best_s:
                continue
            why = (
                f"cannot win: {self._train_s[run]:.3g} s of training without meeting the target, past the best "
                f"time to target so far ({self.best_s:.3g} s, batch {self.best_batch})"
            )
            self.aborted[run] = why
            found.append((run, why))
        return found
