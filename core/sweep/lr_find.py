"""`batchlab lr-find` files: their table and the suggested rates a sweep's ``lr_from`` reads back.

A range test runs through the sweep's scheduler (core/sweep/lr_find_runner.py). Its run file is a sweep file
with root attribute ``mode = "lr_find"`` and an ``lr_range/`` table per run
(docs/runfile-format.md). `suggested_rates` reads the suggestions back for a sweep's ``lr_from``.
"""

from __future__ import annotations

import math
from typing import Any

from batchlab.core.lr_range import LR_FIND_MODE, range_rows, suggested_rates  # noqa: F401 (read from here too)


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
