"""Two benchmarks side by side: per workload and batch size, the ratio B/A of each figure, and whether it is
beyond the noise. Qt-free; `batchlab compare` prints it and the window's File > Compare shows the same cells.

The figures of a run are the ones every view shows (core/figures.py via the sweep model): steady throughput
(samples/s), steady step time (s), peak memory (bytes) and the one-time cost, startup_s + tracing (s).

The noise rule (docs/benchmarking.md). With 2 or more repeats on both sides (runs per batch size, seeds),
the ratio's spread is [min B / max A, max B / min A] and the difference is beyond the noise when the two sides'
ranges do not overlap (every B above every A, or every B below every A). Otherwise (a single run on a side)
it is beyond the noise when the ratio is further from 1 than a threshold (DEFAULT_THRESHOLD unless given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchlab.core.analysis.step_time import StepTimeFit, sweep_step_time
from batchlab.core.errors import SpecError
from batchlab.core.model import SweepData
from batchlab.core.paths import RUN_FILE_SUFFIXES
from batchlab.core.runfile.reader import read_run_file

# Without repeats, a ratio further than this from 1 is called beyond the noise. Shared machines swing more:
# docs/benchmarking.md shows what two runs of one machine gave; --threshold changes it.
DEFAULT_THRESHOLD = 0.10
MIN_REPEATS_FOR_SPREAD = 2
# (key, label in tables, unit of the A and B values)
METRICS = (
    ("samples_per_s", "throughput", "samples/s"),
    ("step_time", "step time", "s"),
    ("peak_memory", "peak memory", "bytes"),
    ("one_time", "one-time cost", "s"),
)
MODEL_PARAMS = (("alpha", "alpha (s per step)"), ("beta", "beta (s per sample)"))


@dataclass
class BenchSide:
    """One benchmark: its files' root attributes (of the first file) and each workload's sweep."""

    label: str
    attrs: dict[str, Any]
    sweeps: dict[str, SweepData]  # workload -> its sweep

    @property
    def suite(self) -> str:
        return str(self.attrs.get("bench_suite", ""))

    @property
    def version(self) -> int:
        return int(self.attrs.get("bench_suite_version", -1))


@dataclass(frozen=True)
class Cell:
    """One figure at one workload and batch size: A's and B's values (one per repeat), their ratio B/A of the
    means, the ratio's spread (NaN without repeats on both sides) and the verdict."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    ratio: float
    low: float
    high: float
    beyond: bool
    rule: str  # "spread" or "threshold"


@dataclass
class CompareRow:
    workload: str
    batch_size: int
    cells: dict[str, Cell]
    note: str = ""  # e.g. runs that did not end ok


@dataclass
class Comparison:
    a: BenchSide
    b: BenchSide
    threshold: float
    rows: list[CompareRow] = field(default_factory=list)
    models: list[ModelComparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelComparison:
    """A workload's step-time model t(B) = alpha + beta*B on each side (core/analysis/step_time.py) and B/A."""

    workload: str
    a: StepTimeFit
    b: StepTimeFit
    cells: dict[str, Cell]


def _bench_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in RUN_FILE_SUFFIXES)
        if not files:
            raise SpecError("file", f"{path} holds no run files; give a folder batchlab bench wrote, or one file")
        return files
    if not path.exists():
        raise SpecError("file", f"{path} does not exist")
    return [path]


def load_side(path: str | Path) -> BenchSide:
    """A benchmark from a folder of `batchlab bench` run files or one of its files; SpecError if not one."""
    path = Path(path).expanduser()
    attrs: dict[str, Any] = {}
    sweeps: dict[str, SweepData] = {}
    for file in _bench_files(path):
        record = read_run_file(file)  # SpecError for a file that is not a run file
        root = record.attrs
        if not root.get("bench_suite"):
            raise SpecError(
                "file", f"{file} is not a benchmark file (no bench_suite attribute; batchlab bench writes them)"
            )
        if attrs and (root.get("bench_suite"), root.get("bench_suite_version")) != (
            attrs.get("bench_suite"),
            attrs.get("bench_suite_version"),
        ):
            raise SpecError("file", f"{path} mixes files of different suites or versions")
        attrs = attrs or root
        sweeps[str(root.get("bench_workload", file.stem))] = SweepData.from_record(record, file.name, str(file))
    return BenchSide(str(path), attrs, sweeps)


