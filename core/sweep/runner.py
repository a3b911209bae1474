"""The sweep's scheduler: which run goes next, stop and skip, and every run's events into one stream.

Runs in the parent process (CLI or GUI worker thread) and never imports TensorFlow. The runs themselves are
started by a launcher (core/sweep/launcher.py): by default LocalLauncher (core/sweep/local_launcher.py), a
child process per run on this machine, one at a time (fresh, standby, reused, forked or prepared ahead).
A run that runs out of memory, diverges or whose child dies is recorded with that status and the sweep goes
on. `stop()` ends the runs in flight cleanly and skips the rest.

Everything is keyed by run: with a launcher of several slots, several runs are in flight at once and their
events are merged, in each run's order, into the one sink (the writer, then the views; run_sweep). With
`abort_losers` (and a target) the scheduler stops a run once it can no longer reach the target sooner than
the best time to target so far, and starts the small batches first (core/sweep/policies.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import RUN_ENDED, RUN_STARTED, SWEEP_ENDED, SWEEP_STARTED, log_event, make_event, now_iso
from batchlab.core.spec import KERAS_PREFIX, RunSpec, SweepSpec
from batchlab.core.sweep.launcher import Launcher, RunHandle
from batchlab.core.sweep.local_launcher import Entry, LocalLauncher, train_entry
from batchlab.core.sweep.multiworker import MultiWorkerLauncher
from batchlab.core.sweep.policies import ABORTED, AbortLosers, small_batches_first
from batchlab.core.sweep.probe import _parent_environment
from batchlab.core.sweep.processes import POLL_SECONDS, PUMP_WAIT_SECONDS, STOP_GRACE_SECONDS
from batchlab.core.sweep.run_end_figures import RunEndFigures

Sink = Callable[[dict[str, Any]], None]

STOPPED_BEFORE_FIRST_RUN = "stopped by the user before the first run"
# While the data is read (check_data, in the window's worker thread) other threads get the GIL back within
# this long, not Python's 5 ms: the zip reads give it up and take it back between chunks, and a GUI thread
# woken too late for a hand-over waited out the whole interval at every call into Qt (a 59 ms stall).
DATA_READ_SWITCH_INTERVAL_S = 0.0005


@contextmanager
def _short_gil_slices(seconds: float = DATA_READ_SWITCH_INTERVAL_S) -> Iterator[None]:
    """Python's thread switch interval lowered to `seconds` inside the block (never raised), then restored."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def make_launcher(spec: SweepSpec, log_dir: Path, *, entry: Entry = train_entry, **local: Any) -> Launcher:
    """The launcher the spec's placement asks for (core/settings/placement.py): a Ray cluster (`ray`), several
    local runs at once (`parallel`), or one local child at a time; `local`: LocalLauncher's options. A run
    of several worker processes (`workers` > 1, core/sweep/multiworker.py) starts its workers on this machine, or
    where Ray places them (core/sweep/ray_workers.py)."""
    if getattr(spec, "workers", 1) > 1 and getattr(spec, "ray", "") and entry is train_entry:
        from batchlab.core.sweep.ray_workers import RayWorkersLauncher

        return RayWorkersLauncher(spec, log_dir)
    if getattr(spec, "workers", 1) > 1:
        return MultiWorkerLauncher(spec, log_dir, entry=entry, **local)
    if getattr(spec, "ray", "") and entry is train_entry:  # range tests and other entries train here
        from batchlab.core.sweep.ray_launcher import RayLauncher

        return RayLauncher(spec, log_dir)
    if getattr(spec, "parallel", ""):
        from batchlab.core.sweep.parallel_launcher import ParallelLauncher

        return ParallelLauncher(spec, log_dir, entry=entry, **local)
    return LocalLauncher(spec, log_dir, entry=entry, **local)


@dataclass
class _Flight:
    """A run in flight: its handle, the run the scheduler starts after it, and how it is being stopped."""

    handle: RunHandle
    next_run: RunSpec | None
    stop_deadline: float | None = None  # monotonic s after which a run asked to stop is killed
    abort: str = ""  # why the scheduler stopped it (early abort); "" when it did not
    ended: dict[str, Any] | None = None  # its run_ended, once it came


