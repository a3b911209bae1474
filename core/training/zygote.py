"""The fork server (zygote) of a sweep on a Linux CPU: TensorFlow imported once, a process forked per run.

The server is a spawned child like any training child. It imports TensorFlow, Keras and the trainer
and loads the sweep's data (numpy), but runs no TensorFlow op: no device is initialised and no
TensorFlow thread pool exists yet, so forking it is safe (a fork after those threads started could
deadlock on a lock one of them held; on a GPU a fork after cuInit is fatal, hence CPU only). Then it
waits on its control pipe; for each request it forks one child, which trains one run (or answers
as the probe) with its own TensorFlow runtime and exits. So every run is a process of its own: a
crash or an out-of-memory kill loses that run, its memory figures start from the same baseline every
run, and the import is paid once per sweep.

Protocol (the parent's side is core/sweep/forkserver.py), over a duplex multiprocessing Pipe:
  {"op": "fork", "kind": "run"|"probe", ...} then the child's end of the run's own socket (SCM_RIGHTS)
      -> {"pid": pid}; the forked child sends its events (or the probe's answer) on that socket and
      reads the parent's stop on it;
  {"op": "wait", "pid": pid, "timeout": s} -> {"exitcode": code or None}: reaps it (code as
      multiprocessing gives it: negative for a signal); a forked child is reaped only when asked, so
      its pid cannot be reused while the parent may still signal it;
  EOF on the pipe (the sweep ended, or the parent died): every forked child still alive is killed and
      reaped, and the server exits.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle

from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.training.child import (
    _enter_child,
    _probe_report,
    _report_setup_failure,
    _set_device_environment,
    _setup_tensorflow,
)
from batchlab.core.training.startup import FORKED, StartupClock

_PR_SET_PDEATHSIG = 1  # prctl option: a signal for this process when its parent dies
_MADV_POPULATE_READ = 22  # madvise advice (Linux >= 5.14): map these pages now, as a read would
WAIT_SLICE_SECONDS = 0.02


def zygote_main(spec_dict: dict, control: Connection, log_path: str | None, niceness: int = 0) -> None:
    """The server's life: import and load, answer {"ready": seconds of each phase}, then serve requests."""
    _enter_child(niceness, log_path)
    children: set[int] = set()
    try:
        spec = SweepSpec.restore(spec_dict)  # the parent checked it; no file is read again here
        _set_device_environment(spec.device)
        t0 = time.perf_counter()
        import keras  # noqa: F401 - imported here once, for every forked child
        import tensorflow  # noqa: F401
        from batchlab.core.training import trainer

        imported = time.perf_counter()
        data = None
        try:
            data = trainer.load_run_data(spec.runs()[0])
        except Exception:  # noqa: BLE001 - each forked child loads it again and reports the failure as its run's
            import traceback

            traceback.print_exc()
        resident = _resident_file_pages()
        control.send({"ready": {"import_s": imported - t0, "data_s": time.perf_counter() - imported}})
        _serve(control, data, children, resident)
    finally:
        for pid in children:
            _kill(pid)
        for pid in children:
            _wait(pid, None)
        sys.stdout.flush()
        sys.stderr.flush()
        control.close()


