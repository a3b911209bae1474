"""The headless command line: `batchlab sweep | report | info | presets | max-batch | lr-find`.

Builds the same SweepSpec as the window, prints a progress bar with ETA while the sweep
runs and the summary table at the end. User mistakes print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from batchlab.core.commands.printing import (
    print_analysis,
    print_batch_changes,
    print_explanation,
    print_metrics_table,
    print_noise_scale,
    print_profile,
    print_range_table,
    print_runs_at_once,
    print_seed_table,
    print_table,
    profile_json,
    read_profile,
)
from batchlab.core.errors import SpecError
from batchlab.core.paths import DEFAULT_OUT_DIR, check_run_file, default_run_file
from batchlab.core.presets import PRESETS
from batchlab.core.settings.arguments import add_sweep_arguments, value_options
from batchlab.core.settings.arguments import sweep_values as settings_values
from batchlab.core.settings.base import whole
from batchlab.core.spec import FIELD_PARSERS, build_spec
from batchlab.core.sweep.interrupts import Interrupts as _Interrupts
from batchlab.core.sweep.progress import ProgressPrinter
from batchlab.core.text_width import terminal_columns, text_width

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
MIB = 1 << 20


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


# (option, spec field, help) of every setting given as a value (core/settings/: each group owns its options);
# the other commands offer some of them. Every value is parsed by its settings group, never here.
SWEEP_OPTIONS = value_options()


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="batchlab", description="Measure how the mini-batch size changes training time, memory and loss."
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sweep = sub.add_parser("sweep", help="run a batch-size sweep headless and save it to an HDF5 run file")
    add_sweep_arguments(sweep)  # one section per settings group (core/settings/)
    run = sweep.add_argument_group("Run file and training processes")
    run.add_argument(
        "--xla-cache",
        action="store_true",
        help="keep XLA's compiled steps in the user's cache folder (~/.cache/batchlab/xla on Linux) so a later sweep "
        "of the same model and batch sizes skips the compile; delete the folder to clear it",
    )
    run.add_argument("--out", default=None, help=f"run file to write (default {DEFAULT_OUT_DIR}/PRESET-TIME.h5)")
    run.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    run.add_argument("--quiet", action="store_true", help="no progress bar, only the final table")
    children = run.add_mutually_exclusive_group()
    children.add_argument(
        "--fresh-children",
        action="store_true",
        help="a new training process for every run that imports TensorFlow itself (default on a Linux CPU: a "
        "fork server imports TensorFlow once and forks a process per run; see docs/performance.md)",
    )
    children.add_argument(
        "--reuse-children",
        action="store_true",
        help="on the CPU, the process of a run that ended ok trains the next run too (the default where fork is "
        "not possible); its memory figures then include what earlier runs left",
    )
    report = sub.add_parser("report", help="print the summary table of a run file")
    report.add_argument("file", help="an .h5 run file written by batchlab")
    report.add_argument("--json", action="store_true", help="print JSON instead of tables: the runs and the analysis")
    report.add_argument(
        "--profile",
        default=None,
        help="a file of batchlab profile: how far its predicted best batch was from this sweep's",
    )
    report.add_argument(
        "--scaling-with",
        nargs="+",
        default=[],
        metavar="FILE",
        help="run files of the same sweep at other --replicas: the scaling lines compare their throughput",
    )
    info = sub.add_parser("info", help="print versions and the devices TensorFlow sees")
    info.add_argument("--peak", action="store_true", help="measure the device's matmul peak (FLOP/s) and cache it")
    info.add_argument("--device", default="auto", help="with --peak: auto (default), cpu or gpu:N")
    sub.add_parser("presets", help="list the named presets and their defaults")
    _add_max_batch_parser(sub)
    _add_lr_find_parser(sub)
    for module in _command_modules():
        module.add_parser(sub)
    return parser


# Commands that live in their own module (core/commands/NAME.py): each has NAME, add_parser(sub) and
# run(args) -> exit code. A new command adds its module here and touches nothing else in this file.
COMMAND_MODULES: tuple[str, ...] = ("bench", "compare", "export", "profile")


def _command_modules():
    import importlib

    return [importlib.import_module(f"batchlab.core.commands.{name}") for name in COMMAND_MODULES]


MAX_BATCH_FIELDS = ("preset", "workload", "model_file", "data", "samples", "val_samples", "optimizer", "lr")
MAX_BATCH_FIELDS += ("momentum", "seeds", "device")


def _add_max_batch_parser(sub) -> None:
    from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, DEFAULT_START

    parser = sub.add_parser(
        "max-batch", help="find the largest batch size that trains on this device (each try in its own process)"
    )
    for option, field, help_text in SWEEP_OPTIONS:
        if field in MAX_BATCH_FIELDS:
            parser.add_argument(option, default=None, help=help_text)
    parser.add_argument("--start", default=None, help=f"first batch size tried (default {DEFAULT_START})")
    parser.add_argument("--max", default=None, help="largest batch size to try (default: the training samples)")
    parser.add_argument(
        "--margin", default=None, help=f"safety margin off the largest fit, 0 to 0.9 (default {DEFAULT_MARGIN})"
    )
    parser.add_argument(
        "--memory-cap",
        default=None,
        help="host memory a try may use: e.g. 80%% (of the memory available now; the default), 6GiB, 512MiB",
    )


LR_FIND_FIELDS = ("preset", "workload", "model_file", "data", "samples", "batch_sizes", "optimizer", "momentum")
LR_FIND_FIELDS += ("seeds", "device")


def _add_lr_find_parser(sub) -> None:
    from batchlab.core.lr_find import DEFAULT_LR_MAX, DEFAULT_LR_MIN, DEFAULT_LR_STEPS, STOP_FACTOR, range_defaults

    parser = sub.add_parser(
        "lr-find",
        help="LR range test per batch size: a fresh model, an exponentially growing rate, a suggested rate each",
    )
    for option, field, help_text in SWEEP_OPTIONS:
        if field in LR_FIND_FIELDS:
            parser.add_argument(option, default=None, help=help_text)
    parser.add_argument("--shuffle", dest="shuffle", action="store_true", default=None, help="shuffle the batches")
    parser.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="consecutive slices, fixed order")
    shallue = range_defaults("shallue-mnist")
    for option, what, default, preset_value in (
        ("--lr-min", "first", DEFAULT_LR_MIN, shallue.lr_min),
        ("--lr-max", "last", DEFAULT_LR_MAX, shallue.lr_max),
    ):
        parser.add_argument(
            option, default=None, help=f"{what} rate tried (default {default:g}; shallue-mnist {preset_value:g})"
        )
    parser.add_argument(
        "--lr-steps",
        default=None,
        help=f"steps from --lr-min to --lr-max (default {DEFAULT_LR_STEPS}; shallue-mnist {shallue.lr_steps}); the "
        f"test stops early once the smoothed loss exceeds {STOP_FACTOR:g}x its best or is not finite",
    )
    default_out = f"{DEFAULT_OUT_DIR}/lr-find-PRESET-TIME.h5"
    parser.add_argument("--out", default=None, help=f"run file to write (default {default_out})")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def _int_option(name: str, value, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    return whole(name, value, low, f"use a whole number from {low} to {high}", high)


def cmd_max_batch(args: argparse.Namespace) -> int:
    from batchlab.core.analysis.batch_search import DEFAULT_START
    from batchlab.core.sweep.max_batch import (
        PROBE_STEPS,
        MaxBatchError,
        describe_memory,
        describe_result,
        describe_trial,
        parse_margin,
        parse_memory_cap,
        search_max_batch,
    )

    values: dict[str, Any] = {
        f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS if f in MAX_BATCH_FIELDS
    }
    values["batch_sizes"] = "1"  # the search chooses the sizes
    spec = build_spec(values)
    limit = _int_option("max", args.max, spec.samples, 1, spec.samples)
    start = _int_option("start", args.start, min(DEFAULT_START, limit), 1, limit)
    margin = parse_margin(args.margin)
    cap = parse_memory_cap(args.memory_cap)
    print("checking data and model (starting TensorFlow)", file=sys.stderr)

    def checked(environment: dict) -> None:
        print(
            f"largest batch on {environment.get('device_description', 'this device')}: trying up to {limit:,} "
            f"samples (the training data{' or --max' if args.max else ''}); each try trains {PROBE_STEPS} steps and "
            f"a validation pass in its own process, host memory capped at {cap / MIB:,.0f} MiB",
            flush=True,
        )

    try:
        result = search_max_batch(
            spec, cap, limit, start, margin, on_checked=checked, on_trial=lambda t: print(describe_trial(t), flush=True)
        )
    except MaxBatchError as e:
        print(f"batchlab: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("batchlab: stopped; no answer", file=sys.stderr)
        return EXIT_INTERRUPTED
    for line in describe_result(result, cap):
        print(line)
    if result.batch_size is None:
        return EXIT_FAILED
    memory = describe_memory(result)
    if memory:
        print(memory)
    return EXIT_OK


def sweep_values(args: argparse.Namespace) -> dict[str, Any]:
    """The spec values `batchlab sweep` options give (None: not given, the preset's); the window builds the same."""
    return settings_values(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    from batchlab.core.sweep.runner import SweepRunner, run_sweep

    spec = build_spec(sweep_values(args))
    if args.xla_cache:  # before the training processes start: TensorFlow reads the flag at its first op
        from batchlab.core.training.xla_choice import enable_xla_cache, xla_cache_dir

        enable_xla_cache(xla_cache_dir())
    if args.out:
        out = check_run_file(args.out, overwrite=args.overwrite)
    else:
        out = check_run_file(default_run_file(spec.preset), create_folder=True)
    runner = SweepRunner(spec, reuse=not args.fresh_children, fork=not (args.fresh_children or args.reuse_children))
    progress = ProgressPrinter(spec, stream=sys.stderr, enabled=not args.quiet)
    try:
        with _Interrupts(runner, progress):
            status = run_sweep(
                spec,
                out,
                sink=progress.handle,
                overwrite=args.overwrite,
                runner=runner,
                on_preflight=lambda: progress.note(
                    f"checking data and model for {len(spec.runs())} runs (starting TensorFlow)"
                ),
            )
    finally:
        progress.close()
    print(f"run file: {out}")
    print_table(out)
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK


def cmd_lr_find(args: argparse.Namespace) -> int:
    from batchlab.core.lr_find import parse_range_settings
    from batchlab.core.sweep.lr_find_runner import LrFindRunner, run_lr_find

    values: dict[str, Any] = {
        f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS if f in LR_FIND_FIELDS
    }
    values["shuffle"] = args.shuffle
    spec = build_spec(values)
    settings = parse_range_settings(args.lr_min, args.lr_max, args.lr_steps, preset=spec.preset)
    if args.out:
        out = check_run_file(args.out, overwrite=args.overwrite)
    else:
        out = check_run_file(default_run_file(f"lr-find-{spec.preset}"), create_folder=True)
    runner = LrFindRunner(spec, settings)

    def show(event: dict[str, Any]) -> None:
        if event.get("type") == "run_ended":
            print(f"run {event.get('run')}: {event.get('status')}: {event.get('message')}", file=sys.stderr, flush=True)

    progress = ProgressPrinter(spec, stream=sys.stderr, enabled=False)
    print(
        f"range test: {settings.lr_min:g} to {settings.lr_max:g} over {settings.lr_steps} steps, "
        f"{len(spec.runs())} batch size/seed runs, each a fresh model in its own process",
        file=sys.stderr,
    )
    with _Interrupts(runner, progress):
        status = run_lr_find(spec, settings, out, sink=show, overwrite=args.overwrite, runner=runner)
    print(f"run file: {out}")
    print_range_table(out)
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK


def _is_lr_find_file(path) -> bool:
    from batchlab.core.lr_find import LR_FIND_MODE
    from batchlab.core.runfile.reader import read_root_attrs

    return read_root_attrs(path).get("mode") == LR_FIND_MODE  # the root alone: not the whole file a second time


def cmd_report(args: argparse.Namespace) -> int:
    from batchlab.core.analysis.concurrency import runs_at_once_line
    from batchlab.core.bench.compare import bench_file_lines
    from batchlab.core.model import SweepData
    from batchlab.core.table import format_table, summary_rows, target_line
    from batchlab.core.time_account_table import print_time_account

    if _is_lr_find_file(args.file):
        return _report_lr_find(args)
    sweep = SweepData.from_file(args.file)  # the same model, and so the same figures, as the window
    profile = read_profile(args.profile) if args.profile is not None else None  # a bad file: one line, first
    others = [SweepData.from_file(path) for path in getattr(args, "scaling_with", [])]
    rows = summary_rows(sweep)
    if args.json:
        from batchlab.core.analysis.analyse import analyse

        payload = {"sweep": {"status": sweep.status, "message": sweep.message}, "runs": rows}
        if sweep.left_out_note:
            payload["sweep"]["left_out"] = sweep.left_out_note
        at_once = runs_at_once_line(sweep)
        if at_once:
            payload["sweep"]["runs_at_once"] = at_once
        payload["analysis"] = analyse(sweep, profile).as_dict()
        from batchlab.core.analysis.explain import explain_scaling

        payload["scaling"] = explain_scaling(sweep, others)  # the explanation's scaling lines (docs/scaling.md)
        payload.update(profile_json(args.file, sweep))
        print(json.dumps(payload, indent=2, default=str))
        return EXIT_OK
    env = sweep.environment
    print(f"{args.file}: sweep {sweep.status_text}; {env.get('device_description', 'unknown device')}")
    print(f"TensorFlow {env.get('tensorflow_version', '?')}, CUDA {env.get('cuda_version', '?')}")
    for bench_line in bench_file_lines(sweep.file_attrs):  # a `batchlab bench` file: its suite and machine
        print(textwrap.fill(bench_line, text_width(), subsequent_indent="  "))
    if sweep.left_out_note:  # a summary-only export says what it lacks (core/export/hdf5.py)
        print(sweep.left_out_note)
    line = target_line(sweep.spec)
    if line:
        print(textwrap.fill(line, text_width(), subsequent_indent="  "))
    tasks = sorted({str(r.attrs["task"]) for r in sweep.runs.values() if r.attrs.get("task")})
    if tasks:
        print(f"task: {', '.join(tasks)}")
    print_runs_at_once(sweep)  # runs trained at the same time (--parallel): their times are not a run's alone
    print(format_table(rows, width=terminal_columns()))
    print_batch_changes(sweep)
    print_seed_table(rows)
    print_time_account(sweep)
    print_explanation(sweep, others)
    print_analysis(sweep, profile)  # with a profile, its recommendation says how far the prediction was off
    print_metrics_table(rows)
    print_noise_scale(sweep)
    print_profile(args.file)
    return EXIT_OK


def _report_lr_find(args: argparse.Namespace) -> int:
    from batchlab.core.lr_find import range_rows
    from batchlab.core.runfile.reader import read_run_file

    record = read_run_file(args.file)
    if args.json:
        print(json.dumps(range_rows(record), indent=2, default=str))
        return EXIT_OK
    env = record.environment
    print(f"{args.file}: LR range test {record.status}; {env.get('device_description', 'unknown device')}")
    print_range_table(args.file)
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    from batchlab.core.sweep.peak import cache_path, measure_peak, read_peaks
    from batchlab.core.sweep.probe import probe_environment

    if args.peak:
        build_spec({"device": args.device})  # the one check of a device name
        print(f"measuring the matmul peak on {args.device} (float32 matrix products, about 30 s)", file=sys.stderr)
        result = measure_peak(args.device)
        print(
            f"matmul peak          {result['flops_per_s'] / 1e9:,.1f} GFLOP/s on {result['device_description']} "
            f"({result['dtype']}, {result['matrix_size']}x{result['matrix_size']}"
            f"{', TF32 allowed' if result.get('tf32') else ''}); cached in {cache_path()}"
        )
        return EXIT_OK
    env = probe_environment()
    for key in ("app_version", "python_version", "platform", "tensorflow_version", "keras_version"):
        print(f"{key:20s} {env.get(key)}")
    print(f"{'cuda_version':20s} {env.get('cuda_version')}  (cuDNN {env.get('cudnn_version')})")
    print("devices:")
    for d in env.get("devices", []):
        mem = d.get("memory_bytes", -1)
        mem_text = f"{mem / (1 << 30):.1f} GiB" if mem and mem > 0 else "memory unknown"
        print(f"  {d['name']:8s} {d['description']} ({mem_text})")
    peaks = read_peaks()
    for description, entry in peaks.items():
        rate = float(entry.get("flops_per_s", 0) or 0)
        print(f"matmul peak          {rate / 1e9:,.1f} GFLOP/s on {description} (measured {entry.get('measured')})")
    if not peaks:
        print("matmul peak          not measured (batchlab info --peak)")
    return EXIT_OK


def cmd_presets(args: argparse.Namespace) -> int:
    for preset in PRESETS.values():
        print(f"{preset.name}: {preset.title}")
        print(f"    {preset.description}")
        shown = {k: v for k, v in preset.defaults.items() if k in FIELD_PARSERS}
        print(
            "    " + ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in shown.items())
        )
    return EXIT_OK


COMMANDS = {
    "sweep": cmd_sweep,
    "report": cmd_report,
    "info": cmd_info,
    "presets": cmd_presets,
    "max-batch": cmd_max_batch,
    "lr-find": cmd_lr_find,
}


def main(argv: list[str] | None = None) -> int:
    """Run one CLI command; returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    command = COMMANDS.get(args.command) or {m.NAME: m.run for m in _command_modules()}[args.command]
    try:
        return command(args)
    except SpecError as e:
        print(f"batchlab: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `batchlab report f.h5 | head`
        sys.stderr.close()
        return EXIT_OK
