"""The time account as a text table for `batchlab report`: one row per run, one column per part (s).

The numbers are core.analysis.time_account's, the same the window's Summary bar and the explanation use.
Kept under 100 columns: short headers, and a legend under the table that names each part.
"""

from __future__ import annotations

import math

from batchlab.core.analysis.time_account import PART_NAMES, PART_WORDS, TimeAccount, sweep_accounts
from batchlab.core.text_width import terminal_columns, text_width

SHORT = {
    "startup": "start",
    "model": "model",
    "pipeline": "pipe",
    "tracing": "trace",
    "compute": "steps",
    "input_wait": "wait",
    "loop": "loop",
    "stalls": "stall",
    "validation": "valid",
    "pipeline_close": "close",
    "hooks": "hooks",
}
WIDTH = 6  # characters per seconds column


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if abs(value) < 100:
        return f"{value:.2f}"
    return f"{value:.0f}"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%" if math.isfinite(value) else "-"


TRANSPOSED_MAX_RUNS = 10  # a narrow terminal gets runs as columns up to this many runs


def format_time_account(accounts: list[TimeAccount], width: int | None = None) -> str:
    """The table and its legend; "" when no run has an account. Given the terminal's `width`, a table wider
    than it (95 columns) is printed with the runs as columns and the parts as rows, if there are few runs."""
    if not accounts:
        return ""
    wide = _by_run(accounts)
    if width is None or max(map(len, wide.split("\n")[:-1])) <= width or len(accounts) > TRANSPOSED_MAX_RUNS:
        return wide
    return _by_part(accounts)


def _legend() -> str:
    legend = "; ".join(f"{SHORT[k]}: {PART_WORDS[k]}" for k in PART_NAMES)
    return "seconds; wall: from the request for the run to its end; unacc: the share of it no part holds; " + legend


def _by_part(accounts: list[TimeAccount]) -> str:
    """One row per part, one column per run ("b512", or "r3 b512" with seeds)."""
    several = len({a.run for a in accounts}) != len({a.batch_size for a in accounts})
    names = [f"r{a.run} b{a.batch_size}" if several else f"b{a.batch_size}" for a in accounts]
    size = max(WIDTH, *map(len, names))
    rows = [("", names)]
    rows += [(SHORT[k], [_seconds(a.parts[k]) for a in accounts]) for k in PART_NAMES]
    rows.append(("wall", [_seconds(a.wall) for a in accounts]))
    rows.append(("unacc", [_percent(a.unaccounted_share) for a in accounts]))
    lines = [f"{label:<5} " + " ".join(f"{c:>{size}}" for c in cells) for label, cells in rows]
    return "\n".join([*(line.rstrip() for line in lines), _legend()])


def _by_run(accounts: list[TimeAccount]) -> str:
    several = len({a.run for a in accounts}) != len({a.batch_size for a in accounts})  # seeds: say the run
    head = ["run", "batch"] if several else ["batch"]
    columns = [*head, *(SHORT[k] for k in PART_NAMES), "wall", "unacc"]

    def line(cells: list[str]) -> str:
        return " ".join(f"{c:>{5 if i < len(head) else WIDTH}}" for i, c in enumerate(cells))

    lines = [line(columns)]
    for a in accounts:
        cells = [str(a.run), str(a.batch_size)] if several else [str(a.batch_size)]
        cells += [_seconds(a.parts[k]) for k in PART_NAMES]
        lines.append(line([*cells, _seconds(a.wall), _percent(a.unaccounted_share)]))
    lines.append(_legend())
    return "\n".join(lines)


def print_time_account(sweep) -> None:
    """Print the sweep's time account (a heading, the table and its legend), if any run has one."""
    import textwrap

    text = format_time_account(sweep_accounts(sweep.ordered_runs()), width=terminal_columns())
    if not text:
        return
    *rows, legend = text.split("\n")
    print("\nWhere each run's time went (s; docs/analysis.md, 'Every second accounted for'):")
    print("\n".join(rows))
    print(textwrap.fill(legend, text_width()))
