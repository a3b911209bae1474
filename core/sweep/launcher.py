"""Where runs execute: the small interface between the sweep's scheduler and whatever trains its runs.

The scheduler (core/sweep/runner.py) decides which run goes next, when to stop and what to skip, and merges
every run's events into the one writer and the sinks. A launcher starts runs and hands back a `RunHandle`
per run (as `concurrent.futures.Executor.submit` hands back a future): the run's events, stop, kill and what
it was. The scheduler never knows processes from threads or machines.

`LocalLauncher` (core/sweep/local_launcher.py) trains each run in a child process on this machine, one at a
time; its ways of getting a child (fresh, standby, reused, forked from a fork server, prepared ahead) are its
options. A launcher that can have several runs in flight says so in `slots`; tests drive the scheduler with a
launcher that synthesises events (tests/core/fake_launcher.py). docs/contributing.md: where a new one goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from batchlab.core.spec import RunSpec


class RunHandle(Protocol):
    """One run in flight, as its launcher started it."""

    run: RunSpec
    kind: str  # what it was, recorded with the run: fresh, standby, reused, forked, probe (training/startup.py)
    note: str  # something the log should say about how it was started ("" when nothing)
    # Optional: `placement`, a dict of scalar fields saying where the run trains (e.g. its visible GPU, its
    # Ray node); the scheduler adds them to the run's run_started, so the run file records them per run.

    def poll(self, timeout: float) -> bool:
        """Whether an event is waiting (waiting up to `timeout` s for one)."""
        ...

    def recv(self) -> dict[str, Any]:
        """The run's next event, in order; EOFError or OSError once its source is gone."""
        ...

    def stop(self) -> None:
        """End the run cleanly after its current step (it then sends run_ended "interrupted"); thread-safe."""
        ...

    def kill(self) -> None:
        """End the run now (no run_ended follows)."""
        ...

    def is_alive(self) -> bool:
        """Whether the run can still send events."""
        ...

    def death_message(self) -> str:
        """Why the run ended without run_ended, in one line (after `Launcher.finished`)."""
        ...


class Launcher(Protocol):
    """Starts runs and lets them go; the scheduler calls it from one thread, except `kill` (any thread)."""

    slots: int  # how many runs it may have in flight at once
    warnings: list[str]  # what it found that the user should know, logged when the sweep starts

    def prepare(self, runs: list[RunSpec], should_stop: Callable[[], bool]) -> None:
        """Get ready for `runs` while the probe runs (e.g. import TensorFlow ahead); may do nothing."""
        ...

    def probe(self, should_stop: Callable[[], bool], data: Any) -> dict[str, Any] | None:
        """Check the spec where the runs will train; the environment (None if stopped). SpecError if bad."""
        ...

    def start(self, run: RunSpec, next_run: RunSpec | None) -> RunHandle:
        """Start `run` now; `next_run` is the run the scheduler will start after it (None: none)."""
        ...

    def started(self, handle: RunHandle, next_run: RunSpec | None) -> None:
        """`handle`'s run_started came (its model is built): a good moment to get `next_run` ready."""
        ...

    def finished(self, handle: RunHandle, status: str | None, stopping: bool) -> None:
        """`handle`'s run is over with `status` (None: it ended without run_ended); let it go or keep it."""
        ...

    def kill(self) -> None:
        """Kill everything this launcher started, now (a second Ctrl-C)."""
        ...

    def close(self) -> None:
        """Let go of everything that has not trained (spares, servers); called when the sweep ends."""
        ...
