"""The device's matmul peak (FLOP/s), measured with timed float32 matrix products.

Runs in a child process (TensorFlow is imported here only). The best of several timed rounds over
several matrix sizes is kept: a peak is what the device can do, not what it did on average on a
busy machine. Each round's result is copied to the host, which waits for the device, so the clock
times the work, not its launch.
"""

from __future__ import annotations

import signal
import time
from typing import Any

# n of the n x n float32 matrices. Several sizes, the best counts: which size runs fastest depends on
# the device's caches and cores (on a GPU the large ones fill the device).
CPU_SIZES = (256, 512, 1024, 2048)
GPU_SIZES = (2048, 4096, 8192)
ROUND_SECONDS = 0.2  # each timed round repeats the product until it lasts about this long
ROUNDS = 3
WARMUP_ROUNDS = 1
PEAK_RESULT = "peak_result"
PEAK_ERROR = "peak_error"


def _rate(tf, n: int) -> tuple[float, int]:
    """Best FLOP/s over ROUNDS timed rounds of k chained n x n products, and k."""
    a = tf.random.normal((n, n), dtype=tf.float32, seed=1) / (n**0.5)
    b = tf.random.normal((n, n), dtype=tf.float32, seed=2) / (n**0.5)

    @tf.function
    def chain(x, y, k):
        for _ in tf.range(k):
            x = tf.matmul(x, y)
        return tf.reduce_sum(x[:1, :1])

    def timed(k: int) -> float:
        t0 = time.perf_counter()
        chain(a, b, tf.constant(k)).numpy()  # the host copy waits for the device
        return time.perf_counter() - t0

    timed(1)  # traces
    k = max(1, round(ROUND_SECONDS / max(timed(1), 1e-6)))
    for _ in range(WARMUP_ROUNDS):
        timed(k)
    best = min(timed(k) for _ in range(ROUNDS))
    return 2.0 * n**3 * k / best, k


def measure_matmul_peak(tf, on_gpu: bool) -> dict[str, Any]:
    """The best FLOP/s of chained float32 matmuls over several matrix sizes on the current device."""
    rates = {n: _rate(tf, n)[0] for n in (GPU_SIZES if on_gpu else CPU_SIZES)}
    best = max(rates, key=rates.get)
    return {
        "flops_per_s": rates[best],
        "matrix_size": best,
        "rates_by_size": {str(n): r for n, r in rates.items()},
        "dtype": "float32",
        "tf32": bool(on_gpu and tf.config.experimental.is_tensor_float_32_execution_enabled()),
        "rounds": ROUNDS,
        "tensorflow_version": tf.__version__,
    }


def peak_main(device: str, conn, log_path: str | None) -> None:
    """Child entry: measure the peak on `device` (auto, cpu or gpu:N) and send it with the device's description."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from batchlab.core.training.child import (
        _redirect_output,
        _set_device_environment,
        _setup_tensorflow,
        describe_environment,
    )

    _redirect_output(log_path)
    try:
        _set_device_environment(device)
        tf, tf_device, _, _ = _setup_tensorflow(device)
        environment = describe_environment(tf)
        with tf.device(tf_device or "/CPU:0"):
            result = measure_matmul_peak(tf, on_gpu=tf_device is not None)
        result["device_description"] = environment["device_description"]
        conn.send({"type": PEAK_RESULT, **result})
    except Exception as e:  # one line for the parent; the log keeps the traceback
        import traceback

        traceback.print_exc()
        conn.send({"type": PEAK_ERROR, "message": f"{type(e).__name__}: {e}".splitlines()[0]})
    finally:
        conn.close()
