"""Data-parallel runs: one global batch split over `replicas` devices with tf.distribute.MirroredStrategy, or over
`workers` processes (one replica each) with MultiWorkerMirroredStrategy. Training child only (imports TensorFlow);
the settings are `replicas` and `workers` (core/settings/execution.py, docs/scaling.md).

- Devices: on GPUs the first `replicas` visible GPUs; on a CPU, `replicas` logical CPU devices made from the
  one physical CPU before TensorFlow's runtime starts (configure_devices, called with the thread pools in
  child._setup_tensorflow: also in a child forked from the fork server, whose parent imported TensorFlow but
  ran no op). Logical CPUs share the same cores: a testing and teaching mode, not a speed-up.
- The model is built and compiled inside the strategy's scope, and its optimizer and metric variables are
  made there before the step is traced (Keras's own `_symbolic_build`, which `fit` calls): made lazily inside
  `strategy.run`, an `accuracy` metric's variables fail with "You must feed a value for placeholder tensor
  'cond/.../Placeholder'" (measured with TF 2.21, Keras 3.15).
- The step: the pipeline makes the global batch as on one device (its fetch and starvation are timed as
  before); the compiled step cuts it on the host into contiguous shares (replica i: samples
  [i*n/R, (i+1)*n/R)), so each replica's device receives its own share only, and each replica runs the
  model's own `train_step` on its share. Keras divides each replica's loss by the replicas and the optimizer
  sums the gradients over them, so one update is the mean gradient of the global batch, as on one device.
- Unequal shares (an epoch's last batch when it does not divide by the replicas) get a sample weight that
  makes the update the global batch's mean gradient: Keras alone would average the replicas' share means.
- What is recorded per step is the global batch's: the loss is its mean (regularisation added once), every
  other metric the replicas' values weighted by their shares (exact for means such as accuracy).
- Several workers (core/training/workers.py starts each, core/sweep/multiworker.py the run's processes): each
  worker process joins the cluster its TF_CONFIG describes (start_multi_worker, before TensorFlow's runtime
  starts) and then trains exactly as above: every worker makes the same global batch from the same seed and
  takes its own share (replica i = worker i), the gradients are summed across the processes by collective
  all-reduce, each with a timeout (COLLECTIVE_TIMEOUT_S), so a worker lost on another host cannot hang the
  others forever. Validation goes through the same split (evaluate): Keras 3.15's `model.evaluate` fails under
  MultiWorkerMirroredStrategy ("Attempt to convert a value (PerReplica...)", measured with TF 2.21).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from itertools import pairwise
from typing import Any

import tensorflow as tf
from batchlab.core.errors import SpecError

MIRRORED = "MirroredStrategy"
MULTI_WORKER = "MultiWorkerMirroredStrategy"
# Seconds one collective (a step's all-reduce) may wait for the other workers before it fails the run with
# DeadlineExceeded: a worker lost where the launcher cannot see it (another host) ends the run instead of hanging
# it. Generous: a step of the slowest worker, or its first trace, must fit. TensorFlow runs each timed collective
# in a thread of its own (tens of microseconds a collective, its docs say).
COLLECTIVE_TIMEOUT_S = 600.0
_JOINED: dict[str, Any] = {}  # the cluster this process joined (start_multi_worker): its strategy and join time
ONE_DEVICE = "none"  # the run file's `strategy` of a run on one device (no tf.distribute strategy)
HOST = "/cpu:0"  # where tf.data leaves a batch


def configure_devices(device: str, replicas: int) -> None:
    """Before TensorFlow's runtime starts: on a CPU, make `replicas` logical CPU devices; on GPUs, check that
    `replicas` are visible. A runtime already started with the same devices (a reused child) is left as is."""
    if replicas <= 1:
        return
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and device != "cpu":
        if len(gpus) < replicas:
            raise SpecError("replicas", f"{replicas} replicas need {replicas} GPUs; TensorFlow sees {len(gpus)}")
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    wanted = [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
    try:
        tf.config.set_logical_device_configuration(cpu, wanted)
    except RuntimeError:  # the runtime started already: fine if it has the devices
        if len(tf.config.list_logical_devices("CPU")) < replicas:
            raise SpecError(
                "replicas", f"{replicas} logical CPU devices cannot be made after TensorFlow started"
            ) from None


def start_multi_worker(timeout_s: float = COLLECTIVE_TIMEOUT_S) -> Any:
    """Join the cluster that TF_CONFIG describes: MultiWorkerMirroredStrategy, made before TensorFlow's runtime
    starts (it configures the collectives and starts this worker's server), its collectives timed out after
    `timeout_s`. Waits until every worker has joined. The run's strategy from now on (make_strategy)."""
    import time

    t0 = time.perf_counter()
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    _JOINED.update(strategy=strategy, join_s=time.perf_counter() - t0)
    return strategy


def joined_strategy() -> Any:
    """The multi-worker strategy this process joined (start_multi_worker), or None."""
    return _JOINED.get("strategy")


def make_strategy(replicas: int) -> Any:
    """The multi-worker strategy if this process joined one; else MirroredStrategy over the first `replicas`
    GPUs, or as many logical CPUs; None for one replica."""
    if joined_strategy() is not None:
        return joined_strategy()
    if replicas <= 1:
        return None
    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus if len(gpus) >= replicas else tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([d.name for d in devices[:replicas]])


def scope(strategy: Any):
    """The strategy's scope (variables made inside are mirrored), or a no-op without one."""
    return strategy.scope() if strategy is not None else nullcontext()


def build_variables(model: Any, strategy: Any, x: Any, y: Any) -> None:
    """Make the optimizer's and the compiled metrics' variables in the strategy's scope before any step is
    traced, as fit does (Keras's `_symbolic_build` on one batch's shapes)."""
    with strategy.scope():
        model._symbolic_build(data_batch=(x, y))


def replicated_step(model: Any, strategy: Any) -> Callable:
    """One step of the global batch (x, y) split over the strategy's replicas, returning the global batch's
    loss and metrics (each replica's value weighted by its share of the samples)."""
    return _split_call(model, strategy, "train_step")


def _split_call(model: Any, strategy: Any, method: str) -> Callable:
    """(x, y) -> the global batch's loss and metrics, each replica running `model.<method>` (train_step or
    test_step) on its contiguous share."""
    replicas = strategy.num_replicas_in_sync

    def share(xs, ys, n):
        # the strategy traces this once per local replica: its id (global under MultiWorkerMirroredStrategy:
        # worker k's replica is k) is a constant, so it picks its own share
        i = int(tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group))
        x, y = xs[i], ys[i]
        count = tf.shape(x)[0]
        weight = tf.cast(count, tf.float32)
        # Keras averages each replica's loss over its own share and divides by the replicas, which weights
        # unequal shares (an epoch's last batch) equally; this sample weight (1 for equal shares) makes the
        # update the mean gradient over the global batch, as on one device.
        sample_weight = tf.fill([count], weight * replicas / tf.cast(n, tf.float32))
        logs = getattr(model, method)((x, y, sample_weight))
        for metric in model.metrics:
            metric.reset_state()
        # the loss: replicas x this share's part of the global mean (reduced below by / replicas); the
        # metrics: this share's means (a constant weight leaves them unchanged), weighted by the share below
        return {k: tf.cast(v, tf.float32) * (1.0 if k == "loss" else weight) for k, v in logs.items()}, weight

    def step(x, y):
        n = tf.shape(x)[0]
        bounds = [(i * n) // replicas for i in range(replicas + 1)]
        with tf.device(HOST):  # cut where the pipeline left the batch: each replica's device gets its share only
            xs = tuple(x[bounds[i] : bounds[i + 1]] for i in range(replicas))
            ys = tuple(y[bounds[i] : bounds[i + 1]] for i in range(replicas))
        weighted, weights = strategy.run(share, args=(xs, ys, n))
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, weights, axis=None)
        per_replica = {"loss": float(replicas)}
        return {
            k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) / per_replica.get(k, total)
            for k, v in weighted.items()
        }

    return step


