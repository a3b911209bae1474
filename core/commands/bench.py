"""`batchlab bench`: run the versioned benchmark suite (core/bench/suite.py), a run file per workload."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from batchlab.core.bench.suite import MAX_REPEATS, SUITE, SUITE_NAME, SUITE_VERSION, WORKLOAD_NAMES, plan_bench
from batchlab.core.paths import DEFAULT_OUT_DIR

NAME = "bench"
EXIT_OK, EXIT_INTERRUPTED = 0, 130


def add_parser(sub) -> None:
    sizes = "; ".join(f"{w.name} {w.batch_sizes[0]}-{w.batch_sizes[-1]}" for w in SUITE)
    parser = sub.add_parser(
        NAME,
        help=f"benchmark this machine: the {SUITE_NAME} suite version {SUITE_VERSION} ({sizes}), a run file per "
        "workload with the machine recorded; compare two with batchlab compare",
    )
    parser.add_argument(
        "--out", default=None, help=f"folder for the run files (default {DEFAULT_OUT_DIR}/bench-TIME/), NAME.h5 each"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the workloads' files in --out")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: batch sizes 16 and 64 on 256 samples, cached matmul peak (a suite of its own name, "
        "not comparable with the full one)",
    )
    parser.add_argument("--workloads", default=None, help=f"some of {','.join(WORKLOAD_NAMES)} (default all)")
    parser.add_argument(
        "--repeats",
        default="1",
        help=f"runs per batch size (seeds 0..N-1), 1 to {MAX_REPEATS}; with 2 or more, compare judges the noise by "
        "their spread (default 1)",
    )
    parser.add_argument("--threads", default="0", help="TensorFlow threads per training process (0: one per core)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu or gpu:N")
    parser.add_argument(
        "--no-peak", action="store_true", help="do not measure the matmul peak (about 30 s); record the cached one"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from batchlab.core.bench.suite import BenchRunner, bench_id, suite_attrs
    from batchlab.core.model import SweepData
    from batchlab.core.sweep.interrupts import Interrupts
    from batchlab.core.sweep.progress import ProgressPrinter, format_duration
    from batchlab.core.sweep.runner import run_sweep
    from batchlab.core.table import format_table, summary_rows
    from batchlab.core.text_width import terminal_columns

    plan = plan_bench(args.out, args.quick, args.workloads, args.repeats, args.threads, args.device, args.overwrite)
    plan.folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        peak = _peak(plan.device, measure=not (args.quick or args.no_peak))
    except KeyboardInterrupt:  # before any sweep: nothing written yet
        print("batchlab: stopped while measuring the matmul peak; nothing was run", file=sys.stderr)
        return EXIT_INTERRUPTED
    specs = plan.specs()
    total_runs = sum(len(spec.runs()) for _w, spec in specs)
    done_runs, ident, status = 0, bench_id(), "complete"
    for k, (workload, spec) in enumerate(specs):
        elapsed = time.monotonic() - started
        left = elapsed / done_runs * (total_runs - done_runs) if done_runs else float("nan")
        print(
            f"{plan.suite} v{SUITE_VERSION}, workload {k + 1}/{len(specs)}: {workload.name} ({len(spec.runs())} "
            f"runs); elapsed {format_duration(elapsed)}, suite ETA {format_duration(left)}",
            file=sys.stderr,
            flush=True,
        )
        out = plan.out_path(workload)
        runner = BenchRunner(spec, suite_attrs(plan, workload, ident), peak)
        progress = ProgressPrinter(spec, stream=sys.stderr, enabled=not args.quiet)
        try:
            with Interrupts(runner, progress):
                status = run_sweep(spec, out, sink=progress.handle, overwrite=args.overwrite, runner=runner)
        finally:
            progress.close()
        done_runs += len(spec.runs())
        print(f"run file: {out}")
        print(format_table(summary_rows(SweepData.from_file(out)), width=terminal_columns()))
        if status == "interrupted":
            break
    print(
        f"{plan.suite} v{SUITE_VERSION} took {format_duration(time.monotonic() - started)}; "
        f"compare it with another: batchlab compare {plan.folder} OTHER"
    )
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK


def _peak(device: str, measure: bool):
    """environment -> the matmul peak the files record: measured now (once), or the cached one for the device."""
    from batchlab.core.events import now_iso
    from batchlab.core.sweep.peak import measure_peak, read_peaks

    if measure:
        print(f"measuring the matmul peak on {device} (about 30 s)", file=sys.stderr, flush=True)
        measured: dict[str, Any] = {**measure_peak(device), "measured": now_iso()}
        return lambda environment: measured

    def cached(environment: dict[str, Any]) -> dict[str, Any] | None:
        description = str(environment.get("device_description", ""))
        entry = read_peaks().get(description)
        return {**entry, "device_description": description} if entry else None

    return cached
