"""The per-run summary table that `batchlab sweep` and `batchlab report` print (and --json gives as rows)."""

from __future__ import annotations

import io
import math
from typing import Any

from batchlab.core.model import SweepData
from batchlab.core.runfile.liveness import WRITER_GONE_MESSAGE
from batchlab.core.runfile.reader import SweepRecord, status_if_writer_gone
from rich.console import Console
from rich.table import Table

MIB = 1 << 20
MESSAGE_WIDTH = 60  # characters of a run's message shown in the table
TABLE_MAX_WIDTH = 400  # characters; wide enough that rich never wraps or squeezes a column
TABLE_COLUMNS = (  # (row key, header, format); numbers are right-aligned
    ("batch_size", "batch", "{:d}"),
    ("seed", "seed", "{:d}"),
    ("final_loss", "final loss", "{:.4g}"),
    ("total_time", "time (s)", "{:.1f}"),
    ("samples_per_s", "steady samples/s", "{:.0f}"),
    ("tracing_time", "tracing (s)", "{:.2f}"),
    ("first_epoch_peak_bytes", "mem 1st epoch (MiB)", "{:.1f}"),
    ("steady_peak_bytes", "mem steady (MiB)", "{:.1f}"),
)
# Shown when any run has a target (train to target): where each run first met it (Shallue's rule).
TARGET_COLUMNS = (
    ("steps_to_target", "steps to target", "{:.0f}"),
    ("epochs_to_target", "epochs to target", "{:.3g}"),
    ("examples_to_target", "examples to target", "{:.0f}"),
    ("time_to_target", "time to target (s)", "{:.2f}"),
)
NOT_REACHED_TEXT = "not reached within budget"
BYTES_KEYS = ("peak_memory_bytes", "first_epoch_peak_bytes", "steady_peak_bytes")


def summary_rows(sweep: SweepData | SweepRecord, writer_gone: bool = False) -> list[dict[str, Any]]:
    """One dict per run: index, batch_size, seed, status, message and every figure of
    batchlab.core.model.RunFigures (final_loss, total_time (s), samples_per_s (steady state),
    step_time (s), epoch_time (s), tracing_time (s), peak_memory_bytes, first_epoch_peak_bytes,
    steady_peak_bytes (bytes, -1 unknown) and peak_memory_source).

    Takes the sweep model (live) or a record read from a file: the figures come from the model
    either way, so a file whose writer died reads "interrupted" (SweepData.end_if_writer_gone). With
    `writer_gone`, runs still "running" are reported "interrupted" whatever the writer's state (a caller
    that knows the writer stopped).
    """
    data = sweep if isinstance(sweep, SweepData) else SweepData.from_record(sweep)
    rows = []
    for run in data.ordered_runs():
        status, message = run.status, run.message
        if writer_gone and status == "running":
            status, message = status_if_writer_gone(status), WRITER_GONE_MESSAGE
        row = {"index": run.index, "batch_size": run.batch_size, "seed": run.seed, "status": status}
        row.update(run.figures.as_dict())
        row["metrics"] = run.final_metrics  # the model's compiled metrics at the end: {"val_mae": 0.12, ...}
        row["message"] = message
        rows.append(row)
    return rows


def _cell(key: str, value: Any, fmt: str) -> str:
    """A number as text; NaN, None and the -1 "not available" marker show as "-"."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if key in ("batch_size", "seed", *BYTES_KEYS) and value < 0:
        return "-"
    if key in BYTES_KEYS:
        value = value / MIB
    return fmt.format(value)


def _status_cell(status: str, message: str) -> str:
    """The status; for anything but "ok", followed by the message's first line, shortened."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    if status == "ok" or not lines:
        return status
    text = lines[0]
    if len(text) > MESSAGE_WIDTH:
        text = text[: MESSAGE_WIDTH - 3] + "..."
    return f"{status}: {text}"


