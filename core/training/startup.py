"""The one-time costs of a run, measured in its training child: what it paid before its first step.

A child records how long each phase of its start took (process start, TensorFlow import, data,
model build, input pipeline) and when the parent asked for the run. A child started when its run
was asked for ("fresh") pays every phase after the request; a standby child, started while the
previous run trained, did the process start, the import and the data before it (`prepared`).
No TensorFlow here: the clock is plain Python, so it can run before the import it times.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FRESH = "fresh"  # started when its run was asked for
STANDBY = "standby"  # started while the previous run trained (or the probe ran), then handed its run
PROBE = "probe"  # the child that checked the spec (the probe), then took the first run (CPU only)
REUSED = "reused"  # the process that trained the previous run (CPU only, after a run that ended ok)
FORKED = "forked"  # forked for its run from the sweep's fork server, which imported TensorFlow once (Linux CPU)
AHEAD_PHASES = ("process", "import", "data")  # what a reused child does not pay again (the data: if the same)
PHASES = ("process", "import", "data", "model", "pipeline")  # in the order a child goes through them


class StartupClock:
    """Seconds of each start-up phase, and the request time, for one training child (wall clock, s)."""

    def __init__(self, launched_at: float = math.nan, entered: float | None = None):
        """`launched_at`: the parent's time.time() just before it started this process; `entered`: the
        child's first line of our code (time.time())."""
        self.entered = time.time() if entered is None else entered
        self.launched_at = launched_at
        self.seconds: dict[str, float] = {}
        if math.isfinite(launched_at):
            self.seconds["process"] = max(0.0, self.entered - launched_at)
        self.ready_at = math.nan  # the child had imported TensorFlow and loaded the data
        self.requested_at = math.nan  # the parent asked for the run (the go message)
        self.kind = FRESH
        self.ahead_s = math.nan  # seconds the run was prepared ahead (model, engine, first call), if it was

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase (adds up if entered twice)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    @classmethod
    def reused(cls, requested_at: float) -> StartupClock:
        """The clock of a run handed to the child that trained the previous run: no process start and no
        import (0 s, not paid); the data phase is timed only if this run's data had to be loaded."""
        clock = cls(entered=time.time())
        for name in AHEAD_PHASES:
            clock.seconds[name] = 0.0
        clock.requested(requested_at, REUSED)
        clock.ready()
        return clock

    @classmethod
    def forked(cls, requested_at: float) -> StartupClock:
        """The clock of a run forked from the fork server (core/training/zygote.py): the process start is the
        fork (from the parent's request to the forked child's first line); the import and the data were paid
        once, by the server, before any run (0 s here)."""
        clock = cls(launched_at=requested_at)
        clock.seconds["import"] = clock.seconds["data"] = 0.0
        clock.requested(requested_at, FORKED)
        clock.ready()
        return clock

    def ready(self) -> None:
        self.ready_at = time.time()

    def requested(self, at: float, kind: str) -> None:
        """The parent's request for the run arrived: sent at `at` (time.time()), to a `kind` child."""
        self.requested_at, self.kind = float(at), kind

    def prepared_s(self) -> float:
        """Seconds of process start, import and data done before the request (0 for a fresh or reused child)."""
        if self.kind not in (STANDBY, PROBE) or not (
            math.isfinite(self.requested_at) and math.isfinite(self.launched_at)
        ):
            return 0.0
        done = self.ready_at if math.isfinite(self.ready_at) else self.requested_at
        return max(0.0, min(done, self.requested_at) - self.launched_at)

    def fields(self) -> dict[str, Any]:
        """run_started fields: the child kind, each phase (s), what was prepared before the request and the
        time from the request to now, when training begins (s)."""
        requested = self.requested_at if math.isfinite(self.requested_at) else self.launched_at
        out: dict[str, Any] = {"child": self.kind}
        for name in PHASES:
            out[f"startup_{name}_s"] = float(self.seconds.get(name, math.nan))
        out["startup_prepared_s"] = self.prepared_s()
        out["prepared_ahead_s"] = float(self.ahead_s)
        out["startup_s"] = max(0.0, time.time() - requested) if math.isfinite(requested) else math.nan
        return out
