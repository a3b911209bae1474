"""Ctrl-C during a sweep run from the command line (batchlab sweep, profile, lr-find, bench)."""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchlab.core.sweep.progress import ProgressPrinter

INTERRUPT_POLL_SECONDS = 0.05  # how soon the watcher acts on a Ctrl-C


class Interrupts:
    """Ctrl-C during a sweep: the first stops after the current step, the second kills the current run.

    The signal handler only counts. It runs between any two bytecodes of the main thread, which may
    hold the progress printer's or the runner's lock at that moment, so acting there could deadlock;
    a watcher thread acts on the count instead.
    """

    def __init__(self, runner, progress: ProgressPrinter):
        self.runner = runner
        self.progress = progress
        self.count = 0  # written only by the handler
        self._acted = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="batchlab-ctrl-c", daemon=True)

    def on_signal(self, signum, frame) -> None:
        self.count += 1

    def __enter__(self) -> Interrupts:
        self._previous = signal.signal(signal.SIGINT, self.on_signal)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._previous)
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(INTERRUPT_POLL_SECONDS):
            while self._acted < self.count:
                self._acted += 1
                if self._acted == 1:
                    self.progress.note("stopping after the current step (Ctrl-C again to kill it)")
                    self.runner.stop()
                else:
                    self.progress.note("killing the current run")
                    self.runner.kill_current()
