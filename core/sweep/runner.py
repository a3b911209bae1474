"""The sweep runner: drives one training child per run and forwards its events, in order.

Runs in the parent process (CLI or GUI worker thread) and never imports TensorFlow. A run
that runs out of memory, diverges or whose child dies is recorded with that status and the
sweep goes on in a fresh child. `stop()` ends the current run cleanly and skips the rest.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchlab.core.events import RUN_ENDED, SWEEP_ENDED, SWEEP_STARTED, log_event, make_event, now_iso
from batchlab.core.spec import KERAS_PREFIX, RunSpec, SpecError, SweepSpec
from batchlab.core.training.child import PROBE_ERROR, PROBE_RESULT, probe_main, run_main

Sink = Callable[[dict[str, Any]], None]

POLL_SECONDS = 0.05  # how often a waiting parent looks at the stop flag
STOP_GRACE_SECONDS = 20.0  # a run asked to stop gets this long to finish its step
PROBE_TIMEOUT_SECONDS = 600.0  # includes a first Keras dataset download
STOPPED_BEFORE_FIRST_RUN = "stopped by the user before the first run"


def _log_tail(path: Path, lines: int = 1) -> str:
    """The last non-empty line(s) of a child's log, for crash messages."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())[:300]


def _death_message(exitcode: int | None, log_path: Path) -> str:
    if exitcode is not None and exitcode < 0:
        sig = signal.Signals(-exitcode).name
        cause = "often the host ran out of memory" if sig == "SIGKILL" else "a native crash"
        text = f"the training process died from {sig} ({cause})"
    else:
        text = f"the training process exited unexpectedly with code {exitcode}"
    tail = _log_tail(log_path)
    return f"{text}; last output: {tail}" if tail else text


class SweepRunner:
    """Runs a validated spec, one child process per run; thread-safe `stop()`."""

    def __init__(self, spec: SweepSpec, log_dir: str | os.PathLike | None = None, niceness: int = 0):
        """niceness > 0 starts each training child that much below this process's CPU priority (the
        window uses it so that its GUI thread is never queued behind TensorFlow's threads)."""
        self.spec = spec
        self.niceness = max(0, int(niceness))
        self.environment: dict[str, Any] | None = None
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._child_stop = None
        self._child: multiprocessing.process.BaseProcess | None = None
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="batchlab-"))
        self._data_checked = False
        self._probe_data = None  # the parent's checked data, a few rows, for the probe child
        self._warnings: list[str] = []  # found by the checks; logged when the sweep starts

    # ------------------------------------------------------------------ control

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """End the current run cleanly (marked interrupted, measurements kept) and skip the rest."""
        with self._lock:
            self._stop.set()
            if self._child_stop is not None:
                self._child_stop.set()

    def kill_current(self) -> None:
        """Stop at once: the current child (a run or the probe) is killed (for a second Ctrl-C)."""
        self.stop()
        with self._lock:
            if self._child is not None and self._child.is_alive():
                self._child.kill()

    def _track(self, child: multiprocessing.process.BaseProcess | None) -> None:
        with self._lock:
            self._child = child

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
        return list(self._warnings)

    def preflight(self) -> dict[str, Any]:
        """Check the data, then build the model in a probe child; return the environment. SpecError if bad.

        A stop while the probe runs ends the probe; the environment then holds only what this
        process knows, and `run` ends the sweep interrupted before its first run.
        """
        if self.environment is None:
            self.check_data()
            if self._stop.is_set():  # stopped before the probe started: no point starting TensorFlow
                self.environment = _parent_environment()
                return self.environment
            self.environment = _probe(
                self._ctx,
                self.spec,
                self._log_dir / "probe.log",
                check=True,
                data=self._probe_data,
                should_stop=self._stop.is_set,
                track=self._track,
            )
            if self.environment is None:
                self.environment = _parent_environment()
        return self.environment

    # ------------------------------------------------------------------ running

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
            for warning in self._warnings:
                sink(log_event("warning", warning))
            if self._stop.is_set():
                status, message = "interrupted", STOPPED_BEFORE_FIRST_RUN
            for run in runs:
                if self._stop.is_set():
                    break
                self._run_one(run, sink)
            if self._stop.is_set() and status == "complete":
                status, message = "interrupted", "stopped by the user"
        except Exception as e:  # a bug in a sink must still leave a closed, honest file
            status, message = "failed", f"{type(e).__name__}: {e}"
            raise
        finally:
            sink(make_event(SWEEP_ENDED, status=status, message=message, ended=now_iso()))
        return status

    def sweep_fields(self) -> dict[str, Any]:
        """Extra fields of sweep_started (a range test names its mode here)."""
        return {}

    def _run_one(self, run: RunSpec, sink: Sink) -> str:
        log_path = self._log_dir / f"run_{run.index:03d}.log"
        receiver, sender = self._ctx.Pipe(duplex=False)
        child_stop = self._ctx.Event()
        target, args = self._child_entry(run)
        child = self._ctx.Process(
            target=target,
            args=(*args, sender, child_stop, str(log_path), self.niceness),
            daemon=True,
            name=f"batchlab-run-{run.index}",
        )
        with self._lock:
            self._child_stop, self._child = child_stop, child
            if self._stop.is_set():
                child_stop.set()
        child.start()
        sender.close()  # the child holds the only write end, so its death shows as EOF here
        ended = self._pump(receiver, child, child_stop, sink)
        child.join(timeout=STOP_GRACE_SECONDS)
        if child.is_alive():
            child.kill()
            child.join()
        with self._lock:
            self._child_stop, self._child = None, None
        if ended is not None:
            return ended["status"]
        if self._stop.is_set():
            status, message = "interrupted", "stopped by the user; the training process was ended"
        else:
            status, message = "crashed", _death_message(child.exitcode, log_path)
        sink(log_event("error" if status == "crashed" else "warning", message, run=run.index))
        sink(make_event(RUN_ENDED, run=run.index, status=status, message=message, ended=now_iso()))
        return status

    def _child_entry(self, run: RunSpec) -> tuple[Callable, tuple]:
        """The child's entry point and its first arguments (the pipe, stop flag, log and niceness follow)."""
        return run_main, (run.to_dict(),)

    def _pump(self, receiver, child, child_stop, sink: Sink) -> dict[str, Any] | None:
        """Forward the child's events until its run_ended, its death, or a stop that times out."""
        stop_deadline = None
        while True:
            try:
                if receiver.poll(POLL_SECONDS):
                    event = receiver.recv()
                    sink(event)
                    if event.get("type") == RUN_ENDED:
                        return event
                    continue
            except (EOFError, OSError):
                return None
            if self._stop.is_set():
                child_stop.set()
                stop_deadline = stop_deadline or time.monotonic() + STOP_GRACE_SECONDS
                if time.monotonic() > stop_deadline:
                    child.kill()
            if not child.is_alive() and not receiver.poll(0):
                return None


