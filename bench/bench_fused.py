"""Whole-sweep wall time: `batchlab sweep --fused K` against a hand-written Keras `fit` sweep of the same model.

Target (issue 12, item 6): the default `mnist-autoencoder` sweep (batch 8 to 512, 10 epochs, 5,000
samples; validation off, as the hand-written sweep has none) in fused mode takes at most 0.35x the
wall time of the hand-written `fit` sweep, with the same per-step loss records (one row per step,
each step's own loss).

Each way is a fresh process timed from launch to exit, as a user pays it:

  fit      the hand-written sweep: one Python process that imports TensorFlow once, then for each
           batch size builds the same compiled model (batchlab.core.training.workloads.build_model,
           same seed) and calls model.fit(x, x, batch_size=b, epochs=E, shuffle=False, verbose=0)
           (bench_fit_parity.measure_fit: the same code that bench measures throughput with);
  fused    `batchlab sweep --preset mnist-autoencoder --val-samples 0 --fused K --quiet` (every step
           recorded, the run file written), with `--xla` added when this bench is given --xla (the
           whole K-step call compiled by XLA), `--xla auto` with --xla auto (XLA only in runs whose
           steps repay the compile: core/training/xla_choice.py);
  default  (with --with-default) the same sweep without --fused, for the side-by-side;
  ahead    (with --also-ahead) the fused sweep with one TensorFlow thread per training process and each
           next run prepared while the current one trains: `--fused K --xla auto --threads 1
           --prepare-ahead` (--ahead-xla on: `--xla` instead; docs/performance.md);
  auto1    (with --also-threads) `--fused K --xla auto --threads 1`: one thread without the preparation;
  fit1     (with --also-ahead or --fit-one-thread) the hand-written sweep with one TensorFlow thread
           (intra- and inter-op) set before its first op: not what a user writes (fit's default threads
           stay the target's reference), printed beside the headline for honesty.

Ways are interleaved in pairs whose order alternates over repeats, so drift and other load fall on all
alike; the ratio is the median of the per-pair ratios, with their min-max as the spread. The CPU
seconds of each way's processes (user + system, from getrusage) are printed beside the wall times:
on a shared machine they are the steadier measure of the work each way does. The loss check
compares each run's per-epoch train loss in the run file (the sample-weighted mean of its per-step
losses) with fit's epoch loss, and checks the file has one row per step.

Usage (from the repository root):

    .venv/bin/python bench/bench_fused.py [--fused 64] [--repeats 2] [--with-default]
        [--xla [auto]] [--also-auto] [--also-ahead [--ahead-xla on|auto]] [--also-threads] [--fit-one-thread]
        [--warm-cache] [--batch-sizes 8,...,512] [--epochs 10] [--samples 5000] [--device cpu|gpu]
"""

from __future__ import annotations

import argparse
import json
import math
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

