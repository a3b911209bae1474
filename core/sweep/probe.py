"""The probe: a child that reports the environment (versions, devices) and, for a sweep, checks the spec by
building its model on the data before any run starts, so a bad spec fails in one line at once.

The sweep runner starts it (in a spawned child, or forked from the fork server: runner.py), `batchlab info`
and the window's device list ask it for the environment alone (probe_environment). No TensorFlow here.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.spec import SweepSpec
from batchlab.core.sweep.processes import POLL_SECONDS, STOP_GRACE_SECONDS, _death_message, start_child
from batchlab.core.training.child import PROBE_ERROR, PROBE_RESULT, probe_main

PROBE_TIMEOUT_SECONDS = 600.0  # includes a first Keras dataset download


def _parent_environment() -> dict[str, Any]:
    """What this process knows of the environment, for a sweep stopped before its probe answered."""
    from batchlab.core import __version__

    return {
        "app_version": __version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "devices": [],
        "device_description": "unknown (stopped before the training process reported its devices)",
    }


def _probe(
    ctx,
    spec: SweepSpec,
    log_path: Path,
    check: bool,
    data=None,
    should_stop: Callable[[], bool] = lambda: False,
    track: Callable[[Any], None] | None = None,
) -> dict[str, Any] | None:
    """Start a probe child and wait for its answer in short slices; None if `should_stop` said so first.

    `data` (a few checked rows) saves the child loading the data again; `track` is told the child
    while it lives, so a kill can reach it.
    """
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(
        target=probe_main,
        args=(spec.to_dict(), sender, str(log_path), check, data),
        daemon=True,
        name="batchlab-probe",
    )
    if track is not None:
        track(child)
    start_child(child)
    sender.close()
    try:
        message = _probe_answer(child, receiver, log_path, should_stop)
    finally:
        child.join(timeout=STOP_GRACE_SECONDS)
        if child.is_alive():
            child.kill()
            child.join()
        if track is not None:
            track(None)
    return _probe_environment(message)


def _probe_answer(child, receiver, log_path: Path, should_stop: Callable[[], bool]) -> dict[str, Any] | None:
    """Wait in short slices for a probe child's answer; None if `should_stop` said so first (the child is
    killed). SpecError if it does not answer in time or dies first."""
    deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
    try:
        while not receiver.poll(POLL_SECONDS):
            if should_stop():
                child.kill()
                return None
            if time.monotonic() > deadline:
                child.kill()
                raise SpecError("setup", f"the training process did not answer in {PROBE_TIMEOUT_SECONDS:.0f} s")
        return receiver.recv()
    except EOFError:
        child.join()
        if should_stop():  # killed on purpose
            return None
        raise SpecError("setup", f"could not start training: {_death_message(child.exitcode, log_path)}") from None


def _probe_environment(message: dict[str, Any] | None) -> dict[str, Any] | None:
    """The environment of a probe's answer; SpecError for a bad spec; None for no answer (stopped)."""
    if message is None:
        return None
    if message["type"] == PROBE_ERROR:
        raise SpecError(message["field"], message["message"])
    assert message["type"] == PROBE_RESULT
    return message["environment"]


def _gpu_possible(device: str) -> bool:
    """Whether TensorFlow might train on a GPU here, judged without importing it: not when the spec says cpu or
    CUDA_VISIBLE_DEVICES hides every GPU, nor on Linux without a GPU device node (NVIDIA, WSL, ROCm)."""
    if device == "cpu":
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if platform.system() == "Linux":
        dev = Path("/dev")
        return any(dev.glob("nvidia[0-9]*")) or (dev / "dxg").exists() or (dev / "kfd").exists()
    return True


def probe_environment(device: str = "auto") -> dict[str, Any]:
    """Versions and the devices TensorFlow sees (for `info` and the GUI's device list)."""
    from batchlab.core.spec import build_spec

    spec = build_spec({"device": device})
    ctx = multiprocessing.get_context("spawn")
    log_dir = Path(tempfile.mkdtemp(prefix="batchlab-probe-"))
    return _probe(ctx, spec, log_dir / "probe.log", check=False)
