"""The training input pipeline: a tf.data pipeline shaped like fit's array adapter, each batch stamped with
the time it was made (so the loop can tell input wait from fetch overhead), and the fetch overhead's
calibration. Runs inside the training child; imports TensorFlow.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import tensorflow as tf
from batchlab.core.training import faults

CALIBRATION_WARMUP = 5  # next() calls that start the calibration pipeline's threads, not timed
CALIBRATION_FETCHES = 20  # timed next() calls; their median is the fetch overhead
CALIBRATION_PAUSE_S = 0.002  # time given to the prefetch thread to refill the buffer before each timed call


def sample_order(samples: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """The sample indices in training order: 0..samples-1, or a new seeded shuffle on each iteration
    (each epoch's `iter`), the same orders wherever this dataset is built with the same seed."""
    indices = tf.data.Dataset.range(samples)
    if shuffle:
        indices = indices.shuffle(samples, seed=seed, reshuffle_each_iteration=True)
    return indices


def make_input_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """Batches of (x, y, made) as fit builds them from arrays (optional per-epoch shuffle, gather, prefetch);
    `made` is the wall-clock time (s since the epoch) the pipeline finished the batch."""
    x_t = tf.convert_to_tensor(x)
    y_t = tf.convert_to_tensor(y)
    batches = sample_order(x.shape[0], shuffle, seed).batch(batch_size)
    batches = batches.map(lambda i: (tf.gather(x_t, i), tf.gather(y_t, i)), num_parallel_calls=tf.data.AUTOTUNE)
    delay = faults.input_delay()
    if delay > 0:

        def slow(xb, yb):
            done = tf.py_function(lambda: time.sleep(delay) or 0, [], tf.int32)
            with tf.control_dependencies([done]):
                return tf.identity(xb), tf.identity(yb)

        batches = batches.map(slow)  # sequential on purpose: one batch per `delay`
    # The last stage stamps each batch with the wall-clock time it was made (tf.timestamp: seconds since
    # the Unix epoch, as time.time()). A batch made before the loop asked for it was waiting in the
    # prefetch buffer: only a batch made after the ask made the step wait (input_wait).
    batches = batches.map(lambda xb, yb: (xb, yb, tf.timestamp()))
    return batches.prefetch(tf.data.AUTOTUNE)


def _starvation(fetch: float, asked: float, made) -> float:
    """Seconds of a fetch spent waiting for the pipeline to make the batch (s): from the ask (wall clock)
    to the batch's `made` stamp, at most the whole fetch; 0 for a batch already in the prefetch buffer.
    The rest of the fetch is next()'s own cost. Read after the step's clock stopped (a host copy)."""
    return min(fetch, max(0.0, float(made) - asked))


def calibrate_fetch_overhead(x: np.ndarray, y: np.ndarray, batch_size: int) -> float:
    """Fixed cost (s) of next() on a prefetch buffer that already holds the batch: the median over
    CALIBRATION_FETCHES calls on a pipeline of one repeated batch of the run's element spec.

    Recorded for reference (run_started's fetch_overhead_s); input_wait is measured per step from the
    batches' stamps instead (_starvation), since next()'s cost while training differs from this by up to
    3x on a busy 2-core machine. The real pipeline is not used, so its shuffle order stays the run's.
    """
    b = min(batch_size, x.shape[0])
    x_t = tf.convert_to_tensor(x[:b])
    y_t = tf.convert_to_tensor(y[:b])
    # The run's own stages (index batches, a parallel gather, prefetch) over one batch of its data,
    # repeated: the gather threads work while next() runs, as they do in training.
    indices = tf.data.Dataset.range(b).batch(b).repeat()
    data = indices.map(lambda i: (tf.gather(x_t, i), tf.gather(y_t, i)), num_parallel_calls=tf.data.AUTOTUNE)
    iterator = iter(data.prefetch(tf.data.AUTOTUNE))
    for _ in range(CALIBRATION_WARMUP):
        next(iterator)
    times = []
    for _ in range(CALIBRATION_FETCHES):
        time.sleep(CALIBRATION_PAUSE_S)
        t0 = time.perf_counter()
        next(iterator)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