def check_versions(a: BenchSide, b: BenchSide, force: bool = False) -> str | None:
    """SpecError when the suites or versions differ (unless `force`); with `force`, the warning to print."""
    if (a.suite, a.version) == (b.suite, b.version):
        return None
    text = (
        f"{a.label} is {a.suite} version {a.version} but {b.label} is {b.suite} version {b.version}: they measure "
        "different things"
    )
    if not force:
        raise SpecError("suite", f"{text}; --force compares them anyway")
    return f"warning: {text} (compared anyway, --force)"


def run_values(sweep: SweepData) -> dict[int, dict[str, list[float]]]:
    """batch size -> figure -> one value per run that ended ok (NaN where a run lacks the figure)."""
    out: dict[int, dict[str, list[float]]] = {}
    for run in sweep.ordered_runs():
        if run.status != "ok":
            continue
        figures = run.figures
        peak = float(figures.peak_memory_bytes) if figures.peak_memory_bytes >= 0 else math.nan
        one_time = _float(run.attrs.get("startup_s")) + _float(figures.tracing_time)
        values = {"samples_per_s": figures.samples_per_s, "step_time": figures.step_time}
        values.update(peak_memory=peak, one_time=one_time)
        per_batch = out.setdefault(run.batch_size, {k: [] for k, _l, _u in METRICS})
        for key, value in values.items():
            per_batch[key].append(_float(value))
    return out


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def compare_cell(a: list[float] | tuple[float, ...], b: list[float] | tuple[float, ...], threshold: float) -> Cell:
    """The ratio of B's mean to A's and the noise verdict (module docstring); NaN ratio without values."""
    a = tuple(v for v in a if math.isfinite(v))
    b = tuple(v for v in b if math.isfinite(v))
    if not a or not b or min(a + b) <= 0:  # a ratio of a negative fitted alpha (noise) would mean nothing
        return Cell(a, b, math.nan, math.nan, math.nan, False, "none")
    ratio = (sum(b) / len(b)) / (sum(a) / len(a))
    if len(a) >= MIN_REPEATS_FOR_SPREAD and len(b) >= MIN_REPEATS_FOR_SPREAD:
        low, high = min(b) / max(a), max(b) / min(a)
        return Cell(a, b, ratio, low, high, min(b) > max(a) or max(b) < min(a), "spread")
    return Cell(a, b, ratio, math.nan, math.nan, abs(ratio - 1.0) > threshold, "threshold")


def _status_note(sweep: SweepData | None, batch_size: int, side: str) -> str:
    if sweep is None:
        return f"{side}: not run"
    bad = sorted({r.status for r in sweep.ordered_runs() if r.batch_size == batch_size and r.status != "ok"})
    return f"{side}: {', '.join(bad)}" if bad else ""


def _workload_rows(name: str, a: SweepData | None, b: SweepData | None, threshold: float) -> list[CompareRow]:
    va = run_values(a) if a is not None else {}
    vb = run_values(b) if b is not None else {}
    sizes = sorted({r.batch_size for s in (a, b) if s is not None for r in s.ordered_runs()})
    rows = []
    for size in sizes:
        cells = {
            key: compare_cell(va.get(size, {}).get(key, []), vb.get(size, {}).get(key, []), threshold)
            for key, _l, _u in METRICS
        }
        note = "; ".join(n for n in (_status_note(a, size, "A"), _status_note(b, size, "B")) if n)
        rows.append(CompareRow(name, size, cells, note))
    return rows


def _model(name: str, a: SweepData | None, b: SweepData | None, threshold: float) -> ModelComparison | None:
    fa = sweep_step_time(a) if a is not None else None
    fb = sweep_step_time(b) if b is not None else None
    if fa is None or fb is None:
        return None
    cells = {key: compare_cell([getattr(fa, key)], [getattr(fb, key)], threshold) for key, _l in MODEL_PARAMS}
    return ModelComparison(name, fa, fb, cells)


