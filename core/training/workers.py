"""A worker process of a multi-worker run (`workers` > 1): it joins the cluster its TF_CONFIG describes and trains
the run with MultiWorkerMirroredStrategy, one replica of the global batch (core/training/replication.py).

The parent starts one such process per worker (core/sweep/multiworker.py builds each TF_CONFIG from the
workers' addresses; worker 0 is the chief). Every worker trains the same steps and sends its events; the parent
keeps the chief's and drains the others'. No TensorFlow at import: the parent names `worker_main` to start it.

Each worker is a fresh process: the strategy must be made before TensorFlow's runtime starts (it configures
the collectives and starts the worker's gRPC server), so a fork server's or a reused child cannot join.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

from batchlab.core.spec import RunSpec
from batchlab.core.training import faults
from batchlab.core.training.child import _enter_child, _report_setup_failure, _set_device_environment, _setup_tensorflow
from batchlab.core.training.failures import first_line
from batchlab.core.training.hooks import Hook
from batchlab.core.training.startup import StartupClock

LOCALHOST = "localhost"


def tf_config(addresses: Sequence[str], index: int) -> str:
    """Worker `index`'s TF_CONFIG (JSON) in the cluster of `addresses` ("host:port", worker 0 first: the chief).
    The one place it is built: for local workers (core/sweep/multiworker.py) and Ray-placed ones (ray_worker.py)."""
    if not 0 <= index < len(addresses):
        raise ValueError(f"worker {index} is not one of the {len(addresses)} workers")
    return json.dumps({"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": index}})


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """`count` distinct TCP ports free on `host` now (the system's choice). Another process may take one before
    its worker binds it: that worker then cannot join, and the run ends with one line saying so."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_task() -> tuple[int, int, str]:
    """This process's worker index, the number of workers and its own address, from TF_CONFIG ((0, 1, "") if unset)."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    workers = [*config.get("cluster", {}).get("chief", []), *config.get("cluster", {}).get("worker", [])]
    index = int(config.get("task", {}).get("index", 0)) + (
        len(config.get("cluster", {}).get("chief", [])) if config.get("task", {}).get("type") == "worker" else 0
    )
    return index, max(1, len(workers)), workers[index] if index < len(workers) else ""


def worker_main(
    tf_config: str,
    visible_devices: str | None,
    run_dict: dict,
    conn,
    stop_event,
    log_path: str | None,
    niceness: int = 0,
    launched_at: float = math.nan,
) -> None:
    """A local worker process (core/sweep/multiworker.py): priority, signals and log, then `train_worker` with
    its events going to `conn` and its stop flag `stop_event`."""
    _enter_child(niceness, log_path)
    try:
        train_worker(tf_config, visible_devices, run_dict, conn.send, stop_event.is_set, StartupClock(launched_at))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.close()


def train_worker(
    tf_config: str,
    visible_devices: str | None,
    run_dict: dict,
    send: Callable[[dict[str, Any]], None],
    should_stop: Callable[[], bool],
    startup: StartupClock,
) -> str | None:
    """Train one run as one worker of its cluster, in a process of its own (a local worker or a Ray worker task,
    core/training/ray_worker.py): `tf_config` is its TF_CONFIG (JSON), `visible_devices` the GPUs it may see
    (CUDA_VISIBLE_DEVICES; None: as the run's device says). Events go to `send`; a failure before training (the
    cluster cannot be joined: a port taken, a worker that never came) is its run_ended "error" with one line
    naming this worker. The run's status (None: it failed before training)."""
    os.environ["TF_CONFIG"] = tf_config
    index = run_dict.get("index")
    try:
        run = RunSpec.from_dict(run_dict)
        _set_device_environment(run.sweep.device)
        if visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
        with startup.phase("import"):  # with the wait for every worker to join (its own figure: cluster_join_s)
            tf, tf_device, nvml_index, device_name = _setup_tensorflow(run.sweep.device, run.sweep.tf_threads)
            _join()
            from batchlab.core.training import trainer
        with startup.phase("data"):
            data = trainer.load_run_data(run)
        startup.ready()
        from batchlab.core.training import run as run_module

        return run_module.train_run(
            run, send, should_stop, tf_device, nvml_index, device_name, data=data, startup=startup
        )
    except Exception as e:  # failures before training started: this worker's run_ended says which
        _report_setup_failure(_Sender(send), index, e)
        return None


class _Sender:
    """`send` with a connection's face, for _report_setup_failure."""

    def __init__(self, send: Callable[[dict[str, Any]], None]):
        self.send = send


def _join() -> None:
    """Join the cluster (replication.start_multi_worker); a failure names this worker and its address."""
    from batchlab.core.training.replication import start_multi_worker

    try:
        start_multi_worker()
    except Exception as e:
        worker, workers, address = cluster_task()
        raise RuntimeError(
            f"worker {worker} of {workers} ({address}) could not join the cluster (is its port free and its host "
            f"reachable?): {first_line(e)}"
        ) from e


class WorkerExit(Hook):
    """The test seam's lost worker (faults.WORKER_EXIT_ENV): the process exits at once after step `step`."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, step: int, logs: dict[str, Any]) -> None:
        if step >= self.step:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(faults.WORKER_EXIT_CODE)


def worker_hook_for(setup: Any, emit, built: dict[str, Any]) -> Hook | None:
    """The execution group's hook (core/settings/execution.py): only the test seam's lost worker; None otherwise."""
    if not os.environ.get(faults.WORKER_EXIT_ENV) or not os.environ.get("TF_CONFIG"):
        return None
    step = faults.worker_exit_step(setup.run.index, cluster_task()[0])
    return WorkerExit(step) if step is not None else None
