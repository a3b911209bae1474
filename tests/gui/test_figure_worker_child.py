"""The figures worker's forked child (gui/figure_worker.py, Linux): a job's result, its error, a child that dies
or sends what cannot be sent, and the window closing while a child computes. In a worker thread alone a job
starved the GUI thread of the GIL (a 500-run Summary froze the window 0.4 s); in a child it cannot."""

from __future__ import annotations

import math
import os
import sys
import time

import pytest
from batchlab.gui.figure_worker import FigureWorker
from PySide6.QtTest import QTest

from tests.gui.conftest import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="jobs run in a forked child on Linux")

WAIT_S = 30


class View:
    """What the worker calls back on the GUI thread."""

    shown = True

    def __init__(self):
        self.results: list = []
        self.failures: list = []

    def computed(self, version, result):
        self.results.append((version, result))

    def compute_failed(self, version, message):
        self.failures.append((version, message))

    def compute_skipped(self, version):  # pragma: no cover - every view here is shown
        raise AssertionError("skipped")


@pytest.fixture
def worker(qapp):
    w = FigureWorker()
    yield w
    w.shutdown()


def _run(worker, job, version=1) -> View:
    view = View()
    worker.submit(view, version, job)
    wait_until(lambda: view.results or view.failures, WAIT_S)
    return view


def test_a_job_runs_in_a_child_and_its_result_comes_back_whole(worker):
    view = _run(worker, lambda: {"pid": os.getpid(), "loss": [0.5, math.nan], "text": "batch 64"}, version=7)
    [(version, result)] = view.results
    assert version == 7
    assert result["pid"] != os.getpid()  # computed in another process
    assert result["loss"][0] == 0.5 and math.isnan(result["loss"][1]) and result["text"] == "batch 64"
    assert (worker.children, worker.lost) == (1, 0)


def test_a_job_that_raises_in_the_child_is_a_failure_naming_the_error(worker):
    def job():
        raise ValueError("no steady epoch")

    view = _run(worker, job)
    assert view.failures == [(1, "ValueError: no steady epoch")]
    assert view.results == [] and worker.lost == 0


def test_a_child_that_dies_or_cannot_send_its_result_is_a_failure_the_view_recomputes(worker):
    """The view's compute_failed computes on the GUI thread (RunChangeView): nothing is lost."""

    def dies():
        os._exit(3)  # as a crash would: no result written

    view = _run(worker, dies)
    assert view.failures == [(1, "the figures process ended without a result")] and worker.lost == 1

    view = _run(worker, lambda: lambda: "a function is not sent")  # not picklable
    assert view.failures == [(1, "the figures process ended without a result")] and worker.lost == 2


def test_the_child_computes_on_the_data_as_it_was_when_asked(worker):
    """What the GUI thread changes after asking (a live sweep's next run) is not in the child's result."""
    data = {"runs": [1, 2]}
    view = View()
    worker.submit(view, 1, lambda: (time.sleep(0.2), list(data["runs"]))[1])
    data["runs"].append(3)  # a run ended meanwhile
    wait_until(lambda: view.results, WAIT_S)
    assert view.results == [(1, [1, 2])]


def test_the_child_holds_none_of_the_windows_descriptors(worker):
    """A pipe the window holds (a run's child waiting for its end, say) is closed in the figures child."""
    read_fd, write_fd = os.pipe()
    try:

        def open_in_child(fd=write_fd):
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        assert open_in_child()  # open here
        view = _run(worker, open_in_child)
        assert view.results == [(1, False)]
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_closing_kills_a_child_that_is_still_computing(worker):
    view = View()
    worker.submit(view, 1, lambda: time.sleep(600))
    [child] = worker._children
    worker.shutdown()
    wait_until(lambda: not worker._children, WAIT_S)  # killed and reaped by its collecting thread
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # no such process: gone
    assert view.results == [] and view.failures == []  # the closed window hears nothing


def test_one_child_at_a_time_and_a_views_waiting_job_replaced_by_its_newer_one(worker):
    """The GUI thread keeps a core: a second job waits for the first child; a view that asks again before its
    job started gets only its newest computed (the older result would be dropped)."""
    first, second = View(), View()
    worker.submit(first, 1, lambda: time.sleep(0.3) or "first")
    worker.submit(second, 1, lambda: "second, stale")
    worker.submit(second, 2, lambda: "second, newest")
    most = 0
    deadline = time.monotonic() + WAIT_S
    while not second.results and time.monotonic() < deadline:
        most = max(most, len(worker._children))
        QTest.qWait(5)
    assert most == 1
    assert first.results == [(1, "first")] and second.results == [(2, "second, newest")]
    assert worker.children == 2