def _target_cells(row: dict[str, Any]) -> list[str]:
    """The target columns of a run: its figures, or "not reached within budget" for a run that trained its
    whole budget without meeting the target ("not reached" when it ended otherwise; "-" with no target)."""
    reached = row.get("target_reached", -1)
    if reached == 1:
        return [_cell(key, row.get(key), fmt) for key, _, fmt in TARGET_COLUMNS]
    status = row.get("status")
    if reached == 0 and status not in ("pending", "running", "skipped"):
        why = NOT_REACHED_TEXT if status == "ok" else f"not reached ({status})"
        return [why] + ["-"] * (len(TARGET_COLUMNS) - 1)
    return ["-"] * len(TARGET_COLUMNS)


def target_line(spec: dict[str, Any]) -> str | None:
    """What the target columns mean, from a sweep's spec dict: the target, when it is evaluated, the budget."""
    from batchlab.core.targets import TargetSyntaxError, parse_target

    if not spec.get("target"):
        return None
    try:
        target = parse_target(str(spec["target"]))
    except TargetSyntaxError:
        return None
    every = spec.get("eval_every")
    when = f"every {every} steps and at epoch ends" if every else "at epoch ends"
    budget = spec.get("budget") or {}
    limit = f"; at most {budget.get('amount')} {budget.get('unit')}" if budget else ""
    return (
        f"target: {target.describe()} (first evaluation strictly better), evaluated {when}{limit}; "
        "time to target is training time, evaluation passes left out"
    )


def batch_schedule_lines(sweep: SweepData) -> list[str]:
    """For a sweep with a batch schedule, one line per run saying where its batch changed (from its step
    rows, core.batch_rules.batch_changes) and, for grow, where the rate took over the decay; [] without."""
    from batchlab.core.batch_rules import BatchPlan, batch_changes, describe_changes

    lines = []
    for run in sweep.ordered_runs():
        schedule = run.attrs.get("batch_schedule")
        if not schedule or schedule == "constant" or not len(run.steps):
            continue
        step, epoch = run.steps["step"], run.steps["epoch"]
        changes = describe_changes(batch_changes(step, epoch, run.steps["batch_size"]))
        text = f"run {run.index} (batch {run.batch_size}, {schedule}): batch {changes}"
        if schedule == "grow":
            plan = BatchPlan(
                "grow",
                run.batch_size,
                float(run.attrs["batch_growth_factor"]),
                int(run.attrs["batch_growth_every"]),
                int(run.attrs["max_batch"]),
            )
            firsts = {int(e): int(s) for s, e in zip(step[::-1], epoch[::-1], strict=True)}  # each epoch's first step
            decays = [
                f"rate x{plan.rate_scale(e):.4g} from step {firsts[e]} (epoch {e})"
                for e in sorted(firsts)
                if plan.rate_scale(e) != plan.rate_scale(e - 1) and e > 0
            ]
            if decays:
                text += "; past max_batch " + ", ".join(decays)
        lines.append(text)
    return lines


def metric_names(rows: list[dict[str, Any]]) -> list[str]:
    """Every compiled metric any row has, train_NAME first, then val_NAME."""
    names = {name for row in rows for name in row.get("metrics") or {}}
    return sorted(names, key=lambda n: (not n.startswith("train_"), n))