def _parent_environment() -> dict[str, Any]:
    """What this process knows of the environment, for a sweep stopped before its probe answered."""
    from batchlab.core import __version__

    return {
        "app_version": __version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "devices": [],
        "device_description": "unknown (stopped before the training process reported its devices)",
    }


def _probe(
    ctx,
    spec: SweepSpec,
    log_path: Path,
    check: bool,
    data=None,
    should_stop: Callable[[], bool] = lambda: False,
    track: Callable[[Any], None] | None = None,
) -> dict[str, Any] | None:
    """Start a probe child and wait for its answer in short slices; None if `should_stop` said so first.

    `data` (a few checked rows) saves the child loading the data again; `track` is told the child
    while it lives, so a kill can reach it.
    """
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(
        target=probe_main,
        args=(spec.to_dict(), sender, str(log_path), check, data),
        daemon=True,
        name="batchlab-probe",
    )
    if track is not None:
        track(child)
    child.start()
    sender.close()
    deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
    try:
        while not receiver.poll(POLL_SECONDS):
            if should_stop():
                child.kill()
                return None
            if time.monotonic() > deadline:
                child.kill()
                raise SpecError("setup", f"the training process did not answer in {PROBE_TIMEOUT_SECONDS:.0f} s")
        message = receiver.recv()
    except EOFError:
        child.join()
        if should_stop():  # killed on purpose
            return None
        raise SpecError("setup", f"could not start training: {_death_message(child.exitcode, log_path)}") from None
    finally:
        child.join(timeout=STOP_GRACE_SECONDS)
        if child.is_alive():
            child.kill()
            child.join()
        if track is not None:
            track(None)
    if message["type"] == PROBE_ERROR:
        raise SpecError(message["field"], message["message"])
    assert message["type"] == PROBE_RESULT
    return message["environment"]


def probe_environment(device: str = "auto") -> dict[str, Any]:
    """Versions and the devices TensorFlow sees (for `info` and the GUI's device list)."""
    from batchlab.core.spec import build_spec

    spec = build_spec({"device": device})
    ctx = multiprocessing.get_context("spawn")
    log_dir = Path(tempfile.mkdtemp(prefix="batchlab-probe-"))
    return _probe(ctx, spec, log_dir / "probe.log", check=False)


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
        runner.preflight()

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

    def both(event: dict[str, Any]) -> None:
        writer.handle(event)  # the file first: a failing consumer must not lose a measurement
        if sink is not None:
            sink(event)

    try:
        return runner.run(both)
    finally:
        writer.close()
