"""One try of the max-batch finder, in its own child process: can this batch size train here?

Builds the run exactly as a sweep would (data, model, compiled optimizer, the same input pipeline
and step function), then trains `steps` full steps (the first creates the optimizer's state and
traces) and runs one validation pass at the same batch size, and reports the peak memory. Any
memory exhaustion (TensorFlow's, the host's MemoryError) is an "oom" answer; the parent also
kills this process when it passes the host memory cap, so the machine never swaps.
"""

from __future__ import annotations

import signal
import statistics
import sys
import time

from batchlab.core.spec import RunSpec

PROBE_ANSWER = "batch_probe"


def batch_probe_main(run_dict: dict, conn, log_path: str | None, steps: int) -> None:
    """Child entry: try run_dict's batch size for `steps` training steps and a validation pass; send the answer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from batchlab.core.training.child import _redirect_output, _set_device_environment, _setup_tensorflow

    _redirect_output(log_path)
    answer = {"type": PROBE_ANSWER, "status": "error", "message": ""}
    try:
        run = RunSpec.from_dict(run_dict)
        _set_device_environment(run.sweep.device)
        tf, tf_device, nvml_index, _ = _setup_tensorflow(run.sweep.device, replicas=run.sweep.replicas)
        from batchlab.core.training.input_pipeline import make_input_pipeline
        from batchlab.core.training.memory import MemoryProbe
        from batchlab.core.training.trainer import make_step_function, prepare_run, validate

        setup = prepare_run(run, lambda event: None)
        memory = MemoryProbe(tf_device, nvml_index)
        memory.on_epoch_begin(0)
        pipeline = make_input_pipeline(setup.x_train, setup.y_train, run.batch_size, False, run.seed).repeat()
        step_fn = make_step_function(setup.model, setup.strategy)
        batches = iter(pipeline)
        times = []
        for _ in range(steps):
            xb, yb, _made = next(batches)
            t0 = time.perf_counter()
            float(step_fn(xb, yb)["loss"])  # reading the loss waits for the device
            times.append(time.perf_counter() - t0)
        if setup.x_val is not None:
            validate(setup.model, setup.x_val, setup.y_val, run.batch_size)
        reading = memory.read()
        peak = next(
            (reading[k] for k in ("tf_peak_bytes", "device_memory_bytes", "rss_peak_bytes") if reading[k] > 0), -1
        )
        answer.update(
            status="ok",
            peak_bytes=int(peak),
            step_time=statistics.median(times[1:]) if len(times) > 1 else times[0],
        )
    except Exception as e:
        import traceback

        from batchlab.core.training.failures import classify_failure, first_line

        traceback.print_exc()
        answer.update(status=classify_failure(e), message=first_line(e))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send(answer)
        conn.close()
