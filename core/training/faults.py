"""The one test seam of the training child: faults a test injects through environment variables.

Not user settings, and documented here only: a test sets a variable in its own process, and the training
processes it starts (fork server, forked and fresh children) inherit it. TensorFlow-free, so a test names
them without loading TensorFlow.

- BATCHLAB_TEST_FAIL_RUN=N: run N fails (status "error") after run_started, before its first step, in a
  child that stays alive (tests/core/test_reused_children.py: what follows a failed run).
- BATCHLAB_TEST_FAIL_PREPARE=N: preparing run N ahead fails (tests/core/test_prepare_ahead.py).
- BATCHLAB_TEST_WORKER_EXIT=R:W:K: worker W of multi-worker run R exits at once (code WORKER_EXIT_CODE, no
  run_ended) after its step K, as a worker lost mid-run would (tests/core/test_multiworker.py).
- BATCHLAB_TEST_INPUT_DELAY_S=S: every batch is held up S seconds in the input pipeline (a sequential
  tf.data map that sleeps), a pipeline that really starves the step (tests/core/test_training.py).
- BATCHLAB_TEST_EXIT_RUN=N:S: the Ray worker training run N exits at once (os._exit, no run_ended) right after
  it sent the step event that holds step S: a worker lost mid-epoch (tests/core/test_ray_faults.py). A Ray
  sweep hands every BATCHLAB_TEST_* variable to its workers in their runtime environment.
"""

from __future__ import annotations

import os

FAIL_RUN_ENV = "BATCHLAB_TEST_FAIL_RUN"
FAIL_PREPARE_ENV = "BATCHLAB_TEST_FAIL_PREPARE"
INPUT_DELAY_ENV = "BATCHLAB_TEST_INPUT_DELAY_S"
WORKER_EXIT_ENV = "BATCHLAB_TEST_WORKER_EXIT"
WORKER_EXIT_CODE = 3
EXIT_RUN_ENV = "BATCHLAB_TEST_EXIT_RUN"
EXIT_CODE = 70  # how a worker lost by EXIT_RUN_ENV exits
TEST_ENV_PREFIX = "BATCHLAB_TEST_"  # what a launcher of remote workers hands on (core/sweep/ray_cluster.py)


def fail_if_injected(name: str, run_index: int) -> None:
    """Raise the failure a test asked for with the variable `name` (FAIL_RUN_ENV, FAIL_PREPARE_ENV) for this
    run; nothing otherwise."""
    if os.environ.get(name) == str(run_index):
        raise RuntimeError(f"{name}={run_index}: a failure injected by a test")


def input_delay() -> float:
    """Seconds each batch is held up (INPUT_DELAY_ENV; 0 when unset or not a number)."""
    try:
        return max(0.0, float(os.environ.get(INPUT_DELAY_ENV, "0") or 0))
    except ValueError:
        return 0.0


def worker_exit_step(run_index: int, worker: int) -> int | None:
    """The step after which worker `worker` of multi-worker run `run_index` exits (WORKER_EXIT_ENV "R:W:K");
    None if not."""
    parts = [p.strip() for p in os.environ.get(WORKER_EXIT_ENV, "").split(":")]
    if len(parts) != 3 or parts[:2] != [str(run_index), str(worker)] or not parts[2].isdigit():
        return None
    return int(parts[2])


def exit_step(run_index: int) -> int | None:
    """The step after which the worker training this run exits (EXIT_RUN_ENV "N:S"); None when not asked."""
    run, _, step = os.environ.get(EXIT_RUN_ENV, "").partition(":")
    if run.strip() != str(run_index):
        return None
    try:
        return int(step)
    except ValueError:
        return None
