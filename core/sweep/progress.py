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
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from batchlab.core.events import LOG, RUN_ENDED, RUN_STARTED, STEPS, SWEEP_STARTED
from batchlab.core.model import SweepData
from batchlab.core.spec import SweepSpec
from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

BAR_WIDTH = 24  # characters
NARROW_BAR_WIDTH = 10  # characters, on a terminal narrower than the full line needs (80 columns)
GAP = 2  # spaces between the bar and the line's parts
# What the line drops first when the terminal is too narrow: the ETA and the run stay to the last.
DROP_ORDER = ("elapsed", "epoch", "batch", "loss")
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


@dataclass
class _RunClock:
    """What one run has shown so far: samples trained, seconds of training, and its start-up cost (s)."""

    batch_size: int
    requested: float  # clock when the run was asked for (the previous run's end, or the sweep's start)
    samples: int = 0
    train_s: float = 0.0  # s of training since the first step ended (the run's own wall_time clock)
    startup_s: float = math.nan  # request -> first step done: process start, TensorFlow, data, model, tracing
    first_wall: float = 0.0  # s: the run's wall_time at the end of its first step
    first_samples: int = 0  # samples of that first step (counted in the start-up, not in the training rate)


def fit_step_time(measured: dict[int, float]) -> Callable[[int], float] | None:
    """Least-squares step time t(B) = alpha + beta*B (s) over the measured {batch size: step time (s)}.

    None when fewer than two batch sizes are measured or the fit is not increasing (noise), so
    callers fall back to constant samples/s.
    """
    if len(measured) < 2:
        return None
    batches = np.array(sorted(measured), dtype=float)
    times = np.array([measured[int(b)] for b in batches])
    beta, alpha = np.polyfit(batches, times, 1)
    if not (math.isfinite(alpha) and math.isfinite(beta)) or beta <= 0:
        return None
    return lambda b: alpha + beta * b


