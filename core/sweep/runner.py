"""The sweep runner: drives one training child per run and forwards its events, in order.

Runs in the parent process (CLI or GUI worker thread) and never imports TensorFlow. A run
that runs out of memory, diverges or whose child dies is recorded with that status and the
sweep goes on in a fresh child. `stop()` ends the current run cleanly and skips the rest.

On the CPU (as the probe found) one process serves the runs: the probe child takes the first run,
and the child of a run that ended ok trains the next one (a reused child: no new process, no
TensorFlow import); after any other end the next run starts in a fresh process, so a crash still
loses one run. On a GPU (or with reuse=False, `--fresh-children`) each run trains in its own process
(one run's memory figures are its own), started ahead: once run i starts training, the child for run
i+1 starts, imports TensorFlow and loads the data at the lowest CPU priority (the cycles training
leaves) and waits for its run (a standby). The first run's standby gets ready while the probe checks
the spec.

On a Linux CPU (the default, unless fork=False) a fork server replaces both: one process imports
TensorFlow and loads the data, and forks a child per run and for the probe (core/sweep/forkserver.py,
core/training/zygote.py): a process per run, one import per sweep. Reused or standby children are then
used only where fork is not possible (not Linux, or a GPU in sight) or with fork=False.
With prepare_ahead (fused runs), the next run's forked child prepares its run while the current one
trains and waits for its turn (core/training/ahead.py; _take_ahead).
The probe itself is core/sweep/probe.py; starting and reaping child processes, core/sweep/processes.py.
"""

from __future__ import annotations

import multiprocessing
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
from batchlab.core.sweep.forkserver import ForkServer, ForkServerGone, fork_possible
from batchlab.core.sweep.probe import _gpu_possible, _parent_environment, _probe, _probe_answer, _probe_environment
from batchlab.core.sweep.processes import (
    POLL_SECONDS,
    PUMP_WAIT_SECONDS,
    STOP_GRACE_SECONDS,
    _death_message,
    _end_process,
    _log_tail,
    _reap,
    log_size,
    start_child,
)
from batchlab.core.sweep.run_end_figures import RunEndFigures
from batchlab.core.training.ahead import PREPARED
from batchlab.core.training.child import probe_run_main, run_main, trains_on_cpu
from batchlab.core.training.startup import FORKED, FRESH, PROBE, REUSED, STANDBY

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


@dataclass
class _RunChild:
    """One run's training child: its process, its event pipe and, for run_main, the pipe that asks for the run."""

    run: RunSpec
    process: multiprocessing.process.BaseProcess
    events: Any  # the read end of the child's event pipe
    go: Any  # the write end of its request pipe; None: the entry trains at once
    stop: Any  # multiprocessing Event: stop between steps
    log_path: Path
    ahead: str = STANDBY  # what it is when started ahead of its run: a standby, or the probe child
    log_offset: int = 0  # where this run's output starts in log_path (a reused child appends to a used log)

    def request(self, kind: str, reuse: bool = False) -> None:
        """Ask the child for its run now; `kind` (fresh or standby) is recorded with the run. With `reuse` the
        request pipe stays open: after a run that ends ok the child waits on it for its next run."""
        if self.go is None:
            return
        try:
            self.go.send({"requested_at": time.time(), "child": kind, "reuse": reuse})
        except OSError:  # it died getting ready: _finish reads its report, or its death
            pass
        finally:
            if not reuse:
                self.release()

    def hand(self, run: RunSpec, log_path: Path) -> bool:
        """Give this child (idle after a run that ended ok) its next run; False if it cannot take it."""
        if self.go is None or not self.process.is_alive():
            return False
        try:
            offset = log_size(log_path)
            request = {"requested_at": time.time(), "child": REUSED, "run": run.to_dict(), "log_path": str(log_path)}
            self.go.send(request)
        except OSError:
            return False
        self.run, self.log_path, self.log_offset = run, log_path, offset
        return True

    def release(self) -> None:
        """Close the request pipe: a child waiting on it (a standby, or an idle reused child) exits."""
        if self.go is not None:
            self.go.close()
            self.go = None


class _SocketStop:
    """A forked child's stop flag: one byte on its socket, which the child polls between steps."""

    def __init__(self, conn):
        self._conn, self._sent = conn, False
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            if self._sent:
                return
            self._sent = True
            try:
                self._conn.send_bytes(b"s")
            except OSError:  # it exited already
                pass


