"""A run prepared ahead (`prepare_ahead`, fused runs on a Linux CPU): built, traced and compiled while the
previous run trains, then trained when its turn comes. Training child only (a child forked from the fork
server, core/training/zygote.py).

The parent (core/sweep/runner.py) forks the next run's child as soon as the current run has started. That
child builds the model and the fused engine and makes the fused call's first calls on the run's data (the
trace, and with XLA the compile: seconds of CPU on a CPU), then sets every variable back to its value
before them (FusedLoop.warm_up), so the run trains from exactly where a fresh run would. It tells the parent
PREPARED with the seconds this took (or PREPARE_FAILED: the parent then forks a child for the run as it
would have without preparation, so a failure here loses nothing) and waits for its turn: the parent's
message {"requested_at": time.time()} on the run's socket. Only then does it send anything else (the log
lines of the build, held until then, then run_started and the rest), and only after that message does a
byte on the socket mean "stop". EOF instead (the sweep ended or stopped, or the run goes elsewhere): it
exits untrained.

Its work runs beside the current run's training: with one TensorFlow thread per run (`tf_threads` 1) on
a machine with two cores or more, in the core the training leaves. Memory figures stay per process: each
run's are its own process's, so a child preparing beside it is in neither's figures.
"""

from __future__ import annotations

import time
from typing import Any

PREPARED = "prepared"  # the child is ready: {"type": PREPARED, "seconds": s}
PREPARE_FAILED = "prepare_failed"  # {"type": PREPARE_FAILED, "message": one line}; the child then exits


class HeldEmit:
    """An emit that holds the events until `release(send)`, then sends them and every later one at once."""

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []
        self.send = None

    def __call__(self, event: dict[str, Any]) -> None:
        if self.send is None:
            self.held.append(event)
        else:
            self.send(event)

    def release(self, send) -> None:
        self.send = send
        held, self.held = self.held, []
        for event in held:
            send(event)


def prepare(run, conn, tf_device, nvml_index, data, startup):
    """Build `run` and warm its fused call up, sending PREPARED (and returning (built, emit)) or PREPARE_FAILED
    (and returning None). Whatever fails is logged to this child's log, not raised."""
    from batchlab.core.training import faults
    from batchlab.core.training import run as run_module

    emit = HeldEmit()
    t0 = time.perf_counter()
    try:
        faults.fail_if_injected(faults.FAIL_PREPARE_ENV, run.index)
        hooks = run_module.standard_hooks(run.index, emit, tf_device, nvml_index)
        built = run_module.build_run(run, emit, lambda: conn.poll(0), hooks, data, startup)
        warm_up = getattr(built.engine, "warm_up", None)
        if warm_up is None:
            raise TypeError(f"{type(built.engine).__name__} cannot be prepared ahead (fused runs only)")
        warm_up()
    except Exception as e:  # noqa: BLE001 - the run then starts in a child of its own, as without preparation
        import traceback

        traceback.print_exc()
        conn.send({"type": PREPARE_FAILED, "message": f"{type(e).__name__}: {e}".splitlines()[0]})
        return None
    startup.ahead_s = time.perf_counter() - t0
    conn.send({"type": PREPARED, "seconds": startup.ahead_s})
    return built, emit


def wait_for_turn(conn) -> float | None:
    """Block until the parent says it is this run's turn: its request time; None if it let this child go."""
    try:
        message = conn.recv()
    except (EOFError, OSError):
        return None
    if not isinstance(message, dict) or "requested_at" not in message:
        return None
    return float(message["requested_at"])
