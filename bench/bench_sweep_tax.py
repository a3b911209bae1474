"""Whole-sweep wall time of `batchlab sweep` against a hand-written Keras `fit` sweep in one process.

The question (issue 12, item 3): what does a sweep pay for running every run in its own training
child (process start, TensorFlow import, data, model build) compared with the loop a user would
write by hand? Target: `batchlab sweep --preset mnist-autoencoder` within 1.10x of the hand-written
sweep's wall time on the same machine.

Each way runs as its own process, timed from its launch to its exit, so both pay their own Python
start and TensorFlow import:

  fit       a hand-written sweep: one Python process imports TensorFlow, loads the preset's data
            once, and for every batch size builds the same model (batchlab.core.training.workloads,
            same seed) and calls model.fit(x, y, batch_size=b, epochs=E, shuffle=False, verbose=0)
            (with the same validation data when --val-samples > 0);
  batchlab  `batchlab sweep --preset mnist-autoencoder --val-samples N --quiet --out TMP` as a user
            types it (on a Linux CPU: a fork server imports TensorFlow once and forks a process per run
            and for the probe);
  reuse     (with --reuse) the same with `--reuse-children`: the probe's child takes the first run and
            is reused for every next run that follows one that ended ok (one process, one import);
  standby   (with --standby) the same with `--fresh-children`: a process per run, each prepared while the
            previous run trains (a standby);
  fresh     (with --fresh) a process per run started only when its run is asked for, each importing
            TensorFlow (SweepRunner(standby=False, reuse=False, fork=False)).

The ways run in interleaved rounds whose order alternates (fit, batchlab / batchlab, fit), so load
from other processes on a shared machine falls on both alike; the ratio of each round's pair is
printed, then the median and the range over rounds, with the load average before each sweep.

Usage (from the repository root):

    .venv/bin/python bench/bench_sweep_tax.py [--repeats 3] [--epochs 10] [--val-samples 0] [--standby]
        [--fresh] [--reuse] [--batch-sizes 8,16,...]
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

PRESET = "mnist-autoencoder"
TARGET_RATIO = 1.10  # batchlab / fit wall time: at most this
SEED = 0
FIT, BATCHLAB, STANDBY, FRESH, REUSE = "fit", "batchlab", "standby", "fresh", "reuse"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per run (default: the preset's, 10)")
    p.add_argument("--val-samples", type=int, default=0, help="validation samples (default 0: off, as measured)")
    p.add_argument("--batch-sizes", default=None, help="comma-separated batch sizes (default: the preset's, 8-512)")
    p.add_argument("--standby", action="store_true", help="also time --fresh-children (a standby child per run)")
    p.add_argument("--fresh", action="store_true", help="also time the sweep with a fresh child per run")
    p.add_argument("--reuse", action="store_true", help="also time --reuse-children (one reused process)")
    p.add_argument("--hand-written", action="store_true", help=argparse.SUPPRESS)  # the fit way's own process
    p.add_argument("--no-standby", dest="no_standby", metavar="OUT", help=argparse.SUPPRESS)  # the fresh way
    return p.parse_args(argv)


def sweep_values(args: argparse.Namespace) -> dict:
    values = {"preset": PRESET, "val_samples": args.val_samples, "seeds": [SEED], "device": "cpu"}
    if args.epochs is not None:
        values["epochs"] = args.epochs
    if args.batch_sizes:
        values["batch_sizes"] = args.batch_sizes
    return values


def hand_written_sweep(args: argparse.Namespace) -> int:
    """The sweep a user writes by hand: one process, data loaded once, a fresh model and fit per batch size."""
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    from batchlab.core.datasets import load_spec_data, prepare_arrays
    from batchlab.core.spec import build_spec
    from batchlab.core.training.workloads import build_model

    spec = build_spec(sweep_values(args))
    data = prepare_arrays(load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale)
    for run in spec.runs():
        keras.backend.clear_session()
        tf.keras.utils.set_random_seed(run.seed)
        model, x, y, x_val, y_val, *_ = build_model(run, data)
        validation = (x_val, y_val) if x_val is not None and spec.val_samples > 0 else None
        model.fit(
            x, y, batch_size=run.batch_size, epochs=spec.epochs, shuffle=False, verbose=0, validation_data=validation
        )
    return 0


def fresh_sweep(args: argparse.Namespace) -> int:
    """`batchlab sweep` as the CLI runs it, but every run in a child of its own started when its run is asked for."""
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import SweepRunner, run_sweep

    spec = build_spec(sweep_values(args))
    runner = SweepRunner(spec, standby=False, reuse=False, fork=False)
    return 0 if run_sweep(spec, args.no_standby, runner=runner) == "complete" else 1


def command(way: str, args: argparse.Namespace, out: Path) -> list[str]:
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--val-samples", str(args.val_samples)] + (["--epochs", str(args.epochs)] if args.epochs else [])
    common += ["--batch-sizes", args.batch_sizes] if args.batch_sizes else []
    if way == FIT:
        return [*me, "--hand-written", *common]
    if way == FRESH:
        return [*me, "--no-standby", str(out), *common]
    batchlab = str(Path(sys.executable).with_name("batchlab"))
    fresh_children = {STANDBY: ["--fresh-children"], REUSE: ["--reuse-children"]}.get(way, [])
    return [batchlab, "sweep", "--preset", PRESET, "--device", "cpu", "--seeds", str(SEED), "--quiet"] + [
        "--out",
        str(out),
        *fresh_children,
        *common,
    ]


def load() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall time (s) of the command, and the CPU time (s, user + system) of it and every process it waited for
    (a sweep's training children included): on a machine other work keeps busy, the CPU time says how much
    work each way does, which the wall time there cannot."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def report_startup(files: dict[str, list[Path]]) -> None:
    """What the run files say: each way's start-up per run (its last file), how far a standby's start-up
    reached into the previous run's training, and steady throughput against fresh children."""
    from batchlab.core.analysis.startup import explain_startup
    from batchlab.core.model import SweepData

    sweeps = {way: [SweepData.from_file(f) for f in paths] for way, paths in files.items()}
    for way, loaded in sweeps.items():
        print(f"\nstart-up per run, from the last {way} sweep's run file:")
        for text in explain_startup(loaded[-1].ordered_runs()):
            print(f"  {text}")
        kinds = [str(r.attrs.get("child", "?")) for r in loaded[-1].ordered_runs()]
        print(f"  children: {', '.join(kinds)}")
    if STANDBY in sweeps:
        print("\na standby's start-up (process, import, data) reached this far into the previous run's training")
        print("(s; median):")
        overlap: dict[int, list[float]] = {}
        for sweep in sweeps[STANDBY]:
            runs = sweep.ordered_runs()
            for prev, run in zip(runs, runs[1:], strict=False):
                if run.attrs.get("child") == "standby":
                    reach = float(run.attrs["startup_prepared_s"]) - float(prev.attrs["startup_s"])
                    overlap.setdefault(prev.batch_size, []).append(max(0.0, reach))
        for b, values in overlap.items():
            print(f"  during batch {b:>4}: {statistics.median(values):5.2f}")
    if FRESH not in sweeps:
        return
    print("\nsteady samples/s against fresh children (median over rounds; >1: faster than a fresh child):")
    sizes = sorted({r.batch_size for r in sweeps[BATCHLAB][0].ordered_runs()})
    others = [w for w in (BATCHLAB, REUSE, STANDBY) if w in sweeps]
    for b in sizes:
        rate = {}
        for way in (*others, FRESH):
            runs = [r for sweep in sweeps[way] for r in sweep.ordered_runs() if r.batch_size == b]
            rate[way] = statistics.median(r.figures.samples_per_s for r in runs) if runs else float("nan")
        ratios = "  ".join(f"{w} {rate[w]:8.0f} ({rate[w] / rate[FRESH]:.3f})" for w in others)
        print(f"  batch {b:>4}: fresh {rate[FRESH]:8.0f}  {ratios}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.hand_written:
        return hand_written_sweep(args)
    if args.no_standby:
        return fresh_sweep(args)
    ways = [FIT, BATCHLAB] + ([REUSE] if args.reuse else []) + ([STANDBY] if args.standby else [])
    ways += [FRESH] if args.fresh else []
    print(f"command:  {shlex.join([sys.executable, *sys.argv])}")
    print(f"date:     {datetime.now().astimezone().isoformat(timespec='seconds')}")
    machine = f"{os.cpu_count()} logical CPUs, {platform.machine()}, {platform.system()}"
    print(f"machine:  {machine}, python {platform.python_version()}")
    epochs = args.epochs or "preset's"
    print(f"sweep:    {PRESET}, epochs {epochs}, val_samples {args.val_samples}, {args.repeats} rounds")
    for way in ways:
        print(f"  {way:<9} {shlex.join(command(way, args, Path('OUT.h5')))}")
    walls: dict[str, list[float]] = {w: [] for w in ways}
    cpus: dict[str, list[float]] = {w: [] for w in ways}
    files: dict[str, list[Path]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tax-") as tmp:
        for r in range(args.repeats):
            order = ways if r % 2 == 0 else ways[::-1]
            for way in order:
                out = Path(tmp) / f"{way}-{r}.h5"
                before = load()
                wall, cpu = timed(command(way, args, out))
                walls[way].append(wall)
                cpus[way].append(cpu)
                if way != FIT:
                    files.setdefault(way, []).append(out)
                print(
                    f"  round {r + 1} {way:<9} {wall:7.1f} s wall {cpu:7.1f} s CPU  (load before: {before})", flush=True
                )
            ratios = "  ".join(f"{w}/fit {walls[w][-1] / walls[FIT][-1]:.3f}" for w in ways if w != FIT)
            print(f"  round {r + 1}: {ratios}", flush=True)
        print(f"\nwall time of the whole sweep, s (load now: {load()})")
        for way in ways:
            each = ", ".join(f"{t:.1f}" for t in walls[way])
            cpu = statistics.median(cpus[way])
            print(f"  {way:<9} median {statistics.median(walls[way]):7.1f}  rounds {each}  (CPU median {cpu:.1f} s)")
        verdict = 0
        for way in ways:
            if way == FIT:
                continue
            pairs = [b / f for f, b in zip(walls[FIT], walls[way], strict=True)]
            median = statistics.median(pairs)
            line = f"{way}/fit: median of round ratios {median:.3f}, range {min(pairs):.3f}-{max(pairs):.3f}"
            if way == BATCHLAB:
                ok = median <= TARGET_RATIO
                verdict = 0 if ok else 1
                line += f"; target <= {TARGET_RATIO}: {'PASS' if ok else 'MISSED'}"
            print(line)
            cpu_pairs = [b / f for f, b in zip(cpus[FIT], cpus[way], strict=True)]
            spread = f"{min(cpu_pairs):.3f}-{max(cpu_pairs):.3f}"
            print(f"{way}/fit CPU time: median of round ratios {statistics.median(cpu_pairs):.3f}, range {spread}")
        if BATCHLAB in files:
            report_startup(files)
        print(f"load now: {load()}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
