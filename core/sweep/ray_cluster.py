"""Connecting a sweep to a Ray cluster and sizing its runs there (the Ray launcher's side of Ray itself).

Ray is an optional extra (`pip install 'batchlab[cluster]'`) and is imported only here, when a sweep asks for
it: `--ray` without Ray installed is a one-line SpecError saying how to install it. TensorFlow-free.

- `local` starts a Ray instance on this machine (no dashboard, a small object store, this machine's CPUs and
  GPUs as Ray finds them) and shuts it down when the sweep ends; `auto` joins the cluster this machine
  belongs to (`ray start --head` / `ray start --address`); `ray://host:port` connects as a Ray client.
  A process already connected to Ray (a test session, a notebook after `ray.init`) keeps its connection.
- Each run asks for one GPU (`replicas` GPUs for a data-parallel run) when the runs train on GPUs (device
  gpu, or auto on a cluster that has GPUs), else `ray_cpus` CPUs; `slots` is how many such runs the
  cluster's live nodes hold at once. A run of W workers (`--workers`) asks that for each worker.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.settings.placement import RAY_AUTO, RAY_LOCAL
from batchlab.core.spec import SweepSpec
from batchlab.core.training.faults import TEST_ENV_PREFIX

INSTALL_HINT = "pip install 'batchlab[cluster]'"
LOCAL_OBJECT_STORE_BYTES = 256 << 20  # events are small: no need to reserve Ray's default 30% of memory
RAY_LOG_LEVEL = logging.ERROR  # Ray's own INFO and WARNING lines stay off the CLI's output


def import_ray(address: str) -> Any:
    """The ray module; SpecError in one line (how to install it) when it is not installed."""
    try:
        import ray
    except ImportError:
        raise SpecError(
            "ray",
            f"{address} needs Ray, which is not installed here: {INSTALL_HINT} (or leave ray empty to train "
            "on this machine)",
        ) from None
    return ray


def connect(address: str) -> tuple[Any, bool]:
    """Connect to the cluster `address` names (auto, local or ray://host:port); (ray, whether this call
    started or connected it, so the sweep's end lets it go). SpecError in one line when it cannot."""
    ray = import_ray(address)
    if ray.is_initialized():
        return ray, False
    quiet = {"log_to_driver": False, "logging_level": RAY_LOG_LEVEL}
    try:
        if address == RAY_LOCAL:
            ray.init(address="local", include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError, OSError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = "start one with `ray start --head`, or use local" if address == RAY_AUTO else "check the address"
        if address != RAY_LOCAL and "find any running" not in why:  # Ray >= 2.59's clusters want a token
            hint += " (a cluster with token authentication needs RAY_AUTH_MODE=token here)"
        raise SpecError("ray", f"cannot connect to the Ray cluster {address} ({why}); {hint}") from None
    return ray, True


@dataclass(frozen=True)
class RunResources:
    """What each run (each of its workers, with `workers` > 1) asks Ray for, and how many runs the cluster
    holds at once."""

    cpus: float
    gpus: int
    slots: int
    description: str  # e.g. "1 CPU per run, 2 at once on 1 node (2 CPUs, 0 GPUs)"
    workers: int = 1  # processes per run (MultiWorkerMirroredStrategy), each asking for cpus or gpus

    def options(self) -> dict[str, Any]:
        """Ray task options: a GPU run gets a process of its own (max_calls=1), so its memory figures are its
        own and the next run's GPU is whichever Ray assigns; a CPU run's worker is reused (TensorFlow stays
        imported)."""
        if self.gpus:
            return {"num_gpus": self.gpus, "num_cpus": 0, "max_calls": 1}
        return {"num_cpus": self.cpus}

    def bundle(self) -> dict[str, float]:
        """One worker's share in a run's placement group (core/sweep/ray_workers.py)."""
        return {"GPU": float(self.gpus)} if self.gpus else {"CPU": self.cpus}


def _live_nodes(ray) -> list[dict[str, Any]]:
    return [node for node in ray.nodes() if node.get("Alive")]


def run_resources(ray, spec: SweepSpec) -> RunResources:
    """One GPU per run (replicas GPUs for a data-parallel run) when the runs train on GPUs, else ray_cpus
    CPUs; with `workers` W > 1, that for each of a run's W workers, and the runs held at once are the workers
    the cluster holds divided by W (a run's workers may share a node or not). SpecError when the cluster
    cannot hold one run."""
    nodes = _live_nodes(ray)
    total_gpus = sum(float(n["Resources"].get("GPU", 0)) for n in nodes)
    total_cpus = sum(float(n["Resources"].get("CPU", 0)) for n in nodes)
    on_gpu = spec.device.startswith("gpu") or (spec.device == "auto" and total_gpus > 0)
    counts = f"{len(nodes)} node{'s' * (len(nodes) != 1)} ({total_cpus:g} CPUs, {total_gpus:g} GPUs)"
    workers = max(1, int(getattr(spec, "workers", 1)))
    if on_gpu:
        gpus = max(1, int(spec.replicas))
        held = sum(int(float(n["Resources"].get("GPU", 0)) // gpus) for n in nodes)
        ask, unit, field = f"{gpus} GPU(s)", f"{gpus} GPU", "device"
    else:
        cpus = float(spec.ray_cpus)
        held = sum(int(math.floor(float(n["Resources"].get("CPU", 0)) / cpus + 1e-9)) for n in nodes)
        ask, unit, field = f"{cpus:g} CPUs", f"{cpus:g} CPU", "ray_cpus"
    slots = held // workers
    if workers > 1:
        if slots == 0:
            raise SpecError(
                "workers",
                f"{workers}: each run's {workers} workers ask for {unit} each and the cluster holds {held} such "
                f"worker(s) at once ({counts}); use at most {max(1, held)} workers"
                + ("" if on_gpu else " or a smaller ray_cpus"),
            )
        description = f"{workers} workers of {unit} per run, {slots} run(s) at once on {counts}"
    elif slots == 0 and on_gpu:
        raise SpecError("device", f"{spec.device}: each run needs {ask} on one node; the cluster has {counts}")
    elif slots == 0:
        largest = max((float(n["Resources"].get("CPU", 0)) for n in nodes), default=0.0)
        raise SpecError(
            field, f"{cpus:g} CPUs per run is more than any node of the cluster has ({largest:g}); {counts}"
        )
    else:
        description = f"{unit} per run, {slots} at once on {counts}"
    if on_gpu:
        return RunResources(0.0, gpus, slots, description, workers)
    return RunResources(cpus, 0, slots, description, workers)


def runtime_env(spec: SweepSpec, shared: bool) -> dict[str, Any] | None:
    """The runs' Ray runtime environment, or None (Ray's default workers, started with the instance). Ray gives a
    job's tasks only workers of their runtime environment, so on a connection other sweeps of this process use
    too (`shared`: a test session, a notebook) the runs get workers of their own settings: a worker whose
    TensorFlow was set up with other threads, replicas or device (fixed once per process) never trains them.
    A test's faults (core/training/faults.py) travel in it as well."""
    env = {key: value for key, value in os.environ.items() if key.startswith(TEST_ENV_PREFIX)}
    if shared:
        env["BATCHLAB_RAY_SETUP"] = f"device={spec.device};threads={spec.tf_threads};replicas={spec.replicas}"
    return {"env_vars": env} if env else None


def cluster_description(ray, address: str, resources: RunResources) -> str:
    """One line for the run file's environment: the Ray version, the address and what each run asks for."""
    return f"Ray {ray.__version__} at {address}: {resources.description}"


HEAD_NODE_RESOURCE = "node:__internal_head__"  # Ray's resource of the head node (the GCS's node)


def mailbox_options(ray) -> dict[str, Any]:
    """The mailbox actor's options: no CPU, and on the head node, whose loss ends the cluster anyway, so a lost
    worker node never takes every run's events with it (where the head has that resource)."""
    if any(HEAD_NODE_RESOURCE in n["Resources"] for n in _live_nodes(ray)):
        return {"num_cpus": 0, "resources": {HEAD_NODE_RESOURCE: 0.001}}
    return {"num_cpus": 0}
