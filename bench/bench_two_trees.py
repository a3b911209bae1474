"""Whole-sweep wall time of `batchlab sweep` from two source trees, in interleaved rounds: a change's cost.

A short variant of bench_sweep_tax.py for a before/after question (issue 26: the runner split into a scheduler
and launchers must not slow a sweep down beyond noise). Each tree is a folder holding `batchlab/` (a checkout,
e.g. `git archive BASE | tar -x -C /tmp/base/batchlab`); each sweep is `python -m batchlab.main sweep ...`
with that folder first on PYTHONPATH, a process of its own timed from launch to exit. Rounds alternate the
order (A, B / B, A) so load from other processes falls on both alike; the ratio B/A of each round's wall
time and CPU time (the sweep and its training children) is printed, then the medians and the ranges.

Usage (from the repository root):

    .venv/bin/python bench/bench_two_trees.py A_FOLDER B_FOLDER [--rounds 3] [-- SWEEP OPTIONS]

Default sweep: --preset mnist-autoencoder --epochs 2 --device cpu --quiet (the sweep-tax preset, shortened).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SWEEP = ["--preset", "mnist-autoencoder", "--epochs", "2", "--device", "cpu", "--quiet"]


def timed(tree: str, options: list[str], out: Path) -> tuple[float, float]:
    """Wall time (s) of the sweep, and the CPU time (s, user + system) of it and its training children."""
    env = {**os.environ, "PYTHONPATH": tree, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, "-m", "batchlab.main", "sweep", *options, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tree)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options = argv[argv.index("--") + 1 :] if "--" in argv else DEFAULT_SWEEP
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    print(f"sweep: batchlab sweep {shlex.join(options)}; A = {args.a}, B = {args.b}")
    print(f"machine: {os.cpu_count()} logical cores; load average {os.getloadavg()[0]:.1f} at the start")
    ratios, cpu_ratios = [], []
    with tempfile.TemporaryDirectory(prefix="bench-trees-") as tmp:
        for k in range(args.rounds):
            order = ("a", "b") if k % 2 == 0 else ("b", "a")
            wall, cpu = {}, {}
            for way in order:
                load = os.getloadavg()[0]
                wall[way], cpu[way] = timed(getattr(args, way), options, Path(tmp) / f"{way}-{k}.h5")
                print(f"round {k + 1} {way.upper()}: {wall[way]:6.1f} s, CPU {cpu[way]:6.1f} s (load {load:.1f})")
            ratios.append(wall["b"] / wall["a"])
            cpu_ratios.append(cpu["b"] / cpu["a"])
            print(f"round {k + 1} ratio B/A: wall {ratios[-1]:.3f}, CPU {cpu_ratios[-1]:.3f}", flush=True)
    print(
        f"B/A wall time: median {statistics.median(ratios):.3f} over {len(ratios)} rounds "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}); CPU time: median {statistics.median(cpu_ratios):.3f} "
        f"(range {min(cpu_ratios):.3f}-{max(cpu_ratios):.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