def _resident_file_pages() -> list[tuple[int, int]]:
    """(address, bytes) of every run of this process's file-backed pages that are mapped now: the libraries'
    code and data the import touched. A fork copies the page tables of anonymous memory (the heap, the
    data), not of file-backed mappings, which the child maps again only as it touches them; so a forked
    child's resident memory would lack these ~350 MiB that a fresh child's own import maps (measured),
    and its memory figures would not be comparable with a fresh child's. Empty if /proc cannot say."""
    import numpy as np

    page = os.sysconf("SC_PAGE_SIZE")
    ranges: list[tuple[int, int]] = []
    try:
        with open("/proc/self/maps") as maps, open("/proc/self/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split()
                if len(fields) < 6 or not fields[5].startswith("/") or "r" not in fields[1]:
                    continue
                start, end = (int(v, 16) for v in fields[0].split("-"))
                pagemap.seek(start // page * 8)
                entries = np.frombuffer(pagemap.read((end - start) // page * 8), dtype=np.uint64)
                present = np.concatenate(([0], ((entries >> np.uint64(63)) & np.uint64(1)).astype(np.int8), [0]))
                edges = np.flatnonzero(np.diff(present))
                for first, stop in zip(edges[::2], edges[1::2], strict=True):
                    ranges.append((start + int(first) * page, int(stop - first) * page))
    except (OSError, ValueError):
        return []
    return ranges


def _map_resident(ranges: list[tuple[int, int]]) -> None:
    """Map in this forked child the file-backed pages the server had mapped (see _resident_file_pages), so its
    memory figures count what a fresh child's import maps. No page is read from disk: they are in the page
    cache, shared with the server."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    page = os.sysconf("SC_PAGE_SIZE")
    for address, length in ranges:
        if libc.madvise(address, length, _MADV_POPULATE_READ) != 0 and ctypes.get_errno() == errno.EINVAL:
            for at in range(address, address + length, page):  # before Linux 5.14: a read per page
                ctypes.string_at(at, 1)
        # any other error (the range is no longer mapped): leave it


def _serve(control: Connection, data, children: set[int], resident: list[tuple[int, int]]) -> None:
    """Answer the parent's requests until it closes the pipe."""
    while True:
        try:
            request = control.recv()
        except (EOFError, OSError):
            return
        if request["op"] == "fork":
            fd = recv_handle(control)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _forked(request, fd, control, data, resident)  # never returns
            os.close(fd)  # the forked child holds the only copy: its death shows as EOF to the parent
            children.add(pid)
            control.send({"pid": pid})
        elif request["op"] == "wait":
            pid = request["pid"]
            code = _wait(pid, request.get("timeout"))
            if code is not None:
                children.discard(pid)
            control.send({"exitcode": code})


def _wait(pid: int, timeout: float | None) -> int | None:
    """Reap a forked child, waiting up to `timeout` s (None: for ever); its exit code (-N: killed by signal N),
    or None if it still runs."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG if deadline is not None else 0)
        except ChildProcessError:
            return 0  # reaped before: nothing more to know
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(WAIT_SLICE_SECONDS)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _die_with_parent() -> None:
    """Have the kernel kill this forked child if the server dies (a killed server must leave no orphans)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _forked(request: dict, fd: int, control: Connection, data, resident: list[tuple[int, int]]) -> None:
    """A forked child: train the request's run (or answer as the probe), then exit without the server's
    clean-up (os._exit: no atexit handlers or finalizers of the server run here)."""
    server = os.getppid()
    _die_with_parent()
    if os.getppid() != server:  # the server died between the fork and the prctl
        os._exit(1)
    code = 0
    conn = Connection(fd)
    try:
        control.close()  # the server's pipe is not this child's
        if request.get("log_path"):
            from batchlab.core.training.child import _redirect_output

            _redirect_output(request["log_path"])
        if request["kind"] == "probe":
            conn.send(_probe_report(request["spec"], True, data)[0])
        else:
            _map_resident(resident)  # timed as part of the process start (the fork)
            _train(request, conn, data)
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not return into the server's loop
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _train(request: dict, conn: Connection, data) -> None:
    """One run in this forked child, its events on `conn`; a stop is anything the parent writes on it."""
    startup = StartupClock.forked(request["requested_at"])
    run_dict = request["run"]
    try:
        run = RunSpec.from_dict(run_dict)
        _set_device_environment(run.sweep.device)
        tf, tf_device, nvml_index, device_name = _setup_tensorflow(
            run.sweep.device, run.sweep.tf_threads, run.sweep.replicas
        )
        from batchlab.core.training import run as run_module
        from batchlab.core.training import trainer

        if data is None:
            with startup.phase("data"):
                data = trainer.load_run_data(run)
        built = None
        if request.get("ahead"):  # prepare now, beside the run that trains; train when the parent says so
            from batchlab.core.training import ahead

            prepared = ahead.prepare(run, conn, tf_device, nvml_index, data, startup)
            if prepared is None:
                return  # the parent forks a child of its own for the run
            requested_at = ahead.wait_for_turn(conn)
            if requested_at is None:
                return  # let go untrained
            startup.requested(requested_at, FORKED)
            built, emit = prepared
            emit.release(conn.send)
        run_module.train_run(
            run,
            conn.send,
            lambda: conn.poll(0),
            tf_device,
            nvml_index,
            device_name,
            data=data,
            startup=startup,
            built=built,
        )
    except Exception as e:  # failures before training started; the sweep goes on with the next run
        _report_setup_failure(conn, run_dict.get("index"), e)
    finally:
        conn.close()
