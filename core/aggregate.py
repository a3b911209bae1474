"""Repeats over seeds: every per-run figure, per batch size, as mean and spread (min to max) over the seeds.

Qt- and TensorFlow-free, so the CLI tables, `batchlab report` and the window's bands all use this one
function. The spread is the range (min to max) of the runs that have the figure, with their count n:
with the 2-5 seeds a sweep usually has, a confidence interval would rest on a spread estimate from
too few values, while min-max shows every seed's result as it is.

Which runs count: a figure is averaged over the runs whose value is known (finite; bytes not -1).
Runs that did not end "ok" are left out (a diverged or out-of-memory seed would otherwise pull the
mean with a partial run); `runs` and `ok` say how many there were. The target figures average the
runs that reached the target; `reached` says how many of the ok runs did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BYTES_FIGURES = ("peak_memory_bytes", "first_epoch_peak_bytes", "steady_peak_bytes")
TARGET_FIGURES = ("steps_to_target", "examples_to_target", "epochs_to_target", "time_to_target")


@dataclass(frozen=True)
class Spread:
    """A figure over the seeds of one batch size: mean, min and max of the n runs that have it (NaN if n = 0)."""

    mean: float
    low: float
    high: float
    n: int


def spread(values: Iterable[float]) -> Spread:
    """Mean, min and max of the finite values (NaN and n = 0 when there are none)."""
    known = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not known:
        return Spread(math.nan, math.nan, math.nan, 0)
    return Spread(sum(known) / len(known), min(known), max(known), len(known))


def _known(key: str, value: Any) -> float:
    if value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    if key in BYTES_FIGURES and number < 0:
        return math.nan  # -1: not available
    return number


def aggregate_by_batch(rows: Iterable[Mapping[str, Any]], figures: Iterable[str]) -> list[dict[str, Any]]:
    """One dict per batch size (ascending): batch_size, runs, ok, reached, seeds, and a Spread per figure.

    `rows` are per-run dicts with batch_size, seed, status and the figures (core.table.summary_rows).
    """
    figures = tuple(figures)
    by_batch: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_batch.setdefault(int(row["batch_size"]), []).append(row)
    out = []
    for batch in sorted(by_batch):
        runs = by_batch[batch]
        ok = [r for r in runs if r.get("status") == "ok"]
        reached = [r for r in ok if r.get("target_reached", -1) == 1]
        entry: dict[str, Any] = {
            "batch_size": batch,
            "runs": len(runs),
            "ok": len(ok),
            "reached": len(reached) if any(r.get("target_reached", -1) != -1 for r in ok) else -1,
            "seeds": sorted({int(r.get("seed", -1)) for r in runs}),
        }
        for key in figures:
            counted = reached if key in TARGET_FIGURES else ok
            entry[key] = spread(_known(key, r.get(key)) for r in counted)
        out.append(entry)
    return out
