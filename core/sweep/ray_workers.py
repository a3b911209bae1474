"""A run's MultiWorkerMirroredStrategy workers placed by Ray (`--workers W --ray ADDRESS`; docs/scaling.md).

The Ray launcher (core/sweep/ray_launcher.py) with one change: a run is W Ray tasks instead of one, each
asking for a run's resources (one GPU, or ray_cpus CPUs), reserved together in a placement group of W
bundles. Strategy PACK: the workers share a node where one holds them all (the all-reduce stays on the node,
as in Ray Train's default) and spread over nodes only where none does; the group reserves all W at once, so
two runs never each hold half of what they need and wait for each other. (STRICT_SPREAD would put every worker
on a node of its own, and refuse a one-node cluster.) `slots` = the runs the cluster holds at W workers each.

Each worker (core/training/ray_worker.py `ray_train_worker`, a fresh process: the strategy is made before
TensorFlow's runtime starts) finds a free port on its node and says where it is; the sweep's mailbox gathers
the W addresses (core/sweep/ray_mailbox.py `join`) and each worker builds its TF_CONFIG from them with the
one `tf_config` (core/training/workers.py), as local workers do (core/sweep/multiworker.py). Only the chief's
(worker 0's) events come back, through the mailbox as any Ray run's do; the run records its workers'
addresses (worker_addresses) and nodes (ray_nodes), and the chief's node (ray_node, ray_node_ip, ray_host).

A lost worker (its task fails, or it ends its run with an error, while the chief trains): the chief's failed
all-reduce ends its run, which is recorded `crashed` naming the worker and its node, with what the chief
streamed kept; a chief that does not end by itself within multiworker.WORKER_LOST_GRACE_S is cancelled. The
other workers are cancelled when the run is over, and the sweep goes on. Stop asks the chief (it ends after
its step, interrupted), then the others are cancelled.
"""

from __future__ import annotations

import math
import time
from typing import Any

from batchlab.core.events import RUN_ENDED
from batchlab.core.spec import RunSpec
from batchlab.core.sweep.multiworker import WORKER_LOST_GRACE_S
from batchlab.core.sweep.ray_launcher import MailboxLost, RayLauncher, RayRun, _first_line
from batchlab.core.training.ray_worker import RAY_HELLO, ray_train_worker

PLACEMENT_STRATEGY = "PACK"  # see the module docstring
# How long the chief's run_ended "error" waits to be explained by a lost worker: the chief's all-reduce fails as
# the worker dies, a moment before Ray reports its task failed.
LOST_CHECK_S = 5.0
OTHERS_END_S = 10.0  # after the chief ended its run ok, how long the other workers may take to end by themselves
FRESH_WORKER_ENV = "BATCHLAB_RAY_WORKER"  # a runtime environment of their own: workers never share a process


class RayWorkersRun(RayRun):
    """One run as W Ray tasks: the chief's events (RayRun's), every worker's end watched."""

    def __init__(self, run: RunSpec, refs: list[Any], group: Any, launcher: RayWorkersLauncher):
        super().__init__(run, refs[0], launcher)
        self.group = group  # the run's placement group
        self.workers = len(refs)
        self._refs = refs
        self._where: dict[int, dict[str, Any]] = {}  # each worker's hello: its address and node
        self._seen_ended: set[int] = set()
        self.lost = ""  # why the run lost a worker, in one line ("" while none is)
        self._lost_at = math.nan
        self._chief_status: str | None = None
        self._chief_cancelled = False

    @property
    def refs(self) -> list[Any]:
        return list(self._refs)

    def name(self, k: int) -> str:
        """'worker 1 of 2 (10.0.0.5:40123) on node 10.0.0.5 (host, id 1a2b3c4d)'."""
        with self._ready:
            hello = self._where.get(k)
        if hello is None:
            return f"worker {k} of {self.workers} (not started yet)"
        ip, host, node = hello.get("ray_node_ip", "?"), hello.get("ray_host", "?"), str(hello.get("ray_node"))[:8]
        return f"worker {k} of {self.workers} ({hello.get('worker_address', '?')}) on node {ip} ({host}, id {node})"

    # ---------------------------------------------------------------- the pump's side

    def deliver(self, event: dict[str, Any]) -> None:
        if event.get("type") != RAY_HELLO:
            super().deliver(event)
            return
        k = int(event.get("worker", 0))
        with self._ready:
            self._where[k] = event
            where = dict(self._where)
        if k == 0:
            self.heard_at = time.monotonic()
            self.placement.update({key: v for key, v in event.items() if key.startswith("ray_")})
        if len(where) == self.workers:  # every worker said where it is before the chief's run_started
            ordered = [where[i] for i in range(self.workers)]
            self.placement["worker_addresses"] = ",".join(str(h.get("worker_address")) for h in ordered)
            self.placement["ray_nodes"] = ",".join(str(h.get("ray_node")) for h in ordered)

    def tasks_ended(self, ended: set[Any], outcome) -> None:
        chief_error = outcome(self.ref)[1] if self.ref in ended else None
        if chief_error is None:  # a chief that failed went first: the others' all-reduce failed because of it
            self.note_others(ended, outcome)
        if self.ref in ended:
            self.end(chief_error)
            return
        with self._ready:
            overdue = bool(self.lost) and time.monotonic() - self._lost_at > WORKER_LOST_GRACE_S
        if overdue and not self._chief_cancelled:  # the chief waits in an all-reduce (a worker on another host)
            self._chief_cancelled = True
            self._launcher.cancel(self.ref, force=True)

    def note_others(self, ended: set[Any], outcome) -> None:
        """Record the first of the other workers in `ended` that is lost to the run (while the chief trains)."""
        for k, ref in enumerate(self._refs[1:], 1):
            with self._ready:
                if ref not in ended or k in self._seen_ended:
                    continue
                self._seen_ended.add(k)
            why = self._why_lost(k, *outcome(ref))
            with self._ready:
                if why and not self.lost and self._chief_status is None:
                    self.lost, self._lost_at = why, time.monotonic()
                    self._ready.notify_all()

    def _why_lost(self, k: int, value: Any, error: BaseException | None) -> str:
        """Why worker `k`, whose task ended, is lost to the run ("" if it is not: it ended its run as the chief
        will, ok or diverged)."""
        if error is not None:
            return f"{self.name(k)} was lost mid-run ({_first_line(error)})"
        status, message = (value or {}).get("status"), str((value or {}).get("message") or "")
        if status in ("ok", "diverged"):
            return ""
        if status is None:
            return f"{self.name(k)} ended without reporting the run's end"
        named = message.find(f"worker {k} of")  # it said which worker it is (core/training/workers.py)
        return f"{self.name(k)}: {message[named:]}" if named >= 0 else f"{self.name(k)} ended with {status}: {message}"

    # ---------------------------------------------------------------- the RunHandle interface

    def recv(self) -> dict[str, Any]:
        """The chief's next event; its run_ended says `crashed`, naming the worker, when a worker was lost."""
        event = super().recv()
        if event.get("type") != RUN_ENDED:
            return event
        status = str(event.get("status"))
        if status == "error" and not self.lost:  # its all-reduce failed: a lost worker, its task seen ended later
            self._launcher.await_others(self, LOST_CHECK_S)
        with self._ready:
            lost, self._chief_status = self.lost, status
        if lost and status == "error":
            return {**event, "status": "crashed", "message": f"{lost}; measurements so far are kept"}
        return event

    def kill(self) -> None:
        for ref in self._refs:
            self._launcher.cancel(ref, force=True)

    def death_message(self) -> str:
        with self._ready:
            lost = self.lost
        if lost:
            return f"{lost}; the run's other workers were cancelled"
        chief, error = f"{self.name(0)}, the chief,", self.error
        if error is None or isinstance(error, MailboxLost):
            return super().death_message()
        if type(error).__name__ == "TaskCancelledError":
            return f"{chief} was cancelled"
        return f"{chief} was lost mid-run ({_first_line(error)}); the run's other workers were cancelled"


