"""The Ray launcher: each run of a sweep is a Ray task on a cluster (`--ray auto|local|ray://host:port`).

Parent side: never imports TensorFlow, and Ray only when a sweep asks for it (core/sweep/ray_cluster.py:
connecting, what each run asks for, how many runs the cluster holds at once = `slots`). The runs train in
Ray worker processes (core/training/ray_worker.py); the probe checks the spec there too.

Events: every run's worker puts its events into the sweep's mailbox actor (core/sweep/ray_mailbox.py) in
batches; one pump thread here takes them all and hands them to each run's handle, in order, so the scheduler
(core/sweep/runner.py) and the one writer see the same events as from a local child, plus where the run
trained (`placement`: ray_node, ray_node_ip, ray_host, recorded with the run).

Stop: the run hears it at its worker's next send and ends after its current step (interrupted, measurements
kept); a run whose task has not started yet is cancelled. A second stop (kill) cancels the tasks by force
(their workers are killed); the sweep's end cancels whatever is left. A worker or node lost mid-run: the
run's task fails, the run is `crashed` with what it streamed so far and a one-line reason naming its node,
and the sweep goes on.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep import ray_cluster
from batchlab.core.sweep.probe import PROBE_TIMEOUT_SECONDS, _probe_environment
from batchlab.core.sweep.processes import POLL_SECONDS
from batchlab.core.sweep.ray_mailbox import Mailbox
from batchlab.core.training.ray_worker import RAY_HELLO, ray_probe, ray_train, ray_warm

TAKE_WAIT_SECONDS = 0.2  # the pump waits this long for events before it looks at the tasks again
RAY_KIND = "ray"  # what a handle was (the run's own `child` field says fresh or reused worker)
MESSAGE_CHARS = 240  # a Ray error's first line is cut here (the death message is one line)


def _first_line(error: BaseException) -> str:
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    text = text[:MESSAGE_CHARS]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class MailboxLost(Exception):
    """The sweep's mailbox actor (or the connection to the cluster) is gone: no run's events can come back."""


class RayRun:
    """One run as a Ray task: its events (handed over by the launcher's pump), stop, kill and its end."""

    def __init__(self, run: RunSpec, ref: Any, launcher: RayLauncher):
        self.run, self.ref, self.kind, self.note = run, ref, RAY_KIND, ""
        self.placement: dict[str, Any] = {}  # where it trains (filled by the worker's first message)
        self.error: BaseException | None = None  # why its task failed, once it ended
        self.submitted_at = time.monotonic()  # here, when its task was submitted
        self.heard_at = math.nan  # here, when its worker's first message arrived (Ray's own overhead: the gap)
        self._launcher = launcher
        self._events: collections.deque[dict[str, Any]] = collections.deque()
        self._ready = threading.Condition()
        self._done = False  # its task ended (and every event it sent before was handed over)

    # ---------------------------------------------------------------- the RunHandle interface

    def poll(self, timeout: float) -> bool:
        with self._ready:
            if not self._events and not self._done and timeout > 0:
                self._ready.wait_for(lambda: self._events or self._done, timeout)
            return bool(self._events)

    def recv(self) -> dict[str, Any]:
        with self._ready:
            self._ready.wait_for(lambda: self._events or self._done)
            if not self._events:
                raise EOFError(f"run {self.run.index}'s Ray task ended")
            return self._events.popleft()

    def stop(self) -> None:
        self._launcher.stop_run(self)

    def kill(self) -> None:
        self._launcher.cancel(self.ref, force=True)

    def is_alive(self) -> bool:
        with self._ready:
            return not self._done

    def death_message(self) -> str:
        """Why the run ended without run_ended, naming the node it trained on (one line)."""
        where = self.where()
        error = self.error
        if error is None:
            return f"its Ray task on {where} ended without reporting the run's end"
        name = type(error).__name__
        if isinstance(error, MailboxLost):
            return f"the sweep's event mailbox on the Ray cluster was lost while it trained on {where} ({error})"
        if name == "TaskCancelledError":
            return f"its Ray task on {where} was cancelled"
        if "NodeDied" in name or "RayletDied" in name:
            return f"Ray {where} was lost while training it ({_first_line(error)})"
        return f"its Ray worker on {where} was lost mid-run ({_first_line(error)})"

    # ---------------------------------------------------------------- the pump's side

    def where(self) -> str:
        if not self.placement:
            return "a node not known yet (the run had not started)"
        p = self.placement
        return f"node {p.get('ray_node_ip', '?')} ({p.get('ray_host', '?')}, id {str(p.get('ray_node', '?'))[:8]})"

    @property
    def started(self) -> bool:
        return bool(self.placement)

    @property
    def refs(self) -> list[Any]:
        """Its Ray tasks (one; a multi-worker run's are its workers', core/sweep/ray_workers.py)."""
        return [self.ref]

    def tasks_ended(self, ended: set[Any], outcome: Callable[[Any], tuple[Any, BaseException | None]]) -> None:
        """The pump saw the tasks in `ended` end (`outcome(ref)`: what one returned, or why it failed)."""
        if self.ref in ended:
            self.end(outcome(self.ref)[1])

    def deliver(self, event: dict[str, Any]) -> None:
        if event.get("type") == RAY_HELLO:
            self.heard_at = time.monotonic()
            self.placement = {k: v for k, v in event.items() if k.startswith("ray_")}
            return
        with self._ready:
            self._events.append(event)
            self._ready.notify_all()

    def end(self, error: BaseException | None) -> None:
        with self._ready:
            self.error, self._done = error, True
            self._ready.notify_all()


class RayLauncher:
    """Runs as Ray tasks, `slots` at once (as many as the cluster's live nodes hold); see the module docstring."""

    def __init__(self, spec: SweepSpec, log_dir: Path):
        self.spec = spec
        self.slots = 1  # until connected: how many runs the cluster holds at once
        self.warnings: list[str] = []
        self.environment: dict[str, Any] | None = None
        self.resources: ray_cluster.RunResources | None = None
        self._log_dir = log_dir
        self._ray: Any = None
        self._owns = False  # this launcher connected (or started the local instance): it lets go at the end
        self._mailbox: Any = None
        self._remote: dict[str, Any] = {}
        self._runs: dict[int, RayRun] = {}  # by run index, while their task may still send
        self.submitted: list[RayRun] = []  # every run's handle, in the order submitted (tests, bench/bench_ray.py)
        self._probe_ref: Any = None
        self._warming: list[Any] = []  # tasks getting other slots' workers ready during the probe
        self._run_count = 0
        self._sweep = False  # prepare() was called: runs follow the probe (else a check alone, e.g. max-batch's)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pump: threading.Thread | None = None

    # ------------------------------------------------------------------ before the runs

    def prepare(self, runs: list[RunSpec], should_stop: Callable[[], bool]) -> None:
        """Connect to the cluster and size the runs (SpecError in one line if Ray is missing or unreachable)."""
        self._run_count, self._sweep = len(runs), True
        self._connect()

    def _connect(self) -> None:
        if self._ray is not None:
            return
        self._ray, self._owns = ray_cluster.connect(self.spec.ray)
        ray = self._ray
        try:
            self.resources = ray_cluster.run_resources(ray, self.spec)
            self.slots = self.resources.slots
            # no retries: a run whose worker was lost is recorded crashed, never trained twice into one file
            options = {**self.resources.options(), "max_retries": 0}
            env = ray_cluster.runtime_env(self.spec, shared=not self._owns)
            if env is not None:
                options["runtime_env"] = env
            self._remote = {
                name: ray.remote(**options)(function)
                for name, function in (("probe", ray_probe), ("warm", ray_warm), ("train", ray_train))
            }
            self._remote.update(self._more_remotes(ray, options))
            self._mailbox = ray.remote(**ray_cluster.mailbox_options(ray))(Mailbox).remote()
        except BaseException:
            self.close()
            raise
        if not self.resources.gpus and self.spec.tf_threads == 0:
            self.warnings.append(
                f"tf_threads 0: each run uses TensorFlow's default threads (every core of its node) while Ray "
                f"counts {self.resources.cpus:g} CPU per run, so runs on one node share cores; set tf_threads to "
                "ray_cpus for runs that keep to their share"
            )
        self._pump = threading.Thread(target=self._pump_events, name="batchlab-ray-pump", daemon=True)
        self._pump.start()

    def _more_remotes(self, ray: Any, options: dict[str, Any]) -> dict[str, Any]:
        """Remote functions a subclass adds to probe, warm and train (built with the runs' `options`)."""
        return {}

    def _standbys(self) -> int:
        """How many workers to get ready during the probe: the other slots' (not on GPUs, where a run's worker
        is its own, so a readied one would exit unused)."""
        assert self.resources is not None
        if self.resources.gpus or not self._sweep:
            return 0
        return min(self.slots, self._run_count or self.slots) - 1

    def probe(self, should_stop: Callable[[], bool], data: Any) -> dict[str, Any] | None:
        """The probe as a Ray task with a run's resources: the spec checked where the runs train (the data read
        there); the environment of that worker, with the cluster described (None if stopped first). A probe
        with no sweep after it (`prepare` never called: the max-batch search's check) lets go of the cluster
        at once, since nothing will close this launcher."""
        try:
            return self._probe(should_stop)
        finally:
            if not self._sweep:
                self.close()

    def _probe(self, should_stop: Callable[[], bool]) -> dict[str, Any] | None:
        self._connect()
        ray = self._ray
        assert self.resources is not None
        self._probe_ref = ref = self._remote["probe"].remote(self.spec.to_dict(), time.time())
        # While the probe imports TensorFlow in one worker, the workers of the other slots the runs will fill
        # import it too (and load the data), so the second run does not wait for an import of its own.
        warm = self._standbys()
        self._warming = [self._remote["warm"].remote(self.spec.to_dict(), time.time()) for _ in range(max(0, warm))]
        deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
        try:
            while not ray.wait([ref], timeout=POLL_SECONDS)[0]:
                if should_stop():
                    self.cancel(ref, force=True)
                    return None
                if time.monotonic() > deadline:
                    self.cancel(ref, force=True)
                    raise SpecError(
                        "ray",
                        f"the Ray cluster did not run the probe in {PROBE_TIMEOUT_SECONDS:.0f} s (each run asks "
                        f"for {self._ask()})",
                    )
            try:
                message = ray.get(ref)
            except Exception as e:  # its worker died or the task failed: one line
                raise SpecError("setup", f"the probe's Ray task failed ({_first_line(e)})") from None
        finally:
            self._probe_ref = None
        environment = _probe_environment(message)
        assert environment is not None
        assert self.resources is not None
        if not self._wait_for_standbys(should_stop, deadline):
            return None
        environment["ray_cluster"] = ray_cluster.cluster_description(ray, self.spec.ray, self.resources)
        self.environment = environment
        return environment

    def _wait_for_standbys(self, should_stop: Callable[[], bool], deadline: float) -> bool:
        """Wait until the standbys are ready (they import as the probe does, so rarely long): a run submitted
        while one still holds its slot would make Ray start yet another worker, which imports again.
        False if stopped first."""
        ray, pending = self._ray, list(self._warming)
        while pending and time.monotonic() < deadline:
            if should_stop():
                return False
            pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_SECONDS)[1]
        return True

    def _ask(self) -> str:
        r = self.resources
        return "?" if r is None else (f"{r.gpus} GPU" if r.gpus else f"{r.cpus:g} CPU")

    # ------------------------------------------------------------------ a run

    def start(self, run: RunSpec, next_run: RunSpec | None) -> RayRun:
        """Submit `run` as a Ray task now (it waits in Ray's queue if no node is free)."""
        self._connect()
        ref = self._remote["train"].remote(run.to_dict(), self._mailbox, time.time())
        handle = RayRun(run, ref, self)
        with self._lock:
            self._runs[run.index] = handle
            self.submitted.append(handle)
        return handle

    def started(self, handle: RayRun, next_run: RunSpec | None) -> None:
        """Nothing to get ready: the next run's worker is Ray's to find."""

    def finished(self, handle: RayRun, status: str | None, stopping: bool) -> None:
        """The run is over: a task that ended without run_ended and still runs (killed after the grace period)
        is cancelled by force."""
        with self._lock:
            self._runs.pop(handle.run.index, None)
        if status is None and handle.is_alive():
            self.cancel(handle.ref, force=True)

    def stop_run(self, handle: RayRun) -> None:
        """End the run after its current step (its worker hears it at its next send); a task not started yet
        is taken out of Ray's queue."""
        if self._mailbox is None:
            return
        try:
            self._mailbox.stop.remote(handle.run.index)
        except Exception:  # the cluster is gone: the run's end says so
            pass
        if not handle.started:
            for ref in handle.refs:
                self.cancel(ref, force=False)

    def cancel(self, ref: Any, force: bool) -> None:
        """Cancel a task (force: kill its worker); nothing if it ended or the cluster is gone."""
        try:
            self._ray.cancel(ref, force=force)
        except Exception:
            pass

    # ------------------------------------------------------------------ the events

    def _pump_events(self) -> None:
        """Hand every run's events to its handle, and end the handles whose task ended: a task seen ended
        before a take has had every event it sent handed over with that take."""
        ray = self._ray
        while not self._closing.is_set():
            with self._lock:
                runs = [r for r in self._runs.values() if r.is_alive()]
            refs = [ref for r in runs for ref in r.refs]
            try:
                ended = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) if refs else set()
                batch = ray.get(self._mailbox.take.remote(TAKE_WAIT_SECONDS))
            except Exception as e:  # the mailbox or the cluster is gone: every run in flight is lost
                for run in runs:
                    run.end(MailboxLost(_first_line(e)))
                if not self._closing.is_set():
                    self._closing.wait(TAKE_WAIT_SECONDS)
                continue
            with self._lock:
                by_index = dict(self._runs)
            for index, event in batch:
                handle = by_index.get(index)
                if handle is not None:
                    handle.deliver(event)
            for run in runs:
                run.tasks_ended(ended, self._outcome)

    def _outcome(self, ref: Any) -> tuple[Any, BaseException | None]:
        """What an ended task returned, or the exception it raised (its worker or node lost, cancelled)."""
        try:
            return self._ray.get(ref, timeout=0), None
        except Exception as e:
            return None, e

    # ------------------------------------------------------------------ the end

    def kill(self) -> None:
        """Cancel every task by force (their workers are killed), the probe's too."""
        with self._lock:
            refs = [ref for r in self._runs.values() if r.is_alive() for ref in r.refs]
        if self._probe_ref is not None:
            refs.append(self._probe_ref)
        refs += self._warming
        for ref in refs:
            self.cancel(ref, force=True)
        self._warming = []

    def close(self) -> None:
        """Cancel the tasks still running, stop the pump, end the mailbox, and let go of the cluster if this
        launcher connected to it (a local instance it started shuts down)."""
        if self._ray is None:
            return
        self.kill()
        self._closing.set()
        if self._pump is not None:
            self._pump.join()
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            run.end(run.error)
        ray, self._ray = self._ray, None
        if self._mailbox is not None:
            try:
                ray.kill(self._mailbox)
            except Exception:
                pass
            self._mailbox = None
        if self._owns:
            ray.shutdown()
