"""`--xla auto`: compile the train step with XLA only where a run's steps repay the compile.

TensorFlow-free (pure), so the cost model is tested and documented on its own. On a CPU an XLA
compile of the step costs seconds of CPU once per run (one batch shape), and saves the executor's
per-op work on every step after it. The run compiles when

    steps x (SAVING_FIXED_S + SAVING_PER_SAMPLE_S x batch) >= COMPILE_EXTRA_S

The constants are this project's measurements (bench/bench_xla_compile.py, docs/benchmarks.md,
"Cheaper XLA compiles"): the default `mnist-autoencoder` model with `--fused 64` on the shared
2-core x86_64 CPU, the graph function against the whole call compiled by XLA. They are a rough
guide for other models and machines (a model with more ops saves more per step and compiles
longer), which is why the run file records the estimate beside the choice (`xla_choice`).

On a GPU `auto` keeps Keras's own choice (it compiles with XLA when the model supports it); the
GPU's compile and per-step saving are not measured here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.spec import XLA_AUTO

AUTO = XLA_AUTO
COMPILE_EXTRA_S = 2.5  # CPU s an XLA compile of the fused call costs beyond the graph function's first run
SAVING_FIXED_S = 2.8e-3  # CPU s XLA saves per step whatever the batch (the executor's per-op work)
SAVING_PER_SAMPLE_S = 1.35e-5  # and per sample of the batch (the elementwise work it fuses)


@dataclass(frozen=True)
class XlaChoice:
    """Whether the run compiles its train step with XLA (None: Keras's own choice), and why, in words."""

    compile: bool | None
    reason: str


def saving_per_step(batch_size: int) -> float:
    """CPU seconds XLA saves per training step at this batch size (the model above)."""
    return SAVING_FIXED_S + SAVING_PER_SAMPLE_S * batch_size


def break_even_steps(batch_size: int) -> int:
    """The fewest steps a run of this batch size needs for XLA's compile to pay."""
    return int(-(-COMPILE_EXTRA_S // saving_per_step(batch_size)))


def choose_xla(setting: Any, steps: int, batch_size: int, on_gpu: bool) -> XlaChoice:
    """The spec's `xla` (True, False or "auto") for a run of `steps` steps at `batch_size`."""
    if setting is True:
        return XlaChoice(True, "on (--xla)")
    if setting != AUTO:
        return XlaChoice(None, "off (Keras's own choice: on a GPU XLA when the model supports it, on a CPU never)")
    if on_gpu:
        return XlaChoice(None, "auto on a GPU: Keras's own choice (XLA when the model supports it)")
    saved = steps * saving_per_step(batch_size)
    verdict = "on" if saved >= COMPILE_EXTRA_S else "off"
    relation = ">=" if saved >= COMPILE_EXTRA_S else "<"
    return XlaChoice(
        verdict == "on",
        f"auto: {verdict}, {steps:,} steps x ~{saving_per_step(batch_size) * 1e3:.1f} ms saved = ~{saved:.1f} s "
        f"{relation} ~{COMPILE_EXTRA_S:g} s compile (CPU; break-even {break_even_steps(batch_size):,} steps)",
    )