class RayWorkersLauncher(RayLauncher):
    """Each run's `spec.workers` workers as Ray tasks in a placement group; see the module docstring."""

    def _more_remotes(self, ray: Any, options: dict[str, Any]) -> dict[str, Any]:
        env = dict((options.get("runtime_env") or {}).get("env_vars", {}))
        env[FRESH_WORKER_ENV] = "1"  # never a worker process that imported TensorFlow for another task
        worker = {**options, "max_calls": 1, "runtime_env": {"env_vars": env}}
        return {"worker": ray.remote(**worker)(ray_train_worker)}

    def _standbys(self) -> int:
        return 0  # every worker is a fresh process: one readied ahead would exit unused

    def start(self, run: RunSpec, next_run: RunSpec | None) -> RayWorkersRun:
        """Reserve the run's W workers (a placement group) and submit them; they wait in Ray's queue until
        the group is placed."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._connect()
        assert self.resources is not None
        workers = self.resources.workers
        group = placement_group([self.resources.bundle()] * workers, strategy=PLACEMENT_STRATEGY)
        submitted = time.time()
        refs = [
            self._remote["worker"]
            .options(scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k))
            .remote(run.to_dict(), self._mailbox, k, workers, submitted)
            for k in range(workers)
        ]
        handle = RayWorkersRun(run, refs, group, self)
        with self._lock:
            self._runs[run.index] = handle
            self.submitted.append(handle)
        return handle

    def finished(self, handle: RayRun, status: str | None, stopping: bool) -> None:
        """The run is over: the other workers end by themselves after an ok run (given OTHERS_END_S), else
        they are cancelled; the placement group is let go."""
        with self._lock:
            self._runs.pop(handle.run.index, None)
        refs = handle.refs
        if status in ("ok", "diverged") and self._ray is not None:
            self._ray.wait(refs[1:], num_returns=len(refs) - 1, timeout=OTHERS_END_S)
        for ref in refs:
            self.cancel(ref, force=True)  # nothing for a task that ended
        self._let_go(getattr(handle, "group", None))

    def await_others(self, handle: RayWorkersRun, timeout: float) -> None:
        """Wait up to `timeout` s for one of the run's other workers to end, and record it if it is lost."""
        others = handle.refs[1:]
        try:
            ended = set(self._ray.wait(others, num_returns=1, timeout=timeout)[0])
            ended |= set(self._ray.wait(others, num_returns=len(others), timeout=0)[0])
        except Exception:  # the cluster is gone: the run's end says what is known
            return
        handle.note_others(ended, self._outcome)

    def _let_go(self, group: Any) -> None:
        if group is None or self._ray is None:
            return
        try:
            self._ray.util.remove_placement_group(group)
        except Exception:  # the cluster is gone
            pass

    def close(self) -> None:
        """The Ray launcher's end, and every run's placement group let go."""
        for handle in list(self.submitted):
            self._let_go(getattr(handle, "group", None))
        super().close()
