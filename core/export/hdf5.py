"""`batchlab export OUT.h5 FILE.h5 ...`: chosen runs of one or more run files into one new run file.

The runs are replayed as events through the one writer (core/runfile/replay.py, core/runfile/writer.py), so
the new file has a sweep file's layout and opens in `batchlab report` and the window like one. Its root says
where the runs came from (docs/runfile-format.md, *Exported files*). A summary-only export leaves out the
per-step tables and keeps, per run, the figures computed from them (core/figures.py, STEP_FIGURES).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import SWEEP_ENDED, SWEEP_STARTED, log_event, make_event, now_iso
from batchlab.core.export.select import Selection, read_sources, select_runs
from batchlab.core.figures import STEP_FIGURES, SUMMARY_STEPS_ATTR, summary_attr
from batchlab.core.paths import user_path
from batchlab.core.runfile.reader import RunRecord, SweepRecord
from batchlab.core.runfile.replay import log_events, run_events
from batchlab.core.runfile.writer import RunFileWriter
from batchlab.core.spec_diff import differences_text, spec_differences

# Settings that may differ between the files of one export: each run records its own batch size and seed.
MAY_DIFFER = ("batch_sizes", "seeds")
CONTENT_FULL, CONTENT_SUMMARY = "full", "summary"


@dataclass(frozen=True)
class ExportResult:
    path: Path
    runs: int
    sources: int
    content: str


def export_hdf5(
    out: str | Path,
    paths: list[str | Path],
    selection: Selection | None = None,
    summary_only: bool = False,
    overwrite: bool = False,
) -> ExportResult:
    """Write the runs `selection` takes from the files `paths` into the new run file `out`.

    Raises SpecError (one line) for a bad source, a selection matching nothing, sources whose settings
    differ, an `out` that exists (without `overwrite`) or that is one of the sources.
    """
    selection = selection or Selection()
    records = read_sources(paths)
    target = user_path(out)
    for record in records:
        if target.exists() and record.path is not None and target.resolve() == Path(record.path).resolve():
            raise SpecError("out", f"{out} is one of the files to export; write the export to a new file")
    mode = _common_mode(records)
    _check_same_settings(records)
    chosen = select_runs(records, selection)
    summary_source = any(SUMMARY_STEPS_ATTR in run.attrs for _, run in chosen)  # an export of a summary stays one
    content = CONTENT_SUMMARY if summary_only or summary_source else CONTENT_FULL
    leave_out = ("steps",) if summary_only else ()
    writer = RunFileWriter(out, overwrite=overwrite, step_flush_s=math.inf, leave_out=leave_out)
    try:
        _write(writer, records, chosen, selection, content, mode, summary_only)
    except BaseException:
        writer.close()
        writer.path.unlink(missing_ok=True)  # never leave half an export behind
        raise
    writer.close()
    return ExportResult(writer.path, len(chosen), len({id(r) for r, _ in chosen}), content)


def _write(
    writer: RunFileWriter,
    records: list[SweepRecord],
    chosen: list[tuple[SweepRecord, RunRecord]],
    selection: Selection,
    content: str,
    mode: str,
    summary_only: bool,
) -> None:
    first = records[0]
    spec = dict(first.spec)
    spec["batch_sizes"] = list(dict.fromkeys(run.batch_size for _, run in chosen))
    spec["seeds"] = list(dict.fromkeys(run.seed for _, run in chosen))
    plan = [{"index": i, "batch_size": run.batch_size, "seed": run.seed} for i, (_, run) in enumerate(chosen)]
    exported = now_iso()
    provenance = {
        "exported": exported,
        "export_content": content,
        "export_selection": selection.describe(),
        "export_sources": json.dumps(_sources(records, chosen), sort_keys=True),
    }
    started = min((str(r.attrs["started"]) for r in records if r.attrs.get("started")), default=exported)
    writer.handle(
        make_event(
            SWEEP_STARTED,
            spec=spec,
            runs=plan,
            environment=first.environment,
            started=started,
            mode=mode or None,
            export=provenance,
        )
    )
    new_index: dict[tuple[int, int], int] = {}
    for i, (record, run) in enumerate(chosen):
        new_index[(id(record), run.index)] = i
        for event in run_events(run, i, _run_provenance(record, run, summary_only)):
            writer.handle(event)
    for record in records:
        runs = {old: new for (rid, old), new in new_index.items() if rid == id(record)}
        if runs:
            for event in log_events(record.log, runs):
                writer.handle(event)
    what = "summary only: per-step tables left out" if content == CONTENT_SUMMARY else "every table"
    names = ", ".join(str(r.path) for r in records if any(rid == id(r) for rid, _ in new_index))
    line = f"batchlab export: {len(chosen)} run(s) ({selection.describe()}; {what}) of {names}"
    writer.handle(log_event("info", line))
    status, message = _sweep_status(records)
    ended = max((str(r.attrs["ended"]) for r in records if r.attrs.get("ended")), default=exported)
    writer.handle(make_event(SWEEP_ENDED, status=status, message=message, ended=ended))


def _run_provenance(record: SweepRecord, run: RunRecord, summary_only: bool) -> dict[str, Any]:
    """The run attributes an export adds: where the run came from, and in a summary-only file the figures
    its left-out steps gave (core/figures.py reads them back)."""
    extra: dict[str, Any] = {"source_file": str(record.path), "source_index": run.index}
    if summary_only and len(next(iter(run.steps.values()), ())):
        figures = run.figures.as_dict()
        extra[SUMMARY_STEPS_ATTR] = len(next(iter(run.steps.values())))
        extra.update({summary_attr(name): float(figures[name]) for name in STEP_FIGURES})
    return extra


def _sources(records: list[SweepRecord], chosen: list[tuple[SweepRecord, RunRecord]]) -> list[dict[str, Any]]:
    """One entry per source file: its path, content hash, identity (created, host) and the runs taken."""
    out = []
    for record in records:
        taken = [run.index for rec, run in chosen if rec is record]
        if not taken:
            continue
        attrs = record.attrs
        out.append(
            {
                "file": str(Path(record.path).resolve()) if record.path else "",
                "sha256": _sha256(Path(record.path)) if record.path else "",
                "created": attrs.get("created", ""),
                "started": attrs.get("started", ""),
                "status": record.status,
                "host": attrs.get("writer_host", attrs.get("host", "")),
                "device_description": attrs.get("device_description", ""),
                "app_version": attrs.get("app_version", ""),
                "runs": taken,
            }
        )
        if attrs.get("export_sources"):  # an export of an export: where that one's runs came from
            out[-1]["export_sources"] = json.loads(str(attrs["export_sources"]))
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _common_mode(records: list[SweepRecord]) -> str:
    """The files' `mode` (sweep, profile, lr_find); files of different kinds cannot share one export."""
    modes = {str(r.attrs.get("mode", "")) for r in records}
    if len(modes) > 1:
        kinds = ", ".join(f"{r.path}: {r.attrs.get('mode') or 'sweep'}" for r in records)
        raise SpecError("file", f"the files are of different kinds ({kinds}); export each kind on its own")
    return modes.pop()


def _check_same_settings(records: list[SweepRecord]) -> None:
    """Refuse files whose settings differ beyond batch sizes and seeds: the export has one spec, as a sweep."""
    specs = {str(r.path): {k: v for k, v in r.spec.items() if k not in MAY_DIFFER} for r in records}
    differences = spec_differences(specs)
    if differences:
        lines = "; ".join(differences_text(differences))
        raise SpecError(
            "file", f"the files were made with different settings ({lines}); export them into separate files"
        )


def _sweep_status(records: list[SweepRecord]) -> tuple[str, str]:
    statuses = [r.status for r in records]
    if len(records) == 1 and statuses[0] != "running":
        return statuses[0], records[0].message
    if "running" in statuses:
        return "interrupted", "a source sweep was still running when it was exported"
    for status in ("failed", "interrupted"):
        if status in statuses:
            return status, f"a source sweep ended {status}"
    return "complete", ""
