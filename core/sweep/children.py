"""A run's training child as the local launcher holds it: its process, its event pipe and its stop flag.

`_RunChild` is the RunHandle (core/sweep/launcher.py) of LocalLauncher. No TensorFlow here.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchlab.core.spec import RunSpec
from batchlab.core.sweep.processes import _death_message, log_size
from batchlab.core.training.startup import REUSED, STANDBY


@dataclass
class _RunChild:
    """One run's training child: its process, its event pipe and, for run_main, the pipe that asks for the run."""

    run: RunSpec
    process: multiprocessing.process.BaseProcess
    events: Any  # the read end of the child's event pipe
    go: Any  # the write end of its request pipe; None: the entry trains at once
    stop_flag: Any  # multiprocessing Event (or _SocketStop): stop between steps
    log_path: Path
    ahead: str = STANDBY  # what it is when started ahead of its run: a standby, or the probe child
    log_offset: int = 0  # where this run's output starts in log_path (a reused child appends to a used log)
    kind: str = STANDBY  # what it was for its run (set when the run is started)
    note: str = ""  # what the log should say about how it was started
    placement: dict[str, Any] = field(default_factory=dict)  # where it trains, recorded with its run (the slot)

    # ---------------------------------------------------------------- the RunHandle interface

    def poll(self, timeout: float) -> bool:
        return self.events.poll(timeout)

    def recv(self) -> dict[str, Any]:
        return self.events.recv()

    def stop(self) -> None:
        self.stop_flag.set()

    def kill(self) -> None:
        self.process.kill()

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def death_message(self) -> str:
        return _death_message(self.process.exitcode, self.log_path, self.log_offset)

    # ---------------------------------------------------------------- the local launcher's own

    def request(self, kind: str, reuse: bool = False) -> None:
        """Ask the child for its run now; `kind` (fresh or standby) is recorded with the run. With `reuse` the
        request pipe stays open: after a run that ends ok the child waits on it for its next run."""
        if self.go is None:
            return
        try:
            self.go.send({"requested_at": time.time(), "child": kind, "reuse": reuse})
        except OSError:  # it died getting ready: the scheduler reads its report, or its death
            pass
        finally:
            if not reuse:
                self.release()

    def hand(self, run: RunSpec, log_path: Path) -> bool:
        """Give this child (idle after a run that ended ok) its next run; False if it cannot take it."""
        if self.go is None or not self.process.is_alive():
            return False
        try:
            offset = log_size(log_path)
            request = {"requested_at": time.time(), "child": REUSED, "run": run.to_dict(), "log_path": str(log_path)}
            self.go.send(request)
        except OSError:
            return False
        self.run, self.log_path, self.log_offset = run, log_path, offset
        return True

    def release(self) -> None:
        """Close the request pipe: a child waiting on it (a standby, or an idle reused child) exits."""
        if self.go is not None:
            self.go.close()
            self.go = None


class _SocketStop:
    """A forked child's stop flag: one byte on its socket, which the child polls between steps."""

    def __init__(self, conn):
        self._conn, self._sent = conn, False
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            if self._sent:
                return
            self._sent = True
            try:
                self._conn.send_bytes(b"s")
            except OSError:  # it exited already
                pass