def compare_benches(
    a_path: str | Path, b_path: str | Path, threshold: float = DEFAULT_THRESHOLD, force: bool = False
) -> Comparison:
    """Load both benchmarks, check their suite versions and compare every workload they hold."""
    if not (math.isfinite(threshold) and 0 < threshold < 10):
        raise SpecError("threshold", f"{threshold!r} is not allowed; use a fraction above 0, e.g. 0.1 for 10%")
    a, b = load_side(a_path), load_side(b_path)
    comparison = Comparison(a, b, threshold)
    warning = check_versions(a, b, force)
    if warning:
        comparison.notes.append(warning)
    for name in [*a.sweeps, *(n for n in b.sweeps if n not in a.sweeps)]:
        sa, sb = a.sweeps.get(name), b.sweeps.get(name)
        comparison.rows.extend(_workload_rows(name, sa, sb, threshold))
        model = _model(name, sa, sb, threshold)
        if model is not None:
            comparison.models.append(model)
    return comparison


def cell_text(cell: Cell) -> str:
    """A cell as both views show it: the ratio, its spread in brackets with repeats, * when beyond the noise."""
    if not math.isfinite(cell.ratio):
        return "n/a"
    shown = [cell.ratio, *((cell.low, cell.high) if cell.rule == "spread" else ())]
    # a difference beyond the noise that 2 decimals would show as 1.00 gets a third, so the * has a number
    digits = 3 if cell.beyond and any(f"{v:.2f}" == "1.00" for v in shown) else 2
    text = f"{cell.ratio:.{digits}f}"
    if cell.rule == "spread":
        text += f" [{cell.low:.{digits}f}-{cell.high:.{digits}f}]"
    return text + (" *" if cell.beyond else "")


def table_headers() -> list[str]:
    return ["workload", "batch", *(f"{label} B/A" for _k, label, _u in METRICS), "note"]


def table_cells(row: CompareRow) -> list[str]:
    """One row of the comparison table, as the CLI prints it and the window shows it."""
    return [row.workload, str(row.batch_size), *(cell_text(row.cells[k]) for k, _l, _u in METRICS), row.note]


def model_lines(comparison: Comparison) -> list[str]:
    """Each workload's step-time model on both sides and the ratios of its parameters."""
    lines = []
    for m in comparison.models:
        lines.append(
            f"{m.workload}: step time t(B) = alpha + beta*B: A {m.a.alpha * 1e3:.3g} ms + {m.a.beta * 1e3:.3g} ms "
            f"x B, B {m.b.alpha * 1e3:.3g} ms + {m.b.beta * 1e3:.3g} ms x B; B/A alpha "
            f"{cell_text(m.cells['alpha'])}, beta {cell_text(m.cells['beta'])}"
            + (
                " (alpha below 0 on a side: the line misses the small batches, no ratio)"
                if min(m.a.alpha, m.b.alpha) <= 0
                else ""
            )
        )
    return lines


def summary_lines(comparison: Comparison) -> list[str]:
    """Per workload, one sentence on throughput: the range of B/A and where it is beyond the noise."""
    lines = []
    for name in dict.fromkeys(r.workload for r in comparison.rows):
        cells = [r.cells["samples_per_s"] for r in comparison.rows if r.workload == name]
        cells = [c for c in cells if math.isfinite(c.ratio)]
        if not cells:
            lines.append(f"{name}: no batch size with a throughput on both sides")
            continue
        low, high = min(c.ratio for c in cells), max(c.ratio for c in cells)
        up = sum(c.beyond and c.ratio > 1 for c in cells)
        down = sum(c.beyond and c.ratio < 1 for c in cells)
        span = f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}x to {high:.2f}x"
        verdict = (
            f"beyond the noise at {up + down} of {len(cells)} batch sizes ({up} higher, {down} lower)"
            if up + down
            else f"within the noise at all {len(cells)} batch sizes"
        )
        lines.append(f"{name}: B's throughput is {span} A's; {verdict}")
    return lines