class SweepRunner:
    """Runs a validated spec, one child process per run; thread-safe `stop()`."""

    def __init__(
        self,
        spec: SweepSpec,
        log_dir: str | os.PathLike | None = None,
        niceness: int = 0,
        standby: bool = True,
        reuse: bool = True,
        fork: bool = True,
    ):
        """niceness > 0 starts each training child that much below this process's CPU priority (the
        window uses it so that its GUI thread is never queued behind TensorFlow's threads). `standby`:
        start each run's child while the previous run trains (see _run_one); False: each run's child
        starts when its run is asked for. `reuse`: on the CPU, the child of a run that ended ok trains the
        next run too (no new process, no TensorFlow import); False (--fresh-children): a process per run.
        `fork`: on a Linux CPU, a fork server imports TensorFlow once and forks each run's child (and the
        probe's); it takes precedence over `reuse` and `standby`. False: --reuse-children / --fresh-children."""
        self.spec = spec
        self.standby = standby
        self.reuse = reuse
        self.fork = fork
        self._zygote: ForkServer | None = None  # the fork server, while the sweep uses one
        self._standby: _RunChild | None = None  # the next run's child, getting ready
        self._ahead: _RunChild | None = None  # the next run's forked child, preparing its run (prepare_ahead)
        self._idle: _RunChild | None = None  # the child of a run that ended ok, waiting to be reused
        self._first: RunSpec | None = None  # the run the probe child will take (prepare_first_run)
        self._exiting: list[multiprocessing.process.BaseProcess] = []  # children whose run ended, still exiting
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
            for spare in (self._standby, self._idle, self._ahead):
                if spare is not None and spare.process.is_alive():
                    spare.process.kill()
            if self._zygote is not None:
                self._zygote.kill()  # its forked children die with it

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
            if self._zygote is not None:
                self.environment = self._probe_forked()
            elif self._first is not None:
                self.environment = self._probe_first_child(self._first)
            else:
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
        if getattr(self.spec, "prepare_ahead", False) and self._zygote is None and not self._stop.is_set():
            self._warnings.append(
                "prepare_ahead: runs are not forked from a fork server here (a GPU, not Linux, or fresh or reused "
                "children), so no run is prepared ahead; each run is built when its turn comes"
            )
        try:
            for warning in self._warnings:
                sink(log_event("warning", warning))
            if self._stop.is_set():
                status, message = "interrupted", STOPPED_BEFORE_FIRST_RUN
            for k, run in enumerate(runs):
                if self._stop.is_set():
                    break
                self._run_one(run, sink, runs[k + 1] if k + 1 < len(runs) else None)
            if self._stop.is_set() and status == "complete":
                status, message = "interrupted", "stopped by the user"
        except Exception as e:  # a bug in a sink must still leave a closed, honest file
            status, message = "failed", f"{type(e).__name__}: {e}"
            raise
        finally:
            self.discard_standby()
            self._discard_ahead()
            self._retire_idle()
            while self._exiting:
                _reap(self._exiting.pop())
            self._close_zygote()
            sink(make_event(SWEEP_ENDED, status=status, message=message, ended=now_iso()))
        return status

    def sweep_fields(self) -> dict[str, Any]:
        """Extra fields of sweep_started (a range test names its mode here)."""
        return {}

    def _run_one(self, run: RunSpec, sink: Sink, next_run: RunSpec | None = None) -> str:
        """Run `run` in the child that trained the previous run if it ended ok and may be reused (CPU), else in
        its standby child if one is ready for it, else in a fresh one; while it trains, a standby child for
        `next_run` gets ready unless this child will take it. After a run that did not end ok, that child and
        the standby are let go and the next run gets a fresh child."""
        forked, note = self._take_ahead(run)
        if note:
            sink(log_event("warning", note, run=run.index))
        if forked is None:
            forked = self._fork_child(run)
        with self._lock:
            child, self._standby = self._standby, None
            idle, self._idle = self._idle, None
        kind = child.ahead if child is not None else STANDBY
        if forked is not None:
            child, kind = forked, FORKED
        elif idle is not None and idle.hand(run, self._log_path(run)):
            if child is not None:
                _end_process(child.process)
            child, kind = idle, REUSED
        else:
            if idle is not None:
                self._retire(idle)
            if child is None or child.run.index != run.index or not child.process.is_alive():
                if child is not None:
                    _end_process(child.process)
                child, kind = self._launch(run), FRESH
        reuse = forked is None and self._reuses(run)
        with self._lock:
            self._child_stop, self._child = child.stop, child.process
            if self._stop.is_set():
                child.stop.set()
        if kind != REUSED:
            child.request(kind, reuse=reuse)

        def forward(event: dict[str, Any]) -> None:
            sink(event)
            # Once this run starts training (its model built), the next run's child starts, importing
            # TensorFlow and loading the data at the lowest CPU priority, with the cycles training leaves.
            # Not when this child will train the next run itself (if this run ends ok).
            if (
                event.get("type") == RUN_STARTED
                and next_run is not None
                and not reuse
                and self._zygote is None
                and self._can_stand_by(next_run)
            ):
                standby = self._launch(next_run)
                with self._lock:
                    self._standby = standby
            # With prepare_ahead the next run's forked child builds, traces and compiles its run meanwhile.
            if event.get("type") == RUN_STARTED and next_run is not None and self._prepares_ahead():
                ahead = self._fork_child(next_run, ahead=True)
                with self._lock:
                    self._ahead = ahead

        status = self._finish(child, forward, keep=reuse)
        if status != "ok":
            self.discard_standby()  # whatever went wrong, the next run starts in a fresh process
            self._discard_ahead()
        return status

    def _fork_child(self, run: RunSpec, ahead: bool = False) -> _RunChild | None:
        """`run`'s child forked from the fork server, or None: no server, or it is gone (then closed, and this
        run and the next get children of their own). With `ahead` the child prepares its run and waits for
        its turn (core/training/ahead.py; _take_ahead gives it its turn)."""
        if self._zygote is None:
            return None
        log_path = self._log_path(run)
        try:
            process, events = self._zygote.fork_run(run, log_path, ahead=ahead)
        except ForkServerGone:
            self._close_zygote()
            return None
        return _RunChild(run, process, events, None, _SocketStop(events), log_path, FORKED)

    def _prepares_ahead(self) -> bool:
        """Whether the next run's child is forked ahead to prepare its run: prepare_ahead (fused runs only, as the
        spec checks), a fork server, and no stop."""
        return (
            bool(getattr(self.spec, "prepare_ahead", False))
            and self.spec.fused > 1
            and self._zygote is not None
            and not self._stop.is_set()
        )

    def _take_ahead(self, run: RunSpec) -> tuple[_RunChild | None, str]:
        """The child prepared ahead for `run`, told that its turn has come; or None (none was prepared, or its
        preparation failed: then `run` gets a child forked now, as without preparation) and why, in words, for
        the log ("" when there is nothing to say). Waits for a preparation still under way: it had a head start
        on a child forked now."""
        asked = time.time()  # the run's request: its startup_s holds any wait for the preparation to end
        with self._lock:
            child, self._ahead = self._ahead, None
        if child is None:
            return None, ""
        if child.run.index != run.index:
            _end_process(child.process)
            child.events.close()
            return None, ""
        answer = self._prepared_answer(child)
        if answer is not None and answer.get("type") == PREPARED:
            try:
                child.events.send({"requested_at": asked})
                return child, ""
            except OSError:
                answer = None
        _end_process(child.process)
        child.events.close()
        if self._stop.is_set():
            return None, ""
        if answer is None:
            why = _death_message(child.process.exitcode, child.log_path)
        else:
            why = str(answer.get("message", ""))
        return None, f"run {run.index} could not be prepared ahead ({why}); it starts in a process forked now"

    def _prepared_answer(self, child: _RunChild) -> dict[str, Any] | None:
        """Wait for a child preparing ahead to say PREPARED or PREPARE_FAILED; None if it died or a stop came."""
        while not self._stop.is_set():
            try:
                if child.events.poll(POLL_SECONDS):
                    return child.events.recv()
            except (EOFError, OSError):
                return None
            if not child.process.is_alive() and not child.events.poll(0):
                return None
        return None

    def _discard_ahead(self) -> None:
        """End a child preparing ahead whose run will not be given to it (it has not trained)."""
        with self._lock:
            child, self._ahead = self._ahead, None
        if child is not None:
            _end_process(child.process)
            child.events.close()

    def _forks(self, run: RunSpec) -> bool:
        """Whether the sweep forks its children from a fork server: on (fork), Linux, no GPU in sight (the
        server must never touch a device), and children that train sweep runs (run_main)."""
        return (
            self.fork
            and fork_possible()
            and not _gpu_possible(self.spec.device)
            and self._child_entry(run)[0] is run_main
        )

    def _probe_forked(self) -> dict[str, Any] | None:
        """The probe in a child forked from the server: its environment (None if stopped first); SpecError if
        the spec is bad. If the server died getting ready, the probe runs in a child of its own and the runs
        get children of their own; if the runs turn out not to train on the CPU, the server is closed."""
        zygote = self._zygote
        assert zygote is not None
        log_path = self._log_dir / "probe.log"
        try:
            if not zygote.wait_ready(self._stop.is_set):
                raise ForkServerGone
            process, events = zygote.fork("probe", log_path, spec=self.spec.to_dict())
        except ForkServerGone:
            self._close_zygote()
            if self._stop.is_set():
                return None
            if zygote.process.exitcode not in (None, 0):  # why, for the log; the probe below says it to the user
                self._warnings.append(
                    f"the fork server failed ({_log_tail(self._log_dir / 'fork-server.log')}); "
                    "each run starts in a process of its own"
                )
            return _probe(
                self._ctx,
                self.spec,
                log_path,
                check=True,
                data=self._probe_data,
                should_stop=self._stop.is_set,
                track=self._track,
            )
        self._track(process)
        try:
            environment = _probe_environment(
                _probe_answer(process, events, self._log_dir / "probe.log", self._stop.is_set)
            )
        finally:
            self._track(None)
            events.close()
            _reap(process)
        if environment is not None and not trains_on_cpu(environment):
            self._close_zygote()
        return environment

    def _close_zygote(self) -> None:
        """End the fork server (it kills and reaps whatever it forked that still runs)."""
        with self._lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()

    def close(self) -> None:
        """Let every child that has not trained go: a standby, and the fork server (a sweep that never ran)."""
        self.discard_standby()
        self._discard_ahead()
        self._close_zygote()

    def _reuses(self, run: RunSpec) -> bool:
        """Whether `run`'s child may train the next run after it (if it ends ok): reuse on, the runs train on
        the CPU (a GPU allocator's pools would carry one run's memory into the next run's figures), and a
        child that trains sweep runs (run_main)."""
        return self.reuse and self._on_cpu() and self._child_entry(run)[0] is run_main

    def _retire(self, child: _RunChild) -> None:
        """Let an idle reused child go: it exits when its request pipe closes (reaped at the sweep's end)."""
        child.release()
        self._exiting.append(child.process)

    def _retire_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            self._retire(idle)

    def prepare_first_run(self) -> None:
        """Get the first run's child ready during the probe. Where the runs may train on the CPU (no GPU in
        sight) and children are reused, the probe child itself becomes the first run's child (one TensorFlow
        import fewer); otherwise a standby starts now, importing TensorFlow while the probe checks the spec."""
        runs = self.spec.runs()
        if not runs or self._standby is not None or self.environment is not None or self._zygote is not None:
            return
        if self._forks(runs[0]) and not self._stop.is_set():
            self._zygote = ForkServer(
                self._ctx, self.spec, self._log_dir / "fork-server.log", self.niceness, start_child
            )
            return
        if not self._can_stand_by(runs[0]):
            return
        if self.reuse and not _gpu_possible(self.spec.device):
            self._first = runs[0]
            return
        standby = self._launch(runs[0])
        with self._lock:
            self._standby = standby

    def _probe_first_child(self, run: RunSpec) -> dict[str, Any] | None:
        """The probe in the child that will train `run`: its environment (None if stopped first); SpecError if
        the spec is bad. On the CPU the child then waits for `run` as its standby; elsewhere it exits."""
        child = self._launch(run, probe=True)
        self._track(child.process)
        try:
            environment = _probe_environment(
                _probe_answer(child.process, child.events, child.log_path, self._stop.is_set)
            )
        except BaseException:
            _end_process(child.process)
            raise
        finally:
            self._track(None)
        if environment is None or self._stop.is_set():
            _end_process(child.process)
        elif trains_on_cpu(environment):
            with self._lock:
                self._standby = child
        else:  # a GPU after all: the child exits after its answer; the first run gets a fresh one
            child.release()
            _reap(child.process)
        return environment

    def _on_cpu(self) -> bool:
        """The runs train on the CPU (as the probe found), so a finished child's memory is no other's concern."""
        return trains_on_cpu(self.environment)

    def _can_stand_by(self, run: RunSpec) -> bool:
        """A child may be started ahead of `run`: standby on, no stop, and a child that waits to be asked."""
        return self.standby and not self._stop.is_set() and self._child_entry(run)[0] is run_main

    def discard_standby(self) -> None:
        """End a standby child that will not be asked for its run (it has not trained)."""
        with self._lock:
            child, self._standby = self._standby, None
        if child is not None:
            _end_process(child.process)

    def _log_path(self, run: RunSpec) -> Path:
        return self._log_dir / f"run_{run.index:03d}.log"

    def _launch(self, run: RunSpec, probe: bool = False) -> _RunChild:
        """Start the child for `run`; a child whose entry is run_main then waits for `request`. With `probe`,
        the child first answers as the probe (probe_run_main), then waits for `request` likewise."""
        log_path = self._log_path(run)
        receiver, sender = self._ctx.Pipe(duplex=False)
        child_stop = self._ctx.Event()
        target, args = self._child_entry(run)
        go_receiver = go_sender = None
        extra: tuple = ()
        if target is run_main:
            go_receiver, go_sender = self._ctx.Pipe(duplex=False)
            extra = (go_receiver, time.time())  # launched_at: the child's process start is timed from here
        if probe:
            target, args, extra = probe_run_main, (self.spec.to_dict(), *args), (*extra, self._probe_data)
        process = self._ctx.Process(
            target=target,
            args=(*args, sender, child_stop, str(log_path), self.niceness, *extra),
            daemon=True,
            name=f"batchlab-run-{run.index}",
        )
        start_child(process)
        sender.close()  # the child holds the only write end, so its death shows as EOF here
        if go_receiver is not None:
            go_receiver.close()
        return _RunChild(run, process, receiver, go_sender, child_stop, log_path, PROBE if probe else STANDBY)

    def _finish(self, child: _RunChild, sink: Sink, keep: bool = False) -> str:
        """Forward the child's events until its run ends or it dies; the run's status. With `keep`, a child
        whose run ended ok is kept (idle) for the next run instead of being let go."""
        run, log_path = child.run, child.log_path
        ended = self._pump(child.events, child.process, child.stop, sink)
        if ended is not None and keep and ended["status"] == "ok" and not self._stop.is_set():
            with self._lock:
                self._child_stop, self._child = None, None
                self._idle = child
            return "ok"
        child.release()  # a child kept for reuse waits on it after a run that ended ok: now it exits
        if ended is not None and self._on_cpu():
            # Its run is over and recorded: on a CPU the next run need not wait for this process to tear
            # TensorFlow down (memory figures are per process). On a GPU it must: its memory is still held.
            self._exiting.append(child.process)
        else:
            _reap(child.process)
        with self._lock:
            self._child_stop, self._child = None, None
        if ended is not None:
            return ended["status"]
        if self._stop.is_set():
            status, message = "interrupted", "stopped by the user; the training process was ended"
        else:
            status, message = "crashed", _death_message(child.process.exitcode, log_path, child.log_offset)
        sink(log_event("error" if status == "crashed" else "warning", message, run=run.index))
        sink(make_event(RUN_ENDED, run=run.index, status=status, message=message, ended=now_iso()))
        return status

    def _child_entry(self, run: RunSpec) -> tuple[Callable, tuple]:
        """The child's entry point and its first arguments (the pipe, stop flag, log and niceness follow)."""
        return run_main, (run.to_dict(),)

    def _pump(self, receiver, child, child_stop, sink: Sink) -> dict[str, Any] | None:
        """Forward the child's events until its run_ended, its death, or a stop that times out.

        It wakes for an event or every PUMP_WAIT_SECONDS, and looks at the stop flag and the child's life
        after either (a child that streams steps but ignores a stop is still ended after the grace period).
        """
        stop_deadline = None
        while True:
            try:
                if receiver.poll(PUMP_WAIT_SECONDS):
                    event = receiver.recv()
                    sink(event)
                    if event.get("type") == RUN_ENDED:
                        return event
            except (EOFError, OSError):
                return None
            if self._stop.is_set():
                child_stop.set()
                stop_deadline = stop_deadline or time.monotonic() + STOP_GRACE_SECONDS
                if time.monotonic() > stop_deadline:
                    child.kill()
            if not child.is_alive() and not receiver.poll(0):
                return None


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
