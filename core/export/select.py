"""Which runs of one or more run files an export takes: by batch size, seed and status.

Shared by the HDF5 export (core/export/hdf5.py) and the TensorBoard export (core/export/tensorboard.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from batchlab.core.errors import SpecError
from batchlab.core.events import RUN_FILE_STATUSES
from batchlab.core.runfile.liveness import WRITER_GONE_MESSAGE, writer_gone
from batchlab.core.runfile.reader import RunRecord, SweepRecord, read_run_file, status_if_writer_gone


@dataclass(frozen=True)
class Selection:
    """Runs to export; an empty tuple takes every value."""

    batch_sizes: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()
    statuses: tuple[str, ...] = ()

    def takes(self, run: RunRecord) -> bool:
        return (
            (not self.batch_sizes or run.batch_size in self.batch_sizes)
            and (not self.seeds or run.seed in self.seeds)
            and (not self.statuses or run.status in self.statuses)
        )

    def describe(self) -> str:
        """The selection as a person reads it, e.g. "batch 32,64; seed 0; status ok" ("all runs" when none)."""
        parts = [
            f"{name} {','.join(map(str, values))}"
            for name, values in (("batch", self.batch_sizes), ("seed", self.seeds), ("status", self.statuses))
            if values
        ]
        return "; ".join(parts) or "all runs"


def _whole_numbers(field: str, text: str | None, low: int) -> tuple[int, ...]:
    if not text:
        return ()
    values = []
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            message = f"{part.strip()!r} is not a whole number; give a comma-separated list such as 32,64"
            raise SpecError(field, message) from None
        if value < low:
            raise SpecError(field, f"{value} is not allowed; use whole numbers from {low}")
        values.append(value)
    return tuple(dict.fromkeys(values))


def parse_selection(batch: str | None = None, seed: str | None = None, status: str | None = None) -> Selection:
    """The --batch, --seed and --status options (comma-separated lists) as a Selection; SpecError names a bad one."""
    statuses = tuple(dict.fromkeys(s.strip() for s in status.split(","))) if status else ()
    for value in statuses:
        if value not in RUN_FILE_STATUSES:
            raise SpecError("status", f"{value!r} is not a run status; use one of {', '.join(RUN_FILE_STATUSES)}")
    return Selection(_whole_numbers("batch", batch, 1), _whole_numbers("seed", seed, 0), statuses)


def read_sources(paths: list[str | Path]) -> list[SweepRecord]:
    """Every source file read (RunFileError, one line, for one that is not a run file), each run's status as
    every view reads it: a sweep whose writer died reads interrupted (core/runfile/liveness.py)."""
    if not paths:
        raise SpecError("file", "name at least one run file (.h5) to export")
    resolved = [Path(p).expanduser().resolve() for p in paths]
    if len(set(resolved)) < len(resolved):
        raise SpecError("file", "a file is named twice; name each run file once")
    records = []
    for path in paths:
        record = read_run_file(path)
        if writer_gone(record.status, record.attrs):
            record.status = status_if_writer_gone(record.status)
            record.attrs["message"] = WRITER_GONE_MESSAGE
            for run in record.runs:
                if run.status == "running":
                    run.status = run.attrs["status"] = status_if_writer_gone(run.status)
                    run.message = run.attrs["message"] = WRITER_GONE_MESSAGE
        records.append(record)
    return records


def select_runs(records: list[SweepRecord], selection: Selection) -> list[tuple[SweepRecord, RunRecord]]:
    """(source, run) of every run the selection takes, file by file in run order; SpecError when none matches,
    naming what the files hold."""
    chosen = [(record, run) for record in records for run in record.runs if selection.takes(run)]
    if chosen:
        return chosen
    runs = [run for record in records for run in record.runs]
    if not runs:
        raise SpecError("file", f"{', '.join(str(r.path) for r in records)} holds no runs; nothing to export")
    held = (
        f"batch sizes {_listed(r.batch_size for r in runs)}; seeds {_listed(r.seed for r in runs)}; "
        f"statuses {_listed(r.status for r in runs)}"
    )
    field = "batch" if selection.batch_sizes else "seed" if selection.seeds else "status"
    raise SpecError(field, f"no run matches {selection.describe()}; the files hold {held}")


def _listed(values) -> str:
    return ", ".join(map(str, sorted(set(values))))
