"""Several runs at once on this machine (`--parallel`, core/settings/placement.py; docs/scaling.md).

Each of the launcher's slots is a `LocalLauncher` (core/sweep/local_launcher.py) that trains one run at a time
in a child process of its own; the scheduler (core/sweep/runner.py) keeps a run in flight in every slot and
merges their events by run. No TensorFlow here.

- `--parallel gpus`: one slot per GPU the probe found. Every child of a slot sees only that slot's GPU:
  `CUDA_VISIBLE_DEVICES` is set in the spawned child before its entry runs, so before TensorFlow is imported
  (processes.with_environment; the parent's environment is never changed). A slot takes its next run only
  after the previous run's process has exited (its memory freed), so two runs' processes never share a GPU;
  the scheduler is not held up while a finished run's process exits (its other runs' events keep flowing):
  the wait, if any, comes when the slot's next run starts, and a slot whose process has exited goes first.
  Each run records `visible_gpu` (what its child's CUDA_VISIBLE_DEVICES held), `slot` and `runs_at_once`.
  No GPU found: a one-line SpecError.
- `--parallel N` on a CPU: N slots. The runs share the cores, so their times mean little: the sweep logs one
  warning that says why, and every run carries its own (logged with its index) and records `slot`,
  `runs_at_once` and `shared_cores` = 1. On a Linux CPU the slots fork their children from one fork server
  (one TensorFlow import for the sweep); elsewhere a slot's child trains the slot's next run (reuse).
  Where the probe found GPUs (device auto), each of the N slots gets a GPU of its own, so N may not exceed
  the GPUs; with device gpu:K it is refused (N runs on one GPU).

Memory figures stay each run's own with several runs in flight: they are read in the run's own process
(core/training/memory.py): TensorFlow's allocator peak of the process's one visible GPU, NVML's memory of
this process id on the GPU found by its PCI bus id, and the process's peak RSS (VmHWM, reset each epoch).
Nothing is sampled device-wide or in the parent. What runs at once do share is the host's total memory (two
runs can run it out: the kernel then kills one, recorded `crashed`) and, on a CPU, the cores and caches.

Not done: standby children (a GPU slot's next run starts its TensorFlow import when the slot frees, while the
other slots train) and prepare_ahead; the next run's slot is not known when the previous run starts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchlab.core.analysis.concurrency import shared_cores_note
from batchlab.core.errors import SpecError
from batchlab.core.settings.placement import PARALLEL_GPUS, parallel_runs
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep.children import _RunChild
from batchlab.core.sweep.local_launcher import Entry, LocalLauncher, train_entry
from batchlab.core.sweep.probe import _gpu_possible
from batchlab.core.sweep.processes import _reap
from batchlab.core.training.child import trains_on_cpu

# A probe of the environment (should_stop, data) -> environment or None; tests give one that lists GPUs.
EnvironmentProbe = Callable[[Callable[[], bool], Any], "dict[str, Any] | None"]

NO_GPU = (
    "gpus: no GPU found here; use parallel N for N runs at once on the CPU "
    "(they share its cores, so their times mean little), or leave parallel empty for one run at a time"
)


def gpu_ids(environment: dict[str, Any]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value that shows a child each GPU of a probe's environment, in its order.

    The probe names a GPU gpu:N with N its index in CUDA_VISIBLE_DEVICES's numbering when this process's
    CUDA_VISIBLE_DEVICES lists numbers or is unset (core/training/child.py describe_environment); where it
    lists UUIDs (GPU-..., MIG-...), the child gets the UUID at the GPU's position."""
    names = [str(d.get("name", "")) for d in environment.get("devices") or [] if d.get("kind") == "GPU"]
    listed = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    if len(listed) == len(names) and not all(e.isdigit() for e in listed) and "-1" not in listed:
        return listed
    return [name.split(":", 1)[1] if ":" in name else str(i) for i, name in enumerate(names)]


