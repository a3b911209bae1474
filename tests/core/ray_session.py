"""One local Ray instance for every Ray test of a pytest process (tests/core/test_ray*.py,
tests/gui/test_ray_window.py).

Started on first use with 2 CPU slots and shut down when the process exits, so the Ray tests pay Ray's start
once. A sweep with `ray: local` finds this process connected already and uses the same instance
(core/sweep/ray_cluster.py `connect`); it never shuts down what it did not start.
"""

from __future__ import annotations

import atexit
import logging

RAY_TEST_CPUS = 2  # two runs in flight at once, one CPU each
RAY_TEST_OBJECT_STORE_BYTES = 128 << 20
# Tiny runs for the Ray tests: the bundled MLP on a few hundred samples, one TensorFlow thread per run, so two
# runs in flight fit this 2-core machine.
TINY_RAY = {"preset": "mnist-mlp", "samples": 256, "val_samples": 0, "epochs": 1, "device": "cpu", "tf_threads": 1}


def local_ray():
    """The ray module, connected to this process's one local test instance (started the first time)."""
    import ray  # the test extra installs it (pyproject.toml)

    if not ray.is_initialized():
        ray.init(
            address="local",  # a new instance, whatever cluster this machine may know of (RAY_ADDRESS, a stale file)
            num_cpus=RAY_TEST_CPUS,
            num_gpus=0,
            include_dashboard=False,
            object_store_memory=RAY_TEST_OBJECT_STORE_BYTES,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
        atexit.register(ray.shutdown)
    return ray
