"""What an XLA compile of the fused call costs on this CPU, and what XLA flags do to it and to the steps.

For each XLA_FLAGS setting (a fresh process each: XLA reads its flags once, at its first compile) and
each batch size, a freshly built default `mnist-autoencoder` model (build_model, same seed) gets a
`FusedFunction` (core/training/fused.py) with jit_compile on, and:

  compile   the CPU seconds (time.process_time: every thread of the process) and wall seconds of
            the first call of K steps, minus K steady steps: tracing plus the XLA compile;
  short     the CPU seconds of the first call of one short batch (an epoch's last; XLA compiles one
            shape, so it runs in the graph function: its first run, or its trace);
  step      the steady CPU (and wall) ms per step over the next calls (`--calls` calls of K steps);
  loss      the loss of the last step, to compare settings' numerics (float32 rounding only).

Settings interleave over repeats in a rotating order, so other load falls on all alike; each figure
is the median. The setting "graph" is the same call without XLA (the executor), for the break-even.

Usage (from the repository root):

    .venv/bin/python bench/bench_xla_compile.py [--batch-sizes 8,128,512] [--repeats 2] [--calls 4]
        [--settings default,O0,...] [--fused 64]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

# name -> XLA_FLAGS ("graph": no XLA at all)
SETTINGS = {
    "graph": None,
    "default": "",
    "O1": "--xla_backend_optimization_level=1",
    "O0": "--xla_backend_optimization_level=0",
    "cheap-llvm": "--xla_llvm_disable_expensive_passes=true",
    "O1+cheap-llvm": "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true",
    "no-thunks": "--xla_cpu_use_thunk_runtime=false",
    "split-1": "--xla_cpu_parallel_codegen_split_count=1",
    "fast-math": "--xla_cpu_enable_fast_math=true",
}
DEFAULT_SETTINGS = "graph,default,O1,O0,cheap-llvm,O1+cheap-llvm,no-thunks,split-1"
BEFORE = "before"  # the default flags, run by --before-python


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", default="8,128,512")
    p.add_argument("--fused", type=int, default=64, help="K, steps per call (default 64)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--calls", type=int, default=4, help="steady calls of K steps after the first (default 4)")
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--settings", default=DEFAULT_SETTINGS, help=f"from {','.join(SETTINGS)}")
    p.add_argument(
        "--before-python",
        default=None,
        help="also the setting 'before': default flags run by this interpreter (another checkout's venv, whose "
        "batchlab is that checkout's code), to compare a change to core/training/fused.py",
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.epochs, args.device = 1, "cpu"  # for bench_fit_parity.make_run
    bad = [s for s in args.settings.split(",") if s not in SETTINGS and not (s == BEFORE and args.before_python)]
    if bad:
        p.error(f"unknown settings {bad}; from {','.join(SETTINGS)}")
    return args


def child(args: argparse.Namespace) -> int:
    """One setting, every batch size, in this fresh process: JSON lines of the figures."""
    import keras
    import tensorflow as tf
    from batchlab.core.datasets import load_spec_data, prepare_arrays
    from batchlab.core.training.fused import FusedFunction
    from batchlab.core.training.workloads import build_model
    from bench_fit_parity import make_run

    k = args.fused
    for b in [int(v) for v in args.batch_sizes.split(",")]:
        keras.backend.clear_session()
        run = make_run(args, b)
        tf.keras.utils.set_random_seed(run.seed)
        spec = run.sweep
        data = prepare_arrays(load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale)
        built = build_model(run, data)
        built.model.jit_compile = args.child != "graph"
        fused = FusedFunction(built.model, built.x_train, built.y_train, k)
        samples = built.x_train.shape[0]
        order = tf.range(samples, dtype=tf.int32)
        full = samples // b
        starts = (
            [(i * k) % max(1, full - k + 1) for i in range(args.calls + 1)] if full >= k else [0] * (args.calls + 1)
        )
        n = min(k, full)
        t0, c0 = time.perf_counter(), time.process_time()
        fused.call(order, starts[0] * b, n, b)
        t1, c1 = time.perf_counter(), time.process_time()
        for s in starts[1:]:
            rows = fused.call(order, s * b, n, b)
        t2, c2 = time.perf_counter(), time.process_time()
        short = samples % b or b // 2  # an epoch's short last batch (another shape: the graph function)
        fused.call(order, 0, 1, short)
        c3 = time.process_time()
        steps = n * args.calls
        cpu_step, wall_step = (c2 - c1) / steps, (t2 - t1) / steps
        loss = float(rows[-1][1 + fused.names.index("loss")])
        print(
            json.dumps(
                {
                    "batch": b,
                    "compile_cpu_s": (c1 - c0) - n * cpu_step,
                    "compile_wall_s": (t1 - t0) - n * wall_step,
                    "short_cpu_s": c3 - c2,
                    "step_cpu_ms": 1e3 * cpu_step,
                    "step_wall_ms": 1e3 * wall_step,
                    "loss": loss,
                }
            ),
            flush=True,
        )
    return 0


def run_setting(args: argparse.Namespace, name: str) -> list[dict]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("XLA_FLAGS", None)
    if SETTINGS.get(name):
        env["XLA_FLAGS"] = SETTINGS[name]
    python = args.before_python if name == BEFORE else sys.executable
    cmd = [
        python,
        __file__,
        "--child",
        "default" if name == BEFORE else name,
        "--batch-sizes",
        args.batch_sizes,
        "--fused",
        str(args.fused),
    ]
    cmd += ["--calls", str(args.calls), "--samples", str(args.samples)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"setting {name} ({SETTINGS.get(name)}) failed:\n{out.stderr[-2000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    from bench_fused import _uptime

    settings = args.settings.split(",")
    batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    print(f"command:    {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    print(f"date:       {datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine:    {os.cpu_count()} logical CPUs, {platform.machine()}, CPU only")
    print(f"load:       {_uptime()}")
    print(f"workload:   mnist-autoencoder, {args.samples} samples, K = {args.fused}, {args.calls} steady calls\n")
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for r in range(args.repeats):
        shift = r % len(settings)
        for name in settings[shift:] + settings[:shift]:
            rows = run_setting(args, name)
            results[name].extend(rows)
            cells = "  ".join(
                f"B={m['batch']} compile {m['compile_cpu_s']:5.2f} CPU-s step {m['step_cpu_ms']:6.3f} CPU-ms"
                for m in rows
            )
            print(f"  repeat {r + 1} {name:14s} {cells}", flush=True)
    print(f"\nload after: {_uptime()}\n")
    heads = " | ".join(f"B={b} compile CPU s (wall) + short CPU s / step CPU ms (wall) / loss" for b in batch_sizes)
    print(f"| setting | XLA_FLAGS | {heads} |")
    print(f"|---|---|{'---:|' * len(batch_sizes)}")
    for name in settings:
        cells = []
        for b in batch_sizes:
            ms = [m for m in results[name] if m["batch"] == b]

            def med(key, ms=ms):
                return statistics.median(m[key] for m in ms)

            cells.append(
                f"{med('compile_cpu_s'):.2f} ({med('compile_wall_s'):.2f}) + {med('short_cpu_s'):.2f} / "
                f"{med('step_cpu_ms'):.3f} "
                f"({med('step_wall_ms'):.3f}) / {ms[-1]['loss']:.4f}"
            )
        if name == BEFORE:
            flags = f"(none; {args.before_python})"
        else:
            flags = "(no XLA)" if SETTINGS[name] is None else (f"`{SETTINGS[name]}`" if SETTINGS[name] else "(none)")
        print(f"| {name} | {flags} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
