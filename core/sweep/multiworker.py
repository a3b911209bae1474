"""Multi-worker runs (`workers` W > 1): each run trains in W processes joined by MultiWorkerMirroredStrategy,
one replica of the global batch in each (core/training/workers.py, replication.py; docs/scaling.md).

- TF_CONFIG: `tf_config(addresses, i)` (core/training/workers.py) is the one place it is built, from the
  workers' "host:port" addresses (worker 0 is the chief). Here the addresses are this machine's free ports
  (`local_addresses`); with `--ray` each worker finds a free port on the node Ray placed it on
  (core/sweep/ray_workers.py).
- Events: only the chief's reach the scheduler (and the one writer); the other workers train the same steps,
  their events are drained and dropped, except their error lines (a traceback), which go to the run's log
  named by the worker; their output is kept in the sweep's log folder (run_NNN.workerK.log).
- A lost worker: a worker that dies, or ends its run with an error, while the chief trains would leave the
  chief waiting in its next all-reduce (on one host TensorFlow notices the closed connection at once; across
  hosts only the collective timeout, replication.COLLECTIVE_TIMEOUT_S, ends the wait). The run's handle watches
  every worker: the chief gets WORKER_LOST_GRACE_S to end by itself (sending the steps it holds), then it is
  killed; either way the run ends `crashed` with one line naming the lost worker, and every process of the run
  is ended. A stop asks the chief only (its run_ended says "interrupted"); the other workers are then ended.

No TensorFlow here.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import LOG, RUN_ENDED
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep.local_launcher import Entry, train_entry
from batchlab.core.sweep.probe import _probe
from batchlab.core.sweep.processes import POLL_SECONDS, PUMP_WAIT_SECONDS, _death_message, _reap, start_child
from batchlab.core.training.startup import FRESH
from batchlab.core.training.workers import LOCALHOST, free_ports, tf_config, worker_main

# After a worker is lost, how long the chief may take to end by itself (its all-reduce fails at once when the
# lost worker was on this host) before it is killed: long enough to send the steps it holds (every 0.25 s).
WORKER_LOST_GRACE_S = 10.0
LOST_CHECK_S = 1.0  # how long a chief's run_ended "error" waits to be explained by a lost worker (WorkerGroup.recv)


def local_addresses(count: int) -> list[str]:
    """Addresses for `count` workers on this machine: localhost and a free port each."""
    return [f"{LOCALHOST}:{port}" for port in free_ports(count)]


def worker_devices(spec: SweepSpec, environment: dict[str, Any] | None, workers: int) -> list[str | None]:
    """Each local worker's CUDA_VISIBLE_DEVICES: GPU i for worker i where the probe saw a GPU per worker; None
    (the run's device: the CPU) on a CPU or with device cpu. SpecError where some, but too few, GPUs are seen."""
    gpus = [str(d.get("name", "")) for d in (environment or {}).get("devices", []) if d.get("kind") == "GPU"]
    if spec.device == "cpu" or not gpus:
        return [None] * workers
    if len(gpus) < workers:
        raise SpecError(
            "workers",
            f"{workers} workers on this machine need {workers} GPUs (one each); TensorFlow sees {len(gpus)}; "
            f"use device cpu or at most {len(gpus)} workers",
        )
    return [g.partition(":")[2] for g in gpus[:workers]]


@dataclass
class _Worker:
    """One worker process of a run: its index, address, process, event pipe and log."""

    index: int
    address: str
    process: multiprocessing.process.BaseProcess
    events: Any  # the read end of its event pipe
    log_path: Path
    ended: dict[str, Any] | None = None  # its run_ended, once it came
    closed: bool = False  # its pipe is at end-of-file


class WorkerGroup:
    """The RunHandle of a multi-worker run (core/sweep/launcher.py): the chief's events, every worker's life."""

    def __init__(self, run: RunSpec, workers: list[_Worker], stop_flag: Any):
        self.run = run
        self.kind = FRESH
        self.note = ""
        self.placement = {"worker_addresses": ",".join(w.address for w in workers)}
        self.workers = workers
        self._stop_flag = stop_flag
        self._lock = threading.Lock()
        self._lost = ""  # why the run lost a worker, in one line ("" while none is lost)
        self._lost_at = 0.0  # monotonic s when it was found
        self._chief_status: str | None = None  # the chief's run_ended status, once it came
        self._relayed: list[dict[str, Any]] = []  # the other workers' error lines, for the run's log
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name=f"batchlab-workers-{run.index}", daemon=True)
        self._watcher.start()

    @property
    def chief(self) -> _Worker:
        return self.workers[0]

    # ---------------------------------------------------------------- the RunHandle interface

    def poll(self, timeout: float) -> bool:
        with self._lock:
            if self._relayed:
                return True
        return self.chief.events.poll(timeout)

    def recv(self) -> dict[str, Any]:
        """The other workers' error lines first (named), then the chief's next event; its run_ended says
        `crashed`, naming the worker, when a worker was lost."""
        with self._lock:
            if self._relayed:
                return self._relayed.pop(0)
        event = self.chief.events.recv()
        if event.get("type") != RUN_ENDED:
            return event
        lost = self._find_lost() if event.get("status") == "error" else ""
        with self._lock:
            self._chief_status = str(event.get("status"))
        if lost:  # the chief's error was its all-reduce failing: the run crashed because a worker was lost
            event = {**event, "status": "crashed", "message": f"{lost}; measurements so far are kept"}
        if event.get("status") != "ok":
            self._end_others()
        return event

    def stop(self) -> None:
        """Ask the chief to stop after its step (it sends run_ended "interrupted"); the others are ended then."""
        self._stop_flag.set()

    def kill(self) -> None:
        for w in self.workers:
            if w.process.is_alive():
                w.process.kill()

    def is_alive(self) -> bool:
        return self.chief.process.is_alive()

    def death_message(self) -> str:
        with self._lock:
            lost = self._lost
        if lost:
            return f"{lost}; the run's other workers were ended"
        chief = self.chief
        return f"{self._name(chief)} (the chief): {_death_message(chief.process.exitcode, chief.log_path)}"

    # ---------------------------------------------------------------- the launcher's own

    def close(self, status: str | None) -> None:
        """The run is over (`status`; None: it ended without run_ended): end what still runs, reap every worker."""
        self._done.set()
        if status != "ok":
            self.kill()
        for w in self.workers:
            _reap(w.process)
            if w is not self.chief:
                w.events.close()
        self._watcher.join()

    def _name(self, w: _Worker) -> str:
        return f"worker {w.index} of {len(self.workers)} ({w.address})"

    def _find_lost(self) -> str:
        """Why a worker was lost ("" if none was), looking for up to LOST_CHECK_S: a worker on this host that died
        has closed its connections, which failed the chief's step, a moment before its exit can be seen."""
        deadline = time.monotonic() + LOST_CHECK_S
        while True:
            self._scan()
            with self._lock:
                lost = self._lost
            others_alive = any(w.process.exitcode is None for w in self.workers[1:])
            if lost or not others_alive or time.monotonic() > deadline:
                return lost
            time.sleep(POLL_SECONDS)

    def _end_others(self) -> None:
        for w in self.workers[1:]:
            if w.process.is_alive():
                w.process.kill()

    def _watch(self) -> None:
        """Drain the other workers' events and watch every worker's life until the run is over."""
        while not self._done.is_set():
            others = [w.events for w in self.workers[1:] if not w.closed]
            alive = [w.process.sentinel for w in self.workers if w.process.exitcode is None]
            if not others and not alive:
                return
            wait([*others, *alive], timeout=PUMP_WAIT_SECONDS)
            self._scan()
            with self._lock:
                lost, since, chief_status = self._lost, self._lost_at, self._chief_status
            if chief_status is None and not self.chief.process.is_alive():
                self._end_others()  # the chief died: the others would wait for it in their next all-reduce
            elif lost and chief_status is None and time.monotonic() - since > WORKER_LOST_GRACE_S:
                self.kill()  # the chief did not end by itself: it waits in an all-reduce

    def _scan(self) -> None:
        """Read what the other workers sent (their run_ended kept, the rest dropped) and find a lost worker."""
        with self._lock:
            for w in self.workers[1:]:
                exited = w.process.exitcode is not None  # before the drain: all it sent is in the pipe by now
                try:
                    while not w.closed and w.events.poll(0):
                        event = w.events.recv()
                        if event.get("type") == RUN_ENDED:
                            w.ended = event
                        elif event.get("type") == LOG and event.get("level") == "error":
                            text = str(event.get("message", ""))
                            named = text if f"worker {w.index} of" in text else f"{self._name(w)}: {text}"
                            self._relayed.append({**event, "message": named})
                except (EOFError, OSError):
                    w.closed = True
                if self._lost or self._chief_status is not None:
                    continue
                why = self._why_lost(w, exited)
                if why:
                    self._lost, self._lost_at = why, time.monotonic()

    def _why_lost(self, w: _Worker, exited: bool) -> str:
        """Why worker `w` is lost while the chief trains ("" if it is not): it ended its run with an error (or
        out of memory), or its process had `exited` without run_ended."""
        name = self._name(w)
        if w.ended is not None:
            status, message = str(w.ended.get("status")), str(w.ended.get("message") or "")
            if status in ("ok", "diverged"):  # the chief trains the same steps: it ends so too, on its own
                return ""
            named = message.find(f"worker {w.index} of")  # it said which worker it is (workers.py)
            return message[named:] if named >= 0 else f"{name} ended with {status}: {message}"
        if exited:
            return f"{name} was lost mid-run: {_death_message(w.process.exitcode, w.log_path)}"
        return ""


