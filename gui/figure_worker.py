"""Computing a view's figures off the GUI thread: the Summary's, the explanation's and the Analysis tab's of a
500-run file took 0.3-1.7 s each on the GUI thread.

What runs off the GUI thread is pure: core/ functions (core/analysis, core/aggregate: numpy, no Qt) over a sweep
that nothing changes while they run (a file read, not a live sweep: the window computes a live sweep's figures
on the GUI thread). The view then draws the result on the GUI thread. One number, one place: the job is the
same function the view calls when it computes on the GUI thread (RunChangeView.figures_job).

Where the job runs. In a worker thread alone, the job held the interpreter (the GIL) while the GUI thread
painted, and the GUI thread lost: numpy's sorts and partitions (np.isin, np.median) let go of the GIL and take it
back thousands of times a second, and CPython then never asks the worker to hand it over (a switch happened),
so each of the GUI thread's returns from Qt into Python waited. Switching to a 500-run file's Summary froze the
window 0.4 s of which the GUI thread worked 0.06 s; a shorter switch interval did not help. So on Linux the
worker thread forks a child process for each job (os.fork: ~10 ms for a 500 MB window; the child shares the
sweep's pages copy-on-write, nothing is copied or sent), the child runs the job and writes its result back
through a pipe (pickled: BatchLab's own in-memory figures between its own processes, never a user's file), and
exits with os._exit (no Qt, no cleanup). The child has only the forking thread and runs only numpy and core/
code; it never touches Qt, HDF5 or a lock another thread may have held at the fork. Elsewhere (macOS's
frameworks are not fork-safe, Windows has no fork), or if a child dies without a result, the job runs in the
worker thread as before.

Results come back through a queued signal, tagged with the view and the data version they were computed
for; the view drops a result whose version is no longer its data's (another file opened, a run ended).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from batchlab.gui.file_reader import emit_if_alive
from PySide6.QtCore import QObject, Signal

IN_CHILD = sys.platform.startswith("linux")  # where a job runs in a forked child (see the module's docstring)
SWITCH_INTERVAL_S = 0.0002  # Python's thread switch interval while a job runs in the thread (default 0.005 s)

# Python 3.12+ warns at every fork of a process with threads; the child here runs only numpy and core/ code
warnings.filterwarnings("ignore", message=r".*multi-threaded, use of fork\(\)", category=DeprecationWarning)


class FigureWorker(QObject):
    """One worker thread for the views' figures; jobs run in the order they were asked.

    `submit(view, version, job)` runs `job()` (in a forked child where `in_child`, else in the thread) and calls
    `view.computed(version, result)` on the GUI thread (or `view.compute_failed(version, message)` if the job
    raised). A view asks again when its data changed; the result of an older request is dropped by the view (its
    version differs). A job whose view is hidden (`view.shown` False) when its turn comes is not run
    (`view.compute_skipped(version)`): the view asks again when it is shown, and a user who went on to another
    tab does not wait for it.
    """

    _done = Signal(object, object, object)  # view, version, result
    _failed = Signal(object, object, str)  # view, version, "ExceptionType: message"
    _skipped = Signal(object, object)  # view, version: hidden when its turn came

    def __init__(self, parent: QObject | None = None, in_child: bool = IN_CHILD):
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchlab-figures")
        self._closed = False
        self.in_child = in_child  # False: jobs run in the thread (tests whose jobs talk to the test)
        self.jobs = 0  # jobs submitted (tests)
        self.children = 0  # jobs whose result came from a forked child (tests)
        self.lost = 0  # children that ended without a result (their job then ran in the thread)
        self._child: int | None = None  # the running child's pid
        self._child_lock = threading.Lock()
        self._done.connect(self._on_done)
        self._failed.connect(self._on_failed)
        self._skipped.connect(self._on_skipped)

    def submit(self, view: Any, version: object, job: Callable[[], object]) -> None:
        if self._closed:
            return
        self.jobs += 1
        self._executor.submit(self._work, view, version, job)

    def shutdown(self) -> None:
        """The window closes: jobs not started are dropped, a running child is killed (a job running in the
        thread ends on its own, its result unseen)."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._child_lock:
            if self._child is not None:
                os.kill(self._child, signal.SIGKILL)  # not reaped yet (a zombie at worst): the pid is still its

    def _work(self, view: Any, version: object, job: Callable[[], object]) -> None:
        if self._closed:
            return
        if not getattr(view, "shown", True):  # its tab was left before the job's turn: computed when shown again
            self._emit(self._skipped, view, version)
            return
        outcome = self._in_child(job) if self.in_child else None
        if outcome is None:
            if self._closed:
                return
            outcome = _in_thread(job)
        kind, value = outcome
        if kind == "done":
            self._emit(self._done, view, version, value)
        else:
            self._emit(self._failed, view, version, value)

    def _in_child(self, job: Callable[[], object]) -> tuple[str, Any] | None:
        """The job's ("done", result) or ("failed", message) from a forked child; None if the child ended
        without one (killed, crashed, or a result that cannot be sent)."""
        read_fd, write_fd = os.pipe()
        with self._child_lock:
            if self._closed:
                os.close(read_fd)
                os.close(write_fd)
                return None
            pid = os.fork()
            if pid == 0:  # the child: this thread alone; it never returns
                _child_main(job, read_fd, write_fd)
            self._child = pid
        os.close(write_fd)
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                payload = pipe.read()  # until the child exits (the read lets go of the GIL)
        finally:
            with self._child_lock:
                os.waitpid(pid, 0)
                self._child = None
        try:
            outcome = pickle.loads(payload) if payload else None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            outcome = None
        if not (isinstance(outcome, tuple) and len(outcome) == 2 and outcome[0] in ("done", "failed")):
            self.lost += 1
            return None
        self.children += 1
        return outcome

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


def _in_thread(job: Callable[[], object]) -> tuple[str, Any]:
    """The job in this (the worker) thread. It is mostly Python, so it holds the GIL; each time the GUI thread
    calls back into Python (every paint and boundingRect of a plot item) it waits up to the switch interval for
    it: 5 ms by default. Shorter while the job runs."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
    try:
        return "done", job()
    except Exception as e:  # noqa: BLE001 - a figure that cannot be computed: the view says so, the thread lives
        return "failed", f"{type(e).__name__}: {e}"
    finally:
        sys.setswitchinterval(interval)


def _child_main(job: Callable[[], object], read_fd: int, write_fd: int) -> None:
    """The forked child: run the job, write the pickled outcome to the pipe, exit without any cleanup (Qt's,
    atexit's, the buffers of the parent's files are the parent's). Every other descriptor is closed first, so the
    child holds open no pipe or socket of the window's (a run's child waiting for its end, say)."""
    code = 1
    try:
        os.close(read_fd)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, os.sysconf("SC_OPEN_MAX"))
        try:
            outcome: tuple[str, Any] = ("done", job())
        except Exception as e:  # noqa: BLE001 - sent to the parent, said by the view
            outcome = ("failed", f"{type(e).__name__}: {e}")
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
        code = 0
    except BaseException:  # noqa: BLE001 - anything else (an unpicklable result, a signal): no result, the
        pass  # parent runs the job in its thread
    finally:
        os._exit(code)