class SweepProgress:
    """Fraction done and ETA of a sweep, counted in training samples (each run sees the same number).

    The ETA sums, over the runs still to come, the predicted training time at their batch size plus
    the measured per-run start-up cost (see eta_seconds). `clock` (seconds, monotonic) is injectable
    so recorded event streams can be replayed with their own timing.
    """

    def __init__(self, spec: SweepSpec, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.plan = {r.index: r.batch_size for r in spec.runs()}
        self.total_runs = len(self.plan)
        # training examples each run's budget plans (a steps budget plans more at larger batches)
        self.run_samples = {r.index: spec.budget.examples(spec.samples, r.batch_size) for r in spec.runs()}
        self.total = sum(self.run_samples.values())
        self.done_runs = 0
        self.t0 = clock()
        self._requested = self.t0  # when the next run was asked for
        self._runs: dict[int, _RunClock] = {}
        self._ended: set[int] = set()
        # The runs in flight, by run, in the order they started: batch, seed, epochs, epoch, loss, samples.
        self._live: dict[int, dict[str, Any]] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            SWEEP_STARTED: self._on_sweep_started,
            RUN_STARTED: self._on_run_started,
            STEPS: self._on_steps,
            RUN_ENDED: self._on_run_ended,
        }

    def handle(self, event: dict[str, Any]) -> None:
        handler = self._handlers.get(event["type"])
        if handler is not None:
            handler(event)

    @property
    def in_flight(self) -> list[int]:
        """The runs started and not ended, in the order they started."""
        return list(self._live)

    @property
    def current(self) -> dict[str, Any]:
        """The run started last of those in flight (batch, seed, epochs, epoch, loss); {} when none is."""
        if not self._live:
            return {}
        live = self._live[next(reversed(self._live))]
        return {k: v for k, v in live.items() if k != "samples"}

    def _on_sweep_started(self, event: dict[str, Any]) -> None:
        self._requested = self.clock()

    def _on_run_started(self, event: dict[str, Any]) -> None:
        index = int(event.get("run", self.done_runs))
        self._live[index] = {
            "batch": event["batch_size"],
            "seed": event["seed"],
            "epochs": event["epochs"],
            "epoch": 0,
            "samples": 0,
        }
        self._runs[index] = _RunClock(int(event["batch_size"]), self._requested)

    def _on_steps(self, event: dict[str, Any]) -> None:
        index = int(event.get("run", -1))
        live = self._live.get(index)
        if live is not None:
            live["samples"] += sum(event["batch_size"])
            live["loss"] = event["loss"][-1]
            live["epoch"] = event["epoch"][-1]
        run = self._runs.get(index)
        if run is None:
            return
        now = self.clock()
        run.samples += sum(event["batch_size"])
        walls = [w for w in event.get("wall_time", []) if math.isfinite(w)]
        if not walls:  # a producer without the wall_time column: start-up and training cannot be told apart
            run.startup_s, run.train_s = 0.0, now - run.requested
            return
        if math.isnan(run.startup_s):
            # Start-up runs to the end of the run's first step, which also traces the step function (a cost
            # every run pays once); this event's last step ended about now, walls[-1] - walls[0] after it.
            run.startup_s = max(0.0, now - run.requested - (walls[-1] - walls[0]))
            run.first_wall, run.first_samples = walls[0], event["batch_size"][0]
        run.train_s = walls[-1] - run.first_wall

    def _on_run_ended(self, event: dict[str, Any]) -> None:
        self.done_runs += 1
        index = int(event.get("run", -1))
        self._live.pop(index, None)
        self._ended.add(index)
        self._requested = self.clock()

    @property
    def fraction(self) -> float:
        done = sum(self.run_samples.get(i, 0) for i in self._ended)
        done += sum(min(live["samples"], self.run_samples.get(i, 0)) for i, live in self._live.items())
        return min(1.0, done / self.total) if self.total else 1.0

    def _startup_s(self) -> float:
        """Mean measured start-up cost per run (s); the first run's (which also carries the sweep's
        one-off preflight) counts only until a later run has been measured."""
        costs = [r.startup_s for _, r in sorted(self._runs.items()) if math.isfinite(r.startup_s)]
        if len(costs) > 1:
            costs = costs[1:]
        return float(np.mean(costs)) if costs else math.nan

    def _seconds_per_sample(self) -> Callable[[int], float] | None:
        """Training seconds per sample at a batch size: measured where a run of it has trained, else from
        the step-time fit over the measured sizes (constant samples/s with one). None before any data."""
        samples: dict[int, int] = {}
        seconds: dict[int, float] = {}
        for run in self._runs.values():
            if run.samples > run.first_samples and run.train_s > 0:
                samples[run.batch_size] = samples.get(run.batch_size, 0) + run.samples - run.first_samples
                seconds[run.batch_size] = seconds.get(run.batch_size, 0.0) + run.train_s
        if not samples:
            return None
        measured = {b: seconds[b] / samples[b] for b in samples}
        fit = fit_step_time({b: per_sample * b for b, per_sample in measured.items()})

        def per_sample(b: int) -> float:
            if b in measured:
                return measured[b]
            if fit is not None and fit(b) > 0:
                return fit(b) / b
            nearest = min(measured, key=lambda m: abs(math.log(m / b)))
            return measured[nearest]

        return per_sample

    def _waiting(self) -> set[int]:
        """The runs whose start-up is under way now: those in flight, else the first planned run not ended."""
        if self._live:
            return set(self._live)
        return {min((i for i in self.plan if i not in self._ended), default=-1)}

    def eta_seconds(self) -> float:
        """Seconds left: for each run still to come, samples x measured (or fitted) seconds per sample at its
        batch size plus the mean start-up cost; the running run counts its samples still to train. NaN
        until the first run has trained a step."""
        per_sample = self._seconds_per_sample()
        startup = self._startup_s()
        if per_sample is None or not math.isfinite(startup):
            return math.nan
        now = self.clock()
        waiting = self._waiting()
        remaining = 0.0
        for index, batch in self.plan.items():
            if index in self._ended:
                continue
            run = self._runs.get(index)
            to_train = self.run_samples[index] - batch  # the first step is part of the start-up cost
            if run is None or run.samples == 0:  # to come, or its process is starting
                waited = now - self._requested if index in waiting else 0.0
                remaining += max(0.0, startup - waited) + to_train * per_sample(batch)
            else:
                remaining += max(0, self.run_samples[index] - run.samples) * per_sample(batch)
        return remaining

    def line(self, width: int | None = None) -> str:
        """Percent done, the current run, batch, epoch and loss, elapsed time and ETA (the text beside the bar).
        Within `width` characters if given: the least needed parts go first (DROP_ORDER), never the ETA."""
        run_no = min(self.done_runs + 1, self.total_runs)
        flying = len(self._live)
        runs = f"runs {run_no}-{self.done_runs + flying}" if flying > 1 else f"run {run_no}"
        parts = {"percent": f"{self.fraction * 100:3.0f}%", "run": f"{runs}/{self.total_runs}"}
        if self.current:  # the run started last, with several in flight
            parts["batch"] = f"batch {self.current['batch']}"
            parts["epoch"] = f"epoch {self.current['epoch'] + 1}/{self.current['epochs']}"
            if "loss" in self.current:
                parts["loss"] = f"loss {self.current['loss']:.4g}"
        parts["elapsed"] = f"elapsed {format_duration(self.clock() - self.t0)}"
        parts["eta"] = f"ETA {format_duration(self.eta_seconds())}"
        text = "  ".join(parts.values())
        for name in DROP_ORDER:
            if width is None or len(text) <= width:
                break
            parts.pop(name, None)
            text = "  ".join(parts.values())
        return text


def _target_note(run) -> str:
    """ ", target met at step N (T s of training)" or ", target not reached", from the run's figures; "" without one."""
    if run is None or run.figures.target_reached == -1:
        return ""
    f = run.figures
    if f.target_reached == 1:
        return f", target met at step {f.steps_to_target:.0f} ({f.time_to_target:.3g} s of training)"
    return ", target not reached"


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
        columns = self._live.console.width if self._live is not None else 10_000
        with self._lock:
            fraction, full = self.progress.fraction, self.progress.line()
            bar = BAR_WIDTH if BAR_WIDTH + GAP + len(full) <= columns else NARROW_BAR_WIDTH
            text = self.progress.line(width=columns - bar - GAP - 1)  # the last column: no wrap on any terminal
        row = Table.grid(padding=(0, GAP))
        row.add_row(ProgressBar(total=1.0, completed=fraction, width=bar), Text(text, no_wrap=True))
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
            self.note(f"run {event['run'] + 1}/{total_runs}: {status} {detail}{_target_note(run)}".rstrip())
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
