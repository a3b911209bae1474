"""Data-parallel runs: one global batch split over `replicas` devices with tf.distribute.MirroredStrategy.
Training child only (imports TensorFlow); the setting is `replicas` (core/settings/execution.py, docs/scaling.md).

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
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import tensorflow as tf
from batchlab.core.errors import SpecError

MIRRORED = "MirroredStrategy"
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


def make_strategy(replicas: int) -> Any:
    """MirroredStrategy over the first `replicas` GPUs, else as many logical CPUs; None for one replica."""
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
    replicas = strategy.num_replicas_in_sync

    def share(xs, ys, n):
        # MirroredStrategy traces this once per replica: its id is a constant, so it picks its own share
        i = int(tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group))
        x, y = xs[i], ys[i]
        count = tf.shape(x)[0]
        weight = tf.cast(count, tf.float32)
        # Keras averages each replica's loss over its own share and divides by the replicas, which weights
        # unequal shares (an epoch's last batch) equally; this sample weight (1 for equal shares) makes the
        # update the mean gradient over the global batch, as on one device.
        sample_weight = tf.fill([count], weight * replicas / tf.cast(n, tf.float32))
        logs = model.train_step((x, y, sample_weight))
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


def check_batches(samples: int, batch_size: int, replicas: int) -> None:
    """Refuse an epoch whose last, smaller batch leaves a replica without a sample (its loss would be 0/0)."""
    last = samples % batch_size
    if 0 < last < replicas:
        raise SpecError(
            "replicas",
            f"{samples} samples at batch {batch_size} leave a last batch of {last}, fewer than the {replicas} "
            "replicas; change the samples or the batch size",
        )


def replication_fields(replicas: int, batch_size: int) -> dict[str, Any]:
    """run_started fields: the strategy, the replicas and each replica's share of the global batch (samples)."""
    return {
        "strategy": MIRRORED if replicas > 1 else ONE_DEVICE,
        "replicas": int(replicas),
        "per_replica_batch": int(batch_size) // max(1, int(replicas)),
    }