class ParallelLauncher:
    """Runs in child processes of this one, several at once: one LocalLauncher per slot (module docstring)."""

    def __init__(
        self,
        spec: SweepSpec,
        log_dir: Path,
        niceness: int = 0,
        standby: bool = True,
        reuse: bool = True,
        fork: bool = True,
        entry: Entry = train_entry,
        environment_probe: EnvironmentProbe | None = None,
    ):
        """The local options as LocalLauncher takes them (`standby` is not used: see the module docstring).
        `environment_probe`: how the environment is found (default: the base launcher's probe, which checks the
        spec); tests give one that lists GPUs."""
        self.spec = spec
        self.niceness = max(0, int(niceness))
        self.reuse, self.fork, self.entry = reuse, fork, entry
        self.wanted = parallel_runs(spec.parallel)  # None: one per GPU
        self.slots = self.wanted or 1  # set from the probe's devices
        self.warnings: list[str] = []
        self.environment: dict[str, Any] | None = None
        self._log_dir = log_dir
        self._environment_probe = environment_probe
        self._lock = threading.Lock()
        # The probe, and on a Linux CPU the fork server every slot forks from.
        self._base = LocalLauncher(spec, log_dir, self.niceness, standby=False, reuse=False, fork=fork, entry=entry)
        self._slots: list[LocalLauncher] = []
        self._placements: list[dict[str, Any]] = []
        self._busy: dict[int, _RunChild] = {}  # slot -> the run in flight there
        self._exiting: dict[int, Any] = {}  # GPU slot -> its last run's process, until it is known to have exited
        self._run_count: int | None = None  # the sweep's runs (prepare): never more slots than runs

    # ------------------------------------------------------------------ before the runs

    def prepare(self, runs: list[RunSpec], should_stop: Callable[[], bool]) -> None:
        """Start the fork server during the probe where the runs will fork from one (a Linux CPU)."""
        self._run_count = len(runs)
        if self.spec.parallel == PARALLEL_GPUS and not _gpu_possible(self.spec.device):
            return  # the probe refuses at once: no GPU in sight
        if self._environment_probe is None:
            self._base.prepare(runs, should_stop)

    def probe(self, should_stop: Callable[[], bool], data: Any) -> dict[str, Any] | None:
        """Check the spec where the runs train and set up the slots; SpecError where they cannot be placed."""
        gpus_wanted = self.spec.parallel == PARALLEL_GPUS
        if self._environment_probe is not None:
            environment = self._environment_probe(should_stop, data)
        else:
            if gpus_wanted and not _gpu_possible(self.spec.device):  # no GPU device in sight: say so at once
                raise SpecError("parallel", NO_GPU)
            environment = self._base.probe(should_stop, data)
            self.warnings += self._base.warnings
        self.environment = environment
        if environment is None:  # stopped first
            return None
        self._place(environment)
        return environment

    def _place(self, environment: dict[str, Any]) -> None:
        """One slot per GPU (`gpus`, or N of the GPUs found), or N slots on the CPU; SpecError if impossible."""
        on_cpu = trains_on_cpu(environment)
        ids = [] if on_cpu else gpu_ids(environment)
        if self.wanted is None and not ids:
            raise SpecError("parallel", NO_GPU)
        if ids and self.spec.device.startswith("gpu:"):
            raise SpecError(
                "parallel",
                f"{self.spec.parallel} with device {self.spec.device} would train {self.spec.parallel} runs at once "
                "on one GPU; use device auto (a GPU per run), or device cpu",
            )
        replicas = int(getattr(self.spec, "replicas", 1) or 1)
        if ids and replicas > 1:
            raise SpecError(
                "parallel",
                f"{self.spec.parallel} with replicas {replicas}: each run at once gets one GPU of its own, and "
                f"{replicas} replicas need {replicas}; leave parallel empty for data-parallel runs",
            )
        if ids and self.wanted is not None and self.wanted > len(ids):
            raise SpecError(
                "parallel",
                f"{self.wanted} runs at once need {self.wanted} GPUs (two runs never share one) and TensorFlow sees "
                f"{len(ids)}; use parallel gpus, at most {len(ids)}, or device cpu",
            )
        count = len(ids) if self.wanted is None else self.wanted
        count = max(1, min(count, self._run_count or count))  # 2 runs with parallel 4: 2 at once, said so
        for slot in range(count):
            if ids:
                launcher = self._slot_launcher({"CUDA_VISIBLE_DEVICES": ids[slot]})
                placement = {"slot": slot, "runs_at_once": count, "visible_gpu": ids[slot]}
            else:
                launcher = self._slot_launcher(None)
                placement = {"slot": slot, "runs_at_once": count, "shared_cores": 1}
            launcher.adopt(self._base)
            self._slots.append(launcher)
            self._placements.append(placement)
        self.slots = count
        if not ids:
            threads = int(getattr(self.spec, "tf_threads", 0) or 0)
            pools = f"{threads} TensorFlow thread(s) each" if threads else "TensorFlow's default thread pools each"
            self.warnings.append(
                f"parallel {self.spec.parallel}: {count} runs train at once on this machine's {os.cpu_count()} CPU "
                f"cores ({pools}); they share the cores and memory bandwidth, so each run's times (step time, "
                "throughput, time to target) include waiting for the others and mean little; every such run "
                "carries a warning; for times that mean something, leave parallel empty"
            )
        elif getattr(self.spec, "prepare_ahead", False):
            self.warnings.append("prepare_ahead: runs on several GPUs at once are not prepared ahead")

    def _slot_launcher(self, child_env: dict[str, str] | None) -> LocalLauncher:
        return LocalLauncher(
            self.spec,
            self._log_dir,
            self.niceness,
            standby=False,
            reuse=self.reuse,
            fork=self.fork,
            entry=self.entry,
            child_env=child_env,
            reap_later=True,
        )

    # ------------------------------------------------------------------ a run

    def start(self, run: RunSpec, next_run: RunSpec | None) -> _RunChild:
        """Start `run` in a free slot (the scheduler starts a run only when one is free): one whose previous run's
        process has exited, else the first free one once its process has (killed after the grace period)."""
        with self._lock:
            free = [i for i in range(len(self._slots)) if i not in self._busy]
        gone = [i for i in free if self._exiting.get(i) is None or not self._exiting[i].is_alive()]
        slot = gone[0] if gone else free[0]
        process = self._exiting.pop(slot, None)
        if process is not None:
            _reap(process)  # at once when it exited; else the wait its GPU needs before another run
        handle = self._slots[slot].start(run, None)
        handle.placement = dict(self._placements[slot])
        if "shared_cores" in handle.placement:
            handle.note = "; ".join(n for n in (handle.note, f"run {run.index} {shared_cores_note(self.slots)}") if n)
        with self._lock:
            self._busy[slot] = handle
        return handle

    def started(self, handle: _RunChild, next_run: RunSpec | None) -> None:
        """Nothing is started ahead: the next run's slot is not known yet."""

    def finished(self, handle: _RunChild, status: str | None, stopping: bool) -> None:
        """The run's slot lets it go (on a GPU: waits for its process to exit), then takes the next run."""
        slot = next(i for i, h in self._busy.items() if h is handle)
        self._slots[slot].finished(handle, status, stopping)
        if "visible_gpu" in handle.placement:
            self._exiting[slot] = handle.process  # its GPU's next run waits for it (start)
        with self._lock:
            del self._busy[slot]

    # ------------------------------------------------------------------ the end

    def kill(self) -> None:
        """Kill every run in flight, the probe and the fork server (from any thread)."""
        with self._lock:
            slots = list(self._slots)
        for launcher in slots:
            launcher.kill()
        self._base.kill()

    def close(self) -> None:
        """Reap every slot's exited children, then close the fork server."""
        while self._exiting:
            _reap(self._exiting.popitem()[1])
        for launcher in self._slots:
            launcher.close()
        self._base.close()
