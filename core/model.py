"""What the window knows about one sweep: runs, their step and epoch columns, and the log.

Filled either live from the event stream or at once from a run file, so every view
draws from one place. Plain Python and numpy: no Qt here, so it is cheap to test.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from batchlab.core import events as ev

FAILED_STATUSES = ("oom", "diverged", "crashed", "error")
_versions = itertools.count(1)


def next_version() -> int:
    """A number larger than every one handed out before; views redraw what changed since they last looked."""
    return next(_versions)


class Columns:
    """Named numpy columns that grow by appending, with doubling capacity (amortised O(1) per row)."""

    def __init__(self, columns: Iterable[ev.Column], capacity: int = 256):
        self._dtypes = {c.name: np.dtype(c.dtype) for c in columns}
        self._data = {name: np.empty(capacity, dtype=dt) for name, dt in self._dtypes.items()}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name][: self._n]

    def names(self) -> tuple[str, ...]:
        return tuple(self._dtypes)

    def extend(self, values: Mapping[str, Any]) -> None:
        """Append equal-length lists (or scalars: one row); missing columns are filled with NaN / -1."""
        lengths = {len(np.atleast_1d(values[k])) for k in self._dtypes if k in values}
        if not lengths:
            return
        count = max(lengths)
        self._reserve(self._n + count)
        for name, dt in self._dtypes.items():
            target = self._data[name]
            if name in values:
                target[self._n : self._n + count] = np.asarray(values[name], dtype=dt)
            else:
                target[self._n : self._n + count] = np.nan if dt.kind == "f" else -1
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
    """One run of a sweep as the window sees it."""

    index: int
    batch_size: int
    seed: int
    status: str = "pending"
    message: str = ""
    steps_per_epoch: int | None = None
    epochs_planned: int | None = None
    final_loss: float = math.nan
    total_time: float = math.nan
    samples_per_s: float = math.nan
    recorded_peak_bytes: int = -1
    steps: Columns = field(default_factory=lambda: Columns(ev.STEP_COLUMNS))
    epochs: Columns = field(default_factory=lambda: Columns(ev.EPOCH_COLUMNS, capacity=16))
    version: int = field(default_factory=next_version)  # any change
    steps_version: int = field(default_factory=next_version)  # new step rows
    epochs_version: int = field(default_factory=next_version)  # new epoch rows

    def touch(self) -> None:
        self.version = next_version()

    def table_version(self, table: str) -> int:
        """Version of the "steps" or "epochs" table: plots of one table skip redraws when only the other grew."""
        return self.steps_version if table == "steps" else self.epochs_version

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    @property
    def peak_memory_bytes(self) -> int:
        """Peak memory as the CLI report counts it: TensorFlow's allocator peak, else device, else host RSS."""
        for name in ("tf_peak_bytes", "device_memory_bytes", "rss_peak_bytes"):
            col = self.epochs[name]
            if len(col) and (col >= 0).any():
                return int(col.max())
        return self.recorded_peak_bytes

    def last_loss(self) -> float:
        """The final loss if the run reported one, else the last finite step loss (NaN if none)."""
        if math.isfinite(self.final_loss):
            return self.final_loss
        loss = self.steps["loss"]
        finite = loss[np.isfinite(loss)]
        return float(finite[-1]) if len(finite) else math.nan

    def step_fraction(self) -> float:
        """How far this run got, 0..1, from its steps and its planned total."""
        if self.status not in ("pending", "running"):
            return 1.0
        if not self.steps_per_epoch or not self.epochs_planned:
            return 0.0
        return min(1.0, len(self.steps) / (self.steps_per_epoch * self.epochs_planned))


class SweepData:
    """All runs of one sweep; `handle(event)` applies the event stream in order."""

    def __init__(self, label: str = "", path: str | None = None):
        self.label = label
        self.path = path
        self.spec: dict[str, Any] = {}
        self.environment: dict[str, Any] = {}
        self.status = "running"
        self.message = ""
        self.runs: dict[int, RunData] = {}
        self.logs: list[dict[str, Any]] = []
        self.current_run: int | None = None
        self.summary_version = next_version()

    # ------------------------------------------------------------ live events

    def handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        handler = getattr(self, f"_on_{kind}", None)
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
        run.batch_size = int(e.get("batch_size", run.batch_size))
        run.seed = int(e.get("seed", run.seed))
        run.status = "running"
        run.steps_per_epoch = e.get("steps_per_epoch")
        run.epochs_planned = e.get("epochs")
        self.current_run = run.index
        run.steps_version = run.epochs_version = next_version()  # plots make the run's curves now
        run.touch()
        self.summary_version = next_version()

    def _on_steps(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.steps.extend({k: e[k] for k in ev.STEP_COLUMN_NAMES if k in e})
        run.steps_version = next_version()
        run.touch()

    def _on_epoch_ended(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.epochs.extend({k: e[k] for k in ev.EPOCH_COLUMN_NAMES if k in e})
        run.epochs_version = next_version()
        run.touch()

    def _on_run_ended(self, e: Mapping[str, Any]) -> None:
        run = self._run(int(e["run"]))
        run.status = str(e.get("status", "error"))
        run.message = str(e.get("message") or "")
        run.final_loss = _float(e.get("final_loss"))
        run.total_time = _float(e.get("total_time"))
        run.samples_per_s = _float(e.get("samples_per_s"))
        run.touch()
        self.summary_version = next_version()

    def _on_log(self, e: Mapping[str, Any]) -> None:
        self.logs.append(dict(e))

    def _on_sweep_ended(self, e: Mapping[str, Any]) -> None:
        self.status = str(e.get("status", "complete"))
        self.message = str(e.get("message") or "")
        self.current_run = None
        self.summary_version = next_version()

    # ------------------------------------------------------------ from a file

    @classmethod
    def from_record(cls, record: Any, label: str = "", path: str | None = None) -> SweepData:
        """Build from batchlab.core.runfile's SweepRecord (a file on disk, finished or still being written)."""
        data = cls(label=label, path=path)
        data.spec = dict(getattr(record, "spec", {}) or {})
        data.environment = dict(getattr(record, "environment", {}) or {})
        data.status = str(getattr(record, "status", "") or "")
        for rec in record.runs:
            run = RunData(int(rec.index), int(rec.batch_size), int(rec.seed))
            run.status = str(rec.status)
            run.message = str(getattr(rec, "message", "") or "")
            run.steps.extend(dict(rec.steps or {}))
            run.epochs.extend(dict(rec.epochs or {}))
            run.final_loss = _float(getattr(rec, "final_loss", None))
            run.total_time = _float(getattr(rec, "total_time", None))
            run.samples_per_s = _float(getattr(rec, "samples_per_s", None))
            peak = getattr(rec, "peak_memory_bytes", None)
            run.recorded_peak_bytes = int(peak) if peak is not None and math.isfinite(float(peak)) else -1
            data.runs[run.index] = run
        return data

    # ------------------------------------------------------------ questions views ask

    def batch_sizes(self) -> list[int]:
        return sorted({r.batch_size for r in self.runs.values() if r.batch_size > 0})

    def ordered_runs(self) -> list[RunData]:
        return [self.runs[i] for i in sorted(self.runs)]

    def progress(self) -> float:
        """Fraction of the sweep done, 0..1: finished runs count whole, the running one by its steps."""
        if not self.runs:
            return 0.0
        return sum(r.step_fraction() for r in self.runs.values()) / len(self.runs)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