class MultiWorkerLauncher:
    """Each run in `spec.workers` fresh processes on this machine, one run at a time (slots = 1)."""

    slots = 1

    def __init__(
        self,
        spec: SweepSpec,
        log_dir: Path,
        niceness: int = 0,
        entry: Entry = train_entry,
        addresses: Callable[[int], list[str]] = local_addresses,
        **_local: Any,
    ):
        """`addresses(W)`: where the run's W workers listen ("host:port", the chief first); the local launcher's
        other options (standby, reuse, fork) do not apply: a worker joins its cluster before TensorFlow starts."""
        if entry is not train_entry:
            raise SpecError(
                "workers", f"{spec.workers} is not allowed here: this command trains in one process; use workers 1"
            )
        self.spec = spec
        self.workers = int(spec.workers)
        self.niceness = max(0, int(niceness))
        self.addresses = addresses
        self.warnings: list[str] = []
        self.environment: dict[str, Any] | None = None
        self._log_dir = Path(log_dir)
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._visible: list[str | None] = [None] * self.workers
        self._running: WorkerGroup | None = None
        self._probe_child: multiprocessing.process.BaseProcess | None = None

    def prepare(self, runs: list[RunSpec], should_stop: Callable[[], bool]) -> None:
        """Nothing ahead: each run's workers start fresh when its turn comes."""

    def probe(self, should_stop: Callable[[], bool], data: Any) -> dict[str, Any] | None:
        """The probe in a child of its own (one process: the model is checked without the cluster); then each
        local worker's GPU (worker_devices)."""
        environment = _probe(
            self._ctx, self.spec, self._log_dir / "probe.log", check=True, data=data, should_stop=should_stop,
            track=self._track,
        )  # fmt: skip
        if environment is not None:
            self._visible = worker_devices(self.spec, environment, self.workers)
        self.environment = environment
        return environment

    def _track(self, child: multiprocessing.process.BaseProcess | None) -> None:
        with self._lock:
            self._probe_child = child

    def start(self, run: RunSpec, next_run: RunSpec | None) -> WorkerGroup:
        """Start the run's workers (worker 0, the chief, first), each with its TF_CONFIG."""
        addresses = self.addresses(self.workers)
        stop_flag = self._ctx.Event()
        never = self._ctx.Event()  # the other workers are never asked to stop: they end with the chief
        workers = []
        for i, address in enumerate(addresses):
            suffix = "" if i == 0 else f".worker{i}"
            log_path = self._log_dir / f"run_{run.index:03d}{suffix}.log"
            receiver, sender = self._ctx.Pipe(duplex=False)
            process = self._ctx.Process(
                target=worker_main,
                args=(
                    tf_config(addresses, i), self._visible[i], run.to_dict(), sender, stop_flag if i == 0 else never,
                    str(log_path), self.niceness, time.time(),
                ),
                daemon=True,
                name=f"batchlab-run-{run.index}-worker-{i}",
            )  # fmt: skip
            start_child(process)
            sender.close()  # the worker holds the only write end, so its death shows as EOF here
            workers.append(_Worker(i, address, process, receiver, log_path))
        group = WorkerGroup(run, workers, stop_flag)
        group.keep = never  # alive as long as the workers: a flag let go before a worker unpickles it is gone
        with self._lock:
            self._running = group
        return group

    def started(self, handle: WorkerGroup, next_run: RunSpec | None) -> None:
        """Nothing to get ready: the next run's workers start when its turn comes."""

    def finished(self, handle: WorkerGroup, status: str | None, stopping: bool) -> None:
        with self._lock:
            self._running = None
        handle.close(status)

    def kill(self) -> None:
        """Kill the running run's workers and the probe."""
        with self._lock:
            group, probe = self._running, self._probe_child
        if group is not None:
            group.kill()
        if probe is not None and probe.is_alive():
            probe.kill()

    def close(self) -> None:
        """Nothing is kept between runs."""
