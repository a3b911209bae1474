"""A hook that times Python's garbage collector during a run: one of the pauses a run's clock can hide.

A collection stops every Python thread of the training process, wherever it falls (inside a step, a
validation pass, between epochs); the run's time account (core/analysis/time_account.py) reports it
beside its parts, not as one of them, since its seconds are already inside those parts.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from batchlab.core.training.hooks import Hook, Logs


class GcWatch(Hook):
    """Sums the seconds of every garbage collection between on_run_begin and on_run_end (`gc_time_s`) and
    keeps the longest one (`gc_max_s`), through gc.callbacks."""

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        spent = time.perf_counter() - self._t0
        self.total += spent
        self.longest = max(self.longest, spent)

    def on_run_begin(self, logs: Logs) -> None:
        gc.callbacks.append(self._callback)

    def on_run_end(self, logs: Logs) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        logs.setdefault("gc_time_s", self.total)
        logs.setdefault("gc_max_s", self.longest)
