"""The parent's side of the fork server (core/training/zygote.py): start it, have it fork a child per run.

No TensorFlow here. The server is a spawned child; each child it forks is handed to the runner as a
`ForkedProcess`, which answers what the runner asks of a multiprocessing Process (is_alive, kill,
join, exitcode): the forked child is the server's child, not ours, so the server reaps it and
reports its exit code when asked.
"""

from __future__ import annotations

import os
import platform
import signal
import threading
import time
from pathlib import Path
from typing import Any

from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.training.zygote import zygote_main

READY_TIMEOUT_SECONDS = 600.0  # the import, and a first Keras dataset download


def fork_possible() -> bool:
    """Whether this platform can run a fork server (Linux: os.fork and /proc)."""
    return platform.system() == "Linux" and hasattr(os, "fork")


class ForkServerGone(Exception):
    """The server died or closed its pipe: the run goes to a child of its own instead."""


class ForkedProcess:
    """A child forked by the server, seen as the runner sees a multiprocessing Process."""

    def __init__(self, server: ForkServer, pid: int, name: str):
        self.server, self.pid, self.name = server, pid, name
        self._exitcode: int | None = None

    def is_alive(self) -> bool:
        """Running (not exited): the server reaps only when asked, so an exited child is a zombie till then."""
        if self._exitcode is not None:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def kill(self) -> None:
        if self._exitcode is None:  # not reaped yet, so the pid is still this child's
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def join(self, timeout: float | None = None) -> None:
        if self._exitcode is None:
            self._exitcode = self.server.wait(self.pid, timeout)

    @property
    def exitcode(self) -> int | None:
        if self._exitcode is None and not self.is_alive():
            self.join(timeout=5.0)
        return self._exitcode


class ForkServer:
    """One sweep's fork server: started, it imports TensorFlow and loads the data; then forks on request."""

    def __init__(self, ctx, spec: SweepSpec, log_path: Path, niceness: int, start):
        """`start(process)` starts a multiprocessing Process (the runner's start_child)."""
        self._control, server_end = ctx.Pipe(duplex=True)
        self._lock = threading.Lock()
        self._ctx = ctx
        self.process = ctx.Process(
            target=zygote_main,
            args=(spec.to_dict(), server_end, str(log_path), niceness),
            daemon=True,
            name="batchlab-fork-server",
        )
        start(self.process)
        server_end.close()
        self.ready: dict[str, float] | None = None  # seconds of its import and data, once it answered

    def wait_ready(self, should_stop, timeout: float = READY_TIMEOUT_SECONDS) -> bool:
        """Wait for the server's import and data (in short slices); False if it died or `should_stop` said so."""
        if self.ready is not None:
            return True
        deadline = time.monotonic() + timeout
        try:
            while not self._control.poll(0.05):
                if should_stop() or time.monotonic() > deadline or not self.process.is_alive():
                    return False
            self.ready = self._control.recv()["ready"]
        except (EOFError, OSError):
            return False
        return True

    def fork(self, kind: str, log_path: Path, **fields: Any) -> tuple[ForkedProcess, Any]:
        """Fork a child for a run (kind "run", with run=, requested_at=) or the probe (kind "probe", spec=); its
        process and the parent's end of its socket (events in; a stop out). ForkServerGone if it cannot."""
        if not self.wait_ready(lambda: False):
            raise ForkServerGone
        mine, theirs = self._ctx.Pipe(duplex=True)
        try:
            with self._lock:
                self._control.send({"op": "fork", "kind": kind, "log_path": str(log_path), **fields})
                _send_fd(self._control, theirs.fileno())
                answer = self._control.recv()
        except (EOFError, OSError) as e:
            mine.close()
            raise ForkServerGone from e
        finally:
            theirs.close()  # the forked child holds the only copy: its death shows as EOF on `mine`
        name = f"batchlab-{kind}-{fields['run']['index']}" if kind == "run" else "batchlab-probe"
        return ForkedProcess(self, int(answer["pid"]), name), mine

    def fork_run(self, run: RunSpec, log_path: Path, ahead: bool = False) -> tuple[ForkedProcess, Any]:
        """A child for `run`; with `ahead` it prepares the run and waits for its turn (core/training/ahead.py)."""
        return self.fork("run", log_path, run=run.to_dict(), requested_at=time.time(), ahead=ahead)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """Have the server reap a forked child (waiting up to `timeout` s); its exit code, or None if it runs.
        If the server is gone, so is the child (it dies with the server): reported as killed."""
        try:
            with self._lock:
                self._control.send({"op": "wait", "pid": pid, "timeout": timeout})
                return self._control.recv()["exitcode"]
        except (EOFError, OSError):
            return -signal.SIGKILL

    def alive(self) -> bool:
        return self.process.is_alive()

    def close(self, grace: float = 20.0) -> None:
        """End the server: it kills and reaps any child it forked that still runs, then exits."""
        self._control.close()
        self.process.join(timeout=grace)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    def kill(self) -> None:
        """Kill the server at once; its forked children die with it (PR_SET_PDEATHSIG)."""
        if self.process.is_alive():
            self.process.kill()


def _send_fd(conn, fd: int) -> None:
    from multiprocessing.reduction import send_handle

    send_handle(conn, fd, None)
