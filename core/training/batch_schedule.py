"""The batch-size schedule of a run as a hook: which batch each epoch trains at (core/batch_rules.py).

The engine (trainer.InstrumentedLoop) asks `batch_for_epoch` before every epoch and rebatches its
input pipeline when the answer changes. This hook decides two_phase's switch from the validation
loss of every evaluation (epoch ends, and evaluation points inside an epoch with eval_every); for
grow it hands the rate's decay past max_batch to the rate hook. Every change is said in the run's
log. No TensorFlow here: it is tested on synthetic rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from batchlab.core.batch_rules import BatchPlan
from batchlab.core.events import log_event
from batchlab.core.lr_rules import Plateau
from batchlab.core.training.hooks import Hook, LearningRateLog

Emit = Callable[[dict[str, Any]], None]


class BatchSchedule(Hook):
    """Batch of each epoch from a BatchPlan; two_phase's plateau test on the epoch-end validation losses."""

    def __init__(self, plan: BatchPlan, run_index: int, emit: Emit, rates: LearningRateLog | None = None):
        self.plan = plan
        self.run = run_index
        self.emit = emit
        self.rates = rates
        self.current = plan.start
        self.rate_scale = 1.0
        self.switched_at: int | None = None  # two_phase: the first epoch at the larger batch
        self.epoch = 0  # the epoch training now
        self.plateau = Plateau(0.5, plan.patience, plan.min_delta) if plan.schedule == "two_phase" else None

    def batch_for_epoch(self, epoch: int, step: int) -> int:
        """The batch epoch `epoch` trains at (its first step is `step`); says in the log where it changes."""
        self.epoch = epoch
        batch = self.plan.batch(epoch, self.switched_at)
        if batch != self.current:
            self.emit(
                log_event(
                    "info",
                    f"batch size {self.current} -> {batch} from step {step} (epoch {epoch}, {self.plan.schedule})",
                    run=self.run,
                )
            )
            self.current = batch
        scale = self.plan.rate_scale(epoch)
        if scale != self.rate_scale:
            self.emit(
                log_event(
                    "info",
                    f"batch at its maximum {self.plan.max_batch}: the rate is multiplied by {scale:.4g} "
                    f"of its planned value from step {step} (epoch {epoch})",
                    run=self.run,
                )
            )
            self.rate_scale = scale
            if self.rates is not None:
                self.rates.set_rate_scale(scale)
        return batch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        self.observe(float(logs.get("val_loss", math.nan)))

    def observe(self, val_loss: float) -> None:
        """One evaluation's validation loss (an epoch end's, or an evaluation point's inside the epoch):
        two_phase switches from the next epoch once `patience` of them in a row were not better."""
        if self.plateau is None or self.switched_at is not None:
            return
        if self.plateau.update(val_loss) != 1.0:
            self.switched_at = self.epoch + 1
