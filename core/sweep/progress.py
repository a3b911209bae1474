"""The CLI's progress display for a sweep, fed by the event stream.

SweepProgress (ours) turns events into the fraction done and an ETA; on a terminal, rich draws it as
a bar that redraws itself, with notes printed above it. Without a terminal (a log file, CI) a plain
line per finished run and per warning is printed instead.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from batchlab.core.events import LOG, RUN_ENDED, RUN_STARTED, STEPS
from batchlab.core.model import SweepData
from batchlab.core.spec import SweepSpec
from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

BAR_WIDTH = 24  # characters
REFRESH_PER_SECOND = 4  # redraws; keeps elapsed time moving while a child starts TensorFlow
NOTED_LOG_LEVELS = ("warning", "error")


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "--"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class SweepProgress:
    """Fraction done and ETA of a sweep, counted in training samples (each run sees the same number)."""

    def __init__(self, spec: SweepSpec):
        self.total_runs = len(spec.runs())
        self.samples_per_run = spec.samples * spec.epochs
        self.total = self.total_runs * self.samples_per_run
        self.done_runs = 0
        self.current_samples = 0
        self.t0 = time.monotonic()
        self.current: dict[str, Any] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            RUN_STARTED: self._on_run_started,
            STEPS: self._on_steps,
            RUN_ENDED: self._on_run_ended,
        }

    def handle(self, event: dict[str, Any]) -> None:
        handler = self._handlers.get(event["type"])
        if handler is not None:
            handler(event)

    def _on_run_started(self, event: dict[str, Any]) -> None:
        self.current = {"batch": event["batch_size"], "seed": event["seed"], "epochs": event["epochs"], "epoch": 0}
        self.current_samples = 0

    def _on_steps(self, event: dict[str, Any]) -> None:
        self.current_samples += sum(event["batch_size"])
        self.current["loss"] = event["loss"][-1]
        self.current["epoch"] = event["epoch"][-1]

    def _on_run_ended(self, event: dict[str, Any]) -> None:
        self.done_runs += 1
        self.current_samples = 0
        self.current = {}

    @property
    def fraction(self) -> float:
        done = self.done_runs * self.samples_per_run + min(self.current_samples, self.samples_per_run)
        return min(1.0, done / self.total) if self.total else 1.0

    def eta_seconds(self) -> float:
        f = self.fraction
        return (time.monotonic() - self.t0) * (1 - f) / f if f > 0 else math.nan

    def line(self) -> str:
        """Percent done, the current run, batch, epoch and loss, elapsed time and ETA (the text beside the bar)."""
        run_no = min(self.done_runs + 1, self.total_runs)
        parts = [f"{self.fraction * 100:3.0f}%", f"run {run_no}/{self.total_runs}"]
        if self.current:
            parts.append(f"batch {self.current['batch']}")
            parts.append(f"epoch {self.current['epoch'] + 1}/{self.current['epochs']}")
            if "loss" in self.current:
                parts.append(f"loss {self.current['loss']:.4g}")
        parts.append(f"elapsed {format_duration(time.monotonic() - self.t0)}")
        parts.append(f"ETA {format_duration(self.eta_seconds())}")
        return "  ".join(parts)


class ProgressPrinter:
    """Shows SweepProgress: a live bar on a terminal, or a line per finished run when not a TTY.

    Thread-safe: events arrive on the caller's thread, notes may come from another (the CLI's
    Ctrl-C watcher), and rich redraws from its own.
    """

    def __init__(self, spec: SweepSpec, stream: TextIO, enabled: bool = True):
        self.progress = SweepProgress(spec)
        # The run's figures in the notes come from the one sweep model, so they match `batchlab report`.
        self.model = SweepData()
        self.stream = stream
        self.enabled = enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self._lock = threading.Lock()  # guards self.progress; never held while calling into rich
        self._live: Live | None = None
        if self.tty:
            console = Console(file=stream, force_terminal=True, highlight=False)
            self._live = Live(
                console=console,
                get_renderable=self._renderable,
                refresh_per_second=REFRESH_PER_SECOND,
                transient=True,  # the bar goes when the sweep ends; the notes above it stay
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)

    def _renderable(self) -> Table:
        with self._lock:
            fraction, text = self.progress.fraction, self.progress.line()
        row = Table.grid(padding=(0, 2))
        row.add_row(ProgressBar(total=1.0, completed=fraction, width=BAR_WIDTH), Text(text, no_wrap=True))
        return row

    def note(self, text: str) -> None:
        """A line above the bar (or on its own without a terminal)."""
        if not self.enabled:
            return
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def handle(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.progress.handle(event)
            self.model.handle(event)
            total_runs = self.progress.total_runs
        kind = event["type"]
        if kind == RUN_ENDED:
            status = event["status"]
            run = self.model.runs.get(int(event["run"]))
            loss = run.figures.final_loss if run is not None else math.nan
            detail = f"final loss {loss:.4g}" if status == "ok" else event.get("message", "")
            self.note(f"run {event['run'] + 1}/{total_runs}: {status} {detail}".rstrip())
        elif kind == LOG and event.get("level") in NOTED_LOG_LEVELS:
            # One line: a failed run's full traceback is in the run file's log, not on the terminal.
            lines = str(event.get("message", "")).strip().splitlines() or [""]
            shown = lines[-1] if lines[0].startswith("Traceback") else lines[0]  # a traceback ends in its error
            more = " (traceback in the run file's log)" if len(lines) > 1 else ""
            self.note(f"{event['level']}: {shown}{more}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.enabled:
            self.stream.flush()
