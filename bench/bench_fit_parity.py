"""Training throughput of BatchLab's two engines against a plain Keras `model.fit` of the same model.

For each batch size the same compiled model (batchlab.core.training.workloads.build_model, same seed, so the same
initial weights), data slice, optimizer and batch order (shuffle=False) is trained three ways in this
one process, in an order that rotates over repeats (A,B,C / B,C,A / C,A,B) so that drift and other
load on the machine fall on all alike:

  A  plain Keras: model.fit(x, x, batch_size=b, epochs=E, shuffle=False, verbose=0), timed per epoch
     by a callback that reads the clock in on_epoch_begin / on_epoch_end;
  B  BatchLab's instrumented loop (loop=loop, the default): batchlab.core.training.run.train_run on a
     RunSpec from batchlab.core.spec.build_spec, epoch_time taken from its epoch_ended events (per-step loss,
     step time and fetch time recorded as in a real sweep);
  C  BatchLab's fit engine (loop=fit): the same train_run, which trains with model.fit itself plus
     BatchLab's timing callback (fit_engine.FitClock), epoch_time from its epoch_ended events.

Throughput is steady state: samples/s over epochs 1..E-1 (epoch 0 includes tracing the step),
median over repeats. Targets: loop / fit >= 0.97 at every batch size (the instrumented loop is not
slower than the user's fit), and the fit engine's callback (per-step loss, tracing check, hooks)
takes <= 3% of fit's epoch time, measured by the callback's own clock (FitEngine.callback_time),
which other load on a shared machine does not blur the way it blurs throughput ratios; its
throughput ratio to plain fit is printed too and should be 1 within the noise. Validation is off
for all three (no clock includes it) to keep the run short. Not a test: timings are noisy on a
shared machine, which is why the order rotates and medians are used.

Usage (from the repository root):

    .venv/bin/python bench/bench_fit_parity.py [--batch-sizes 8,16,...] [--epochs 3] [--repeats 2]
        [--samples 5000] [--device cpu|gpu]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import shlex
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

PRESET = "mnist-autoencoder"
TARGET_RATIO = 0.97  # loop / fit: at least this
MAX_CALLBACK_SHARE = 0.03  # fit engine: time in BatchLab's callback, as a share of fit's epoch time
DEFAULT_EPOCHS = 3
DEFAULT_REPEATS = 2
SEED = 0
FIT = "fit"  # plain model.fit
LOOP = "loop"  # BatchLab's instrumented loop
FIT_ENGINE = "fit-engine"  # BatchLab's fit engine
WAYS = (FIT, LOOP, FIT_ENGINE)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from batchlab.core.presets import preset_defaults

    defaults = preset_defaults(PRESET)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batch-sizes",
        default=",".join(str(b) for b in defaults["batch_sizes"]),
        help="comma-separated batch sizes (default: the preset's, 8 to 512)",
    )
    p.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, help="epochs per measurement, >= 2 (default 3)")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="measurements per way and batch (default 2)")
    p.add_argument("--samples", type=int, default=defaults["samples"], help="training samples (default 5000)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where both ways train (default cpu)")
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be >= 2: epoch 0 includes tracing and is left out of the throughput")
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def steady_throughput(epoch_times: list[float], samples: int) -> float:
    """Samples per second over every epoch but the first (which includes tracing the step)."""
    steady = epoch_times[1:]
    return samples * len(steady) / sum(steady)


def make_run(args: argparse.Namespace, batch_size: int, loop: str = "loop"):
    """The RunSpec BatchLab would build for this batch size of the preset and engine, validation off."""
    from batchlab.core.spec import build_spec

    spec = build_spec(
        {
            "preset": PRESET,
            "batch_sizes": [batch_size],
            "epochs": args.epochs,
            "samples": args.samples,
            "val_samples": 0,
            "seeds": [SEED],
            "device": "cpu" if args.device == "cpu" else "gpu:0",
            "loop": loop,
        }
    )
    (run,) = spec.runs()
    return run


def measure_fit(run) -> tuple[list[float], list[float]]:
    """Plain Keras: per-epoch wall times (s) and epoch losses of model.fit on a freshly built model."""
    import keras
    import tensorflow as tf
    from batchlab.core.datasets import load_spec_data, prepare_arrays
    from batchlab.core.training.workloads import build_model

    class EpochClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times: list[float] = []
            self.losses: list[float] = []
            self._t0 = 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self._t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self._t0)
            logs = logs or {}
            self.losses.append(float(logs.get("loss", math.nan)))

    spec = run.sweep
    tf.keras.utils.set_random_seed(run.seed)  # as train_run does, so the initial weights are the same
    data = prepare_arrays(load_spec_data(spec), spec.workload, spec.samples, spec.val_samples, spec.scale)
    model, x, y, *_ = build_model(run, data)
    clock = EpochClock()
    model.fit(x, y, batch_size=run.batch_size, epochs=spec.epochs, shuffle=False, verbose=0, callbacks=[clock])
    return clock.times, clock.losses


def measure_batchlab(run, tf_device: str | None, nvml_index: int | None, device_name: str):
    """BatchLab (either engine, as the run's spec says): per-epoch wall times (s) and train losses
    from train_run's epoch_ended events."""
    from batchlab.core.events import EPOCH_ENDED, RUN_ENDED
    from batchlab.core.training.run import train_run

    events: list[dict] = []
    train_run(run, events.append, lambda: False, tf_device, nvml_index, device_name)
    ended = next(e for e in events if e["type"] == RUN_ENDED)
    if ended["status"] != "ok":
        raise RuntimeError(f"BatchLab run at batch {run.batch_size} ended {ended['status']}: {ended['message']}")
    epochs = [e for e in events if e["type"] == EPOCH_ENDED]
    return [e["epoch_time"] for e in epochs], [e["train_loss"] for e in epochs]


def measure_fit_engine(run, tf_device: str | None, nvml_index: int | None, device_name: str):
    """BatchLab's fit engine through the same train_run a sweep runs: per-epoch wall times (s), train
    losses, and the share of those epochs spent in BatchLab's own callback (FitEngine.callback_time),
    a cost that other load on the machine does not blur the way it blurs throughput ratios."""
    from batchlab.core.training import run as run_module

    engines = []
    make_engine = run_module.make_engine

    def keep_engine(*args, **kwargs):
        engines.append(make_engine(*args, **kwargs))
        return engines[-1]

    run_module.make_engine = keep_engine  # to read the engine's callback time afterwards
    try:
        times, losses = measure_batchlab(run, tf_device, nvml_index, device_name)
    finally:
        run_module.make_engine = make_engine
    return times, losses, engines[-1].callback_time / sum(times)


def fresh_state() -> None:
    """Drop the previous measurement's model and graphs so each one starts alike."""
    import keras

    keras.backend.clear_session()
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # must precede the TensorFlow import
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    from batchlab.core.spec import SpecError, parse_batch_sizes

    try:  # the same checks and messages as `batchlab sweep`, before any training starts
        batch_sizes = parse_batch_sizes(args.batch_sizes)
        runs = {b: make_run(args, b) for b in batch_sizes}
        engine_runs = {b: make_run(args, b, loop="fit") for b in batch_sizes}
    except SpecError as e:
        print(f"bench_fit_parity: {e}", file=sys.stderr)
        return 2
    if args.device == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            print("--device gpu: TensorFlow sees no GPU", file=sys.stderr)
            return 2
        tf.config.experimental.set_memory_growth(gpus[0], True)
        tf_device, nvml_index, device_name = "GPU:0", 0, "gpu:0"
    else:
        tf_device, nvml_index, device_name = None, None, "cpu"

    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    print(f"command:    {command}")
    print(f"date:       {datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"tensorflow: {tf.__version__}   keras: {keras.__version__}   python: {platform.python_version()}")
    print(f"device:     {device_name} ({os.cpu_count()} logical CPUs, {platform.machine()}, {platform.system()})")
    print(
        f"workload:   {PRESET}, {args.samples} samples, {args.epochs} epochs, {args.repeats} repeats, "
        f"shuffle off, validation off; steady state = epochs 1..{args.epochs - 1}"
    )
    print("ways: fit = plain model.fit; loop = BatchLab's instrumented loop; fit-engine = BatchLab's --loop fit")
    print("order rotates per repeat; numbers are medians over repeats (noisy on a shared machine)\n")

    throughput: dict[tuple[int, str], list[float]] = {(b, w): [] for b in batch_sizes for w in WAYS}
    loss_gap: dict[tuple[int, str], float] = {(b, w): 0.0 for b in batch_sizes for w in (LOOP, FIT_ENGINE)}
    callback_share: dict[int, list[float]] = {b: [] for b in batch_sizes}
    t_start = time.perf_counter()
    for r in range(args.repeats):
        for b in batch_sizes:
            order = WAYS[r % 3 :] + WAYS[: r % 3]
            losses = {}
            for way in order:
                fresh_state()
                if way == FIT:
                    times, losses[way] = measure_fit(runs[b])
                elif way == LOOP:
                    times, losses[way] = measure_batchlab(runs[b], tf_device, nvml_index, device_name)
                else:
                    times, losses[way], share = measure_fit_engine(engine_runs[b], tf_device, nvml_index, device_name)
                    callback_share[b].append(share)
                throughput[(b, way)].append(steady_throughput(times, args.samples))
            for way in (LOOP, FIT_ENGINE):
                gap = max(abs(f - m) / abs(f) for f, m in zip(losses[FIT], losses[way], strict=True))
                loss_gap[(b, way)] = max(loss_gap[(b, way)], gap)
            fit = throughput[(b, FIT)][-1]
            print(
                f"  repeat {r + 1}/{args.repeats} batch {b:>4} order {'/'.join(order)}: fit {fit:>8.0f}  "
                f"loop {throughput[(b, LOOP)][-1]:>8.0f}  fit-engine {throughput[(b, FIT_ENGINE)][-1]:>8.0f} "
                f"samples/s  ratios {throughput[(b, LOOP)][-1] / fit:.3f} {throughput[(b, FIT_ENGINE)][-1] / fit:.3f}",
                flush=True,
            )

    print(f"\nsteady-state throughput, median of {args.repeats} (total {time.perf_counter() - t_start:.0f} s)")
    header = (
        f"{'batch':>6} {'fit':>8} {'loop':>8} {'fit-engine':>11} {'loop/fit':>9} {'pairs':>10} {'engine/fit':>11} "
        f"{'pairs':>10} {'callback %':>11} {'loss gap loop':>14} {'loss gap engine':>16}"
    )
    print(header)
    print("-" * len(header))
    loop_ratios, engine_ratios = [], []
    for b in batch_sizes:
        fit = statistics.median(throughput[(b, FIT)])
        loop = statistics.median(throughput[(b, LOOP)])
        engine = statistics.median(throughput[(b, FIT_ENGINE)])
        loop_ratios.append(loop / fit)
        engine_ratios.append(engine / fit)
        print(
            f"{b:>6} {fit:>8.0f} {loop:>8.0f} {engine:>11.0f} {loop / fit:>9.3f} {_spread(throughput, b, LOOP):>10} "
            f"{engine / fit:>11.3f} {_spread(throughput, b, FIT_ENGINE):>10} "
            f"{100 * statistics.median(callback_share[b]):>11.2f} "
            f"{loss_gap[(b, LOOP)]:>14.1e} {loss_gap[(b, FIT_ENGINE)]:>16.1e}"
        )
    worst = min(loop_ratios)
    loop_ok = worst >= TARGET_RATIO
    share = max(statistics.median(v) for v in callback_share.values())
    engine_ok = share <= MAX_CALLBACK_SHARE
    print(
        f"\nloop: min ratio {worst:.3f} (batch {batch_sizes[loop_ratios.index(worst)]}); target >= {TARGET_RATIO}: "
        f"{'PASS' if loop_ok else 'FAIL'}"
    )
    print(
        f"fit engine: its callback takes at most {100 * share:.2f}% of an epoch; target <= "
        f"{100 * MAX_CALLBACK_SHARE:.0f}%: {'PASS' if engine_ok else 'FAIL'} "
        f"(throughput ratios to plain fit {min(engine_ratios):.3f}-{max(engine_ratios):.3f}: 1 within the noise?)"
    )
    print(
        "ratio = median BatchLab / median fit; pairs = min-max of each repeat's back-to-back ratio, to show the noise"
    )
    print("loss gap = largest relative difference of per-epoch train loss from plain fit's (the same training?)")
    return 0 if loop_ok and engine_ok else 1


def _spread(throughput: dict[tuple[int, str], list[float]], b: int, way: str) -> str:
    pairs = [m / f for f, m in zip(throughput[(b, FIT)], throughput[(b, way)], strict=True)]
    return f"{min(pairs):.2f}-{max(pairs):.2f}"


if __name__ == "__main__":
    sys.exit(main())
