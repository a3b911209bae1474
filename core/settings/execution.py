"""Execution: the device, the training loop and its device sync, gradient accumulation, fused steps, XLA,
mixed precision, TensorFlow's threads, data-parallel replicas and worker processes (core/training/execution.py,
fused.py, replication.py, workers.py; core/sweep/multiworker.py; docs/performance.md, docs/scaling.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import HookFactory, Setting, SettingsGroup, blank, boolean, choice, whole
from batchlab.core.settings.optimizer import MODEL_OPTIMIZER

DEFAULTS = preset_defaults(DEFAULT_PRESET)
LOOPS = ("loop", "fit")
SYNC_MODES = ("every_step", "sampled")
MAX_ACCUMULATE = 1024
MAX_FUSED = 4096
MAX_TF_THREADS = 1024
MAX_REPLICAS = 64
MAX_WORKERS = 64
XLA_AUTO = "auto"  # xla: compile only where the run's steps repay the compile (core/training/xla_choice.py)
MIXED_PRECISION_ON_CPU = (
    "unsupported on CPU: float16 is emulated there and slower than float32; use a GPU (device auto or gpu:N) "
    "or leave mixed precision off"
)
ENGINES = (("loop", "BatchLab's loop (every step timed)"), ("fit", "model.fit (epochs timed as fit sees them)"))
SYNC_CHOICES = (("every_step", "every step"), ("sampled", "sampled steps (loop only)"))


@dataclass(frozen=True)
class ExecutionSettings:
    device: str = DEFAULTS["device"]
    loop: str = DEFAULTS["loop"]  # training engine: BatchLab's instrumented loop, or model.fit with a timing callback
    sync: str = DEFAULTS["sync"]  # instrumented loop: sync the device after every step, or only on sampled steps
    accumulate: int = DEFAULTS["accumulate"]  # micro-batches per optimizer update (gradient accumulation)
    fused: int = DEFAULTS["fused"]  # steps per call of the step function; each step's loss still recorded
    xla: bool | str = DEFAULTS["xla"]  # jit_compile the train step: True, False or "auto" (where it pays)
    mixed_precision: bool = DEFAULTS["mixed_precision"]  # mixed_float16 with loss scaling (GPU only)
    tf_threads: int = DEFAULTS["tf_threads"]  # TensorFlow's intra- and inter-op threads; 0: its default
    replicas: int = DEFAULTS["replicas"]  # MirroredStrategy over this many devices; batch sizes stay global
    workers: int = DEFAULTS["workers"]  # MultiWorkerMirroredStrategy over this many processes, one replica each


def parse_device(value: Any) -> str:
    text = str(value).strip().lower()
    what = "the device must be auto, cpu or gpu:N (N = 0, 1, ...)"
    if text in ("auto", "cpu"):
        return text
    if text.startswith("gpu:") and text[4:].isdigit():
        return f"gpu:{int(text[4:])}"
    if text == "gpu":
        return "gpu:0"
    raise SpecError("device", f"{value!r} is not known; {what}")


def parse_loop(value: Any) -> str:
    """`loop` (BatchLab's instrumented loop, every step timed) or `fit` (the model's own fit, epochs timed)."""
    return choice("loop", value, LOOPS)


def parse_sync(value: Any) -> str:
    """How often the instrumented loop waits for the device: `every_step` or `sampled` steps only."""
    return choice("sync", str(value).strip().replace("-", "_"), SYNC_MODES)


def parse_accumulate(value: Any) -> int:
    """Gradient accumulation: k micro-batches per optimizer update (1 = none); effective batch = batch size x k."""
    what = f"accumulate must be a whole number from 1 (no accumulation) to {MAX_ACCUMULATE}"
    return whole("accumulate", 1 if blank(value) else value, 1, what, MAX_ACCUMULATE)


def parse_fused(value: Any) -> int:
    """Training steps per call of the step function (1 = one step per call, the default loop)."""
    what = f"fused must be a whole number of steps per call from 1 (one step per call) to {MAX_FUSED}"
    return whole("fused", 1 if blank(value) else value, 1, what, MAX_FUSED)


def parse_xla(value: Any) -> bool | str:
    """True, False or "auto" (XLA only where the run's steps repay the compile: core/training/xla_choice.py)."""
    if isinstance(value, str) and value.strip().lower() == XLA_AUTO:
        return XLA_AUTO
    try:
        return boolean("xla", False if blank(value) else value)
    except SpecError:
        raise SpecError("xla", f"{value!r} is not allowed; use true, false or {XLA_AUTO}") from None


def parse_mixed_precision(value: Any) -> bool:
    return boolean("mixed_precision", False if blank(value) else value)


def parse_tf_threads(value: Any) -> int:
    """TensorFlow's intra- and inter-op threads in the training child (0 = TensorFlow's default: one per core)."""
    what = f"tf_threads must be a whole number of threads from 1 to {MAX_TF_THREADS}, or 0 for TensorFlow's default"
    return whole("tf_threads", 0 if blank(value) else value, 0, what, MAX_TF_THREADS)


def parse_replicas(value: Any) -> int:
    """Data-parallel replicas per run (1 = one device): the first N GPUs, or N logical CPU devices on a CPU."""
    what = f"replicas must be a whole number of devices from 1 (one device) to {MAX_REPLICAS}"
    return whole("replicas", 1 if blank(value) else value, 1, what, MAX_REPLICAS)


def parse_workers(value: Any) -> int:
    """Worker processes per run (1 = one process): MultiWorkerMirroredStrategy, one replica in each."""
    what = f"workers must be a whole number of processes from 1 (one process) to {MAX_WORKERS}"
    return whole("workers", 1 if blank(value) else value, 1, what, MAX_WORKERS)


def _replicas_conflict(p: dict[str, Any], n: int, what: str = "replicas") -> str | None:
    """Why the settings in `p` cannot split each batch over `n` replicas (None: they can); `what`: "replicas"
    (MirroredStrategy in one process) or "workers" (MultiWorkerMirroredStrategy, one replica per process)."""
    strategy = "MultiWorkerMirroredStrategy" if what == "workers" else "MirroredStrategy"
    sizes = [b for b in p.get("batch_sizes") or () if isinstance(b, int) and b > 0]
    odd = [b for b in sizes if b % n]
    samples = p.get("samples")  # None: the whole data, checked in the child (replication.check_batches)
    short = [(b, samples % b) for b in sizes if isinstance(samples, int) and 0 < samples % b < n] or [(0, 0)]
    gpus = "worker i on GPU i) or cpu" if what == "workers" else f"the first {n} GPUs) or cpu (logical CPUs"
    conflicts = (
        (p.get("loop") == "fit", "the fit engine does not build its model in a strategy's scope; use loop loop"),
        (p.get("fused", 1) > 1, f"fused steps are not supported with {what}; use fused 1"),
        (p.get("accumulate", 1) > 1, f"gradient accumulation is not supported with {what}; use accumulate 1"),
        (
            p.get("noise_scale_every") is not None,
            f"the noise scale's micro-batch gradients are taken outside the replicas' step, not checked under "
            f"{strategy}; leave noise_scale_every empty",
        ),
        (
            p.get("batch_schedule") not in (None, "constant"),
            f"a batch schedule's batches need not divide by the {what}; use batch_schedule constant",
        ),
        (p.get("xla") not in (None, False), f"XLA is not compiled across {what} here; use xla false"),
        (
            isinstance(p.get("device"), str) and p["device"].startswith("gpu:"),
            f"device {p.get('device')} names one GPU; use device auto ({gpus})",
        ),
        (
            bool(odd),
            f"the global batch size {odd[0] if odd else 0} does not divide by {n} {what}; use multiples of {n}",
        ),
        (
            short[0][0] > 0,
            f"{samples} samples at batch {short[0][0]} leave a last batch of {short[0][1]}, fewer than the {n} "
            f"{what} (one would get no sample); change the samples or the batch size",
        ),
    )
    return next((reason for bad, reason in conflicts if bad), None)


def _check_replicas(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Several replicas need BatchLab's one-step loop, a constant batch that divides by them and one or all GPUs."""
    n = p.get("replicas", 1)
    if not isinstance(n, int) or n <= 1 or "replicas" in errors:
        return
    reason = _replicas_conflict(p, n)
    if reason:
        errors["replicas"] = SpecError("replicas", f"{n} is not allowed here: {reason}")


def _workers_conflict(p: dict[str, Any], n: int) -> str | None:
    """Why the settings in `p` cannot train each run over `n` worker processes (None: they can)."""
    replicas = p.get("replicas", 1)
    conflicts = (
        (
            isinstance(replicas, int) and replicas > 1,
            f"each worker trains one replica here (workers x replicas is not wired); use replicas 1 with workers, "
            f"or workers 1 with replicas {replicas}",
        ),
        (
            bool(p.get("parallel")),
            "each run already takes its workers' processes, one run at a time; leave parallel empty",
        ),
    )
    return next((reason for bad, reason in conflicts if bad), None) or _replicas_conflict(p, n, "workers")


def _check_workers(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Several workers need what several replicas need (each worker is one replica), one replica per worker and
    one run at a time on this machine's processes."""
    n = p.get("workers", 1)
    if not isinstance(n, int) or n <= 1 or "workers" in errors:
        return
    reason = _workers_conflict(p, n)
    if reason:
        errors["workers"] = SpecError("workers", f"{n} is not allowed here: {reason}")


def _check_accumulate(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Accumulation needs an optimizer BatchLab builds, and a budget that counts samples, not updates."""
    k = p.get("accumulate", 1)
    if not isinstance(k, int) or k <= 1 or "accumulate" in errors:
        return
    reason = None
    if p.get("optimizer") == MODEL_OPTIMIZER:
        reason = f"it needs an optimizer BatchLab builds, not {MODEL_OPTIMIZER!r} (the file's own); name one"
    elif p.get("budget_unit") == "steps" or p.get("target") is not None:
        reason = "a steps budget or a target counts updates, and a recorded step is one micro-batch; use epochs"
    if reason:
        errors["accumulate"] = SpecError("accumulate", f"{k} is not allowed here: {reason}")


def _check_execution(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Fused steps need BatchLab's loop (fit has steps_per_execution, which averages the losses); mixed precision
    needs a GPU and a model BatchLab builds (a .keras file keeps the dtypes it was saved with)."""
    k = p.get("fused", 1)
    if isinstance(k, int) and k > 1 and "fused" not in errors:
        if p.get("loop") == "fit":
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with loop fit: fit's own steps_per_execution reports one mean loss per call; "
                "use loop loop (every step's loss recorded) or fused 1",
            )
        elif p.get("noise_scale_every") is not None:
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with noise_scale_every: the noise scale is measured between single steps; "
                "use fused 1 or leave noise_scale_every empty",
            )
        elif p.get("sync") not in (None, "every_step"):
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with sync {p['sync']}: a fused call is timed as a whole (one sync per call); "
                "use sync every_step or fused 1",
            )
    if p.get("mixed_precision") and "mixed_precision" not in errors:
        if p.get("device") == "cpu":
            errors["mixed_precision"] = SpecError("mixed_precision", MIXED_PRECISION_ON_CPU)
        elif p.get("workload") == "keras-file":
            errors["mixed_precision"] = SpecError(
                "mixed_precision",
                "applies to the built-in workloads; a .keras file trains with the dtypes it was saved with "
                "(save it under keras.mixed_precision.set_global_policy('mixed_float16') instead)",
            )


def _add_arguments(group) -> None:
    group.add_argument(
        "--xla",
        nargs="?",
        const=True,
        default=None,
        metavar="auto",
        help="compile the train step with XLA (jit_compile); --xla auto: only in runs whose steps repay the compile",
    )


def _read_arguments(args) -> dict[str, Any]:
    return {"xla": args.xla}


GROUP = SettingsGroup(
    name="execution",
    title="Execution",
    values=ExecutionSettings,
    settings=(
        Setting("device", "choice", parse_device, "auto (default), cpu or gpu:N", "Device", "--device"),
        Setting(
            "loop",
            "choice",
            parse_loop,
            "loop (default: BatchLab's loop, every step timed) or fit (model.fit, timed as fit sees it)",
            "Training loop",
            "--loop",
            ENGINES,
        ),
        Setting(
            "sync",
            "choice",
            parse_sync,
            "every_step (default) or sampled: how often the loop waits for the device to time a step",
            "Device sync",
            "--sync",
            SYNC_CHOICES,
        ),
        Setting(
            "accumulate",
            "int",
            parse_accumulate,
            "gradient accumulation: k micro-batches per update, effective batch = batch x k",
            "Accumulate (micro-batches)",
            "--accumulate",
            placeholder="1: no accumulation",
        ),
        Setting(
            "fused",
            "int",
            parse_fused,
            "K training steps per call of the step function, every step's loss kept (default 1)",
            "Fused steps per call",
            "--fused",
            placeholder="1: one step per call",
        ),
        Setting(
            "xla",
            "bool",
            parse_xla,
            "compile the train step with XLA (jit_compile); partly checked (--xla auto): only in runs whose "
            "steps repay the compile",
            check_text="compile with XLA (partly: auto)",
        ),
        Setting(
            "mixed_precision",
            "bool",
            parse_mixed_precision,
            "mixed_float16 with loss scaling, float32 output layer (GPU only; refused on the CPU)",
            option="--mixed-precision",
            check_text="mixed float16 (GPU only)",
        ),
        Setting(
            "tf_threads",
            "int",
            parse_tf_threads,
            "TensorFlow threads (intra- and inter-op) in each training process; 0 = TensorFlow's default (one "
            "per core)",
            option="--threads",
        ),
        Setting(
            "replicas",
            "int",
            parse_replicas,
            "data-parallel replicas (tf.distribute MirroredStrategy): the first N GPUs, or on a CPU N logical CPU "
            "devices sharing the same cores (for testing and teaching, not speed); batch sizes are global, each "
            "replica trains batch / N",
            "Replicas (data parallel)",
            "--replicas",
            placeholder="1: one device",
        ),
        Setting(
            "workers",
            "int",
            parse_workers,
            "data-parallel worker processes per run (tf.distribute MultiWorkerMirroredStrategy, one replica each, "
            "configured by TF_CONFIG): W processes on this machine, or placed by Ray with ray; batch sizes are "
            "global, each worker trains batch / W (docs/scaling.md)",
            "Workers (processes)",
            "--workers",
            placeholder="1: one process",
        ),
    ),  # fmt: skip
    checks=(_check_accumulate, _check_execution, _check_replicas, _check_workers),
    hooks=(HookFactory("workers", "batchlab.core.training.workers:worker_hook_for", 500),),
    add_arguments=_add_arguments,
    read_arguments=_read_arguments,
)
