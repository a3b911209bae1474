"""Whether a run file's writer is alive (core/runfile/liveness.py), from the root attributes it records."""

import socket
import subprocess
import sys

import h5py
from batchlab.core.runfile import RunFileWriter
from batchlab.core.runfile.liveness import WRITER_ALIVE, WRITER_GONE, WRITER_UNKNOWN, writer_identity, writer_state


def test_writer_state_alive_gone_reused_pid_and_unknown(tmp_path):
    with RunFileWriter(tmp_path / "a.h5") as writer:
        writer.flush()
        with h5py.File(tmp_path / "a.h5", "r", locking=False) as f:
            attrs = dict(f.attrs)
    assert attrs["writer_host"] == socket.gethostname()
    assert writer_state(attrs) == WRITER_ALIVE  # this test process wrote it
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert writer_state({**attrs, "writer_pid": int(dead.stdout)}) == WRITER_GONE
    me = writer_identity()
    assert writer_state({**me, "writer_started": me["writer_started"] - 3600}) == WRITER_GONE  # pid reused since
    assert writer_state({**me, "writer_host": "another-host"}) == WRITER_UNKNOWN
    assert writer_state({}) == WRITER_UNKNOWN  # a file from before the writer was recorded
