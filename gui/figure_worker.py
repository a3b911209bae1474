"""Computing a view's figures off the GUI thread: the Summary's, the explanation's and the Analysis tab's of a
500-run file took 0.3-1.7 s each on the GUI thread.

What runs in the thread is pure: core/ functions (core/analysis, core/aggregate: numpy, no Qt) over a sweep
that nothing changes while they run (a file read, not a live sweep: the window computes a live sweep's figures
on the GUI thread). The view then draws the result on the GUI thread. One number, one place: the job is the
same function the view calls when it computes on the GUI thread (RunChangeView.figures_job).

Results come back through a queued signal, tagged with the view and the data version they were computed
for; the view drops a result whose version is no longer its data's (another file opened, a run ended).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from batchlab.gui.file_reader import emit_if_alive
from PySide6.QtCore import QObject, Signal

SWITCH_INTERVAL_S = 0.0002  # Python's thread switch interval while a job runs (default 0.005 s; see _work)


class FigureWorker(QObject):
    """One worker thread for the views' figures; jobs run in the order they were asked.

    `submit(view, version, job)` runs `job()` in the thread and calls `view.computed(version, result)` on the
    GUI thread (or `view.compute_failed(version, message)` if the job raised). A view asks again when its data
    changed; the result of an older request is dropped by the view (its version differs). A job whose view is
    hidden (`view.shown` False) when its turn comes is not run (`view.compute_skipped(version)`): the view asks
    again when it is shown, and a user who went on to another tab does not wait for it.
    """

    _done = Signal(object, object, object)  # view, version, result
    _failed = Signal(object, object, str)  # view, version, "ExceptionType: message"
    _skipped = Signal(object, object)  # view, version: hidden when its turn came

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchlab-figures")
        self._closed = False
        self.jobs = 0  # jobs submitted (tests)
        self._done.connect(self._on_done)
        self._failed.connect(self._on_failed)
        self._skipped.connect(self._on_skipped)

    def submit(self, view: Any, version: object, job: Callable[[], object]) -> None:
        if self._closed:
            return
        self.jobs += 1
        self._executor.submit(self._work, view, version, job)

    def shutdown(self) -> None:
        """The window closes: jobs not started are dropped; the one running ends on its own (its result unseen)."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _work(self, view: Any, version: object, job: Callable[[], object]) -> None:
        if self._closed:
            return
        if not getattr(view, "shown", True):  # its tab was left before the job's turn: computed when shown again
            self._emit(self._skipped, view, version)
            return
        # The job is mostly Python, so it holds the GIL; each time the GUI thread calls back into Python (every
        # paint and boundingRect of a plot item) it waits up to the switch interval for it: 5 ms by default,
        # which made one plot's repaint take 120 ms while a summary was computed. Shorter while jobs run.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
        try:
            result = job()
        except Exception as e:  # noqa: BLE001 - a figure that cannot be computed: the view says so, the thread lives
            self._emit(self._failed, view, version, f"{type(e).__name__}: {e}")
            return
        finally:
            sys.setswitchinterval(interval)
        self._emit(self._done, view, version, result)

    _emit = staticmethod(emit_if_alive)  # the window may be deleted while a job runs

    def _on_done(self, view: Any, version: object, result: object) -> None:
        if not self._closed:
            view.computed(version, result)

    def _on_failed(self, view: Any, version: object, message: str) -> None:
        if not self._closed:
            view.compute_failed(version, message)

    def _on_skipped(self, view: Any, version: object) -> None:
        if not self._closed:
            view.compute_skipped(version)
