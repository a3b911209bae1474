"""Early abort (issue 28 item 5): wall time of a train-to-target sweep with `--abort-losers` against without.

Target: on `mnist-cnn-98`, the sweep with early abort takes at most 0.5x the exhaustive sweep's wall time and
names the same fastest batch (the lowest time to target among the runs that met the target).

Each way is `batchlab sweep --preset mnist-cnn-98 ... --quiet` as a user types it, a process of its own timed
from launch to exit; the two run in interleaved rounds whose order alternates (full, abort / abort, full), so
load from other processes falls on both alike. Extra options after `--` shorten the preset on a slow machine
(e.g. `-- --samples 12000 --max-epochs 2`); the printout names them.

Usage (from the repository root):

    .venv/bin/python bench/bench_abort_losers.py [--rounds 2] [--preset mnist-cnn-98] [-- SWEEP OPTIONS]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 0.5  # abort / full wall time: at most this


def fastest(path: Path) -> tuple[int | None, dict[str, int]]:
    """The batch with the lowest time to target among the runs that met it, and how many runs ended how."""
    from batchlab.core.model import SweepData
    from batchlab.core.table import summary_rows

    rows = summary_rows(SweepData.from_file(path))
    met = [r for r in rows if r.get("target_reached") == 1]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    best = min(met, key=lambda r: r["time_to_target"])["batch_size"] if met else None
    return best, counts


def timed(cmd: list[str]) -> float:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--preset", default="mnist-cnn-98")
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    batchlab = [sys.executable, str(REPO_ROOT / "main.py")]
    base = [*batchlab, "sweep", "--preset", args.preset, "--device", "cpu", "--quiet", *extra]
    print(f"command:  {shlex.join(base)} [--abort-losers] --out TMP")
    print(f"machine:  {os.cpu_count()} logical cores; load average {os.getloadavg()[0]:.1f} at the start")
    ratios, same = [], True
    with tempfile.TemporaryDirectory(prefix="bench-abort-") as tmp:
        for k in range(args.rounds):
            order = ("full", "abort") if k % 2 == 0 else ("abort", "full")
            wall, best, counts = {}, {}, {}
            for way in order:
                out = Path(tmp) / f"{way}-{k}.h5"
                cmd = [*base, "--out", str(out)] + (["--abort-losers"] if way == "abort" else [])
                load = os.getloadavg()[0]
                wall[way] = timed(cmd)
                best[way], counts[way] = fastest(out)
                print(
                    f"round {k + 1} {way:5s}: {wall[way]:7.1f} s, fastest batch {best[way]}, runs {counts[way]} "
                    f"(load {load:.1f})",
                    flush=True,
                )
            ratios.append(wall["abort"] / wall["full"])
            same = same and best["abort"] == best["full"]
            print(f"round {k + 1} ratio abort/full: {ratios[-1]:.3f}", flush=True)
    median = statistics.median(ratios)
    verdict = "met" if median <= TARGET_RATIO and same else "missed"
    print(
        f"abort/full wall time: median {median:.3f} over {len(ratios)} rounds (range {min(ratios):.3f}-"
        f"{max(ratios):.3f}); same fastest batch in every round: {same}; target <= {TARGET_RATIO}: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
