"""Training child processes as the parent handles them: start one with SIGINT blocked, reap or end it, and
say in one line why one died. Shared by the sweep runner, the probe, the peak measurement and max-batch.
No TensorFlow here.
"""

from __future__ import annotations

import multiprocessing
import signal
from pathlib import Path

POLL_SECONDS = 0.05  # how often a waiting parent looks at the stop flag
# How long the sweep's pump waits for a training child's next event before it looks at the stop flag and the
# child's life. A child streams steps every 0.25 s; with 50 ms the pump woke 20 times a second, each time
# taking a core from the training threads for a moment (at the window's nice +5 they yield to it at once).
# A stop reaches the child through its own flag at once; only the grace period's start and a death without
# end-of-file wait for this.
PUMP_WAIT_SECONDS = 0.5
STOP_GRACE_SECONDS = 20.0  # a run asked to stop gets this long to finish its step


def _log_tail(path: Path, lines: int = 1) -> str:
    """The last non-empty line(s) of a child's log, for crash messages."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())[:300]


def _death_message(exitcode: int | None, log_path: Path) -> str:
    if exitcode is not None and exitcode < 0:
        sig = signal.Signals(-exitcode).name
        cause = "often the host ran out of memory" if sig == "SIGKILL" else "a native crash"
        text = f"the training process died from {sig} ({cause})"
    else:
        text = f"the training process exited unexpectedly with code {exitcode}"
    tail = _log_tail(log_path)
    return f"{text}; last output: {tail}" if tail else text


def start_child(process: multiprocessing.process.BaseProcess) -> None:
    """Start a child with SIGINT blocked in it from its first instruction. A Ctrl-C goes to the terminal's
    whole process group; a child still importing (before its entry point ignores SIGINT, e.g. a standby started
    during the probe) would die with a KeyboardInterrupt traceback. The mask is inherited through fork and exec;
    the parent's own mask is restored at once, so its Ctrl-C (pending meanwhile) is not lost."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX
        process.start()
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _reap(process: multiprocessing.process.BaseProcess) -> None:
    """Wait for a child whose run ended to exit; kill it if it does not within the grace period."""
    process.join(timeout=STOP_GRACE_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()


def _end_process(process: multiprocessing.process.BaseProcess) -> None:
    """Kill a child that has not trained (a standby let go) and reap it."""
    if process.is_alive():
        process.kill()
    process.join()
