"""Entry points of the training child process: the only place TensorFlow is imported.

The parent (CLI or GUI) starts children with multiprocessing's spawn context, so a crash or an
out-of-memory kill takes only the run that was training with it. A run's child may be started while
the previous run trains (a standby: it imports TensorFlow and loads the data, then waits for its run);
on the CPU the probe's child takes the first run and a child whose run ended ok is handed the next
one (reused), so a sweep imports TensorFlow once.
The child sends event dicts (core/events.py) through a one-way pipe and watches a stop flag between steps.
"""

from __future__ import annotations

import math
import os
import platform
import signal
import sys
import threading
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import RUN_ENDED, log_event, make_event, now_iso
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.training.startup import StartupClock

PROBE_RESULT = "probe_result"
PROBE_ERROR = "probe_error"
STANDBY_NICE = 19  # a standby prepares at the lowest priority: the run that trains meanwhile keeps the CPU


def _set_device_environment(device: str) -> None:
    """Choose the visible devices before TensorFlow is imported; it reads these once."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # make CUDA's numbering match NVML's
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    elif device.startswith("gpu:"):
        os.environ["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]


def _redirect_output(log_path: str | None) -> None:
    """Send the child's stdout/stderr (TensorFlow's chatter, crash dumps) to a log file."""
    if not log_path:
        return
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _cpu_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} logical cores)"


def _setup_tensorflow(device: str, threads: int = 0, replicas: int = 1):
    """Import TF, set its thread pools (`threads` > 0: that many intra- and inter-op threads; 0: TensorFlow's
    default) and with `replicas` > 1 its devices (logical CPUs, or a check of the GPUs: replication.py), all
    before its runtime starts; enable GPU memory growth; return (tf, tf_device, nvml_index, device_name)."""
    import tensorflow as tf
    from batchlab.core.training.replication import configure_devices

    set_threads(tf, threads)
    configure_devices(device, replicas)

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        # Allocate GPU memory as needed, so nvidia-smi shows what a run uses, not all of it.
        tf.config.experimental.set_memory_growth(gpu, True)
    if device.startswith("gpu:") and not gpus:
        raise SpecError("device", f"{device} was asked for but TensorFlow sees no GPU; use cpu or auto")
    if gpus and device != "cpu":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        first = visible.split(",")[0].strip()
        nvml_index = int(first) if first.isdigit() else 0
        return tf, "GPU:0", nvml_index, f"gpu:{nvml_index}"
    return tf, None, None, "cpu"


def set_threads(tf, threads: int) -> None:
    """TensorFlow's intra-op (one op's work split) and inter-op (ops side by side) thread pools: `threads` each,
    before the first op (TensorFlow fixes them when its runtime starts). 0 leaves TensorFlow's default. In a
    process whose runtime already started with the same setting (a reused child) nothing changes; a different
    one is an error, not ignored."""
    if threads <= 0:
        return
    config = tf.config.threading
    if (config.get_intra_op_parallelism_threads(), config.get_inter_op_parallelism_threads()) == (threads, threads):
        return
    config.set_intra_op_parallelism_threads(threads)
    config.set_inter_op_parallelism_threads(threads)


def describe_environment(tf) -> dict[str, Any]:
    """Versions and devices, as stored in every run file's root attributes."""
    import keras
    import psutil
    from batchlab.core import __version__
    from batchlab.core.training.memory import GpuProcessMemory

    build = tf.sysconfig.get_build_info()
    devices = [
        {
            "name": "cpu",
            "kind": "CPU",
            "description": _cpu_description(),
            "memory_bytes": int(psutil.virtual_memory().total),
        }
    ]
    for i, gpu in enumerate(tf.config.list_physical_devices("GPU")):
        details = tf.config.experimental.get_device_details(gpu)
        name = details.get("device_name", gpu.name)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
        index = int(visible[i]) if i < len(visible) and visible[i].strip().isdigit() else i
        devices.append(
            {
                "name": f"gpu:{index}",
                "kind": "GPU",
                "description": f"{name} (compute capability {details.get('compute_capability', '?')})",
                "memory_bytes": GpuProcessMemory(index).total_bytes(),
            }
        )
    using = devices[1] if len(devices) > 1 else devices[0]
    return {
        "app_version": __version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__,
        "cuda_version": str(build.get("cuda_version", "") or "none"),
        "cudnn_version": str(build.get("cudnn_version", "") or "none"),
        "devices": devices,
        "device_description": f"{using['name']}: {using['description']}",
        "host": platform.node(),
    }


