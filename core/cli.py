"""The headless command line: `batchlab sweep | report | info | presets | max-batch | lr-find`.

Builds the same SweepSpec as the window, prints a progress bar with ETA while the sweep
runs and the summary table at the end. User mistakes print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.paths import DEFAULT_OUT_DIR, check_run_file, default_run_file
from batchlab.core.presets import PRESETS
from batchlab.core.settings.arguments import add_sweep_arguments, value_options
from batchlab.core.settings.arguments import sweep_values as settings_values
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
    _add_profile_parser(sub)
    for module in _command_modules():
        module.add_parser(sub)
    return parser


# Commands that live in their own module (core/commands/NAME.py): each has NAME, add_parser(sub) and
# run(args) -> exit code. A new command adds its module here and touches nothing else in this file.
COMMAND_MODULES: tuple[str, ...] = ("bench", "compare", "export")


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
    try:
        number = int(str(value).strip())
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise SpecError(name, f"{value!r} is not allowed; use a whole number from {low} to {high}")
    return number


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


def _print_table(path: Path) -> None:
    from batchlab.core.model import SweepData
    from batchlab.core.table import format_table, summary_rows, target_line

    sweep = SweepData.from_file(path)
    line = target_line(sweep.spec)
    if line:
        print(textwrap.fill(line, text_width(), subsequent_indent="  "))
    rows = summary_rows(sweep)
    print(format_table(rows, width=terminal_columns()))
    _print_batch_changes(sweep)
    _print_seed_table(rows)
    _print_explanation(sweep)
    _print_analysis(sweep)
    _print_metrics_table(rows)
    _print_noise_scale(sweep)


def _print_noise_scale(sweep) -> None:
    """The gradient noise scale of the runs that measured it (--noise-scale-every), if any."""
    from batchlab.core.analysis.noise_scale import noise_scale_report

    lines = noise_scale_report(sweep)
    if lines:
        print("\nGradient noise scale (McCandlish et al. 2018: with a rate tuned per batch size, Bcrit ~ B_simple):")
        print("\n".join(lines))


def _print_batch_changes(sweep) -> None:
    """With a batch schedule: where each run's batch (and, for grow, its rate) changed (core.table)."""
    from batchlab.core.table import batch_schedule_lines

    for line in batch_schedule_lines(sweep):
        print(line)


def _print_metrics_table(rows: list[dict]) -> None:
    """The model's compiled metrics at the end of each run (core.table.format_metrics_table), if any."""
    from batchlab.core.table import format_metrics_table

    text = format_metrics_table(rows)
    if text:
        print("\nThe model's metrics at the end of each run:")
        print(text)


def _print_seed_table(rows: list[dict[str, Any]]) -> None:
    """With several seeds per batch size: every figure per batch size as mean [min-max] (core/aggregate.py)."""
    from batchlab.core.table import format_seed_table, seeds_line

    line = seeds_line(rows)
    if line:
        print()
        print(line)
        print(format_seed_table(rows))


def _print_explanation(sweep, others=()) -> None:
    """Why the times and memory came out as they did (core/analysis/explain.py), one paragraph per point;
    `others`: sweeps at other replicas for the scaling lines."""
    import textwrap

    from batchlab.core.analysis.explain import explain_sweep
    from batchlab.core.sweep.peak import cached_peak

    peak = cached_peak(sweep.environment.get("device_description", ""))
    print()
    print("Why the times and memory came out this way:")
    for paragraph in explain_sweep(sweep, peak_flops=peak, others=others):
        print(textwrap.fill(paragraph, text_width(), initial_indent="- ", subsequent_indent="  "))


