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

import os
from dataclasses import dataclass
from pathlib import Path
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


XLA_FLAGS_ENV = "TF_XLA_FLAGS"  # TensorFlow reads it once, at its first op: set before the training process runs one
CACHE_FLAG = "--tf_xla_persistent_cache_directory"


def xla_cache_dir() -> Path:
    """Where `--xla-cache` keeps compiled steps: the user's cache folder's xla/ (delete it to clear the cache)."""
    from batchlab.core.paths import user_cache_dir

    return user_cache_dir() / "xla"


def enable_xla_cache(folder: Path, env: dict[str, str] | None = None) -> None:
    """Have the training processes started from here keep and reuse XLA's compiled executables in `folder`
    (TensorFlow's persistent compile cache), by adding the flag to TF_XLA_FLAGS in `env` (os.environ)."""
    env = os.environ if env is None else env
    folder.mkdir(parents=True, exist_ok=True)
    flags = env.get(XLA_FLAGS_ENV, "")
    if CACHE_FLAG not in flags:
        # the key is the compiled program's fingerprint; the strict check would also compare function names,
        # which another sweep's traces may number differently
        env[XLA_FLAGS_ENV] = f"{flags} {CACHE_FLAG}={folder} --tf_xla_disable_strict_signature_checks".strip()


def xla_cache_in_use(env: dict[str, str] | None = None) -> str:
    """The persistent compile cache folder TF_XLA_FLAGS names, or ""."""
    env = os.environ if env is None else env
    for flag in env.get(XLA_FLAGS_ENV, "").split():
        if flag.startswith(CACHE_FLAG + "="):
            return flag.split("=", 1)[1]
    return ""
