"""Where a CPU training step goes: per-step wall and CPU time of each way to train, in one process.

For the default `mnist-autoencoder` model (784-128-32-128-784, Adam, 5,000 bundled samples, shuffle
off) at each batch size, the same freshly built model (build_model, same seed) trains one warm-up
epoch (tracing and compiling) and then one timed epoch, each of these ways:

  fit          model.fit(x, y, batch_size=b, shuffle=False), steps_per_execution 1 (Keras's default);
  fit-spe      the same with steps_per_execution K (one mean loss per K steps: what fit reports);
  fit-spe-xla  the same with jit_compile=True;
  loop         BatchLab's one-step loop: the run's tf.data pipeline, the model's train_step as one
               tf.function, the loss read after each step (sync every_step, as a sweep runs);
  loop-xla     the same with the step compiled by XLA (`--xla`);
  fused-iter   the fused loop as it was before (a tf.while_loop of K steps taking batches from the
               pipeline's iterator inside the graph; with `--xla` only the step was an XLA cluster);
  fused        `--fused K`: batches gathered from the arrays held as tensors, K steps per call, every
               step's loss returned in one (K, columns) array (core/training/fused.py);
  fused-xla    `--fused K --xla`: the same call compiled whole by XLA (loop, gathers, K steps).

Ways and batch sizes interleave over repeats (the way order rotates), so other load falls on all
alike; each figure is the median over repeats. CPU time is time.process_time (all the process's
threads), less blurred by other load than wall time. "compute" is the step's FLOPs (the model's
counted FLOPs per sample x batch) at the machine's float32 matmul peak, measured here the way
`batchlab info --peak` measures it: the time a step would take if it were only its matrix products.
Step time minus that is the step's fixed cost (executor, Python, optimizer's small ops).

Usage (from the repository root):

    .venv/bin/python bench/bench_step_cost.py [--batch-sizes 8,32,128,512] [--fused 64] [--repeats 2]
        [--ways fit,fit-spe,...] [--samples 5000]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

WAYS = ("fit", "fit-spe", "fit-spe-xla", "loop", "loop-xla", "fused-iter", "fused", "fused-xla")
DEFAULT_BATCH_SIZES = "8,32,128,512"
DEFAULT_FUSED = 64
DEFAULT_REPEATS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", default=DEFAULT_BATCH_SIZES)
    p.add_argument("--fused", type=int, default=DEFAULT_FUSED, help=f"K, steps per call (default {DEFAULT_FUSED})")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--ways", default=",".join(WAYS))
    args = p.parse_args(argv)
    args.epochs, args.device = 2, "cpu"  # for bench_fit_parity.make_run
    bad = [w for w in args.ways.split(",") if w not in WAYS]
    if bad or args.fused < 2 or args.repeats < 1:
        p.error(f"--ways from {','.join(WAYS)}; --fused >= 2; --repeats >= 1")
    return args


class Trainer:
    """One way at one batch size on a fresh model: epoch() trains one epoch and returns its step count."""

    def __init__(self, way: str, args: argparse.Namespace, batch: int, data):
        import keras
        import tensorflow as tf
        from batchlab.core.training.workloads import build_model
        from bench_fit_parity import make_run

        keras.backend.clear_session()
        run = make_run(args, batch)
        tf.keras.utils.set_random_seed(run.seed)
        built = build_model(run, data)
        self.model, self.x, self.y, self.batch = built.model, built.x_train, built.y_train, batch
        self.k = args.fused
        xla = way.endswith("-xla")
        if way.startswith("fit-spe"):
            m = self.model
            m.compile(optimizer=m.optimizer, loss=m.loss, steps_per_execution=self.k, jit_compile=xla)
        elif xla:
            self.model.jit_compile = True
        self.epoch: Callable[[], int] = getattr(self, "_" + way.split("-xla")[0].replace("-", "_"))
        self.steps = math.ceil(self.x.shape[0] / batch)

    def _fit(self) -> int:
        self.model.fit(self.x, self.y, batch_size=self.batch, epochs=1, shuffle=False, verbose=0)
        return self.steps

    _fit_spe = _fit

    def _loop(self) -> int:
        from batchlab.core.training.input_pipeline import make_input_pipeline
        from batchlab.core.training.trainer import make_step_function

        if not hasattr(self, "step_fn"):
            self.pipeline = make_input_pipeline(self.x, self.y, self.batch, False, 0)
            self.step_fn = make_step_function(self.model)
        for xb, yb, _made in self.pipeline:
            float(self.step_fn(xb, yb)["loss"])  # the loop reads each step's loss (sync every_step)
        return self.steps

    def _fused_iter(self) -> int:
        import tensorflow as tf
        from batchlab.core.training.input_pipeline import make_input_pipeline

        if not hasattr(self, "iter_call"):
            self.pipeline = make_input_pipeline(self.x, self.y, self.batch, False, 0)
            self.iter_call = _iterator_fused(self.model)
        iterator, i = iter(self.pipeline), 0
        while i < self.steps:
            n = min(self.k, self.steps - i)
            self.iter_call(iterator, tf.constant(n)).numpy()
            i += n
        return self.steps

    def _fused(self) -> int:
        import tensorflow as tf
        from batchlab.core.training.fused import FusedFunction

        if not hasattr(self, "fused"):
            self.fused = FusedFunction(self.model, self.x, self.y, self.k)
            self.order = tf.range(self.x.shape[0], dtype=tf.int32)
        samples, i = self.x.shape[0], 0
        full = samples // self.batch
        while i < full:
            n = min(self.k, full - i)
            self.fused.call(self.order, i * self.batch, n, self.batch)
            i += n
        if samples % self.batch:
            self.fused.call(self.order, full * self.batch, 1, samples % self.batch)
        return self.steps


def _iterator_fused(model):
    """The fused call as it was before the arrays moved onto the device: a while_loop taking K batches
    from the pipeline's iterator; with jit_compile only the step itself is an XLA cluster."""
    import tensorflow as tf

    def one_step(x, y):
        logs = model.train_step((x, y))
        values = tf.stack([tf.cast(tf.shape(x)[0], tf.float32)] + [tf.cast(logs[k], tf.float32) for k in sorted(logs)])
        for metric in model.metrics:
            metric.reset_state()
        return values

    if model.jit_compile:
        one_step = tf.function(one_step, jit_compile=True)

    def fused(iterator, n):
        def body(i, rows):
            x, y, _made = iterator.get_next()
            return i + 1, rows.write(i, one_step(x, y))

        rows = tf.TensorArray(tf.float32, size=n)
        _, rows = tf.while_loop(lambda i, _r: i < n, body, (tf.constant(0), rows), parallel_iterations=1)
        return rows.stack()

    return tf.function(fused, autograph=False)


