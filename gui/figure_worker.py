"""Computing a view's figures off the GUI thread: the Summary's, the explanation's and the Analysis tab's of a
500-run file took 0.3-1.7 s each on the GUI thread, and a live sweep's Summary grew by ~1.15 ms per run at every
run's end (318 ms at 240 runs).

What runs off the GUI thread is pure: core/ functions (core/analysis, core/aggregate: numpy, no Qt). The view
then draws the result on the GUI thread. One number, one place: the job is the same function the view calls when
it computes on the GUI thread (RunChangeView.figures_job).

Where the job runs. In a worker thread, the job held the interpreter (the GIL) while the GUI thread painted, and
the GUI thread lost: numpy's sorts and partitions (np.isin, np.median) let go of the GIL and take it back
thousands of times a second, and CPython then never asks the worker to hand it over (a switch happened), so each
of the GUI thread's returns from Qt into Python waited. Switching to a 500-run file's Summary froze the window
0.4 s of which the GUI thread worked 0.06 s; a shorter switch interval did not help. So on Linux the GUI thread
forks a child process for each job when it asks for it (os.fork: ~10 ms for a 500 MB window; the child sees the
data copy-on-write as it was at the fork, nothing is copied or sent, and what the GUI thread changes afterwards
is not seen: a live sweep's data can be handed over too). The child runs the job, writes its result back through
a pipe (pickled: BatchLab's own in-memory figures between its own processes, never a user's file) and leaves
with os._exit (no Qt, no cleanup); a collecting thread waits for it. The child has only the forking thread and
runs only numpy and core/ code; it never touches Qt, HDF5 or a lock another thread may have held at the fork,
and it closes every descriptor but its pipe first (a run's pipes stay the window's alone). Elsewhere (macOS's
frameworks are not fork-safe, Windows has no fork) the job runs in a worker thread, for a file only (a live
sweep's figures are then computed on the GUI thread). A child that ends without a result (it crashed, or its
result could not be sent) is a failure: the view computes on the GUI thread.

Results come back through a queued signal, tagged with the view and the data version they were computed
for; the view drops a result whose version is no longer its data's (another file opened), or, for a live sweep,
draws it and asks again for the newest.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from batchlab.gui.file_reader import emit_if_alive
from PySide6.QtCore import QObject, QTimer, Signal

IN_CHILD = sys.platform.startswith("linux")  # where a job runs in a forked child (see the module's docstring)
SWITCH_INTERVAL_S = 0.0002  # Python's thread switch interval while a job runs in the thread (default 0.005 s)

# Python 3.12+ warns at every fork of a process with threads; the child here runs only numpy and core/ code
warnings.filterwarnings("ignore", message=r".*multi-threaded, use of fork\(\)", category=DeprecationWarning)


class FigureWorker(QObject):
    """Computes the views' figures off the GUI thread.

    `submit(view, version, job)` runs `job()` and calls `view.computed(version, result)` on the GUI thread (or
    `view.compute_failed(version, message)` if the job raised, or its child ended without a result: the view then
    computes on the GUI thread). A view asks again when its data changed; the result of an older request is
    dropped by the view (its version differs).

    Where `in_child` (Linux), `submit` forks the child there and then, on the GUI thread: the child computes on a
    snapshot of the data as it was at that moment (`snapshots`), so a live sweep's figures are computed off the
    GUI thread too (the GUI thread is what changes a live sweep's data, and it is not changing it while it forks).
    One child runs at a time, the others wait their turn (a view's newer job replaces its older one that has not
    started); a collecting thread waits for the child's result. Elsewhere, one worker thread runs the jobs in the
    order they were asked. Either way a job whose view is hidden (`view.shown` False) when its turn comes is not
    run (`view.compute_skipped(version)`): the view asks again when it is shown.
    """

    _done = Signal(object, object, object)  # view, version, result
    _failed = Signal(object, object, str)  # view, version, "ExceptionType: message"
    _skipped = Signal(object, object)  # view, version: hidden when its turn came
    _child_ended = Signal()  # a child's outcome was read: the next queued job may fork

    def __init__(self, parent: QObject | None = None, in_child: bool = IN_CHILD):
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchlab-figures")
        self._collector = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchlab-figures-wait")
        self._queue: list[tuple[Any, object, Callable[[], object]]] = []  # jobs waiting for their child
        self._closed = False
        self.in_child = in_child  # False: jobs run in the thread (tests whose jobs talk to the test)
        self.jobs = 0  # jobs submitted (tests)
        self.children = 0  # jobs whose result came from a forked child (tests)
        self.lost = 0  # children that ended without a result (their view computed on the GUI thread)
        self.longest_fork_s = 0.0  # the longest os.fork on the GUI thread (bench/bench_window_soak.py)
        self._children: set[int] = set()  # the running children's pids
        self._children_lock = threading.Lock()
        self._done.connect(self._on_done)
        self._failed.connect(self._on_failed)
        self._skipped.connect(self._on_skipped)
        self._child_ended.connect(self._start_next)

    @property
    def snapshots(self) -> bool:
        """True where a job computes on the data as it was when submitted (a forked child), whatever the GUI
        thread changes afterwards: then a live sweep's figures may be computed off the GUI thread too."""
        return self.in_child

    def submit(self, view: Any, version: object, job: Callable[[], object]) -> None:
        if self._closed:
            return
        self.jobs += 1
        if not self.in_child:
            self._executor.submit(self._work, view, version, job)
            return
        # one child at a time, so that the GUI thread keeps a core (two children beside the drawing of a
        # 504-run Summary made its longest gap ~100 ms wall for ~65 ms of work); a view's job not yet started
        # is replaced by its newer one (the older result would be dropped)
        self._queue = [queued for queued in self._queue if queued[0] is not view]
        self._queue.append((view, version, job))
        self._start_next()

    def _start_next(self) -> None:
        """On the GUI thread: fork the next queued job's child unless one runs; a job whose view was hidden
        before its turn is skipped (the view asks again when it is shown)."""
        while self._queue and not self._children and not self._closed:
            view, version, job = self._queue.pop(0)
            if not getattr(view, "shown", True):
                view.compute_skipped(version)
                continue
            child = self._fork(job)
            if child is None:  # no process to be had (memory, a process limit): the view computes it here
                QTimer.singleShot(0, self, lambda v=view, n=version: self._on_failed(v, n, "no process for figures"))
                continue
            self._collector.submit(self._collect, view, version, *child)

    def shutdown(self) -> None:
        """The window closes: jobs not started are dropped, running children are killed (a job running in the
        thread ends on its own, its result unseen)."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._collector.shutdown(wait=False, cancel_futures=True)
        self._queue = []
        with self._children_lock:
            for pid in self._children:
                os.kill(pid, signal.SIGKILL)  # not reaped yet (a zombie at worst): the pid is still its

    def _work(self, view: Any, version: object, job: Callable[[], object]) -> None:
        """The thread's way (no fork): the job here, unless its view was hidden before its turn."""
        if self._closed:
            return
        if not getattr(view, "shown", True):  # its tab was left before the job's turn: computed when shown again
            self._emit(self._skipped, view, version)
            return
        self._send(view, version, _in_thread(job))

    def _fork(self, job: Callable[[], object]) -> tuple[int, int] | None:
        """(pid, the pipe's read end) of a child forked to run the job; None if it could not be forked."""
        read_fd, write_fd = os.pipe()
        started = time.perf_counter()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # the child: this thread alone; it never returns
            _child_main(job, read_fd, write_fd)
        os.close(write_fd)
        self.longest_fork_s = max(self.longest_fork_s, time.perf_counter() - started)
        with self._children_lock:
            self._children.add(pid)
        return pid, read_fd

    def _collect(self, view: Any, version: object, pid: int, read_fd: int) -> None:
        """In the collecting thread: the child's outcome, once it has written it and exited; then the next job's
        turn, whatever happened."""
        try:
            outcome = self._outcome(pid, read_fd)
            if not self._closed:
                self._send(view, version, outcome)
        finally:
            if not self._closed:
                self._emit(self._child_ended)

    def _outcome(self, pid: int, read_fd: int) -> tuple[str, Any]:
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                payload = pipe.read()  # until the child exits (the read lets go of the GIL)
        finally:
            with self._children_lock:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:  # reaped by someone else already
                    pass
                self._children.discard(pid)
        try:
            outcome = pickle.loads(payload) if payload else None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            outcome = None
        if not (isinstance(outcome, tuple) and len(outcome) == 2 and outcome[0] in ("done", "failed")):
            self.lost += 1  # killed, crashed, or a result that could not be sent
            return "failed", "the figures process ended without a result"
        self.children += 1
        return outcome

    def _send(self, view: Any, version: object, outcome: tuple[str, Any]) -> None:
        kind, value = outcome
        self._emit(self._done if kind == "done" else self._failed, view, version, value)

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
    """The job in this (the worker) thread, where there is no fork. It is mostly Python, so it holds the GIL;
    each time the GUI thread calls back into Python (every paint and boundingRect of a plot item) it waits up to
    the switch interval for it: 5 ms by default. Shorter while the job runs."""
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
    except BaseException:  # noqa: BLE001 - anything else (an unpicklable result, a signal): no result, which
        pass  # the parent reports as a failure (the view then computes on the GUI thread)
    finally:
        os._exit(code)
