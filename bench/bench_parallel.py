"""Two runs at once on the CPU (`batchlab sweep --parallel 2`) against the same sweep one run at a time.

The question (issue 27, item 1): on a CPU, what does keeping two runs in flight buy in wall time, what does it
cost in CPU time, and how far does it move each run's own times (which is why every such run carries a
warning)? Each sweep runs as a user types it, as its own process timed from launch to exit:

  alone     batchlab sweep --preset mnist-mlp --device cpu --threads 1 ... (one run at a time)
  parallel  the same with --parallel 2

Both fork their runs from one fork server (one TensorFlow import per sweep) and use one TensorFlow thread
per run, so on a 2-core machine the two runs at once have a core each. The two ways run in interleaved
rounds whose order alternates (alone, parallel / parallel, alone), so load from other processes falls on both
alike; each round prints its pair's ratios and /proc/loadavg before each sweep, then the median and range:

- wall: sweep process launch to exit, s;
- CPU: user + system time of the sweep process and every process under it (fork server, forked runs), s;
- per-run throughput: the median over runs of (steady samples/s with --parallel 2) / (alone), read from the
  run files: how much the runs' own times moved by sharing the cores.

Usage (from the repository root):

    .venv/bin/python bench/bench_parallel.py [--rounds 3] [--batch-sizes 16,32,64,128,256,512]
        [--samples 4096] [--epochs 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

ALONE, PARALLEL = "alone", "parallel"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="interleaved pairs (default 3)")
    p.add_argument("--batch-sizes", default="16,32,64,128,256,512", help="the sweep's runs (default 6)")
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--parallel", default="2", help="runs at once in the parallel sweep (default 2)")
    return p.parse_args(argv)


def sweep_command(args: argparse.Namespace, out: Path, way: str) -> list[str]:
    command = [sys.executable, str(REPO_ROOT / "main.py"), "sweep", "--preset", "mnist-mlp", "--device", "cpu"]
    command += ["--samples", str(args.samples), "--val-samples", "0", "--epochs", str(args.epochs)]
    command += ["--batch-sizes", args.batch_sizes, "--seeds", "0", "--threads", "1"]
    command += ["--out", str(out), "--overwrite", "--quiet"]
    return command + (["--parallel", args.parallel] if way == PARALLEL else [])


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the process and everything under it) of one command run to its exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {shlex.join(command)}\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def throughputs(path: Path) -> dict[int, float]:
    """Steady samples/s per batch size, as the run file's figures give it."""
    from batchlab.core.model import SweepData

    sweep = SweepData.from_file(path)
    return {run.batch_size: run.figures.samples_per_s for run in sweep.ordered_runs() if run.status == "ok"}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# bench_parallel {datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"# {platform.node()}: {os.cpu_count()} logical CPUs, {platform.platform()}")
    print(f"# {shlex.join(sweep_command(args, Path('OUT.h5'), PARALLEL))}  (alone: without --parallel)")
    walls, cpus, runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            order = (ALONE, PARALLEL) if round_ % 2 == 0 else (PARALLEL, ALONE)
            got: dict[str, tuple[float, float, str]] = {}
            for way in order:
                load = loadavg()
                out = Path(tmp) / f"{way}-{round_}.h5"
                wall, cpu = timed(sweep_command(args, out, way))
                got[way] = (wall, cpu, load)
            alone, paired = (
                throughputs(Path(tmp) / f"alone-{round_}.h5"),
                throughputs(Path(tmp) / f"parallel-{round_}.h5"),
            )
            moved = statistics.median(paired[b] / alone[b] for b in alone if b in paired)
            wall_ratio, cpu_ratio = got[PARALLEL][0] / got[ALONE][0], got[PARALLEL][1] / got[ALONE][1]
            walls.append(wall_ratio)
            cpus.append(cpu_ratio)
            runs.append(moved)
            print(
                f"round {round_ + 1} ({' then '.join(order)}): alone {got[ALONE][0]:.1f} s wall, {got[ALONE][1]:.1f} "
                f"s CPU (load {got[ALONE][2]}); parallel {got[PARALLEL][0]:.1f} s wall, {got[PARALLEL][1]:.1f} s CPU "
                f"(load {got[PARALLEL][2]}); wall ratio {wall_ratio:.2f}, CPU ratio {cpu_ratio:.2f}, per-run "
                f"throughput ratio {moved:.2f}",
                flush=True,
            )
    print(f"median (range) over {args.rounds} rounds, parallel / alone:")
    print(f"  wall {_spread(walls)}; CPU {_spread(cpus)}; per-run steady throughput {_spread(runs)}")
    print(f"# load average at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
