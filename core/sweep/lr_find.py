"""`batchlab lr-find` files: their table and the suggested rates a sweep's ``lr_from`` reads back.

A range test runs through the sweep's scheduler (core/sweep/lr_find_runner.py). Its run file is a sweep file
with root attribute ``mode = "lr_find"`` and an ``lr_range/`` table per run
(docs/runfile-format.md). `suggested_rates` reads the suggestions back for a sweep's ``lr_from``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

LR_FIND_MODE = "lr_find"


def range_rows(record) -> list[dict[str, Any]]:
    """One row per run of an lr-find file (core.runfile.reader.SweepRecord): what the table shows."""
    rows = []
    for run in record.runs:
        a = run.attrs
        rows.append(
            {
                "batch_size": run.batch_size,
                "seed": run.seed,
                "status": run.status,
                "suggested_lr": float(a.get("suggested_lr", math.nan)),
                "suggested_lr_min10": float(a.get("suggested_lr_min10", math.nan)),
                "loss_at_suggestion": float(a.get("loss_at_suggestion", math.nan)),
                "stop_reason": str(a.get("stop_reason", "")),
                "points": len(run.lr_range.get("lr", ())),
            }
        )
    return rows


def format_range_table(rows: list[dict[str, Any]]) -> str:
    """The lr-find table: batch size, suggested lr (steepest), min/10, smoothed loss there, why it stopped."""

    def num(v: float) -> str:
        return f"{v:.3g}" if math.isfinite(v) else "—"

    seeds = len({r["seed"] for r in rows}) > 1
    header = ["batch"] + (["seed"] if seeds else []) + ["suggested lr", "min/10", "loss there", "steps", "stopped"]
    lines = [header]
    for r in rows:
        stop = r["stop_reason"] if r["status"] == "ok" else f"{r['status']}: {r['stop_reason'] or '-'}"
        lines.append(
            [str(r["batch_size"])]
            + ([str(r["seed"])] if seeds else [])
            + [num(r["suggested_lr"]), num(r["suggested_lr_min10"]), num(r["loss_at_suggestion"])]
            + [str(r["points"]), stop]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    last = len(header) - 1  # the stop reason: left-aligned, free width
    out = []
    for line in lines:
        cells = [c if i == last else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells))
    return "\n".join(out)


def suggested_rates(path: str | os.PathLike, pick: str = "steepest") -> dict[int, float]:
    """Each batch size's suggested rate in an lr-find file; several seeds: their geometric mean.

    `pick` says which suggestion: "steepest" (the steepest fall of the smoothed loss per unit of log(lr)) or
    "min10" (the rate of the lowest smoothed loss / 10); core/lr_range.py.

    Raises SpecError (field lr_from) for a file that is not an lr-find file or holds no usable suggestion.
    """
    from batchlab.core.errors import SpecError
    from batchlab.core.runfile.reader import read_run_file

    path = Path(path)
    try:
        record = read_run_file(path)
    except SpecError as e:
        raise SpecError("lr_from", e.message) from None
    if record.attrs.get("mode") != LR_FIND_MODE:
        raise SpecError("lr_from", f"{path} is a sweep's run file, not an lr-find file; run batchlab lr-find first")
    key = {"steepest": "suggested_lr", "min10": "suggested_lr_min10"}[pick]
    found: dict[int, list[float]] = {}
    for row in range_rows(record):
        if row["status"] == "ok" and math.isfinite(row[key]) and row[key] > 0:
            found.setdefault(row["batch_size"], []).append(row[key])
    return {b: math.exp(sum(map(math.log, v)) / len(v)) if len(v) > 1 else v[0] for b, v in sorted(found.items())}
