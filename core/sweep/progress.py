"""A terminal progress bar with ETA for a sweep, fed by the event stream."""

from __future__ import annotations

import math
import threading
import time
from typing import Any, TextIO

from batchlab.core.spec import SweepSpec

BAR_WIDTH = 24
REDRAW_SECONDS = 0.2  # at most five redraws a second
TICK_SECONDS = 1.0  # keeps elapsed time moving while a child starts TensorFlow


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

    def handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "run_started":
            self.current = {"batch": event["batch_size"], "seed": event["seed"], "epochs": event["epochs"], "epoch": 0}
            self.current_samples = 0
        elif kind == "steps":
            self.current_samples += sum(event["batch_size"])
            self.current["loss"] = event["loss"][-1]
            self.current["epoch"] = event["epoch"][-1]
        elif kind == "run_ended":
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
        f = self.fraction
        filled = int(round(f * BAR_WIDTH))
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        run_no = min(self.done_runs + 1, self.total_runs)
        parts = [f"[{bar}] {f * 100:3.0f}%", f"run {run_no}/{self.total_runs}"]
        if self.current:
            parts.append(f"batch {self.current['batch']}")
            parts.append(f"epoch {self.current['epoch'] + 1}/{self.current['epochs']}")
            if "loss" in self.current:
                parts.append(f"loss {self.current['loss']:.4g}")
        parts.append(f"elapsed {format_duration(time.monotonic() - self.t0)}")
        parts.append(f"ETA {format_duration(self.eta_seconds())}")
        return "  ".join(parts)


class ProgressPrinter:
    """Draws SweepProgress on a terminal (one redrawn line) or, when not a TTY, a line per run."""

    def __init__(self, spec: SweepSpec, stream: TextIO, enabled: bool = True):
        self.progress = SweepProgress(spec)
        self.stream = stream
        self.enabled = enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.last_draw = 0.0
        self.drawn = False
        self._lock = threading.Lock()  # events arrive on the caller's thread, ticks on our own
        self._closed = threading.Event()
        if self.tty:
            threading.Thread(target=self._tick, name="batchlab-progress", daemon=True).start()

    def _tick(self) -> None:
        while not self._closed.wait(TICK_SECONDS):
            with self._lock:
                if time.monotonic() - self.last_draw >= TICK_SECONDS:
                    self._draw()

    def note(self, text: str) -> None:
        if self.enabled:
            with self._lock:
                self._clear()
                print(text, file=self.stream, flush=True)

    def handle(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.progress.handle(event)
        if not self.enabled:
            return
        kind = event["type"]
        if kind == "run_ended":
            status = event["status"]
            loss = event.get("final_loss", math.nan)
            detail = f"final loss {loss:.4g}" if status == "ok" else event.get("message", "")
            self.note(f"run {event['run'] + 1}/{self.progress.total_runs}: {status} {detail}".rstrip())
        elif kind == "log" and event.get("level") in ("warning", "error"):
            self.note(f"{event['level']}: {event['message']}")
        with self._lock:
            if self.tty and time.monotonic() - self.last_draw >= REDRAW_SECONDS:
                self._draw()

    def _draw(self) -> None:
        self.stream.write("\r\x1b[2K" + self.progress.line())
        self.stream.flush()
        self.drawn = True
        self.last_draw = time.monotonic()

    def _clear(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[2K")
            self.drawn = False

    def close(self) -> None:
        self._closed.set()
        if self.enabled:
            with self._lock:
                self._clear()
                self.stream.flush()
