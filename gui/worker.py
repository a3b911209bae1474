"""Background threads of the window: the sweep worker and the device probe.

The sweep worker calls batchlab.core.sweep.runner.run_sweep in a QThread, so the run file's single
writer lives in this (parent) process, off the GUI thread. Events reach the GUI thread in lists,
in order, through one lock-protected buffer: the worker's sink appends to it, and `deliver()` (on the
GUI thread) takes what is there and emits it as `events`. The rare structural events (a run starting
or ending, an epoch, the sweep ending) ask for a delivery at once (one queued wake-up, not one per
event). Step records and log lines ask for none when the worker is `pulled`: the window's refresher
takes them at the start of each frame (gui/refresh.py), so they cost the GUI thread no wake-up of their
own; otherwise (the range test) they are delivered at most every `event_batch_s`. batchlab.core.sweep.runner
is imported here only when a sweep or probe starts; neither it nor anything it imports pulls
in TensorFlow (that happens in the child processes).
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.spec import SweepSpec
from batchlab.gui.refresh import DEFAULT_POLICY, RefreshPolicy
from PySide6.QtCore import QObject, QThread, Signal

# Step chunks (every STEP_FLUSH_SECONDS from the child) and log lines wait in the buffer (for the next
# frame when the worker is pulled, else at most event_batch_s); everything else is delivered at once.
QUIET_EVENTS = ("steps", "log")
# The training child runs this much below the window's CPU priority (nice +5: a quarter of the weight).
# TensorFlow still gets every cycle the window does not use, but when the GUI thread wakes up to
# paint it is not queued behind TensorFlow's threads (on 2 cores that queueing added 15-35 ms stalls).
TRAINING_NICENESS = 5


class SweepWorker(QThread):
    """Runs one sweep; `events` carries lists of event dicts (emitted on the GUI thread, by `deliver`).

    pulled: the GUI thread calls `deliver()` itself at least every frame (the window's refresher), so
    step records and log lines do not wake it; structural events and the sweep's end still do.
    """

    events = Signal(list)
    _ready = Signal()  # queued to the GUI thread: deliver what the buffer holds
    sweep_failed = Signal(str, str)  # field, message: a SpecError before or while starting
    crashed = Signal(str)  # an unexpected exception, with its traceback

    def __init__(
        self,
        spec: SweepSpec,
        out_path: str,
        overwrite: bool = False,
        parent: QObject | None = None,
        policy: RefreshPolicy = DEFAULT_POLICY,
        pulled: bool = False,
    ):
        super().__init__(parent)
        self.pulled = pulled
        self.spec = spec
        self.out_path = out_path
        self.overwrite = overwrite
        self.batch_s = policy.event_batch_s  # the GUI thread gets at most 1 / batch_s event lists a second
        self.status: str | None = None
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._last_emit = 0.0
        self._wake_pending = False  # a _ready is queued and not yet delivered (no second one is sent)
        self._stop_requested = False
        self._runner = None
        # The worker object lives in the GUI thread: emitted from the worker thread this is a queued call.
        self._ready.connect(self.deliver)

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
            self._wake()  # whatever is left is delivered before `finished` reaches the GUI thread

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
        """Called by the sweep (worker thread): buffer the event; wake the GUI thread only if it is due."""
        with self._lock:
            self._pending.append(event)
            due = not self.pulled and time.monotonic() - self._last_emit >= self.batch_s
        if due or event.get("type") not in QUIET_EVENTS:
            self._wake()

    def _wake(self) -> None:
        """Ask the GUI thread to deliver the buffer (once: a request already queued covers later events)."""
        with self._lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        self._ready.emit()

    def deliver(self) -> int:
        """GUI thread: emit every buffered event, in order, as one `events` list; how many there were.

        Every event leaves the buffer here and only here, on the GUI thread, so lists are handled in the
        order the sweep produced them whoever asks (a queued wake-up or a frame of the refresher).
        """
        with self._lock:
            batch, self._pending = self._pending, []
            self._wake_pending = False
            self._last_emit = time.monotonic()
        if batch:
            self.events.emit(batch)
        return len(batch)


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
