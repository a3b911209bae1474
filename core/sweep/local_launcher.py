"""The local launcher: each run trains in a child process on this machine, one run at a time.

Never imports TensorFlow. Its ways of getting a run's child are its options:

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
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep.children import _RunChild, _SocketStop
from batchlab.core.sweep.forkserver import ForkServer, ForkServerGone, fork_possible
from batchlab.core.sweep.probe import _gpu_possible, _probe, _probe_answer, _probe_environment
from batchlab.core.sweep.processes import (
    POLL_SECONDS,
    _death_message,
    _end_process,
    _log_tail,
    _reap,
    start_child,
    with_environment,
)
from batchlab.core.training.ahead import PREPARED
from batchlab.core.training.child import probe_run_main, run_main, trains_on_cpu
from batchlab.core.training.startup import FORKED, FRESH, PROBE, REUSED, STANDBY

# A child's entry point and its first arguments for a run (the pipe, stop flag, log and niceness follow).
Entry = Callable[[RunSpec], tuple[Callable, tuple]]


def train_entry(run: RunSpec) -> tuple[Callable, tuple]:
    """A sweep's runs: the child trains the run (run_main)."""
    return run_main, (run.to_dict(),)


class LocalLauncher:
    """Runs in child processes of this one, one at a time (slots = 1); see the module docstring."""

    slots = 1

    def __init__(
        self,
        spec: SweepSpec,
        log_dir: Path,
        niceness: int = 0,
        standby: bool = True,
        reuse: bool = True,
        fork: bool = True,
        entry: Entry = train_entry,
        child_env: dict[str, str] | None = None,
        reap_later: bool = False,
    ):
        """niceness > 0 starts each training child that much below this process's CPU priority. `standby`: start
        each run's child while the previous run trains; `reuse`: on the CPU, the child of a run that ended ok
        trains the next run too; `fork`: on a Linux CPU, a fork server imports TensorFlow once and forks each
        run's child (and the probe's), taking precedence over both. `entry`: what a child runs for a run.
        `child_env`: variables each run's spawned child sets before its entry runs, so before TensorFlow is
        imported (the parallel launcher's CUDA_VISIBLE_DEVICES: core/sweep/parallel_launcher.py). `reap_later`: a
        run's process is not waited for when its run is over, on a GPU too (the parallel launcher waits for it
        only before its GPU's next run, so the other runs' events keep flowing meanwhile)."""
        self.spec = spec
        self.child_env = dict(child_env or {})
        self.reap_later = reap_later
        self.standby = standby
        self.reuse = reuse
        self.fork = fork
        self.entry = entry
        self.niceness = max(0, int(niceness))
        self.warnings: list[str] = []
        self.environment: dict[str, Any] | None = None
        self._log_dir = log_dir
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._should_stop: Callable[[], bool] = lambda: False
        self._zygote: ForkServer | None = None  # the fork server, while the sweep uses one
        self._owns_zygote = True  # False: another launcher's server (adopt), which that launcher ends
        self._standby: _RunChild | None = None  # the next run's child, getting ready
        self._ahead: _RunChild | None = None  # the next run's forked child, preparing its run (prepare_ahead)
        self._idle: _RunChild | None = None  # the child of a run that ended ok, waiting to be reused
        self._first: RunSpec | None = None  # the run the probe child will take (prepare)
        self._exiting: list[multiprocessing.process.BaseProcess] = []  # children whose run ended, still exiting
        self._child: multiprocessing.process.BaseProcess | None = None  # the probe's or the running run's
        self._reuse_running = False  # the running run's child may train the next run (if this one ends ok)

    def adopt(self, base: LocalLauncher) -> None:
        """Train where `base` probed: take its environment and fork this launcher's children from its fork server
        (if it has one), which `base` keeps, closes and kills (the parallel launcher's slots share one server)."""
        self.environment = base.environment
        with self._lock:
            self._zygote, self._owns_zygote = base._zygote, False

    def _track(self, child: multiprocessing.process.BaseProcess | None) -> None:
        with self._lock:
            self._child = child

    # ------------------------------------------------------------------ before the runs

    def prepare(self, runs: list[RunSpec], should_stop: Callable[[], bool]) -> None:
        """Get the first run's child ready during the probe. Where the runs may train on the CPU (no GPU in
        sight) and children are reused, the probe child itself becomes the first run's child (one TensorFlow
        import fewer); otherwise a standby starts now, importing TensorFlow while the probe checks the spec."""
        self._should_stop = should_stop
        if not runs or self._standby is not None or self.environment is not None or self._zygote is not None:
            return
        if self._forks(runs[0]) and not should_stop():
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

    def probe(self, should_stop: Callable[[], bool], data: Any) -> dict[str, Any] | None:
        """The probe: in a forked child, in the first run's child, or in a child of its own."""
        self._should_stop = should_stop
        if self._zygote is not None:
            environment = self._probe_forked(data)
        elif self._first is not None:
            environment = self._probe_first_child(self._first, data)
        else:
            environment = self._probe_alone(data)
        self.environment = environment
        if getattr(self.spec, "prepare_ahead", False) and self._zygote is None and not should_stop():
            self.warnings.append(
                "prepare_ahead: runs are not forked from a fork server here (a GPU, not Linux, or fresh or reused "
                "children), so no run is prepared ahead; each run is built when its turn comes"
            )
        return environment

    def _probe_alone(self, data: Any) -> dict[str, Any] | None:
        return _probe(
            self._ctx,
            self.spec,
            self._log_dir / "probe.log",
            check=True,
            data=data,
            should_stop=self._should_stop,
            track=self._track,
        )

    def _probe_forked(self, data: Any) -> dict[str, Any] | None:
        """The probe in a child forked from the server: its environment (None if stopped first); SpecError if
        the spec is bad. If the server died getting ready, the probe runs in a child of its own and the runs
        get children of their own; if the runs turn out not to train on the CPU, the server is closed."""
        zygote = self._zygote
        assert zygote is not None
        log_path = self._log_dir / "probe.log"
        try:
            if not zygote.wait_ready(self._should_stop):
                raise ForkServerGone
            process, events = zygote.fork("probe", log_path, spec=self.spec.to_dict())
        except ForkServerGone:
            self._close_zygote()
            if self._should_stop():
                return None
            if zygote.process.exitcode not in (None, 0):  # why, for the log; the probe below says it to the user
                self.warnings.append(
                    f"the fork server failed ({_log_tail(self._log_dir / 'fork-server.log')}); "
                    "each run starts in a process of its own"
                )
            return self._probe_alone(data)
        self._track(process)
        try:
            environment = _probe_environment(_probe_answer(process, events, log_path, self._should_stop))
        finally:
            self._track(None)
            events.close()
            _reap(process)
        if environment is not None and not trains_on_cpu(environment):
            self._close_zygote()
        return environment

    def _probe_first_child(self, run: RunSpec, data: Any) -> dict[str, Any] | None:
        """The probe in the child that will train `run`: its environment (None if stopped first); SpecError if
        the spec is bad. On the CPU the child then waits for `run` as its standby; elsewhere it exits."""
        child = self._launch(run, probe=True, data=data)
        self._track(child.process)
        try:
            environment = _probe_environment(
                _probe_answer(child.process, child.events, child.log_path, self._should_stop)
            )
        except BaseException:
            _end_process(child.process)
            raise
        finally:
            self._track(None)
        if environment is None or self._should_stop():
            _end_process(child.process)
        elif trains_on_cpu(environment):
            with self._lock:
                self._standby = child
        else:  # a GPU after all: the child exits after its answer; the first run gets a fresh one
            child.release()
            _reap(child.process)
        return environment

    # ------------------------------------------------------------------ a run

    def start(self, run: RunSpec, next_run: RunSpec | None) -> _RunChild:
        """Run `run` in the child that trained the previous run if it ended ok and may be reused (CPU), else in
        its forked or standby child if one is ready for it, else in a fresh one."""
        forked, note = self._take_ahead(run)
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
        child.kind, child.note = kind, note
        with self._lock:
            self._child, self._reuse_running = child.process, reuse
        if self._should_stop():
            child.stop()
        if kind != REUSED:
            child.request(kind, reuse=reuse)
        return child

    def started(self, handle: _RunChild, next_run: RunSpec | None) -> None:
        """Once this run starts training (its model built), the next run's child starts, importing TensorFlow
        and loading the data at the lowest CPU priority, with the cycles training leaves; not when this child
        will train the next run itself (if this run ends ok). With prepare_ahead the next run's forked child
        builds, traces and compiles its run meanwhile."""
        if next_run is None:
            return
        if not self._reuse_running and self._zygote is None and self._can_stand_by(next_run):
            standby = self._launch(next_run)
            with self._lock:
                self._standby = standby
        if self._prepares_ahead():
            ahead = self._fork_child(next_run, ahead=True)
            with self._lock:
                self._ahead = ahead

    def finished(self, handle: _RunChild, status: str | None, stopping: bool) -> None:
        """Keep a child whose run ended ok for the next run (reuse), else let it go; after a run that did not end
        ok (or aborted: the scheduler stopped it), the spares are let go and the next run starts afresh."""
        keep = self._reuse_running and status == "ok" and not stopping
        with self._lock:
            self._child, self._reuse_running = None, False
            if keep:
                self._idle = handle
        if not keep:
            handle.release()  # a child kept for reuse waits on it after a run that ended ok: now it exits
            if status is not None and (self._on_cpu() or self.reap_later):
                # Its run is over and recorded: on a CPU the next run need not wait for this process to tear
                # TensorFlow down (memory figures are per process). On a GPU it must: its memory is still held
                # (with reap_later, the parallel launcher waits for it before that GPU's next run instead).
                self._exiting.append(handle.process)
            else:
                _reap(handle.process)
        if status not in ("ok", "aborted"):
            self.discard_standby()  # whatever went wrong, the next run starts in a fresh process
            self._discard_ahead()

    # ------------------------------------------------------------------ the end

    def kill(self) -> None:
        """Kill the running child (a run or the probe), every spare and the fork server (its children die with it)."""
        with self._lock:
            if self._child is not None and self._child.is_alive():
                self._child.kill()
            for spare in (self._standby, self._idle, self._ahead):
                if spare is not None and spare.process.is_alive():
                    spare.process.kill()
            if self._zygote is not None and self._owns_zygote:
                self._zygote.kill()

    def close(self) -> None:
        """Let every child that has not trained go (a standby, one preparing ahead), retire an idle one, reap
        those exiting and close the fork server."""
        self.discard_standby()
        self._discard_ahead()
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            self._retire(idle)
        while self._exiting:
            _reap(self._exiting.pop())
        self._close_zygote()

    def discard_standby(self) -> None:
        """End a standby child that will not be asked for its run (it has not trained)."""
        with self._lock:
            child, self._standby = self._standby, None
        if child is not None:
            _end_process(child.process)

    # ------------------------------------------------------------------ helpers

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
            and not self._should_stop()
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
        if self._should_stop():
            return None, ""
        if answer is None:
            why = _death_message(child.process.exitcode, child.log_path)
        else:
            why = str(answer.get("message", ""))
        return None, f"run {run.index} could not be prepared ahead ({why}); it starts in a process forked now"

    def _prepared_answer(self, child: _RunChild) -> dict[str, Any] | None:
        """Wait for a child preparing ahead to say PREPARED or PREPARE_FAILED; None if it died or a stop came."""
        while not self._should_stop():
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
        return self.fork and fork_possible() and not _gpu_possible(self.spec.device) and self.entry(run)[0] is run_main

    def _close_zygote(self) -> None:
        """End the fork server (it kills and reaps whatever it forked that still runs)."""
        with self._lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None and self._owns_zygote:
            zygote.close()

    def _reuses(self, run: RunSpec) -> bool:
        """Whether `run`'s child may train the next run after it (if it ends ok): reuse on, the runs train on
        the CPU (a GPU allocator's pools would carry one run's memory into the next run's figures), and a
        child that trains sweep runs (run_main)."""
        return self.reuse and self._on_cpu() and self.entry(run)[0] is run_main

    def _retire(self, child: _RunChild) -> None:
        """Let an idle reused child go: it exits when its request pipe closes (reaped at the sweep's end)."""
        child.release()
        self._exiting.append(child.process)

    def _on_cpu(self) -> bool:
        """The runs train on the CPU (as the probe found), so a finished child's memory is no other's concern."""
        return trains_on_cpu(self.environment)

    def _can_stand_by(self, run: RunSpec) -> bool:
        """A child may be started ahead of `run`: standby on, no stop, and a child that waits to be asked."""
        return self.standby and not self._should_stop() and self.entry(run)[0] is run_main

    def _log_path(self, run: RunSpec) -> Path:
        return self._log_dir / f"run_{run.index:03d}.log"

    def _launch(self, run: RunSpec, probe: bool = False, data: Any = None) -> _RunChild:
        """Start the child for `run`; a child whose entry is run_main then waits for `request`. With `probe`,
        the child first answers as the probe (probe_run_main), then waits for `request` likewise."""
        log_path = self._log_path(run)
        receiver, sender = self._ctx.Pipe(duplex=False)
        child_stop = self._ctx.Event()
        target, args = self.entry(run)
        go_receiver = go_sender = None
        extra: tuple = ()
        if target is run_main:
            go_receiver, go_sender = self._ctx.Pipe(duplex=False)
            extra = (go_receiver, time.time())  # launched_at: the child's process start is timed from here
        if probe:
            target, args, extra = probe_run_main, (self.spec.to_dict(), *args), (*extra, data)
        args = (*args, sender, child_stop, str(log_path), self.niceness, *extra)
        if self.child_env:
            target, args = with_environment, (self.child_env, target, *args)
        process = self._ctx.Process(
            target=target,
            args=args,
            daemon=True,
            name=f"batchlab-run-{run.index}",
        )
        start_child(process)
        sender.close()  # the child holds the only write end, so its death shows as EOF here
        if go_receiver is not None:
            go_receiver.close()
        return _RunChild(run, process, receiver, go_sender, child_stop, log_path, PROBE if probe else STANDBY)
