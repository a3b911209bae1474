"""Background threads of the window: the sweep worker and the device probe.

The sweep worker calls batchlab.core.sweep.runner.run_sweep in a QThread, so the run file's single
writer lives in this (parent) process, off the GUI thread. Events reach the GUI thread
in batches: the sink buffers them and emits a list at most every `event_batch_s` of the
window's RefreshPolicy (gui/refresh.py), except that the rare structural events (a run
starting or ending, an epoch, the sweep ending) go out at once. batchlab.core.sweep.runner
is imported here only when a sweep or probe starts; neither it nor anything it imports pulls
in TensorFlow (that happens in the child processes).
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

from batchlab.core.spec import SpecError, SweepSpec
from batchlab.gui.refresh import DEFAULT_POLICY, RefreshPolicy
from PySide6.QtCore import QObject, QThread, Signal

# Step chunks (every STEP_FLUSH_SECONDS from the child) and log lines may wait for the next event
# when one went out less than event_batch_s ago; everything else flushes at once.
QUIET_EVENTS = ("steps", "log")
# The training child runs this much below the window's CPU priority (nice +5: a quarter of the weight).
# TensorFlow still gets every cycle the window does not use, but when the GUI thread wakes up to
# paint it is not queued behind TensorFlow's threads (on 2 cores that queueing added 15-35 ms stalls).
TRAINING_NICENESS = 5


class SweepWorker(QThread):
    """Runs one sweep; `events` carries lists of event dicts, `finished_with` the outcome."""

    events = Signal(list)
    sweep_failed = Signal(str, str)  # field, message: a SpecError before or while starting
    crashed = Signal(str)  # an unexpected exception, with its traceback

    def __init__(
        self,
        spec: SweepSpec,
        out_path: str,
        overwrite: bool = False,
        parent: QObject | None = None,
        policy: RefreshPolicy = DEFAULT_POLICY,
    ):
        super().__init__(parent)
        self.spec = spec
        self.out_path = out_path
        self.overwrite = overwrite
        self.batch_s = policy.event_batch_s  # the GUI thread gets at most 1 / batch_s event lists a second
        self.status: str | None = None
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._last_emit = 0.0
        self._stop_requested = False
        self._runner = None

    def make_runner(self):
        """The runner of this worker's children (a range test's worker makes an LrFindRunner)."""
        from batchlab.core.sweep.runner import SweepRunner

        return SweepRunner(self.spec, niceness=TRAINING_NICENESS)

    def execute(self, runner) -> str:
        """Run everything with `runner`, writing the run file; returns the sweep's status."""
        from batchlab.core.sweep.runner import run_sweep

        return run_sweep(self.spec, self.out_path, sink=self._sink, overwrite=self.overwrite, runner=runner)

    def run(self) -> None:  # QThread override: runs in the worker thread
        with self._lock:
            self._runner = self.make_runner()
            if self._stop_requested:
                self._runner.stop()
        try:
            self.status = self.execute(self._runner)
        except SpecError as e:
            self.sweep_failed.emit(e.field, e.message)
        except Exception:  # noqa: BLE001 - shown in the error dialog instead of killing the thread silently
            self.crashed.emit(traceback.format_exc())
        finally:
            self._flush()

    def stop(self) -> None:
        """Thread-safe: end the current run cleanly and skip the rest."""
        with self._lock:
            self._stop_requested = True
            if self._runner is not None:
                self._runner.stop()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def _sink(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(event)
            due = time.monotonic() - self._last_emit >= self.batch_s
        if due or event.get("type") not in QUIET_EVENTS:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_emit = time.monotonic()
        if batch:
            self.events.emit(batch)


class _ProbeBridge(QObject):
    probed = Signal(dict)
    probe_failed = Signal(str)


class DeviceProbe(QObject):
    """Asks a child process which devices TensorFlow sees, in a daemon thread (it takes seconds).

    A daemon thread rather than a QThread: closing the window must not wait for the probe.
    """

    probed = Signal(dict)  # the environment dict (see core.events.ENVIRONMENT_KEYS)
    probe_failed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._bridge = _ProbeBridge()
        self._bridge.probed.connect(self.probed)
        self._bridge.probe_failed.connect(self.probe_failed)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._probe, args=(self._bridge,), name="batchlab-probe", daemon=True)
        self._thread.start()

    @staticmethod
    def _probe(bridge: _ProbeBridge) -> None:
        from batchlab.core.sweep.probe import probe_environment

        try:
            env = probe_environment("auto")
        except Exception as e:  # noqa: BLE001 - any failure only means "no device list"
            result = ("probe_failed", str(e))
        else:
            result = ("probed", env)
        try:
            getattr(bridge, result[0]).emit(result[1])
        except RuntimeError:  # the window (and the bridge) is gone
            pass