def _print_analysis(sweep, profile=None) -> None:
    """Steps and time to target, the critical batch, regimes and the recommendation (core/analysis/analyse.py);
    `profile`: a profile's prediction (predict.ProfilePrediction) the recommendation checks."""
    import textwrap

    from batchlab.core.analysis.advice import analysis_table
    from batchlab.core.analysis.analyse import analyse
    from batchlab.core.analysis.loss_level import format_loss_level

    analysis = analyse(sweep, profile)
    print()
    print("Which batch size, and why (docs/analysis.md):")
    if analysis.target and analysis.batches:
        print(analysis_table(analysis))
    level = format_loss_level(analysis.loss_level)
    if level:
        print(level)
    for paragraph in analysis.recommendation:
        print(textwrap.fill(paragraph, text_width(), initial_indent="- ", subsequent_indent="  "))


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
    _print_table(out)
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
    _print_range_table(out)
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK


def _print_range_table(path) -> None:
    from batchlab.core.lr_find import SKIP_FRACTION, STOP_FACTOR, format_range_table, range_rows
    from batchlab.core.runfile.reader import read_run_file

    print(format_range_table(range_rows(read_run_file(path))))
    print(
        f"suggested lr: steepest fall of the smoothed loss per unit of log(lr), first {SKIP_FRACTION:.0%} of the "
        f"points skipped; min/10: the rate of the lowest smoothed loss / 10; the test stops when the smoothed loss "
        f"exceeds {STOP_FACTOR:g}x its best. Use it in a sweep with --lr-from {path}"
    )


def _is_lr_find_file(path) -> bool:
    from batchlab.core.lr_find import LR_FIND_MODE
    from batchlab.core.runfile.reader import read_run_file

    return read_run_file(path).attrs.get("mode") == LR_FIND_MODE


def cmd_report(args: argparse.Namespace) -> int:
    from batchlab.core.model import SweepData
    from batchlab.core.table import format_table, summary_rows, target_line
    from batchlab.core.time_account_table import print_time_account

    if _is_lr_find_file(args.file):
        return _report_lr_find(args)
    sweep = SweepData.from_file(args.file)  # the same model, and so the same figures, as the window
    profile = _read_profile(args.profile) if args.profile is not None else None  # a bad file: one line, first
    others = [SweepData.from_file(path) for path in getattr(args, "scaling_with", [])]
    rows = summary_rows(sweep)
    if args.json:
        from batchlab.core.analysis.analyse import analyse

        payload = {"sweep": {"status": sweep.status, "message": sweep.message}, "runs": rows}
        if sweep.left_out_note:
            payload["sweep"]["left_out"] = sweep.left_out_note
        payload["analysis"] = analyse(sweep, profile).as_dict()
        from batchlab.core.analysis.explain import explain_scaling

        payload["scaling"] = explain_scaling(sweep, others)  # the explanation's scaling lines (docs/scaling.md)
        payload.update(_profile_json(args.file, sweep))
        print(json.dumps(payload, indent=2, default=str))
        return EXIT_OK
    env = sweep.environment
    print(f"{args.file}: sweep {sweep.status_text}; {env.get('device_description', 'unknown device')}")
    print(f"TensorFlow {env.get('tensorflow_version', '?')}, CUDA {env.get('cuda_version', '?')}")
    if sweep.left_out_note:  # a summary-only export says what it lacks (core/export/hdf5.py)
        print(sweep.left_out_note)
    line = target_line(sweep.spec)
    if line:
        print(textwrap.fill(line, text_width(), subsequent_indent="  "))
    tasks = sorted({str(r.attrs["task"]) for r in sweep.runs.values() if r.attrs.get("task")})
    if tasks:
        print(f"task: {', '.join(tasks)}")
    print(format_table(rows, width=terminal_columns()))
    _print_batch_changes(sweep)
    _print_seed_table(rows)
    print_time_account(sweep)
    _print_explanation(sweep, others)
    _print_analysis(sweep, profile)  # with a profile, its recommendation says how far the prediction was off
    _print_metrics_table(rows)
    _print_noise_scale(sweep)
    _print_profile(args.file)
    return EXIT_OK


