"""`batchlab profile`: predict the best batch before a sweep, from a short run per batch size that measures the
gradient noise scale and the step time (core/sweep/profile.py runs it; core/analysis/predict.py predicts).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from batchlab.core.commands.printing import print_profile, print_table
from batchlab.core.paths import DEFAULT_OUT_DIR, check_run_file, default_run_file
from batchlab.core.settings.arguments import value_options
from batchlab.core.sweep.interrupts import Interrupts
from batchlab.core.sweep.progress import ProgressPrinter

NAME = "profile"
EXIT_OK = 0
EXIT_INTERRUPTED = 130
SWEEP_OPTIONS = value_options()


def add_parser(sub) -> None:
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


def profile_values(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep a profile runs (core/sweep/profile.py) from `batchlab profile`'s options."""
    from batchlab.core.sweep.profile import profile_values

    return profile_values({f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS}, args.steps)


def run(args: argparse.Namespace) -> int:
    from batchlab.core.sweep.profile import profile_runner, profile_spec, run_profile

    spec = profile_spec({f: getattr(args, o[2:].replace("-", "_")) for o, f, _ in SWEEP_OPTIONS}, args.steps)
    if args.out:
        out = check_run_file(args.out, overwrite=args.overwrite)
    else:
        out = check_run_file(default_run_file(f"profile-{spec.preset}"), create_folder=True)
    runner = profile_runner(spec)
    progress = ProgressPrinter(spec, stream=sys.stderr)
    try:
        with Interrupts(runner, progress):
            status = run_profile(spec, out, sink=progress.handle, overwrite=args.overwrite, runner=runner)
    finally:
        progress.close()
    print(f"run file: {out}")
    print_table(out)
    print_profile(out)
    print(f"check it later with: batchlab report SWEEP.h5 --profile {out}")
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_OK
