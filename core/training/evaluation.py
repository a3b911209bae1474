"""Evaluation points of a run: train to a target (Shallue's rule) and evaluations every N steps.

A hook (the Keras-callback shape, hooks.py) that counts the steps and examples the engine
reports and averages their losses; the engine (trainer.InstrumentedLoop) decides when to
evaluate, runs the validation pass off the training clock, and hands the result to `record`,
which emits one ``evaluation`` event (core/events.py EVAL_COLUMNS) and says whether the run
should stop because it met its target. No TensorFlow here: it is tested on synthetic rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from batchlab.core.events import EVALUATION, log_event, make_event
from batchlab.core.targets import Target
from batchlab.core.training.hooks import Hook

Emit = Callable[[dict[str, Any]], None]


class Evaluations(Hook):
    """Counts steps and examples, averages the losses since the last evaluation, and records evaluations.

    The train loss of an evaluation is the sample-weighted mean of the mini-batch losses (each
    measured before its update) of the steps since the previous evaluation: a cheap, smoothed
    training loss, not a pass over the training set (core/targets.py).
    """

    def __init__(
        self,
        run_index: int,
        emit: Emit,
        samples: int,
        target: Target | None = None,
        eval_every: int | None = None,
        keep_training: bool = False,
    ):
        self.run = run_index
        self.emit = emit
        self.samples = samples
        self.target = target
        self.eval_every = eval_every
        self.keep_training = keep_training
        self.steps = 0  # optimizer steps reported so far
        self.examples = 0
        self.last_steps = -1  # steps at the last evaluation
        self.reached_steps: int | None = None  # steps at the first evaluation that met the target
        self._loss_sum = 0.0
        self._loss_samples = 0

    def on_train_batch_end(self, step: int, logs: Mapping[str, Any]) -> None:
        b = int(logs["batch_size"])
        self.steps = int(step) + 1
        self.examples += b
        self._loss_sum += float(logs["loss"]) * b
        self._loss_samples += b

    def due(self, steps_done: int) -> bool:
        """True when `steps_done` (steps taken, possibly not all reported yet) is an evaluation point."""
        return bool(self.eval_every) and steps_done % self.eval_every == 0 and steps_done != self.last_steps

    def record(
        self,
        wall_time: float,
        train_wall_time: float,
        eval_time: float,
        val_logs: Mapping[str, Any],
        at_epoch_end: bool,
    ) -> bool:
        """Emit one evaluation row; True when it met the target for the first time and the run should stop."""
        val_accuracy = float(val_logs.get("val_accuracy", math.nan))
        row = {
            "steps": self.steps,
            "examples": self.examples,
            "epochs": self.examples / self.samples if self.samples else math.nan,
            "wall_time": wall_time,
            "train_wall_time": train_wall_time,
            "eval_time": eval_time,
            "at_epoch_end": int(at_epoch_end),
            "train_loss": self._loss_sum / self._loss_samples if self._loss_samples else math.nan,
            "val_loss": float(val_logs.get("val_loss", math.nan)),
            "val_accuracy": val_accuracy,
            "val_error": 1.0 - val_accuracy,
        }
        # the model's other compiled metrics from the same validation pass (val_mae, ...): extra evals/ columns
        metrics = {k: float(v) for k, v in (val_logs.get("metrics") or {}).items() if k not in row}
        self.emit(make_event(EVALUATION, run=self.run, **row, **({"metrics": metrics} if metrics else {})))
        self.last_steps = self.steps
        self._loss_sum, self._loss_samples = 0.0, 0
        if (
            self.target is None
            or self.reached_steps is not None
            or not self.target.met({**metrics, **row}.get(self.target.metric, math.nan))
        ):
            return False
        self.reached_steps = self.steps
        then = "training on to the budget" if self.keep_training else "the run stops here"
        self.emit(
            log_event(
                "info",
                f"target {self.target.describe()} met at step {self.steps} "
                f"({row['epochs']:.3g} epochs, {train_wall_time:.3g} s of training); {then}",
                run=self.run,
            )
        )
        return not self.keep_training

    def on_run_end(self, logs: dict[str, Any]) -> None:
        if self.target is not None and self.reached_steps is None and logs.get("status") == "ok":
            self.emit(
                log_event(
                    "info",
                    f"target {self.target.describe()} not reached within the budget ({self.steps} steps)",
                    run=self.run,
                )
            )
