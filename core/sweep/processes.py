"""Training child processes as the parent handles them: start one with SIGINT blocked, reap or end it, and
say in one line why one died. Shared by the sweep runner, the probe, the peak measurement and max-batch.
No TensorFlow here.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.05  # how often a waiting parent looks at the stop flag
# How long the sweep's pump waits for a training child's next event before it looks at the stop flag and the
# child's life. A child streams steps every 0.25 s; with 50 ms the pump woke 20 times a second, each time
# taking a core from the training threads for a moment (at the window's nice +5 they yield to it at once).
# A stop reaches the child through its own flag at once; only the grace period's start and a death without
# end-of-file wait for this.
PUMP_WAIT_SECONDS = 0.5
STOP_GRACE_SECONDS = 20.0  # a run asked to stop gets this long to finish its step


# TensorFlow's start-up lines: every child prints them, whatever later killed it, so quoted as a crash's
# "last output" they mislead (a "failed call to cuInit" on a host that has no GPU and needs none).
STARTUP_CHATTER = (
    "failed call to cuInit",
    "Could not find cuda drivers",
    "absl::InitializeLog()",
    "oneDNN custom operations",
    "TF_ENABLE_ONEDNN_OPTS",
    "This TensorFlow binary is optimized",
    "rebuild TensorFlow with the appropriate compiler flags",
    "Unable to register cu",
    "computation placer already registered",
    "TF-TRT Warning",
)


def _log_tail(path: Path, lines: int = 1, since: int = 0) -> str:
    """The last non-empty line(s) of a child's log written from byte `since` on (what this run's process
    wrote: a log may already hold a let-go standby's output), TensorFlow's start-up lines left out."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    text = [line.strip() for line in text if line.strip() and not any(c in line for c in STARTUP_CHATTER)]
    return " | ".join(text[-lines:])[:300]


def log_size(path: Path) -> int:
    """Bytes in a log now (0 if it does not exist yet): where the next run's output will start."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _death_message(exitcode: int | None, log_path: Path, since: int = 0) -> str:
    if exitcode is not None and exitcode < 0:
        sig = signal.Signals(-exitcode).name
        cause = "often the host ran out of memory" if sig == "SIGKILL" else "a native crash"
        text = f"the training process died from {sig} ({cause})"
    else:
        text = f"the training process exited unexpectedly with code {exitcode}"
    tail = _log_tail(log_path, since=since)
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


def with_environment(env: dict[str, str], target: Callable[..., Any], *args: Any) -> Any:
    """A child's entry with `env` set first: run in the spawned child, before `target` (and so before TensorFlow,
    which reads CUDA_VISIBLE_DEVICES once, at its import) runs. The parent's own environment is never changed,
    so a child started at the same moment from another thread cannot inherit another child's GPU."""
    os.environ.update(env)
    return target(*args)


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