def _add_profile_parser(sub) -> None:
    from batchlab.core.sweep.profile import PROFILE_BATCHES, PROFILE_STEPS

    parser = sub.add_parser(
        "profile",
        help="predict the best batch before a sweep: a short run per batch size measuring noise scale and step time",
    )
    for option, _field, help_text in SWEEP_OPTIONS:
        if option == "--batch-sizes":
            help_text = f"2 or 3 batch sizes to profile (default: {PROFILE_BATCHES} from the preset's list)"
        parser.add_argument(option, default=None, help=help_text)
    parser.add_argument(
        "--steps", default=None, help=f"optimizer steps per batch size (default {PROFILE_STEPS}, after any warmup)"
    )
    parser.add_argument(
        "--out", default=None, help=f"run file to write (default {DEFAULT_OUT_DIR}/profile-PRESET-TIME.h5)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def _profile_values(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep a profile runs (core/sweep/profile.py) from `batchlab profile`'s options."""
    from batchlab.core.sweep.profile import profile_values

    return profile_values({f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS}, args.steps)


def cmd_profile(args: argparse.Namespace) -> int:
    from batchlab.core.sweep.profile import profile_runner, profile_spec, run_profile

    spec = profile_spec({f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS}, args.steps)
    if args.out:
        out = check_run_file(args.out, overwrite=args.overwrite)
    else:
        out = check_run_file(default_run_file(f"profile-{spec.preset}"), create_folder=True)
    runner = profile_runner(spec)
    progress = ProgressPrinter(spec, stream=sys.stderr)
    try:
        with _Interrupts(runner, progress):
            status = run_profile(spec, out, sink=progress.handle, overwrite=args.overwrite, runner=runner)
    finally:
        progress.close()
    print(f"run file: {out}")
    _print_table(out)
    _print_profile(out)
    print(f"check it later with: batchlab report SWEEP.h5 --profile {out}")
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK


def _profile_json(path, sweep) -> dict[str, Any]:
    """report --json of a profile file: its prediction as "profile_prediction" (null when it has none)."""
    from batchlab.core.analysis.predict import PROFILE_MODE, predict_from_profile
    from batchlab.core.runfile.reader import read_run_file

    if read_run_file(path).attrs.get("mode") != PROFILE_MODE:
        return {}
    prediction = predict_from_profile(sweep)
    return {"profile_prediction": prediction.as_dict() if prediction is not None else None}


def _print_profile(path) -> None:
    """A profile file's own prediction (nothing for other run files)."""
    from batchlab.core.analysis.predict import PROFILE_MODE, describe_prediction, predict_from_profile
    from batchlab.core.model import SweepData
    from batchlab.core.runfile.reader import read_run_file

    if read_run_file(path).attrs.get("mode") == PROFILE_MODE:
        prediction = predict_from_profile(SweepData.from_file(path))
        print("\nPrediction from this profile (McCandlish et al. 2018, Bcrit ~ B_simple):")
        if prediction is None:
            print("none: it needs a finite B_simple and a steady step time at two batch sizes at least")
        else:
            print("\n".join(describe_prediction(prediction)))


def _read_profile(path):
    """The prediction of `report --profile FILE` (predict.ProfilePrediction); SpecError when it holds none."""
    from batchlab.core.analysis.predict import predict_from_profile
    from batchlab.core.model import SweepData

    prediction = predict_from_profile(SweepData.from_file(path))
    if prediction is None:
        raise SpecError("profile", f"{path} holds no prediction (no finite B_simple or step-time fit)")
    return prediction


def _report_lr_find(args: argparse.Namespace) -> int:
    from batchlab.core.lr_find import range_rows
    from batchlab.core.runfile.reader import read_run_file

    record = read_run_file(args.file)
    if args.json:
        print(json.dumps(range_rows(record), indent=2, default=str))
        return EXIT_OK
    env = record.environment
    print(f"{args.file}: LR range test {record.status}; {env.get('device_description', 'unknown device')}")
    _print_range_table(args.file)
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
    "profile": cmd_profile,
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
