"""The training hooks of the settings groups (core/settings/: each group's HookFactory names one of these by
"module:function"), and the one place they join a run's hook list, each at its priority (hooks.PRIORITY)."""

from __future__ import annotations

from typing import Any

import keras
from batchlab.core import settings as settings_registry
from batchlab.core.training.batch_schedule import BatchSchedule
from batchlab.core.training.evaluation import Evaluations
from batchlab.core.training.hooks import Emit, HookList, LearningRateLog


def learning_rate_hook(setup: Any) -> LearningRateLog:
    """The hook that records each step's rate: from the plan, or the optimizer's one fixed rate."""
    schedule = setup.schedule
    if schedule is not None:
        return LearningRateLog(schedule.plan, set_scale=schedule.set_scale)
    optimizer = setup.model.optimizer
    rate = getattr(optimizer, "_learning_rate", None)
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return LearningRateLog()  # the model file's own schedule: not known without reading the device
    return LearningRateLog(constant=float(optimizer.learning_rate))  # read once, before training


def learning_rate_hook_for(setup: Any, emit: Emit, built: dict[str, Any]) -> LearningRateLog:
    """The learning-rate group's hook (core/settings/learning_rate.py): every run records its rates."""
    return learning_rate_hook(setup)


def batch_schedule_hook_for(setup: Any, emit: Emit, built: dict[str, Any]) -> BatchSchedule | None:
    """The batch-schedule group's hook: each epoch's batch, scaling the rates hook once grow reaches its cap."""
    if setup.batch_plan is None:
        return None
    return BatchSchedule(setup.batch_plan, setup.run.index, emit, built.get("learning_rate"))


def evaluations_hook_for(setup: Any, emit: Emit, built: dict[str, Any]) -> Evaluations | None:
    """The budget group's hook: evaluation points when the spec asks for them (a target or eval_every)."""
    spec = setup.run.sweep
    if not spec.evaluates:
        return None
    return Evaluations(setup.run.index, emit, setup.samples, spec.target_spec, spec.eval_every, spec.keep_training)


def add_settings_hooks(setup: Any, emit: Emit, hooks: HookList) -> dict[str, Any]:
    """Every settings group's hooks this run needs (core.settings.hook_factories, by priority), added to
    `hooks` at their priority; returns them by name (the engine takes the evaluations, noise and batch ones)."""
    built: dict[str, Any] = {}
    for factory in settings_registry.hook_factories():
        hook = factory.factory()(setup, emit, built)
        if hook is not None:
            built[factory.name] = hooks.add(hook, factory.name, factory.priority)
    return built