_EVAL_STEP: dict[int, tuple[Any, Callable]] = {}  # id(model) -> (model, its compiled split test step)


def evaluate(model: Any, x: Any, y: Any, batch_size: int) -> dict[str, float]:
    """The validation logs (loss and every compiled metric) of `model` on (x, y) at `batch_size`: Keras's own
    evaluate, except in a worker of a multi-worker run, where every worker runs the same batches through the
    split test step (each its share; the figures are the means over all samples, weighted by the batches'
    sizes, as evaluate's loss and mean metrics are). A last batch smaller than the replicas joins the one before."""
    strategy = joined_strategy()
    if strategy is None:
        return model.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)
    n, replicas = int(x.shape[0]), strategy.num_replicas_in_sync
    if n < replicas:
        raise SpecError("workers", f"{n} validation samples cannot be split over {replicas} workers; use more")
    bounds = [*range(0, n, batch_size), n]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < replicas:
        del bounds[-2]
    cached = _EVAL_STEP.get(id(model))
    if cached is None or cached[0] is not model:
        cached = _EVAL_STEP[id(model)] = (
            model,
            tf.function(_split_call(model, strategy, "test_step"), reduce_retracing=True),
        )
    totals: dict[str, float] = {}
    for a, b in pairwise(bounds):
        for k, v in cached[1](x[a:b], y[a:b]).items():
            totals[k] = totals.get(k, 0.0) + float(v) * (b - a)
    return {k: v / n for k, v in totals.items()}


def check_batches(samples: int, batch_size: int, replicas: int) -> None:
    """Refuse an epoch whose last, smaller batch leaves a replica without a sample (its loss would be 0/0)."""
    last = samples % batch_size
    what = "workers" if joined_strategy() is not None else "replicas"
    if 0 < last < replicas:
        raise SpecError(
            what,
            f"{samples} samples at batch {batch_size} leave a last batch of {last}, fewer than the {replicas} "
            f"{what}; change the samples or the batch size",
        )


def replication_fields(replicas: int, batch_size: int) -> dict[str, Any]:
    """run_started fields: the strategy, the worker processes, the replicas in all and each replica's share of
    the global batch (samples); for a worker of a multi-worker run also the seconds it waited to join."""
    strategy = joined_strategy()
    if strategy is not None:
        total = int(strategy.num_replicas_in_sync)
        return {
            "strategy": MULTI_WORKER,
            "workers": total // max(1, len(strategy.extended.worker_devices)),
            "replicas": total,
            "per_replica_batch": int(batch_size) // total,
            "cluster_join_s": float(_JOINED.get("join_s", float("nan"))),
        }
    return {
        "strategy": MIRRORED if replicas > 1 else ONE_DEVICE,
        "workers": 1,
        "replicas": int(replicas),
        "per_replica_batch": int(batch_size) // max(1, int(replicas)),
    }
