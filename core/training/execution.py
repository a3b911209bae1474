"""How a run's train step executes: XLA compilation and mixed precision. Training child only.

- XLA (`xla`): the model's `jit_compile` is set before the step function is built, so the
  instrumented loop, the fused loop and `fit` all compile the train step with XLA. Without it the
  model keeps Keras's own choice ("auto": XLA on a GPU when the model supports it, never on a CPU);
  with `xla = "auto"` a run on the CPU compiles only when its steps repay the compile
  (xla_choice.py). The run file's `xla` attribute records what the run used, `xla_choice` why.
- Mixed precision (`mixed_precision`): Keras's `mixed_float16` policy is set before the model is
  built (layers compute in float16, variables stay float32), the output layer stays float32 (its
  softmax/sigmoid and the loss need float32 range), and `compile` wraps the optimizer in a
  `LossScaleOptimizer` (dynamic loss scaling), as Keras does for that policy. Refused on a CPU:
  float16 is emulated there and slower than float32.
"""

from __future__ import annotations

from typing import Any

import keras
from batchlab.core.errors import SpecError
from batchlab.core.spec import MIXED_PRECISION_ON_CPU, RunSpec
from batchlab.core.training.xla_choice import choose_xla, xla_cache_in_use

MIXED = "mixed_float16"
FLOAT32 = "float32"
STEP_TIMING_PER_STEP = "per step"
STEP_TIMING_PER_CALL = "per call"


def set_precision(spec: Any) -> None:
    """Set Keras's global dtype policy for the model about to be built; raise SpecError for mixed precision
    when TensorFlow sees no GPU (also in the preflight probe, so the sweep is refused before it starts)."""
    if spec.mixed_precision:
        import tensorflow as tf

        if not tf.config.list_logical_devices("GPU"):
            raise SpecError("mixed_precision", MIXED_PRECISION_ON_CPU)
        keras.mixed_precision.set_global_policy(MIXED)
    elif keras.mixed_precision.global_policy().name != FLOAT32:
        keras.mixed_precision.set_global_policy(FLOAT32)  # an earlier run in this process set another policy


def output_dtype() -> str | None:
    """dtype for a built-in model's output layer: float32 under mixed precision, else the policy's (None)."""
    return FLOAT32 if keras.mixed_precision.global_policy().name == MIXED else None


def apply_xla(model: Any, spec: Any, steps: int, batch_size: int) -> str:
    """Compile the train step with XLA when the spec asks for it, or with `auto` where the run's `steps` at
    `batch_size` repay the compile (xla_choice.py), before any step function is built; returns why, in words."""
    import tensorflow as tf

    on_gpu = bool(tf.config.list_logical_devices("GPU"))
    choice = choose_xla(spec.xla, steps, batch_size, on_gpu)
    if choice.compile is not None:
        model.jit_compile = choice.compile
    cache = xla_cache_in_use()
    return f"{choice.reason}; compile cache {cache}" if cache and model.jit_compile is True else choice.reason


def execution_fields(run: RunSpec, model: Any, xla_choice: str = "") -> dict[str, Any]:
    """run_started fields: steps per call, how step times were taken, XLA (and why) and the dtype policy used."""
    k = int(run.sweep.fused or 1)
    policy = getattr(model, "dtype_policy", None)
    return {
        "steps_per_call": k,
        "step_timing": STEP_TIMING_PER_CALL if k > 1 else STEP_TIMING_PER_STEP,
        "xla": int(bool(getattr(model, "jit_compile", False))),
        "xla_choice": xla_choice,
        "precision": str(getattr(policy, "name", FLOAT32)),
        "tf_threads": tensorflow_threads(),
    }


def tensorflow_threads() -> int:
    """The intra-op threads TensorFlow runs with in this process, as it reports them (0: its default, one per
    core); the spec's `tf_threads` sets both pools (child.set_threads)."""
    import tensorflow as tf

    return int(tf.config.threading.get_intra_op_parallelism_threads())
