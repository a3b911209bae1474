"""`batchlab compare A B`: two benchmarks (batchlab bench) side by side, B/A per workload and batch size."""

from __future__ import annotations

import argparse
import json
import math

from batchlab.core.bench.compare import DEFAULT_THRESHOLD
from batchlab.core.errors import SpecError

NAME = "compare"
EXIT_OK = 0


def add_parser(sub) -> None:
    parser = sub.add_parser(
        NAME,
        help="compare two benchmarks (batchlab bench): per workload and batch size the ratio B/A of throughput, "
        "step time, peak memory and one-time costs, and which differences are beyond the noise",
    )
    parser.add_argument("a", metavar="A", help="a folder batchlab bench wrote, or one of its run files")
    parser.add_argument("b", metavar="B", help="the other benchmark (ratios are B/A)")
    parser.add_argument(
        "--threshold",
        default=None,
        help=f"without repeats: a ratio further than this from 1 is beyond the noise (default {DEFAULT_THRESHOLD:g},"
        " i.e. 10%%)",
    )
    parser.add_argument("--force", action="store_true", help="compare files of different suite versions anyway")
    parser.add_argument("--json", action="store_true", help="print the ratios as JSON")


def _threshold(text: str | None) -> float:
    if text is None:
        return DEFAULT_THRESHOLD
    try:
        value = float(text.strip().rstrip("%")) / (100.0 if text.strip().endswith("%") else 1.0)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 10):
        raise SpecError("threshold", f"{text!r} is not allowed; use a fraction above 0, e.g. 0.1 (or 10%)")
    return value


def run(args: argparse.Namespace) -> int:
    from batchlab.core.bench.compare import compare_benches, comparison_json, format_comparison

    comparison = compare_benches(args.a, args.b, threshold=_threshold(args.threshold), force=args.force)
    if args.json:
        print(json.dumps(comparison_json(comparison), indent=2))
    else:
        print(format_comparison(comparison))
    return EXIT_OK
