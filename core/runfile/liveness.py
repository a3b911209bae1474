"""Is a run file's writer still alive? The writer records who it is; a reader of a file that still
says "running" asks whether that process still runs (a killed writer never marks its file finished).

Qt- and TensorFlow-free; psutil reads the process table.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from typing import Any

import psutil

WRITER_ALIVE, WRITER_GONE, WRITER_UNKNOWN = "alive", "gone", "unknown"


def writer_identity() -> dict[str, Any]:
    """Root attributes naming the writing process (host, pid, its start time), so a reader can tell
    whether a file that still says "running" has a live writer (writer_state)."""
    try:
        started = float(psutil.Process().create_time())
    except (psutil.Error, OSError):
        started = math.nan
    return {"writer_host": socket.gethostname(), "writer_pid": os.getpid(), "writer_started": started}


def writer_state(attrs: Mapping[str, Any]) -> str:
    """WRITER_ALIVE when the process that wrote the file (root attributes writer_host, writer_pid,
    writer_started) still runs on this host, WRITER_GONE when it does not (no such pid, or a pid now
    used by a process started at another time), WRITER_UNKNOWN when that cannot be told (a file
    from another host or from before those attributes)."""
    pid, host = attrs.get("writer_pid"), attrs.get("writer_host")
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return WRITER_UNKNOWN
    if not host or str(host) != socket.gethostname() or pid <= 0:
        return WRITER_UNKNOWN
    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return WRITER_GONE
    except (psutil.Error, OSError):
        return WRITER_UNKNOWN
    try:
        recorded = float(attrs.get("writer_started"))
    except (TypeError, ValueError):
        recorded = math.nan
    if math.isfinite(recorded) and abs(started - recorded) > 1.0:
        return WRITER_GONE  # the pid was reused by a later process
    return WRITER_ALIVE


WRITER_GONE_MESSAGE = "the writing process ended"  # the message of a sweep or run read as interrupted by writer_gone


def writer_gone(status: str, attrs: Mapping[str, Any]) -> bool:
    """The one rule for a file whose writer died: it still says "running" (`status`, the sweep's) and its
    writer (root `attrs`) is WRITER_GONE. Such a sweep and its running run read "interrupted (the writing
    process ended)" in `batchlab report`, `--json`, the CSV export and the window alike (SweepData.end_if_writer_gone).
    A writer that cannot be checked (WRITER_UNKNOWN) is not taken for dead."""
    return status == "running" and writer_state(attrs) == WRITER_GONE