def format_comparison(comparison: Comparison) -> str:
    """The whole comparison as text: what was compared, the table, the models, the verdicts and the rule."""
    rows = [table_headers(), *(table_cells(r) for r in comparison.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = [*comparison.notes, *side_lines(comparison), ""]
    for row in rows:
        cells = [
            c.ljust(w) if i in (0, len(row) - 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    out.extend(["", *model_lines(comparison), *summary_lines(comparison), f"Noise: {noise_rule_text(comparison)}."])
    return "\n".join(out)


def side_lines(comparison: Comparison) -> list[str]:
    """Two lines per side: what was run (path, suite, settings), then the machine and its matmul peak."""
    from batchlab.core.bench.machine import describe_machine

    out = []
    for side, bench in (("A", comparison.a), ("B", comparison.b)):
        out.append(f"{side}: {bench.label}: {bench.suite} v{bench.version}, {bench_settings(bench)}")
        out.append(f"   {describe_machine(bench.attrs)}; matmul peak {_peak_text(bench.attrs)}")
    return out


def bench_file_lines(attrs: dict[str, Any]) -> list[str]:
    """What `report` says of a benchmark file (none for a plain sweep): the suite and workload it ran, then the
    machine it measured, worded as `compare` words each side."""
    from batchlab.core.bench.machine import describe_machine

    if not attrs.get("bench_suite"):
        return []
    workload, workloads = str(attrs.get("bench_workload", "?")), str(attrs.get("bench_workloads") or "")
    of = f" (one of {workloads.replace(',', ', ')})" if workloads and workloads != workload else ""
    return [
        f"benchmark: {attrs['bench_suite']} v{attrs.get('bench_suite_version', '?')}, workload "
        f"{workload}{of}; --repeats {attrs.get('bench_repeats', '?')}; "
        f"id {attrs.get('bench_id', '?')}",
        f"machine: {describe_machine(attrs)}; matmul peak {_peak_text(attrs)}",
    ]


def bench_settings(bench: BenchSide) -> str:
    """The settings a benchmark ran with that change its numbers: repeats, threads, device."""
    spec = next(iter(bench.sweeps.values())).spec if bench.sweeps else {}
    threads = int(spec.get("tf_threads", 0) or 0)
    return (
        f"--repeats {bench.attrs.get('bench_repeats', '?')} --threads {threads}"
        f"{'' if threads else ' (one per core)'} --device {spec.get('device', '?')}"
    )


def _peak_text(attrs: dict[str, Any]) -> str:
    rate = _float(attrs.get("matmul_peak_flops_per_s"))
    return f"{rate / 1e9:,.1f} GFLOP/s" if math.isfinite(rate) and rate > 0 else "not measured"


def noise_rule_text(comparison: Comparison) -> str:
    """How `*` was decided, with the numbers the rule used."""
    rows = [c.rule for r in comparison.rows for c in r.cells.values()]
    models = [c.rule for m in comparison.models for c in m.cells.values()]
    limit = f"more than {comparison.threshold * 100:g}% from 1 " + (
        "(the default threshold; --threshold changes it)"
        if comparison.threshold == DEFAULT_THRESHOLD
        else "(--threshold)"
    )
    parts = []
    if "spread" in rows:
        parts.append(
            "with repeats on both sides, [low-high] is the ratio's spread (min B / max A to max B / min A) and * "
            "means the repeats' ranges do not overlap"
        )
    where = [
        *(["with a single run on a side"] if "threshold" in rows else []),
        *(["for the step-time model's alpha and beta (one fit a side)"] if "threshold" in models else []),
    ]
    if where:
        parts.append(f"{' and '.join(where)}, * means the ratio is {limit}")
    return "; ".join(parts) or "no figure to compare"


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as JSON-ready data (NaN as null): the sides, one entry per row and figure, the models."""

    def number(value: float) -> float | None:
        return value if math.isfinite(value) else None

    def cell(c: Cell) -> dict[str, Any]:
        return {
            "a": list(c.a),
            "b": list(c.b),
            "ratio": number(c.ratio),
            "spread": [number(c.low), number(c.high)] if c.rule == "spread" else None,
            "beyond_noise": c.beyond,
            "rule": c.rule,
        }

    return {
        "a": {"path": comparison.a.label, "suite": comparison.a.suite, "version": comparison.a.version},
        "b": {"path": comparison.b.label, "suite": comparison.b.suite, "version": comparison.b.version},
        "threshold": comparison.threshold,
        "rows": [
            {"workload": r.workload, "batch_size": r.batch_size, "note": r.note}
            | {key: cell(r.cells[key]) for key, _l, _u in METRICS}
            for r in comparison.rows
        ],
        "step_time_models": [
            {"workload": m.workload} | {key: cell(m.cells[key]) for key, _l in MODEL_PARAMS} for m in comparison.models
        ],
        "notes": comparison.notes,
    }