def measure(way: str, args: argparse.Namespace, batch: int, data) -> dict[str, float]:
    """Build, one warm-up epoch, one timed epoch: seconds of each and the steady step's wall and CPU time."""
    t0 = time.perf_counter()
    trainer = Trainer(way, args, batch, data)
    t1, c1 = time.perf_counter(), time.process_time()
    trainer.epoch()
    t2, c2 = time.perf_counter(), time.process_time()
    steps = trainer.epoch()
    t3, c3 = time.perf_counter(), time.process_time()
    return {
        "build_s": t1 - t0,
        "first_epoch_s": t2 - t1,
        "epoch_s": t3 - t2,
        "first_epoch_cpu_s": c2 - c1,
        "epoch_cpu_s": c3 - c2,
        "step_ms": 1e3 * (t3 - t2) / steps,
        "cpu_ms": 1e3 * (c3 - c2) / steps,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # before TensorFlow's import
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from batchlab.core.datasets import load_spec_data, prepare_arrays
    from batchlab.core.training.flops import model_flops
    from batchlab.core.training.matmul_peak import measure_matmul_peak
    from batchlab.core.training.workloads import build_model
    from bench_fit_parity import make_run
    from bench_fused import _uptime

    batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    ways = args.ways.split(",")
    print(f"command:    {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    print(f"date:       {datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine:    {os.cpu_count()} logical CPUs, {platform.machine()}; TensorFlow {tf.__version__}, CPU")
    print(f"load:       {_uptime()}")
    spec = make_run(args, batch_sizes[0]).sweep
    data = prepare_arrays(load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale)
    flops = model_flops(build_model(make_run(args, batch_sizes[0]), data).model).run_fields()["flops_per_sample"]
    peak = measure_matmul_peak(tf, on_gpu=False)["flops_per_s"]
    print(f"model:      {flops / 1e6:.3f} MFLOP per training sample (forward + backward, counted)")
    print(f"peak:       {peak / 1e9:.1f} GFLOP/s float32 matmul (best of batchlab info --peak's sizes)")
    print(f"workload:   {args.samples} samples, one warm-up epoch then one timed epoch; K = {args.fused}\n")
    results: dict[tuple[str, int], list[dict]] = {}
    for r in range(args.repeats):
        for b in batch_sizes:
            shift = (r + batch_sizes.index(b)) % len(ways)
            for way in ways[shift:] + ways[:shift]:
                m = measure(way, args, b, data)
                results.setdefault((way, b), []).append(m)
                print(
                    f"  repeat {r + 1} batch {b:4d} {way:12s} first epoch {m['first_epoch_s']:6.2f} s, "
                    f"step {m['step_ms']:8.3f} ms wall {m['cpu_ms']:8.3f} ms CPU",
                    flush=True,
                )
    print(f"\nload after: {_uptime()}\n")
    print("Median over repeats. step: steady-state ms per step (wall, CPU); compute: the step's FLOPs at the")
    print("matmul peak; first: first epoch minus a steady one (s; tracing, XLA compile, pipeline start).\n")
    heads = " | ".join(f"B={b} wall / CPU ms" for b in batch_sizes)
    print(f"| way | {heads} | first epoch extra s, wall / CPU (B={batch_sizes[0]}) |")
    print(f"|---|{'---:|' * len(batch_sizes)}---:|")
    print(f"| compute at peak | {' | '.join(f'{flops * b / peak * 1e3:.3f}' for b in batch_sizes)} | |")
    for way in ways:
        cells = []
        for b in batch_sizes:
            ms = results[(way, b)]
            cells.append(
                f"{statistics.median(m['step_ms'] for m in ms):.3f} / {statistics.median(m['cpu_ms'] for m in ms):.3f}"
            )
        ms = results[(way, batch_sizes[0])]
        extra = statistics.median(m["first_epoch_s"] - m["epoch_s"] for m in ms)
        extra_cpu = statistics.median(m["first_epoch_cpu_s"] - m["epoch_cpu_s"] for m in ms)
        print(f"| {way} | {' | '.join(cells)} | {extra:.2f} / {extra_cpu:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