def format_metrics_table(rows: list[dict[str, Any]]) -> str | None:
    """The model's compiled metrics at the end of each run (batch, seed, one column per metric), or None
    when no run has any."""
    names = metric_names(rows)
    if not names:
        return None
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="", expand=False)
    for header in ("batch", "seed", *(f"final {n}" for n in names)):
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        metrics = row.get("metrics") or {}
        cells = [_cell("batch_size", row.get("batch_size"), "{:d}"), _cell("seed", row.get("seed"), "{:d}")]
        table.add_row(*cells, *(_cell(n, metrics.get(n, math.nan), "{:.4g}") for n in names))
    console = Console(file=io.StringIO(), width=TABLE_MAX_WIDTH, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def two_line(header: str) -> str:
    """A header on two lines, split at the space nearest its middle ("mem 1st\nepoch (MiB)"); one word stays."""
    spaces = [i for i, c in enumerate(header) if c == " "]
    if not spaces:
        return header
    cut = min(spaces, key=lambda i: abs(i - len(header) / 2))
    return header[:cut] + "\n" + header[cut + 1 :]


def format_table(rows: list[dict[str, Any]], width: int | None = None) -> str:
    """Plain-text table of summary_rows(), one line per run, for terminals and logs (drawn by rich).

    Numbers are right-aligned under their headers, columns two spaces apart, no borders or colours,
    so the output reads the same in a terminal, a pipe and a log file. Given the terminal's `width`, a table
    wider than it puts its headers on two lines (on 80 columns the one-line headers made it 108 wide); one
    still wider (a sweep with a target: 135 columns) becomes two tables, the run figures and then the
    target figures, each keyed by batch and seed.
    """
    one_line = _format_table(rows, lambda h: h)
    if width is None or _width(one_line) <= width:
        return one_line
    two_lines = _format_table(rows, two_line)
    if _width(two_lines) <= width or not _has_targets(rows):
        return two_lines
    runs = _format_table(rows, two_line, targets=False)
    targets = _format_table(rows, two_line, columns=TABLE_COLUMNS[:2], status=False)
    return runs + "\n\n" + targets


def _width(text: str) -> int:
    return max(map(len, text.splitlines()), default=0)


def _has_targets(rows: list[dict[str, Any]]) -> bool:
    return any(row.get("target_reached", -1) != -1 for row in rows)


def _format_table(rows: list[dict[str, Any]], head, targets: bool = True, columns=TABLE_COLUMNS, status=True) -> str:
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="", expand=False)
    for _, header, _ in columns:
        table.add_column(head(header), justify="right", no_wrap=True)
    targets = targets and _has_targets(rows)
    if targets:
        for _, header, _ in TARGET_COLUMNS:
            table.add_column(head(header), justify="right", no_wrap=True)
    if status:
        table.add_column("status", justify="left", no_wrap=True)
    for row in rows:
        cells = [_cell(key, row.get(key), fmt) for key, _, fmt in columns]
        if targets:
            cells += _target_cells(row)
        if status:
            cells.append(_status_cell(str(row.get("status", "")), row.get("message", "")))
        table.add_row(*cells)
    console = Console(file=io.StringIO(), width=TABLE_MAX_WIDTH, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def _spread_cell(key: str, s: Any, fmt: str) -> str:
    """mean [min-max] of a Spread, in the figure's format and units; "-" when no run has it."""
    if s.n == 0:
        return "-"
    scale = MIB if key in BYTES_KEYS else 1
    mean, low, high = (fmt.format(v / scale) for v in (s.mean, s.low, s.high))
    return mean if s.n == 1 or low == high else f"{mean} [{low}-{high}]"


def seeds_line(rows: list[dict[str, Any]]) -> str | None:
    """What the per-batch-size table shows, or None when no batch size ran with more than one seed."""
    from batchlab.core.aggregate import aggregate_by_batch

    groups = aggregate_by_batch(rows, ())
    if not any(g["runs"] > 1 for g in groups):
        return None
    return (
        "per batch size over the seeds: mean [min-max] of the runs that ended ok (n = ok runs of all; "
        "target figures over the runs that reached it)"
    )


def format_seed_table(rows: list[dict[str, Any]]) -> str:
    """One line per batch size: every figure of the run table as mean [min-max] over its seeds
    (core/aggregate.py, the one aggregation the window's bands use too)."""
    from batchlab.core.aggregate import aggregate_by_batch

    figures = [c for c in TABLE_COLUMNS if c[0] not in ("batch_size", "seed")]
    targets = any(row.get("target_reached", -1) != -1 for row in rows)
    if targets:
        figures += list(TARGET_COLUMNS)
    groups = aggregate_by_batch(rows, [key for key, _, _ in figures])
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="", expand=False)
    table.add_column("batch", justify="right", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for _, header, _ in figures:
        table.add_column(header, justify="right", no_wrap=True)
    if targets:
        table.add_column("reached", justify="right", no_wrap=True)
    for g in groups:
        cells = [str(g["batch_size"]), f"{g['ok']}/{g['runs']}"]
        cells += [_spread_cell(key, g[key], fmt) for key, _, fmt in figures]
        if targets:
            cells.append(f"{max(g['reached'], 0)}/{g['ok']}")
        table.add_row(*cells)
    console = Console(file=io.StringIO(), width=TABLE_MAX_WIDTH, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())