PRESET = "mnist-autoencoder"
TARGET_RATIO = 0.35  # fused sweep wall time / hand-written fit sweep wall time: at most this
DEFAULT_FUSED = 64
DEFAULT_REPEATS = 2
FIT, FUSED, DEFAULT, AUTO, AHEAD, FIT1 = "fit", "fused", "default", "auto", "ahead", "fit1"
AUTO1 = "auto1"  # --xla auto with one TensorFlow thread, not prepared ahead: the threads' share on its own
XLA_WORDS = {None: "", "on": " with --xla", "auto": " with --xla auto"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from batchlab.core.presets import preset_defaults

    defaults = preset_defaults(PRESET)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", default=",".join(str(b) for b in defaults["batch_sizes"]))
    p.add_argument("--epochs", type=int, default=defaults["epochs"], help="epochs per run (default 10)")
    p.add_argument("--samples", type=int, default=defaults["samples"], help="training samples (default 5000)")
    p.add_argument("--fused", type=int, default=DEFAULT_FUSED, help=f"steps per call (default {DEFAULT_FUSED})")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="pairs per way (default 2)")
    p.add_argument("--with-default", action="store_true", help="also time the sweep without --fused")
    p.add_argument(
        "--xla",
        nargs="?",
        const="on",
        choices=("on", "auto"),
        default=None,
        help="the fused sweep also with --xla (jit_compile); --xla auto: XLA only where a run's steps repay it",
    )
    p.add_argument(
        "--also-auto", action="store_true", help="also time the fused sweep with --xla auto (way 'auto') beside it"
    )
    p.add_argument(
        "--also-ahead",
        action="store_true",
        help="also time the fused sweep with --threads 1 --prepare-ahead (way 'ahead'), and fit with one thread",
    )
    p.add_argument(
        "--ahead-xla",
        choices=("on", "auto"),
        default="auto",
        help="the 'ahead' way's XLA: auto (default: XLA where the steps repay the compile) or on (every run)",
    )
    p.add_argument("--fit-one-thread", action="store_true", help="also time fit with one TensorFlow thread (fit1)")
    p.add_argument(
        "--also-threads",
        action="store_true",
        help="also time --fused K --xla auto --threads 1 without --prepare-ahead (way 'auto1'): one thread alone",
    )
    p.add_argument("--threads-child", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument(
        "--warm-cache",
        action="store_true",
        help="the BatchLab sweeps with XLA's persistent compile cache (--xla-cache) in a temporary folder, filled "
        "by one untimed sweep of each fused way first: a later sweep's figure, not a first sweep's",
    )
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--hand-written-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeats < 1 or args.fused < 2:
        p.error("--repeats must be >= 1 and --fused >= 2")
    return args


def hand_written_child(args: argparse.Namespace) -> int:
    """The hand-written sweep, in this (fresh) process: prints JSON with its training seconds and epoch losses."""
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    if args.threads_child:  # before the first op, as batchlab's --threads does in its training processes
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads_child)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads_child)
    from bench_fit_parity import make_run, measure_fit

    losses, train_s = {}, 0.0
    for b in [int(v) for v in args.batch_sizes.split(",")]:
        keras.backend.clear_session()
        t0 = time.perf_counter()
        _times, losses[b] = measure_fit(make_run(args, b))
        train_s += time.perf_counter() - t0
    print(json.dumps({"train_s": train_s, "losses": losses}))
    return 0


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children and their children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_fit(args: argparse.Namespace, threads: int = 0) -> tuple[float, dict]:
    cmd = [sys.executable, __file__, "--hand-written-child", "--batch-sizes", args.batch_sizes]
    cmd += ["--threads-child", str(threads)]
    cmd += ["--epochs", str(args.epochs), "--samples", str(args.samples), "--device", args.device]
    t0, c0 = time.perf_counter(), _children_cpu()
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    return wall, {**json.loads(result.stdout.strip().splitlines()[-1]), "cpu_s": _children_cpu() - c0}