class SweepRunner:
    """Runs a validated spec through a launcher, in the scheduler's order; thread-safe `stop()`."""

    def __init__(
        self,
        spec: SweepSpec,
        log_dir: str | os.PathLike | None = None,
        niceness: int = 0,
        standby: bool = True,
        reuse: bool = True,
        fork: bool = True,
        *,
        launcher: Launcher | None = None,
        entry: Entry = train_entry,
        mode: str | None = None,
    ):
        """`launcher`: where the runs execute (default: LocalLauncher with niceness, standby, reuse, fork and
        `entry`, see core/sweep/local_launcher.py). `mode`: the run file's root `mode` (lr_find, profile)."""
        self.spec = spec
        self.mode = mode
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="batchlab-"))
        self.launcher: Launcher = launcher or make_launcher(
            spec, self._log_dir, niceness=niceness, standby=standby, reuse=reuse, fork=fork, entry=entry
        )
        self.environment: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._flights: list[_Flight] = []
        self._data_checked = False
        self._probe_data = None  # the parent's checked data, a few rows, for the probe child
        self._warnings: list[str] = []  # found by the checks; logged when the sweep starts
        target = spec.target_spec if getattr(spec, "abort_losers", False) else None
        self.abort_policy = AbortLosers(target) if target is not None else None

    # The local launcher's options, as the CLI and the window set them.
    @property
    def niceness(self) -> int:
        return getattr(self.launcher, "niceness", 0)

    @property
    def reuse(self) -> bool:
        return bool(getattr(self.launcher, "reuse", False))

    @property
    def fork(self) -> bool:
        return bool(getattr(self.launcher, "fork", False))

    # ------------------------------------------------------------------ control

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """End the runs in flight cleanly (marked interrupted, measurements kept) and skip the rest."""
        with self._lock:
            self._stop.set()
            for flight in self._flights:
                flight.handle.stop()

    def kill_current(self) -> None:
        """Stop at once: whatever the launcher runs (the runs or the probe) is killed (for a second Ctrl-C)."""
        self.stop()
        self.launcher.kill()

    # ------------------------------------------------------------------ preflight

    def check_data(self) -> None:
        """Load and check a data file (or the bundled data) here, with numpy, before TensorFlow starts.

        The one load in the parent; SpecError (DataError) if the data cannot be used. A Keras
        dataset is loaded by the probe child instead: only a child may import Keras.
        """
        if self._data_checked:
            return
        if not self.spec.data.startswith(KERAS_PREFIX):
            from batchlab.core.datasets import load_spec_data, prepare_arrays, validation_note

            with _short_gil_slices():
                dataset = load_spec_data(self.spec)
                prepared = prepare_arrays(
                    dataset, self.spec.workload, self.spec.samples, self.spec.val_samples, self.spec.scale
                )
            self._probe_data = prepared.probe_sample()
            note = validation_note(dataset, self.spec.val_samples)
            target = self.spec.target_spec
            if note and target is not None and target.metric.startswith("val_"):
                raise SpecError(
                    "target",
                    f"{target.text} needs validation, but data '{dataset.name}' has no test split (x_test); "
                    "add x_test and y_test to the file or use a train_loss target",
                )
            if note:
                self._warnings.append(note)
        self._data_checked = True

    @property
    def warnings(self) -> list[str]:
        """What the checks found that the user should know, e.g. validation asked for but impossible."""
        return [*self._warnings, *self.launcher.warnings]

    def prepare_first_run(self) -> None:
        """Let the launcher get the first run ready while the probe checks the spec."""
        self.launcher.prepare(self.ordered_runs(), self._stop.is_set)

    def preflight(self) -> dict[str, Any]:
        """Check the data, then have the launcher build the model in a probe; the environment. SpecError if bad.

        A stop while the probe runs ends the probe; the environment then holds only what this
        process knows, and `run` ends the sweep interrupted before its first run.
        """
        if self.environment is None:
            self.check_data()
            if not self._stop.is_set():  # stopped before the probe started: no point starting TensorFlow
                self.environment = self.launcher.probe(self._stop.is_set, self._probe_data)
            if self.environment is None:
                self.environment = _parent_environment()
        return self.environment

    def close(self) -> None:
        """Let every child that has not trained go (a sweep that never ran)."""
        self.launcher.close()

    # ------------------------------------------------------------------ running

    def ordered_runs(self) -> list[RunSpec]:
        """The runs in the order they start: the spec's, or small batches first with early abort."""
        runs = self.spec.runs()
        return small_batches_first(runs) if self.abort_policy is not None else runs

    def sweep_fields(self) -> dict[str, Any]:
        """Extra fields of sweep_started (a range test names its mode here)."""
        return {"mode": self.mode} if self.mode else {}

    def run(self, sink: Sink) -> str:
        """Preflight, then every run in order; returns "complete", "interrupted" or "failed"."""
        environment = self.preflight()
        runs = self.spec.runs()
        sink(
            make_event(
                SWEEP_STARTED,
                spec=self.spec.to_dict(),
                runs=[{"index": r.index, "batch_size": r.batch_size, "seed": r.seed} for r in runs],
                environment=environment,
                started=now_iso(),
                **self.sweep_fields(),
            )
        )
        status, message = "complete", f"{len(runs)} runs finished"
        try:
            for warning in self.warnings:
                sink(log_event("warning", warning))
            if self._stop.is_set():
                status, message = "interrupted", STOPPED_BEFORE_FIRST_RUN
            self._run_all(self.ordered_runs(), sink)
            if self._stop.is_set() and status == "complete":
                status, message = "interrupted", "stopped by the user"
        except Exception as e:  # a bug in a sink must still leave a closed, honest file
            status, message = "failed", f"{type(e).__name__}: {e}"
            raise
        finally:
            for flight in list(self._flights):  # left in flight only by a failure (a sink that raised)
                flight.handle.kill()
                self._flights.remove(flight)
                self.launcher.finished(flight.handle, None, True)
            self.launcher.close()
            sink(make_event(SWEEP_ENDED, status=status, message=message, ended=now_iso()))
        return status

    def _run_all(self, runs: list[RunSpec], sink: Sink) -> None:
        """Start runs while the launcher has a free slot, and forward every run's events until all ended.

        With one run in flight the scheduler waits on its events (up to PUMP_WAIT_SECONDS at a time, so it wakes
        rarely while the run trains); with several it looks at each in turn and naps POLL_SECONDS when none
        had anything to say."""
        queue = list(runs)
        slots = max(1, int(getattr(self.launcher, "slots", 1)))
        while True:
            while queue and len(self._flights) < slots and not self._stop.is_set():
                run = queue.pop(0)
                self._start(run, queue[0] if queue else None, sink)
            if not self._flights:
                return
            wait = PUMP_WAIT_SECONDS if len(self._flights) == 1 else 0.0
            busy = False
            for flight in list(self._flights):
                over, heard = self._pump(flight, sink, wait)
                busy = busy or heard
                if over:
                    self._land(flight, sink)
            if not busy and len(self._flights) > 1:
                time.sleep(POLL_SECONDS)

    def _start(self, run: RunSpec, next_run: RunSpec | None, sink: Sink) -> None:
        handle = self.launcher.start(run, next_run)
        if handle.note:
            sink(log_event("warning", handle.note, run=run.index))
        with self._lock:
            self._flights.append(_Flight(handle, next_run))
            if self._stop.is_set():
                handle.stop()

    def _pump(self, flight: _Flight, sink: Sink, wait: float) -> tuple[bool, bool]:
        """Forward a run's waiting events (waiting up to `wait` s for the first) until its run_ended; then look at
        the stop flag and the run's life (a run that streams steps but ignores a stop is still killed after the
        grace period). (whether the run is over, whether anything came)."""
        handle, heard = flight.handle, False
        try:
            while handle.poll(0.0 if heard else wait):
                heard = True
                event = self._forward(flight, handle.recv(), sink)
                if event.get("type") == RUN_ENDED:
                    flight.ended = event
                    return True, True
                if not self._stop.is_set() and not flight.abort:
                    continue
                break  # a stop: look at its deadline after every event
        except (EOFError, OSError):
            return True, heard
        if self._stop.is_set() or flight.abort:
            handle.stop()
            flight.stop_deadline = flight.stop_deadline or time.monotonic() + STOP_GRACE_SECONDS
            if time.monotonic() > flight.stop_deadline:
                handle.kill()
        if not handle.is_alive() and not handle.poll(0):
            return True, heard
        return False, heard

    def _forward(self, flight: _Flight, event: dict[str, Any], sink: Sink) -> dict[str, Any]:
        """Hand one event on: early abort looks at it first (and words an aborted run's end), then the sink."""
        if event.get("type") == RUN_STARTED and getattr(flight.handle, "placement", None):
            event = {**event, **flight.handle.placement}  # where it trained, recorded with the run
        if event.get("type") == RUN_ENDED and flight.abort and event.get("status") == "interrupted":
            event = {**event, "status": ABORTED, "message": f"{flight.abort}; measurements so far are kept"}
        sink(event)
        if self.abort_policy is not None:
            for index, why in self.abort_policy.observe(event):
                self._abort(index, why, sink)
        if event.get("type") == RUN_STARTED:
            self.launcher.started(flight.handle, flight.next_run)
        return event

    def _abort(self, index: int, why: str, sink: Sink) -> None:
        for flight in self._flights:
            if flight.handle.run.index == index and not flight.abort:
                flight.abort = why
                flight.handle.stop()
                sink(log_event("info", f"run {index} stopped early: it {why}", run=index))

    def _land(self, flight: _Flight, sink: Sink) -> None:
        """A run is over: the launcher lets it go (or keeps it); a run that ended without run_ended gets one."""
        with self._lock:
            self._flights.remove(flight)
        ended = flight.ended
        self.launcher.finished(flight.handle, ended["status"] if ended else None, self._stop.is_set())
        if ended is not None:
            return
        index = flight.handle.run.index
        if flight.abort:
            status, message = ABORTED, f"{flight.abort}; the training process was ended"
        elif self._stop.is_set():
            status, message = "interrupted", "stopped by the user; the training process was ended"
        else:
            status, message = "crashed", flight.handle.death_message()
        sink(log_event("error" if status == "crashed" else "warning", message, run=index))
        self._forward(flight, make_event(RUN_ENDED, run=index, status=status, message=message, ended=now_iso()), sink)


