"""The one sweep model: runs, their step and epoch columns, run attributes and the log.

Filled live from the event stream (``SweepData.handle``) or at once from a run file
(``SweepData.from_file`` / ``from_record``); both paths keep the same columns and run
attributes, and every figure a view, the CLI table or ``batchlab report`` shows is
``RunData.figures``, derived from them by batchlab.core.figures.run_figures (the rules are
there), so a run shows the same numbers live, reopened and in the report.
Plain Python and numpy: no Qt, no TensorFlow.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from batchlab.core import events as ev
from batchlab.core.figures import (
    FIGURE_NAMES,
    MEMORY_SOURCES,
    EvaluationPoints,
    RunFigures,
    evaluation_points,
    final_metrics,
    run_figures,
    steps_left_out,
)
from batchlab.core.runfile.format import column_values
from batchlab.core.runfile.liveness import WRITER_GONE_MESSAGE, writer_gone
from batchlab.core.runfile.reader import SweepRecord, read_run_file, status_if_writer_gone

__all__ = [
    "FAILED_STATUSES",
    "FIGURE_NAMES",
    "MEMORY_SOURCES",
    "Columns",
    "RunData",
    "RunFigures",
    "SweepData",
    "next_version",
    "run_figures",
]

FAILED_STATUSES = ("oom", "diverged", "crashed", "error")
# Event keys that are not run attributes.
_EVENT_KEYS = frozenset(("type", "run"))
_versions = itertools.count(1)


def next_version() -> int:
    """A number larger than every one handed out before; views redraw what changed since they last looked."""
    return next(_versions)


# ---------------------------------------------------------------------- runs


def _append_aligned(store: dict[str, list[float]], values: Mapping[str, Any], rows: int) -> None:
    """Set row `rows - 1` of each named column (created NaN-filled when new); pad every column to `rows`."""
    for name, value in values.items():
        column = store.setdefault(str(name), [])
        column.extend([math.nan] * (rows - 1 - len(column)))
        column.append(float(value) if value is not None else math.nan)
    for column in store.values():
        column.extend([math.nan] * (rows - len(column)))


class Columns:
    """Named numpy columns that grow by appending, with doubling capacity (amortised O(1) per row)."""

    def __init__(self, columns: Iterable[ev.Column], capacity: int = 256):
        self._columns = {c.name: c for c in columns}
        self._data = {c.name: np.empty(capacity, dtype=c.dtype) for c in self._columns.values()}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name][: self._n]

    def get(self, name: str, default: Any = None) -> np.ndarray | Any:
        return self[name] if name in self._data else default

    def names(self) -> tuple[str, ...]:
        return tuple(self._columns)

    def as_dict(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self._columns}

    def extend(self, values: Mapping[str, Any]) -> None:
        """Append equal-length lists (or scalars: one row); missing values become NaN / -1 as in the file."""
        lengths = {1 if np.ndim(values[k]) == 0 else len(values[k]) for k in self._columns if k in values}
        if not lengths:
            return
        count = max(lengths)
        self._reserve(self._n + count)
        for name, column in self._columns.items():
            self._data[name][self._n : self._n + count] = column_values(column, values.get(name), count)
        self._n += count

    def _reserve(self, size: int) -> None:
        capacity = len(next(iter(self._data.values())))
        if size <= capacity:
            return
        while capacity < size:
            capacity *= 2
        for name, arr in self._data.items():
            grown = np.empty(capacity, dtype=arr.dtype)
            grown[: self._n] = arr[: self._n]
            self._data[name] = grown


@dataclass
class RunData:
    """One run of a sweep: its plan, status, run attributes (as the file's run group holds them) and columns."""

    index: int
    batch_size: int
    seed: int
    status: str = "pending"
    message: str = ""
    steps_per_epoch: int | None = None
    epochs_planned: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # run_started / run_ended fields, or the file's
    steps: Columns = field(default_factory=lambda: Columns(ev.STEP_COLUMNS))
    epochs: Columns = field(default_factory=lambda: Columns(ev.EPOCH_COLUMNS, capacity=16))
    evals: Columns = field(default_factory=lambda: Columns(ev.EVAL_COLUMNS, capacity=16))  # evaluation points
    # gradient noise scale measurements (noise_scale_every; core/analysis/noise_scale.py reads them)
    noise_scale: Columns = field(default_factory=lambda: Columns(ev.NOISE_SCALE_COLUMNS, capacity=16))
    # the model's other compiled metrics at each evaluation point (val_mae, ...), NaN where a row lacks one
    eval_metrics: dict[str, list[float]] = field(default_factory=dict)
    # the running epoch's memory peaks so far (the steps event's "memory": epoch and the three readings); live only
    memory_so_far: dict[str, Any] = field(default_factory=dict)
    # the model's compiled metrics per epoch row (train_NAME, val_NAME), as the run file's metrics/ group
    metrics: dict[str, list[float]] = field(default_factory=dict)
    version: int = field(default_factory=next_version)  # any change
    steps_version: int = field(default_factory=next_version)  # new step rows
    epochs_version: int = field(default_factory=next_version)  # new epoch rows
    evals_version: int = field(default_factory=next_version)  # new evaluation rows
    noise_scale_version: int = field(default_factory=next_version)  # new noise scale rows
    _figures: tuple[int, RunFigures] | None = field(default=None, repr=False, compare=False)

    def touch(self) -> None:
        self.version = next_version()

    def table_version(self, table: str) -> int:
        """Version of the "steps", "epochs" or "evals" table: plots of one table skip redraws when another grew."""
        if table == "evals":
            return self.evals_version
        return self.steps_version if table == "steps" else self.epochs_version

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    @property
    def steps_left_out(self) -> bool:
        """True for a run of a summary-only export: its file keeps the figures of its steps but not the steps."""
        return steps_left_out(self.steps.as_dict(), self.attrs)

    @property
    def figures(self) -> RunFigures:
        """Every per-run figure (see run_figures), recomputed only when the run changed."""
        if self._figures is None or self._figures[0] != self.version:
            figures = run_figures(self.steps.as_dict(), self.epochs.as_dict(), self.attrs, self.evals_table())
            self._figures = (self.version, figures)
        return self._figures[1]

    def evals_table(self, rows: int | None = None) -> dict[str, np.ndarray]:
        """The evaluation points: the evals/ columns and the model's other metrics, the first `rows` (None: all)."""
        table = {k: np.asarray(v, dtype=np.float64) for k, v in self.eval_metrics.items()}
        table.update(self.evals.as_dict())
        return {k: v[:rows] for k, v in table.items()} if rows is not None else table

    def evaluation_points(self, rows: int | None = None) -> EvaluationPoints | None:
        """Its evaluation points for a loss plot and where it met its target (core.figures.evaluation_points)."""
        return evaluation_points(self.evals_table(rows), self.attrs)

    @property
    def final_metrics(self) -> dict[str, float]:
        """The last value of each compiled metric (core.figures.final_metrics), live and from a file alike."""
        return final_metrics(self.metrics)

    def planned_steps(self) -> int | None:
        """The steps this run plans (a steps/examples budget ends inside an epoch); None where not known yet."""
        planned = _int_or_none(self.attrs.get("planned_steps"))
        if not planned and self.steps_per_epoch and self.epochs_planned:
            planned = self.steps_per_epoch * self.epochs_planned
        return planned or None

    def step_fraction(self) -> float:
        """How far this run got, 0..1, from its steps and its planned total."""
        if self.status not in ("pending", "running"):
            return 1.0
        planned = self.planned_steps()
        if not planned:
            return 0.0
        return min(1.0, len(self.steps) / planned)


def _scalar_fields(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event's scalar fields, which the writer stores as run attributes."""
    return {
        k: v for k, v in event.items() if k not in _EVENT_KEYS and isinstance(v, (str, int, float, bool, np.generic))
    }


def _int_or_none(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


class SweepData:
    """All runs of one sweep; `handle(event)` applies the event stream in order."""

    def __init__(self, label: str = "", path: str | None = None):
        self.label = label
        self.path = path
        self.spec: dict[str, Any] = {}
        self.environment: dict[str, Any] = {}
        self.file_attrs: dict[str, Any] = {}  # a file's root attributes (writer_pid, ...); empty for a live sweep
        self.status = "running"
        self.message = ""
        self.runs: dict[int, RunData] = {}
        self.logs: list[dict[str, Any]] = []
        self.in_flight: list[int] = []  # the runs started and not ended, in the order they started
        self.summary_version = next_version()
        self._handlers = {
            ev.SWEEP_STARTED: self._on_sweep_started,
            ev.RUN_STARTED: self._on_run_started,
            ev.STEPS: self._on_steps,
            ev.EPOCH_ENDED: self._on_epoch_ended,
            ev.RUN_ENDED: self._on_run_ended,
            ev.LOG: self._on_log,
            ev.SWEEP_ENDED: self._on_sweep_ended,
            ev.EVALUATION: self._on_evaluation,
            ev.NOISE_SCALE: self._on_noise_scale,
        }

    # ------------------------------------------------------------ live events

    def handle(self, event: Mapping[str, Any]) -> None:
        """Apply one event; unknown types are ignored, as the writer does."""
        handler = self._handlers.get(event.get("type"))
        if handler is not None:
            handler(event)

    def _run(self, index: int) -> RunData:
        run = self.runs.get(index)
        if run is None:
            run = self.runs[index] = RunData(index=index, batch_size=0, seed=0)
        return run

    def _on_sweep_started(self, e: Mapping[str, Any]) -> None:
        self.spec = dict(e.get("spec") or {})
        self.environment = dict(e.get("environment") or {})
        self.status = "running"
        for r in e.get("runs", []):
            self.runs[int(r["index"])] = RunData(int(r["index"]), int(r["batch_size"]), int(r["seed"]))
        self.summary_version = next_version()

    def _on_run_started(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.attrs.update(_scalar_fields(e))
        run.batch_size = int(e.get("batch_size", run.batch_size))
        run.seed = int(e.get("seed", run.seed))
        run.status = "running"
        run.steps_per_epoch = _int_or_none(e.get("steps_per_epoch"))
        run.epochs_planned = _int_or_none(e.get("epochs"))
        if run.index in self.in_flight:
            self.in_flight.remove(run.index)
        self.in_flight.append(run.index)
        run.steps_version = run.epochs_version = next_version()  # plots make the run's curves now
        run.touch()
        self.summary_version = next_version()

    def _on_steps(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.steps.extend({k: e[k] for k in run.steps.names() if k in e})
        if isinstance(e.get("memory"), Mapping):
            run.memory_so_far = dict(e["memory"])
        run.steps_version = next_version()
        run.touch()

    def _on_epoch_ended(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.epochs.extend({k: e[k] for k in run.epochs.names() if k in e})
        _append_aligned(run.metrics, e.get("metrics") or {}, len(run.epochs))
        run.epochs_version = next_version()
        run.touch()

    def _on_evaluation(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.evals.extend({k: e[k] for k in run.evals.names() if k in e})
        _append_aligned(run.eval_metrics, e.get("metrics") or {}, len(run.evals))
        run.evals_version = next_version()
        run.touch()

    def _on_noise_scale(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.noise_scale.extend({k: e[k] for k in run.noise_scale.names() if k in e})
        run.noise_scale_version = next_version()
        run.touch()

    def _on_run_ended(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.attrs.update(_scalar_fields(e))
        run.status = str(e.get("status") or "error")
        run.message = str(e.get("message") or "")
        if run.index in self.in_flight:
            self.in_flight.remove(run.index)
        run.touch()
        self.summary_version = next_version()

    def _on_log(self, e: Mapping[str, Any]) -> None:
        self.logs.append(dict(e))

    def _on_sweep_ended(self, e: Mapping[str, Any]) -> None:
        self.status = str(e.get("status", "complete"))
        self.message = str(e.get("message") or "")
        self.in_flight = []
        for run in self.runs.values():
            if run.status == "pending":  # never started; the writer marks the file the same way
                run.status, run.message = ev.SKIPPED, ev.SKIPPED_MESSAGE
                run.touch()
        self.summary_version = next_version()

    # ------------------------------------------------------------ from a file

    @classmethod
    def from_record(
        cls, record: SweepRecord, label: str = "", path: str | None = None, pause: Callable[[], None] | None = None
    ) -> SweepData:
        """Build from a batchlab.core.runfile.SweepRecord (a file on disk, finished or still being written).
        `pause()`, if given, is called after each run (see from_file)."""
        data = cls(label=label, path=path)
        data.spec = dict(record.spec or {})
        data.environment = dict(record.environment or {})
        data.file_attrs = dict(record.attrs or {})
        data.status = str(record.status or "")
        data.message = str(record.message or "")
        for rec in record.runs:
            run = RunData(int(rec.index), int(rec.batch_size), int(rec.seed))
            run.status = str(rec.status)
            run.message = str(rec.message or "")
            run.attrs = dict(rec.attrs)
            run.steps_per_epoch = _int_or_none(rec.attrs.get("steps_per_epoch"))
            run.epochs_planned = _int_or_none(rec.attrs.get("epochs"))
            run.steps.extend(dict(rec.steps or {}))
            run.epochs.extend(dict(rec.epochs or {}))
            run.evals.extend(dict(rec.evals or {}))
            run.noise_scale.extend(dict(rec.noise_scale or {}))
            run.metrics = {k: [float(x) for x in v] for k, v in (rec.metrics or {}).items()}
            run.eval_metrics = {
                k: [float(x) for x in v] for k, v in (rec.evals or {}).items() if k not in ev.EVAL_COLUMN_NAMES
            }
            data.runs[run.index] = run
            if pause is not None:
                pause()
        data.end_if_writer_gone()
        return data

    def end_if_writer_gone(self) -> bool:
        """Read a file whose writer died as ended: when its sweep still says "running" and the process that
        wrote it is gone (core.runfile.liveness.writer_gone, the one rule), the sweep and its running run
        become "interrupted" with the message "the writing process ended". True when it applied."""
        if not writer_gone(self.status, self.file_attrs):
            return False
        self.status, self.message = status_if_writer_gone(self.status), WRITER_GONE_MESSAGE
        for run in self.runs.values():
            if run.status == "running":
                run.status, run.message = status_if_writer_gone(run.status), WRITER_GONE_MESSAGE
                run.touch()
        self.summary_version = next_version()
        return True

    @property
    def left_out_note(self) -> str:
        """What a summary-only export lacks, in one line for the report and the window ("" for other files)."""
        runs = [r for r in self.runs.values() if r.steps_left_out]
        if not runs:
            return ""
        return (
            f"summary-only export: the per-step tables of {len(runs)} runs were left out. Their figures (loss, "
            "time, throughput, step time, tracing) are those of the source, computed at export; per-step curves, the "
            "time account and the loss-level comparison need the steps: see the source file (its log names it)"
        )

    @property
    def status_text(self) -> str:
        """The sweep's status as `batchlab report` and the window word it: "complete", "running",
        "interrupted (the writing process ended)", "failed (why)"."""
        if self.message and self.status not in ("complete", "running"):
            return f"{self.status} ({self.message})"
        return self.status

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        label: str = "",
        progress: Callable[[int, int], None] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> SweepData:
        """Read a run file into the model; raises batchlab.core.runfile.RunFileError if it cannot.

        `progress(done, total)` after each run read (see read_run_file). Every run's figures are computed
        here too, so a window that reads in a worker thread does not compute them on its own. `pause()`, if
        given, is called after each run is built and after each run's figures (a reader thread gives the GUI
        thread the interpreter there; gui/file_reader.py).
        """
        record = read_run_file(path, progress=progress)
        data = cls.from_record(record, label=label or Path(path).name, path=str(path), pause=pause)
        for run in data.runs.values():
            run.figures  # noqa: B018 - computed now (cached on the run), not when a view first asks
            if pause is not None:
                pause()
        return data

    # ------------------------------------------------------------ questions views ask

    @property
    def current_run(self) -> int | None:
        """The run started last of those in flight (None when none is): with one run at a time, the running one."""
        return self.in_flight[-1] if self.in_flight else None

    def batch_sizes(self) -> list[int]:
        return sorted({r.batch_size for r in self.runs.values() if r.batch_size > 0})

    def ordered_runs(self) -> list[RunData]:
        return [self.runs[i] for i in sorted(self.runs)]

    def progress(self) -> float:
        """Fraction of the sweep done, 0..1: finished runs count whole, the running one by its steps."""
        if not self.runs:
            return 0.0
        return sum(r.step_fraction() for r in self.runs.values()) / len(self.runs)
