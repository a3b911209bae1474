"""What a Ray worker process runs for a sweep (core/sweep/ray_launcher.py submits these as Ray tasks).

`ray_probe` checks the spec where the runs will train (the environment, the data read there, the model built
on it); `ray_train` trains one run and streams its events to the sweep's mailbox (core/sweep/ray_mailbox.py)
in batches every RAY_FLUSH_SECONDS, hearing a stop with the same call; it flushes at once at run_ended.
TensorFlow is imported inside them only, once per worker process: Ray keeps a CPU run's worker for the next
task of the same runtime environment, so a later run there pays no import ("reused") and keeps the data if
its data are the same; a GPU run gets a process of its own (max_calls=1). A run's first message names the
node it trains on (RAY_HELLO), which the parent records with the run (ray_node, ray_node_ip, ray_host).
`ray_warm` gets the other slots' workers ready while the probe runs. A run's `child` says what its worker
was: fresh (it paid the import), probe (the probe's worker), standby (readied during the probe) or reused
(its worker trained an earlier run of the sweep).

`ray_train_worker` is one worker of a multi-worker run (`--workers W`; core/sweep/ray_workers.py places the W
tasks): it finds a free port on its node, says where it is (a RAY_HELLO naming the worker and its address),
files its address with the mailbox and waits for the others', builds its TF_CONFIG from them and trains as a
local worker does (core/training/workers.py `train_worker`). Only the chief (worker 0) streams events; the
others' are dropped, and their run_ended is what their task returns.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import threading
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import RUN_ENDED, STEPS
from batchlab.core.settings.data import BUNDLED_DATA, BUNDLED_LARGE_DATA
from batchlab.core.spec import KERAS_PREFIX, RunSpec, SweepSpec
from batchlab.core.training import faults
from batchlab.core.training.child import (
    PROBE_ERROR,
    PROBE_RESULT,
    _clear_session,
    _data_key,
    _report_setup_failure,
    _set_device_environment,
    _setup_tensorflow,
    describe_environment,
)
from batchlab.core.training.startup import PROBE, STANDBY, StartupClock
from batchlab.core.training.workers import free_ports, tf_config, train_worker

RAY_FLUSH_SECONDS = 0.1  # how often a run's worker sends what it has (and hears of a stop): at most this late
RAY_HELLO = "ray_hello"  # a worker's first message: where it trains (the node), never written to the run file
JOIN_WAIT_SECONDS = 300.0  # how long a run's worker waits for its other workers' addresses (they start at once)

# This process's TensorFlow (set up once: threads and devices are fixed when its runtime starts), and the
# data it loaded last, kept for the next run with the same data.
_PROCESS: dict[str, Any] = {"setup": None, "key": None, "data_key": None, "data": None, "prepared": None}


def node_fields() -> dict[str, Any]:
    """Where this worker runs: its Ray node's id and IP, the host name (scalars for run_started)."""
    import ray

    return {
        "ray_node": str(ray.get_runtime_context().get_node_id()),
        "ray_node_ip": str(ray.util.get_node_ip_address()),
        "ray_host": platform.node(),
    }


