"""One run in the training child, end to end: the standard measurements (hooks), the engine the spec asks for
(the instrumented loop, fused steps or model.fit), building a run (ahead of its turn or now) and training it.

`train_run` is the child's entry for a training run (core/training/child.py, zygote.py, ahead.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchlab.core import batch_rules
from batchlab.core.events import log_event, now_iso
from batchlab.core.spec import RunSpec
from batchlab.core.training import faults
from batchlab.core.training.batch_schedule import BatchSchedule
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.execution import execution_fields
from batchlab.core.training.failures import (
    Diverged,
    StopRequested,
    classify_failure,
    first_line,
    traceback_text,
)
from batchlab.core.training.flops import flops_fields
from batchlab.core.training.gc_watch import GcWatch
from batchlab.core.training.hooks import (
    EpochSummary,
    HookList,
    NanCheck,
    RunEvents,
    RunSummary,
    StepLog,
    TracingCounter,
)
from batchlab.core.training.memory import MemoryProbe, current_rss_bytes
from batchlab.core.training.noise_scale import NoiseScaleProbe
from batchlab.core.training.replication import (
    replication_fields,
)
from batchlab.core.training.settings_hooks import add_settings_hooks
from batchlab.core.training.startup import StartupClock
from batchlab.core.training.trainer import InstrumentedLoop, RunSetup, prepare_run
from batchlab.core.training.workloads import accumulation_fields

Emit = Callable[[dict[str, Any]], None]


def standard_hooks(run_index: int, emit: Emit, tf_device: str | None, nvml_index: int | None) -> HookList:
    """The measurements every engine makes, each placed by its priority (hooks.PRIORITY; RunEvents last: it sends)."""
    memory = MemoryProbe(tf_device, nvml_index)
    hooks = HookList()
    # each batch of steps carries the epoch's memory peaks so far, so the live memory plot moves within an epoch
    hooks.add(StepLog(run_index, emit, memory=memory.read), "step_log")
    for hook, name in (
        (GcWatch(), "gc_watch"),
        (EpochSummary(), "epoch_summary"),
        (TracingCounter(), "tracing"),
        (memory, "memory"),
        (RunSummary(), "run_summary"),
        (NanCheck(), "nan_check"),
        (RunEvents(run_index, emit), "run_events"),
    ):
        hooks.add(hook, name)
    return hooks


def make_engine(
    setup: RunSetup,
    hooks: HookList,
    should_stop: Callable[[], bool],
    evaluations: Evaluations | None = None,
    noise: NoiseScaleProbe | None = None,
    batches: BatchSchedule | None = None,
):
    """The engine the spec asks for: the instrumented loop (default) or model.fit (fit_engine.py).

    The spec refuses targets, eval_every, steps/examples budgets and noise_scale_every with the fit engine."""
    spec = setup.run.sweep
    if spec.loop == "fit":
        from batchlab.core.training.fit_engine import FitEngine

        return FitEngine(setup, hooks, should_stop)
    if spec.fused > 1:  # K steps per call (fused.py); the spec allows it with this loop only
        from batchlab.core.training.fused import FusedLoop

        return FusedLoop(setup, hooks, should_stop, spec.fused, evaluations=evaluations)
    return InstrumentedLoop(
        setup,
        hooks,
        should_stop,
        sync=spec.sync,
        evaluations=evaluations,
        noise=noise,
        batches=batches,
    )


@dataclass
class BuiltRun:
    """A run ready to train: its measurements (hooks), its model and data (setup) and its engine."""

    hooks: HookList
    setup: RunSetup
    engine: Any


def build_run(
    run: RunSpec,
    emit: Emit,
    should_stop: Callable[[], bool],
    hooks: HookList,
    data=None,
    clock: StartupClock | None = None,
) -> BuiltRun:
    """Seed, build the model (the clock's `model` phase) and the engine with its hooks (`pipeline`)."""
    clock = clock if clock is not None else StartupClock()
    with clock.phase("model"):
        setup = prepare_run(run, emit, data)
    built = add_settings_hooks(setup, emit, hooks)
    with clock.phase("pipeline"):
        engine = make_engine(
            setup,
            hooks,
            should_stop,
            built.get("evaluations"),
            built.get("noise_scale"),
            built.get("batch_schedule"),
        )
    return BuiltRun(hooks, setup, engine)


def train_run(
    run: RunSpec,
    emit: Emit,
    should_stop: Callable[[], bool],
    tf_device: str | None,
    nvml_index: int | None,
    device_name: str,
    data=None,
    startup: StartupClock | None = None,
    built: BuiltRun | None = None,
) -> str:
    """Train one run, emitting run_started, steps, epoch_ended and finally run_ended (also on failure);
    returns the run's status ("ok", "error", "oom", "diverged", "interrupted").

    `data`: the run's arrays if the child loaded them already (load_run_data); `startup`: the child's
    start-up clock, which times the model build and the pipeline here and goes into run_started; `built`:
    the run already built (build_run) and prepared ahead (core/training/ahead.py), whose emit and should_stop
    must be this call's."""
    clock = startup if startup is not None else StartupClock()
    hooks = built.hooks if built is not None else standard_hooks(run.index, emit, tf_device, nvml_index)
    end: dict[str, Any] = {"status": "ok", "message": ""}
    engine = None
    try:
        # Loading, building and copying the data are inside: their failures (a data file removed
        # mid-sweep, memory exhausted while copying) are this run's status, not a crash.
        if built is None:
            built = build_run(run, emit, should_stop, hooks, data, clock)
        setup, engine = built.setup, built.engine
        planned_epochs, planned_steps, bounds = _planned(run, setup)
        hooks.on_run_begin(_run_started_fields(run, setup, engine, device_name, planned_epochs, planned_steps, startup))
        faults.fail_if_injected(faults.FAIL_RUN_ENV, run.index)
        if setup.batch_plan is None:
            engine.train(planned_epochs, max_steps=planned_steps)
        else:
            epochs, max_steps, max_examples = bounds
            engine.train(epochs, max_steps=max_steps, max_examples=max_examples)
    except StopRequested:
        end.update(status="interrupted", message="stopped by the user; measurements so far are kept")
    except Diverged as e:
        end.update(status="diverged", message=str(e))
    except Exception as e:  # OOM and any other failure end this run only; the sweep goes on
        end.update(status=classify_failure(e), message=first_line(e))
        emit(log_event("error", traceback_text(e), run=run.index))
    end["total_time"] = engine.elapsed() if engine is not None else math.nan
    end["last_close_time_s"] = float(getattr(engine, "last_close_time", math.nan))  # the fit engine: not measured
    hooks.on_run_end(end)
    return end["status"]


def _planned(run: RunSpec, setup: RunSetup) -> tuple[int, int, tuple[int, int | None, int | None]]:
    """The run's planned epochs and steps, and the bounds its engine trains to (a batch schedule has its own)."""
    budget = run.sweep.budget
    planned_steps = budget.steps(setup.samples, run.batch_size)
    planned_epochs = budget.epochs(setup.samples, run.batch_size)
    bounds: tuple[int, int | None, int | None] = (planned_epochs, planned_steps, None)
    if setup.batch_plan is not None:  # the steps and epochs of the schedule (two_phase: before its switch)
        epochs_of_steps, _ = batch_rules.step_batches(
            setup.batch_plan, run.batch_size, setup.samples, budget.unit, budget.amount
        )
        planned_steps, planned_epochs = len(epochs_of_steps), epochs_of_steps[-1] + 1
        bounds = batch_rules.training_bounds(setup.batch_plan, setup.samples, budget.unit, budget.amount)
    return planned_epochs, planned_steps, bounds


def _run_started_fields(run, setup, engine, device_name, planned_epochs, planned_steps, startup) -> dict[str, Any]:
    """What run_started says about the run: its plan, device, model, execution and start-up."""
    budget = run.sweep.budget
    return {
        "run": run.index,
        "batch_size": run.batch_size,
        "seed": run.seed,
        "pid": os.getpid(),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "device": device_name,
        "steps_per_epoch": setup.steps_per_epoch,
        "epochs": planned_epochs,
        "planned_steps": planned_steps,
        "budget": f"{budget.amount} {budget.unit}",
        "target": run.sweep.target or "",
        "eval_every": run.sweep.eval_every or -1,
        "samples": setup.samples,
        "lr": run.lr if run.lr is not None else math.nan,
        "started": now_iso(),
        "rss_before_training_bytes": current_rss_bytes(),
        "task": setup.task,
        "targets": setup.targets,
        **engine.run_fields(),
        **flops_fields(setup.model),
        **accumulation_fields(run),
        **execution_fields(run, setup.model, setup.xla_choice),
        **replication_fields(run.sweep.replicas, run.batch_size),
        **(setup.schedule.plan.attrs() if setup.schedule is not None else {}),
        **(setup.batch_plan.attrs() if setup.batch_plan is not None else {}),
        **(startup.fields() if startup is not None else {}),
    }