def run_sweep(
    spec: SweepSpec,
    out_path: str | os.PathLike,
    sink: Sink | None = None,
    overwrite: bool = False,
    runner: SweepRunner | None = None,
    on_preflight: Callable[[], None] | None = None,
) -> str:
    """Run a sweep and write its run file; the one writer lives in this (parent) process.

    Bad output paths and bad data or models raise SpecError before anything is measured; a
    file created for a sweep that never started is removed again. `on_preflight` is called
    once the cheap checks (output path, data) passed, before the (slow) probe child starts.
    A stop during the probe gives a file whose sweep is "interrupted" with every run pending.
    """
    from batchlab.core.runfile import RunFileWriter

    runner = runner or SweepRunner(spec)

    def check() -> None:
        runner.check_data()  # numpy only: a bad data file fails here, before TensorFlow starts
        if on_preflight is not None:
            on_preflight()
        runner.prepare_first_run()  # its TensorFlow import overlaps the probe's
        try:
            runner.preflight()
        except BaseException:
            runner.close()
            raise

    if overwrite:
        check()  # before the old file is replaced: a failed check must not cost it
    writer = RunFileWriter(out_path, overwrite=overwrite)
    try:
        if not overwrite:
            check()  # after the writer's cheap path checks, so a bad --out fails at once
    except BaseException:
        writer.close()
        Path(out_path).unlink(missing_ok=True)
        raise

    run_end = RunEndFigures()  # run_ended's samples_per_s: the steady throughput every view shows

    def both(event: dict[str, Any]) -> None:
        run_end(event)
        writer.handle(event)  # the file first: a failing consumer must not lose a measurement
        if sink is not None:
            sink(event)

    try:
        return runner.run(both)
    finally:
        writer.close()