def _ignore_ctrl_c() -> None:
    """A Ctrl-C at the parent's terminal is the parent's to act on (a clean stop), as in a local child."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _tensorflow(spec: SweepSpec) -> tuple:
    """(tf, tf_device, nvml_index, device_name), set up in this process once. On a GPU Ray chose the GPU
    (CUDA_VISIBLE_DEVICES), so a gpu:N device means "the GPU Ray gave this run"."""
    key = (spec.device, spec.tf_threads, spec.replicas)
    if _PROCESS["setup"] is None:
        device = "auto" if spec.device.startswith("gpu:") else spec.device
        _set_device_environment(device)
        _PROCESS["setup"], _PROCESS["key"] = _setup_tensorflow(device, spec.tf_threads, spec.replicas), key
    elif _PROCESS["key"] != key:  # the runtime environment keeps other settings' runs off this worker
        raise SpecError("setup", f"this Ray worker's TensorFlow was set up for {_PROCESS['key']}, not {key}")
    return _PROCESS["setup"]


def _check_readable(spec: SweepSpec) -> None:
    """A data or model file must be readable where the run trains: one line naming the node if not."""
    named = spec.data in (BUNDLED_DATA, BUNDLED_LARGE_DATA) or spec.data.startswith(KERAS_PREFIX)
    paths = [("data", os.path.expanduser(spec.data))] if spec.data and not named else []
    if spec.model_file:
        paths.append(("model_file", os.path.expanduser(spec.model_file)))
    for field, path in paths:
        if os.path.isfile(path) and os.access(path, os.R_OK):
            continue
        where = node_fields()
        raise SpecError(
            field,
            f"{path} cannot be read on Ray node {where['ray_node_ip']} ({where['ray_host']}): a remote cluster "
            "needs the file at the same path on every node (or use the bundled or keras: data)",
        )


def _load(run: RunSpec, startup: StartupClock | None = None):
    """The run's arrays: this process's last ones if the data are the same, else loaded (timed as `data`)."""
    from batchlab.core.training import trainer

    key = _data_key(run.to_dict())
    if _PROCESS["data_key"] != key or _PROCESS["data"] is None:
        if startup is not None:
            with startup.phase("data"):
                _PROCESS["data"] = trainer.load_run_data(run)
        else:
            _PROCESS["data"] = trainer.load_run_data(run)
        _PROCESS["data_key"] = key
    return _PROCESS["data"]


def _prepare(spec_dict: dict, submitted_at: float, kind: str) -> tuple[Any, RunSpec]:
    """TensorFlow set up and the first run's data loaded in this worker ahead of its first run, timed on a
    clock that run takes over (`kind`: PROBE or STANDBY) if it belongs to the same sweep. (tf, first run)."""
    spec = SweepSpec.restore(spec_dict)
    _check_readable(spec)
    fresh = _PROCESS["setup"] is None
    clock = StartupClock(submitted_at)
    with clock.phase("import"):
        tf, *_ = _tensorflow(spec)
    run = spec.runs()[0]
    _load(run, clock)
    clock.ready()
    if fresh:
        _PROCESS["prepared"] = (clock, kind, spec_dict)
    return tf, run


def ray_probe(spec_dict: dict, submitted_at: float) -> dict[str, Any]:
    """The probe's answer (core/training/child.py's PROBE_RESULT or PROBE_ERROR), from where the runs train:
    the environment with the node, after building the model on the data read there."""
    _ignore_ctrl_c()
    try:
        tf, run = _prepare(spec_dict, submitted_at, PROBE)
        environment = {**describe_environment(tf), **node_fields()}
        from batchlab.core.training.workloads import build_model

        build_model(run, _load(run))
        _clear_session()  # the check's model: the first run here starts as a fresh process would
        return {"type": PROBE_RESULT, "environment": environment}
    except SpecError as e:
        return {"type": PROBE_ERROR, "field": e.field, "message": e.message}
    except Exception as e:  # the parent shows one line; the worker's log keeps the traceback
        import traceback

        traceback.print_exc()
        return {"type": PROBE_ERROR, "field": "setup", "message": f"{type(e).__name__}: {e}".splitlines()[0]}


def ray_warm(spec_dict: dict, submitted_at: float) -> None:
    """Get this worker ready for the sweep's runs while the probe checks the spec elsewhere (a standby):
    TensorFlow set up and the first run's data loaded. A failure is the probe's to report."""
    _ignore_ctrl_c()
    try:
        _prepare(spec_dict, submitted_at, STANDBY)
    except Exception:  # the probe reports what is wrong with the spec
        pass


class Outbox:
    """A run's events on their way to the mailbox: buffered, sent every RAY_FLUSH_SECONDS by a thread (and at
    once at run_ended); each send brings back whether the run was asked to stop."""

    def __init__(self, mailbox, run: int):
        self._mailbox, self._run = mailbox, run
        self._buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # the buffer
        self._sending = threading.Lock()  # one send at a time, so batches arrive in order
        self._stop = threading.Event()
        self._closed = threading.Event()
        self._exit_step = faults.exit_step(run)
        self._thread = threading.Thread(target=self._loop, name="batchlab-ray-outbox", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._buffer.append(event)
        if event.get("type") == RUN_ENDED:
            self.flush()
        elif self._exit_step is not None and event.get("type") == STEPS and max(event["step"]) >= self._exit_step:
            self.flush()  # a test's lost worker: what it streamed so far reaches the parent, then it is gone
            sys.stdout.flush()
            os._exit(faults.EXIT_CODE)

    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def flush(self) -> None:
        """Send what is buffered (or nothing: the call still brings the stop flag back)."""
        import ray

        with self._sending:
            with self._lock:
                batch, self._buffer = self._buffer, []
            try:
                if ray.get(self._mailbox.put.remote(self._run, batch)):
                    self._stop.set()
            except Exception:  # the sweep is gone (its mailbox ended): nobody listens, so stop
                self._stop.set()

    def close(self) -> None:
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()

    def _loop(self) -> None:
        while not self._closed.wait(RAY_FLUSH_SECONDS):
            self.flush()


def ray_train(run_dict: dict, mailbox, submitted_at: float) -> str | None:
    """Train one run here and stream its events to `mailbox`; its status (None: it failed before training).
    `submitted_at`: the parent's time.time() when it submitted the task (the run's `process` phase is the
    time from there to this line: Ray's scheduling and the worker's pick-up)."""
    _ignore_ctrl_c()
    startup = StartupClock(submitted_at)
    index = int(run_dict["index"])
    outbox = Outbox(mailbox, index)
    outbox.send({"type": RAY_HELLO, "run": index, **node_fields()})
    outbox.flush()
    outbox.start()
    try:
        run = RunSpec.from_dict(run_dict)
        _check_readable(run.sweep)
        prepared, _PROCESS["prepared"] = _PROCESS["prepared"], None
        if _PROCESS["setup"] is None:  # a fresh worker: the import is this run's
            with startup.phase("import"):
                tf, tf_device, nvml_index, device_name = _tensorflow(run.sweep)
        elif prepared is not None and prepared[2] == run_dict["sweep"]:
            # prepared by this sweep's probe or as a standby while the probe ran: the run takes over its clock
            startup, kind = prepared[0], prepared[1]
            startup.requested(submitted_at, kind)
            tf, tf_device, nvml_index, device_name = _tensorflow(run.sweep)
        else:  # TensorFlow set up by an earlier run in this worker
            startup = StartupClock.reused(submitted_at)
            tf, tf_device, nvml_index, device_name = _tensorflow(run.sweep)
            _clear_session()
        data = _load(run, startup)
        startup.ready()
        from batchlab.core.training import run as run_module

        return run_module.train_run(
            run, outbox.send, outbox.stop_requested, tf_device, nvml_index, device_name, data=data, startup=startup
        )
    except Exception as e:  # failures before training started; the sweep goes on with the next run
        _report_setup_failure(outbox, index, e)
        return None
    finally:
        outbox.close()


class _Dropped:
    """A worker's events other than the chief's: dropped (the chief trains the same steps), except its run_ended."""

    def __init__(self) -> None:
        self.ended: dict[str, Any] | None = None

    def send(self, event: dict[str, Any]) -> None:
        if event.get("type") == RUN_ENDED:
            self.ended = {"status": event.get("status"), "message": event.get("message")}


def ray_train_worker(run_dict: dict, mailbox, worker: int, workers: int, submitted_at: float) -> dict | None:
    """Train one run as worker `worker` of `workers`, in a fresh Ray worker process (max_calls=1: the strategy
    is made before TensorFlow's runtime starts). The chief (0) streams the run's events to `mailbox` and hears
    a stop; the others return their run_ended (status, message; None if they had none)."""
    import ray

    _ignore_ctrl_c()
    startup = StartupClock(submitted_at)
    index = int(run_dict["index"])
    where = node_fields()
    address = f"{where['ray_node_ip']}:{free_ports(1, where['ray_node_ip'])[0]}"
    hello = {"type": RAY_HELLO, "run": index, "worker": worker, "worker_address": address, **where}
    ray.get(mailbox.put.remote(index, [hello]))
    addresses = ray.get(mailbox.join.remote(index, worker, workers, address, JOIN_WAIT_SECONDS))
    if addresses is None:
        raise RuntimeError(
            f"worker {worker} of {workers} ({address}): the run's other workers did not report their addresses "
            f"within {JOIN_WAIT_SECONDS:.0f} s"
        )
    config = tf_config(addresses, worker)
    if worker != 0:
        dropped = _Dropped()
        train_worker(config, None, run_dict, dropped.send, lambda: False, startup)
        return dropped.ended
    outbox = Outbox(mailbox, index)
    outbox.start()
    try:
        train_worker(config, None, run_dict, outbox.send, outbox.stop_requested, startup)
    finally:
        outbox.close()
    return None