def probe_main(spec_dict: dict, conn, log_path: str | None, check: bool = True, data=None) -> None:
    """Report the environment; with `check`, also build the model on the data, so a bad spec fails
    before any run starts. `data` is the parent's checked sample (core.datasets.PreparedData); without
    it (a Keras dataset, which only a child may load) the data is loaded and checked here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _redirect_output(log_path)
    try:
        conn.send(_probe_report(spec_dict, check, data)[0])
    finally:
        conn.close()


def _probe_report(spec_dict: dict, check: bool, data=None) -> tuple[dict, Any]:
    """The probe's answer (PROBE_RESULT with the environment, or PROBE_ERROR with the field and message)
    and the data it loaded in full (None if it used the parent's sample or failed)."""
    loaded = None
    try:
        spec = SweepSpec.restore(spec_dict)  # the parent checked it; no file is read again here
        _set_device_environment(spec.device)
        tf, *_ = _setup_tensorflow(spec.device, spec.tf_threads, spec.replicas)
        environment = describe_environment(tf)
        if not check:
            return {"type": PROBE_RESULT, "environment": environment}, None
        from batchlab.core.datasets import load_spec_data, prepare_arrays
        from batchlab.core.training.workloads import build_model

        if data is None:
            data = loaded = prepare_arrays(
                load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale
            )
        build_model(spec.runs()[0], data)
        return {"type": PROBE_RESULT, "environment": environment}, loaded
    except SpecError as e:
        return {"type": PROBE_ERROR, "field": e.field, "message": e.message}, None
    except Exception as e:  # the parent shows one line; the log file keeps the traceback
        import traceback

        traceback.print_exc()
        return {"type": PROBE_ERROR, "field": "setup", "message": f"{type(e).__name__}: {e}".splitlines()[0]}, None


def trains_on_cpu(environment: dict | None) -> bool:
    """Whether a probe's environment says the runs train on the CPU (the parent and the probe's child judge
    reuse by this one rule)."""
    return str((environment or {}).get("device_description", "")).startswith("cpu")


def probe_run_main(
    spec_dict: dict,
    run_dict: dict,
    conn,
    stop_event,
    log_path: str | None,
    niceness: int,
    go,
    launched_at: float = math.nan,
    data=None,
) -> None:
    """The probe (probe_main with check), then, on the CPU, the first run's child: the probe's TensorFlow
    import is the run's, so a sweep pays one import fewer. After its answer the child waits for the request
    for `run_dict` like a standby (run_main). On a GPU it exits after the answer: the model it built for the
    check would stay in the allocator's pools and in the first run's memory figures."""
    startup = StartupClock(launched_at)
    _enter_child(niceness, log_path)
    try:
        with startup.phase("import"):  # the import, the environment and the spec's check: all before the run
            message, loaded = _probe_report(spec_dict, True, data)
        conn.send(message)
        if message["type"] != PROBE_RESULT or not trains_on_cpu(message["environment"]):
            return
        _clear_session()  # the check's model: the run starts from the state a fresh process has
        _serve(run_dict, conn, stop_event, go, startup, data=loaded)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        go.close()
        conn.close()


def run_main(
    run_dict: dict,
    conn,
    stop_event,
    log_path: str | None,
    niceness: int = 0,
    go=None,
    launched_at: float = math.nan,
) -> None:
    """Train one run and stream its events to the parent, `niceness` below the parent's CPU priority.

    With `go` (the read end of a pipe) the child first imports TensorFlow and loads the data, then
    waits for the parent's request ({"requested_at": time.time(), "child": "fresh"|"standby", "reuse": bool})
    before it builds the model and trains: started ahead of its run, it is a standby that took its start-up
    off the sweep's critical path. None (or the pipe closed) instead of a request: exit untrained.
    With "reuse" (the parent found the runs train on the CPU), a run that ended ok is followed by a wait
    for the next request, which carries that run ({"run": ..., "log_path": ...}): the same process trains
    it after keras.backend.clear_session(), with the data kept if the next run's data are the same. Any
    other end (error, out of memory, divergence, a stop) and the child exits, so the next run is fresh.
    Every phase is timed (core/training/startup.py) and recorded with the run.
    """
    startup = StartupClock(launched_at)
    _enter_child(niceness, log_path)
    try:
        _serve(run_dict, conn, stop_event, go, startup)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if go is not None:
            go.close()
        conn.close()


def _serve(run_dict: dict, conn, stop_event, go, startup: StartupClock, data=None) -> None:
    """run_main's work after the child's set-up: prepare, wait for the request, train, and, if reused, the
    next runs. `data`: the run's arrays if already loaded (by the probe)."""
    index = run_dict.get("index")
    waiting = go is not None
    reuse = False
    try:
        # Inside the try: rebuilding the spec checks the data file again, which may be gone by now.
        run = RunSpec.from_dict(run_dict)
        _set_device_environment(run.sweep.device)
        ahead = waiting and not go.poll(0)  # no request yet: a standby, while another run trains

        def prepare():
            if ahead:
                _yield_cpu()
            with startup.phase("import"):
                prepared = _setup_tensorflow(run.sweep.device, run.sweep.tf_threads, run.sweep.replicas)
                from batchlab.core.training import trainer
            with startup.phase("data"):
                return trainer, prepared, trainer.load_run_data(run) if data is None else data

        trainer, (tf, tf_device, nvml_index, device_name), data = _in_thread(prepare) if ahead else prepare()
        startup.ready()
        if waiting:
            waiting = False
            request = _wait_for_request(go, startup)
            if request is None:
                return
            # never on a GPU: its allocator's pools would carry one run's memory into the next run's figures
            reuse = bool(request.get("reuse")) and tf_device is None
        from batchlab.core.training import run as run_module

        status = run_module.train_run(
            run, conn.send, stop_event.is_set, tf_device, nvml_index, device_name, data=data, startup=startup
        )
        while reuse and status == "ok":
            request = _next_run(go)
            if request is None:
                return  # the sweep is over, or the next run goes elsewhere
            index = request["run"].get("index")
            _redirect_output(request.get("log_path"))
            same_data = _data_key(request["run"]) == _data_key(run_dict)
            run_dict = request["run"]
            run = RunSpec.from_dict(run_dict)
            startup = StartupClock.reused(request["requested_at"])
            _clear_session()
            if not same_data:
                with startup.phase("data"):
                    data = trainer.load_run_data(run)
            status = run_module.train_run(
                run, conn.send, stop_event.is_set, tf_device, nvml_index, device_name, data=data, startup=startup
            )
    except Exception as e:  # failures before training started; the sweep goes on with the next run
        if waiting and _wait_for_request(go, startup) is None:
            return  # a standby that failed and was never asked for: nothing to report
        _report_setup_failure(conn, index, e)


def _data_key(run_dict: dict) -> tuple:
    """What a run's arrays depend on (trainer.load_run_data): runs with the same key train on the same data."""
    sweep = run_dict.get("sweep", {})
    return tuple(sweep.get(k) for k in ("data", "workload", "samples", "val_samples", "scale"))


def _clear_session() -> None:
    """Forget the previous run's model, optimizer, traced functions and layer names before the next run
    builds its own (its seed is set again in prepare_run), and free what they held."""
    import gc

    import keras

    keras.backend.clear_session()
    gc.collect()


def _next_run(go) -> dict | None:
    """Block until the parent hands this child its next run (the request) or lets it go (None)."""
    try:
        request = go.recv()
    except (EOFError, OSError):
        return None
    return request if request and request.get("run") else None


def _yield_cpu() -> None:
    """Lowest CPU priority for the calling thread only (Linux: nice is per thread), so a standby's import
    takes only the cycles the training run leaves; the main thread, which trains, keeps its priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), STANDBY_NICE)
    except (OSError, AttributeError):  # not Linux: the whole process would be lowered for good, so not at all
        pass


def _in_thread(work):
    """Run `work()` in a thread of its own and return its result (or raise its exception) here."""
    box: dict = {}

    def target():
        try:
            box["result"] = work()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name="batchlab-standby-prepare", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def _wait_for_request(go, startup: StartupClock) -> dict | None:
    """Block until the parent asks for the run (the request) or lets this standby go (None)."""
    try:
        request = go.recv()
    except (EOFError, OSError):
        return None
    if not request:
        return None
    startup.requested(request["requested_at"], request["child"])
    return request


def lr_find_main(
    run_dict: dict, settings_dict: dict, conn, stop_event, log_path: str | None, niceness: int = 0
) -> None:
    """The LR range test of one run's batch size (`batchlab lr-find`), in a child like a sweep's run."""

    def train(run, send, should_stop, tf_device, nvml_index, device_name):
        from batchlab.core.lr_find import RangeSettings
        from batchlab.core.training.lr_find import range_test_run

        range_test_run(run, RangeSettings(**settings_dict), send, should_stop, device_name)

    _child_main(run_dict, conn, stop_event, log_path, niceness, train)


def _enter_child(niceness: int, log_path: str | None) -> None:
    """Priority, signals and log of a training child, first thing in it."""
    if niceness > 0:
        # Before TensorFlow starts any thread: on Linux the nice value is per thread and inherited.
        os.nice(niceness)
    # Ctrl-C reaches the whole process group; the parent decides, and tells us through stop_event.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _redirect_output(log_path)


def _report_setup_failure(conn, index, e: Exception) -> None:
    """A failure before training started: its message, traceback and the run's end, to the parent."""
    import traceback

    from batchlab.core.training.failures import classify_failure, traceback_text

    traceback.print_exc()
    message = e.args[0] if isinstance(e, SpecError) else f"{type(e).__name__}: {e}"
    message = str(message).splitlines()[0] if str(message) else type(e).__name__
    conn.send(log_event("error", message, run=index))
    conn.send(log_event("error", traceback_text(e), run=index))
    status = classify_failure(e)
    conn.send(make_event(RUN_ENDED, run=index, status=status, message=message, ended=now_iso()))


def _child_main(run_dict: dict, conn, stop_event, log_path: str | None, niceness: int, train) -> None:
    """A child's life around `train(run, send, should_stop, tf_device, nvml_index, device_name)`: priority,
    signals, log, TensorFlow set up, and a run_ended for a failure before training started."""
    _enter_child(niceness, log_path)
    index = run_dict.get("index")
    try:
        # Inside the try: rebuilding the spec checks the data file again, which may be gone by now.
        run = RunSpec.from_dict(run_dict)
        _set_device_environment(run.sweep.device)
        tf, tf_device, nvml_index, device_name = _setup_tensorflow(
            run.sweep.device, run.sweep.tf_threads, run.sweep.replicas
        )
        train(run, conn.send, stop_event.is_set, tf_device, nvml_index, device_name)
    except Exception as e:  # failures before training started; the sweep goes on with the next run
        _report_setup_failure(conn, index, e)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.close()