def run_batchlab(
    args: argparse.Namespace, out: Path, fused: int, xla: str | None = None, extra: tuple[str, ...] = ()
) -> tuple[float, dict]:
    from batchlab.core.runfile.reader import read_run_file

    cmd = [sys.executable, str(REPO_ROOT / "main.py"), "sweep", "--preset", PRESET, "--val-samples", "0"]
    cmd += ["--batch-sizes", args.batch_sizes, "--epochs", str(args.epochs), "--samples", str(args.samples)]
    cmd += ["--device", "cpu" if args.device == "cpu" else "gpu:0", "--out", str(out), "--overwrite", "--quiet"]
    if fused > 1:
        cmd += ["--fused", str(fused)] + {None: [], "on": ["--xla"], "auto": ["--xla", "auto"]}[xla]
    cmd += list(extra)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if args.cache_dir is not None:
        from batchlab.core.training.xla_choice import enable_xla_cache

        enable_xla_cache(args.cache_dir, env)
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    t0, c0 = time.perf_counter(), _children_cpu()
    subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    record = read_run_file(out)
    runs = {}
    for run in record.runs:
        if run.status != "ok":
            raise RuntimeError(f"batch {run.batch_size} ended {run.status}: {run.message}")
        steps = run.steps["loss"]
        runs[run.batch_size] = {
            "losses": [float(v) for v in run.epochs["train_loss"]],
            "step_rows": int(len(steps)),
            "distinct_losses": int(len(set(steps.tolist()))),
            "steps_per_call": int(run.attrs.get("steps_per_call", 1)),
            "total_time": float(run.total_time),
            "xla": int(run.attrs.get("xla", 0) or 0),
            "prepared_ahead_s": float(run.attrs.get("prepared_ahead_s", math.nan)),
            "startup_s": float(run.attrs.get("startup_s", math.nan)),
        }
    return wall, {"train_s": sum(r["total_time"] for r in runs.values()), "runs": runs, "cpu_s": cpu}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.hand_written_child:
        return hand_written_child(args)
    batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    ways = [FIT, FUSED] + ([AUTO] if args.also_auto else []) + ([DEFAULT] if args.with_default else [])
    ways += ([AHEAD] if args.also_ahead else []) + ([AUTO1] if args.also_threads else [])
    ways += [FIT1] if args.also_ahead or args.fit_one_thread else []
    batchlab_fused = [w for w in (FUSED, AUTO, AHEAD, AUTO1) if w in ways]
    print(f"command:    {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    print(f"date:       {datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine:    {os.cpu_count()} logical CPUs, {platform.machine()}, {platform.system()}; device {args.device}")
    print(f"load:       {_uptime()}")
    print(
        f"workload:   {PRESET}, batch {args.batch_sizes}, {args.samples} samples, {args.epochs} epochs, shuffle off, "
        f"validation off; fused = {args.fused} steps per call{XLA_WORDS[args.xla]}\n"
    )
    walls: dict[str, list[float]] = {w: [] for w in ways}
    train: dict[str, list[float]] = {w: [] for w in ways}
    cpu: dict[str, list[float]] = {w: [] for w in ways}
    gap, rows_ok = 0.0, True
    with tempfile.TemporaryDirectory() as tmp:
        args.cache_dir = Path(tmp) / "xla-cache" if args.warm_cache else None
        for way in [w for w in batchlab_fused if args.warm_cache]:
            wall, _ = run_batchlab(args, Path(tmp) / "warm-up.h5", args.fused, *_fused_way(args, way))
            print(f"  cache warm-up, {way}: {wall:.1f} s (untimed)", flush=True)
        for r in range(args.repeats):
            order = ways if r % 2 == 0 else ways[::-1]
            results = {}
            for way in order:
                if way in (FIT, FIT1):
                    wall, results[way] = run_fit(args, threads=1 if way == FIT1 else 0)
                elif way == DEFAULT:
                    wall, results[way] = run_batchlab(args, Path(tmp) / f"{way}.h5", 1)
                else:
                    xla, extra = _fused_way(args, way)
                    wall, results[way] = run_batchlab(args, Path(tmp) / f"{way}.h5", args.fused, xla, extra)
                walls[way].append(wall)
                train[way].append(results[way]["train_s"])
                cpu[way].append(results[way]["cpu_s"])
            for b in batch_sizes:
                fit_losses = results[FIT]["losses"][str(b)]
                for run in [results[w]["runs"][b] for w in batchlab_fused]:
                    gap = max(gap, max(abs(f - m) / abs(f) for f, m in zip(fit_losses, run["losses"], strict=True)))
                    steps = math.ceil(args.samples / b) * args.epochs
                    rows_ok &= run["step_rows"] == steps and run["steps_per_call"] == args.fused
            line = "  ".join(
                f"{w} {walls[w][-1]:6.1f} s (training {train[w][-1]:5.1f} s, CPU {cpu[w][-1]:5.1f} s)" for w in ways
            )
            print(f"  repeat {r + 1}/{args.repeats} order {'/'.join(order)}: {line}", flush=True)
            for way in [w for w in batchlab_fused if args.xla or w != FUSED]:
                compiled = [b for b in batch_sizes if results[way]["runs"][b]["xla"]]
                print(f"    {way} runs compiled with XLA: batch {', '.join(map(str, compiled)) or 'none'}", flush=True)
            if AHEAD in ways:
                per_run, sizes = results[AHEAD]["runs"], batch_sizes
                ahead = [f"{b}: {per_run[b]['prepared_ahead_s']:.1f}/{per_run[b]['startup_s']:.1f}" for b in sizes]
                print(
                    f"    ahead: prepared_ahead_s/startup_s per batch {', '.join(ahead)} (nan: not prepared; "
                    "startup_s: from the run's turn to its first step, any wait for its preparation included)",
                    flush=True,
                )
    print(f"\nload after: {_uptime()}\n")
    print(
        f"{'way':>8} {'wall s (median)':>16} {'training s':>11} {'ratio to fit':>13} {'pairs':>11} "
        f"{'CPU s':>7} {'CPU ratio':>10}"
    )
    for w in ways:
        pairs = [x / f for x, f in zip(walls[w], walls[FIT], strict=True)]
        cpu_pairs = [x / f for x, f in zip(cpu[w], cpu[FIT], strict=True)]
        print(
            f"{w:>8} {statistics.median(walls[w]):>16.1f} {statistics.median(train[w]):>11.1f} "
            f"{statistics.median(pairs):>13.3f} {min(pairs):>5.2f}-{max(pairs):<5.2f} "
            f"{statistics.median(cpu[w]):>7.1f} {statistics.median(cpu_pairs):>10.3f}"
        )
    ratio = statistics.median([x / f for x, f in zip(walls[FUSED], walls[FIT], strict=True)])
    print(
        "\ntraining s: fit = time inside the hand-written sweep's fit calls (model build included); batchlab = sum "
        "of the runs' total_time (first step to run end, tracing included). wall - training = start-up: process "
        "and TensorFlow start, data, model build (once for fit, once per run for batchlab). CPU s: user + system "
        "CPU seconds of the way's processes (getrusage of the children), which other load blurs less than wall time"
    )
    print(f"per-step loss records: one row per step in every fused run: {'yes' if rows_ok else 'NO'}")
    print(f"epoch train loss, fused (and auto) vs fit: largest relative difference {gap:.1e}")
    if AUTO in ways:
        auto = statistics.median([x / f for x, f in zip(walls[AUTO], walls[FIT], strict=True)])
        verdict = "met" if auto <= TARGET_RATIO else "missed"
        print(f"fused --xla auto / fit wall time {auto:.3f}; target <= {TARGET_RATIO}: {verdict}")
    if AUTO1 in ways:
        one = statistics.median([x / f for x, f in zip(walls[AUTO1], walls[FIT], strict=True)])
        one_cpu = statistics.median([x / f for x, f in zip(cpu[AUTO1], cpu[FIT], strict=True)])
        words = f"--fused {args.fused} --xla auto --threads 1 (not prepared ahead)"
        print(f"{words} / fit: wall {one:.3f}, CPU {one_cpu:.3f}")
    if AHEAD in ways:
        xla, extra = _fused_way(args, AHEAD)
        words = f"--fused {args.fused} --xla{' auto' if xla == AUTO else ''} {' '.join(extra)}"
        for ref in [w for w in (FIT, FIT1) if w in ways]:
            ahead = statistics.median([x / f for x, f in zip(walls[AHEAD], walls[ref], strict=True)])
            ahead_cpu = statistics.median([x / f for x, f in zip(cpu[AHEAD], cpu[ref], strict=True)])
            reference = "fit (default threads: the target's reference)" if ref == FIT else "fit with one thread"
            met = "met" if ahead <= TARGET_RATIO else "missed"
            verdict = f"; target <= {TARGET_RATIO}: {met}" if ref == FIT else ""
            print(f"{words} / {reference}: wall time {ahead:.3f}, CPU {ahead_cpu:.3f}{verdict}")
    ok = ratio <= TARGET_RATIO and rows_ok
    print(f"fused / fit wall time {ratio:.3f}; target <= {TARGET_RATIO}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def _fused_way(args: argparse.Namespace, way: str) -> tuple[str | None, tuple[str, ...]]:
    """A fused way's XLA setting and its other sweep options."""
    if way == AUTO:
        return AUTO, ()
    if way == AHEAD:
        return args.ahead_xla, ("--threads", "1", "--prepare-ahead")
    if way == AUTO1:
        return AUTO, ("--threads", "1")
    return args.xla, ()


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
