"""`batchlab export`: chosen runs of run files into a new run file, or into TensorBoard event files.

docs/sharing.md shows both; docs/runfile-format.md (*Exported files*) describes what an exported file holds.
"""

from __future__ import annotations

import argparse

from batchlab.core.errors import SpecError

NAME = "export"
EXIT_OK = 0

USAGE = """\
batchlab export OUT.h5 FILE.h5 [FILE2.h5 ...] [--batch 32,64] [--seed 0] [--status ok] [--summary-only]
batchlab export --tensorboard DIR FILE.h5 [FILE2.h5 ...] [--batch ...] [--seed ...] [--status ...]"""


def add_parser(sub) -> None:
    parser = sub.add_parser(
        NAME,
        help="write chosen runs of run files into a new run file (or a summary), or into TensorBoard event files",
        description="Write the runs of one or more run files that --batch, --seed and --status choose (all by "
        "default) into one new run file with where they came from at its root; it opens in batchlab report and "
        "the window like a sweep's file. With --tensorboard DIR, write them as TensorBoard event files instead "
        "(one folder per run; needs the tensorboard package).",
        usage=USAGE,
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE.h5",
        help="OUT.h5 then the run files to read (with --tensorboard: the run files only)",
    )
    parser.add_argument("--batch", default=None, help="batch sizes to take, comma-separated (default: all)")
    parser.add_argument("--seed", default=None, help="seeds to take, comma-separated (default: all)")
    parser.add_argument(
        "--status", default=None, help="run statuses to take, comma-separated, e.g. ok or ok,oom (default: all)"
    )
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="leave out the per-step tables (the bulk of a file); keep epochs, evaluations, metrics and every "
        "figure the report shows",
    )
    parser.add_argument(
        "--tensorboard", metavar="DIR", default=None, help="write TensorBoard event files under DIR instead"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT.h5, or the run folders under DIR")


def run(args: argparse.Namespace) -> int:
    from batchlab.core.export.select import parse_selection

    selection = parse_selection(args.batch, args.seed, args.status)
    if args.tensorboard is not None:
        if args.summary_only:
            raise SpecError("summary-only", "applies to an HDF5 export; --tensorboard writes no per-step file")
        from batchlab.core.export.tensorboard import export_tensorboard

        result = export_tensorboard(args.tensorboard, args.files, selection, overwrite=args.overwrite)
        print(f"wrote {_runs(result.runs)} as TensorBoard event files under {result.path}")
        print(f"view them with: tensorboard --logdir {result.path}")
        return EXIT_OK
    if len(args.files) < 2:
        raise SpecError("file", f"name the new file and then the run files to export: {USAGE.splitlines()[0]}")
    from batchlab.core.export.hdf5 import CONTENT_SUMMARY, export_hdf5

    out, *sources = args.files
    result = export_hdf5(out, sources, selection, summary_only=args.summary_only, overwrite=args.overwrite)
    what = "summary only, per-step tables left out" if result.content == CONTENT_SUMMARY else "every table"
    files = "1 file" if result.sources == 1 else f"{result.sources} files"
    print(f"wrote {_runs(result.runs)} of {files} to {result.path} ({what})")
    print(f"see them with: batchlab report {result.path}")
    return EXIT_OK


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"
