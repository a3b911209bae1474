"""Batch-size schedules as pure math: the batch (and the rate scale) of every epoch and step of a run.

Free of TensorFlow and Qt, like core/lr_rules.py: the window previews a schedule, tests have known
answers, and the trainer (core/training/batch_schedule.py) asks it which batch an epoch trains at.
docs/learning-rates.md (*Batch-size schedules*) describes what a user sets.

- ``constant``: the run's batch size throughout (every run before batch schedules).
- ``grow`` (Smith et al. 2017, "Don't decay the learning rate, increase the batch size"): every
  ``growth_every`` epochs the batch is multiplied by ``growth_factor`` where a step schedule would have
  divided the rate by it. The batch stops at ``max_batch``; from there the *rate* takes the rest of
  the factor (Smith's rule), so the ratio rate / batch (the scale of the gradient noise) follows a
  step schedule exactly: at the k-th change point the raw batch is start x factor^k; the batch is
  min(max_batch, round(raw)) and the rate is multiplied by max_batch / raw once raw exceeds max_batch.
- ``two_phase`` (a practitioner's recipe): the run's batch until the validation loss stalls, then
  ``switch_to`` once. "Stalls" is reduce-on-plateau's test (core/plateau.Plateau): ``patience``
  evaluations in a row not below the best by more than PLATEAU_MIN_DELTA, counting every epoch
  end's validation and, with eval_every, every evaluation point; the larger batch starts with the
  next epoch.

Batches change only at epoch boundaries: an epoch is one pass over the data at one batch size
(its last batch may be short). Epochs and steps count from 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from batchlab.core.plateau import PLATEAU_MIN_DELTA, Plateau

BATCH_SCHEDULES = ("constant", "grow", "two_phase")
BATCH_SCHEDULE_ALIASES = {"two-phase": "two_phase", "twophase": "two_phase", "smith": "grow"}


@dataclass(frozen=True)
class BatchPlan:
    """One run's batch schedule: everything `batch(epoch)` needs; its attrs() go into run_started."""

    schedule: str  # one of BATCH_SCHEDULES
    start: int  # the run's own batch size (from the sweep's batch list)
    growth_factor: float = 2.0  # grow: the batch is multiplied by this at every change point
    growth_every: int = 2  # grow: epochs between change points
    max_batch: int = 0  # grow: the largest batch; past it the rate decays instead
    switch_to: int = 0  # two_phase: the batch once the validation loss stalled
    patience: int = 2  # two_phase: evaluations without a better validation loss before the switch
    min_delta: float = PLATEAU_MIN_DELTA  # two_phase: a loss must fall by more than this to count as better

    def raw_batch(self, epoch: int) -> float:
        """grow: start x factor^k, k = change points passed by `epoch` (uncapped, unrounded)."""
        return self.start * self.growth_factor ** (epoch // self.growth_every)

    def batch(self, epoch: int, switched_at: int | None = None) -> int:
        """The batch size epoch `epoch` trains at; `switched_at`: two_phase's first epoch at the larger batch."""
        if self.schedule == "grow":
            return min(self.max_batch, round(self.raw_batch(epoch)))
        if self.schedule == "two_phase" and switched_at is not None and epoch >= switched_at:
            return self.switch_to
        return self.start

    def rate_scale(self, epoch: int) -> float:
        """What the rate is multiplied by in `epoch`: 1 until grow's batch reached max_batch, then max_batch / raw."""
        if self.schedule != "grow":
            return 1.0
        raw = self.raw_batch(epoch)
        return 1.0 if raw <= self.max_batch else self.max_batch / raw

    def attrs(self) -> dict[str, Any]:
        """The plan as run_started fields, prefixed batch_ so they read as one group in the run file."""
        d = asdict(self)
        d.pop("start")  # the run's batch_size attribute
        return {k if k.startswith("batch") or k == "max_batch" else f"batch_{k}": v for k, v in d.items()}


def plan_for(spec: Any, batch_size: int, samples: int) -> BatchPlan | None:
    """The batch plan of the run of `spec` (a SweepSpec) at `batch_size`; None for the constant schedule."""
    schedule = spec.batch_schedule
    if schedule == "constant":
        return None
    return BatchPlan(
        schedule=schedule,
        start=int(batch_size),
        growth_factor=float(spec.batch_growth_factor),
        growth_every=int(spec.batch_growth_every),
        max_batch=int(spec.max_batch or samples),
        switch_to=int(spec.batch_switch_to or 0),
        patience=int(spec.batch_patience),
    )


def step_batches(
    plan: BatchPlan | None,
    batch_size: int,
    samples: int,
    unit: str,
    amount: int,
    switched_at: int | None = None,
) -> tuple[list[int], list[int]]:
    """(epoch, batch) of every step a budget of `amount` `unit` (epochs, steps or examples) trains, as two
    lists; a batch is the real one (an epoch's last may be short). An examples budget ends after the step
    that reaches `amount` real examples. `plan` None: `batch_size` throughout."""
    epochs: list[int] = []
    batches: list[int] = []
    seen = 0
    epoch = 0
    while True:
        b = plan.batch(epoch, switched_at) if plan is not None else batch_size
        full, rest = divmod(samples, b)
        sizes = [b] * full + ([rest] if rest else [])
        if unit == "steps":
            sizes = sizes[: amount - len(batches)]
        elif unit == "examples" and amount - seen <= samples:
            sizes = sizes[: math.ceil((amount - seen) / b)]  # the step that reaches `amount` is the last
        epochs += [epoch] * len(sizes)
        batches += sizes
        seen += sum(sizes)
        if (unit == "steps" and len(batches) >= amount) or (unit == "examples" and seen >= amount):
            return epochs, batches
        epoch += 1
        if unit == "epochs" and epoch >= amount:
            return epochs, batches


def training_bounds(plan: BatchPlan, samples: int, unit: str, amount: int) -> tuple[int, int | None, int | None]:
    """(epochs to start at most, max steps, max examples) for the trainer's loop under a batch plan.

    grow is known in advance; two_phase's switch is not, so the epochs are an upper bound and the
    loop ends at the budget: every epoch has at least one step and sees all `samples` examples."""
    if unit == "epochs":
        return amount, None, None
    if unit == "steps":
        if plan.schedule == "grow":
            return step_batches(plan, plan.start, samples, unit, amount)[0][-1] + 1, amount, None
        return amount, amount, None
    return math.ceil(amount / samples), None, amount


def should_switch(val_losses: Sequence[float], patience: int, min_delta: float = PLATEAU_MIN_DELTA) -> int | None:
    """two_phase on a sequence of validation losses: the index of the validation after which the batch
    switches (the `patience`-th in a row not better than the best by more than `min_delta`; NaN is not
    better), or None if the loss never stalled. The same test as reduce-on-plateau (core/plateau.Plateau)."""
    plateau = Plateau(0.5, patience, min_delta)
    for i, loss in enumerate(val_losses):
        if plateau.update(float(loss)) != 1.0:
            return i
    return None


def batch_changes(
    step: Sequence[int], epoch: Sequence[int], batch_size: Sequence[int]
) -> list[tuple[int, int, int, int]]:
    """Where a run's batch changed, from its step rows: (step, epoch, old batch, new batch) for every epoch
    whose first step's batch differs from the previous epoch's first step's (an epoch's last, short batch
    is not a change). Rows in step order."""
    out = []
    previous = None
    last_epoch = None
    for s, e, b in zip(step, epoch, batch_size, strict=True):
        if e == last_epoch:
            continue
        last_epoch = e
        if previous is not None and int(b) != previous:
            out.append((int(s), int(e), previous, int(b)))
        previous = int(b)
    return out


def describe_changes(changes: Sequence[tuple[int, int, int, int]]) -> str:
    """'16 -> 32 at step 64 (epoch 2), 32 -> 64 at step 96 (epoch 4)', or 'unchanged'."""
    if not changes:
        return "unchanged"
    return ", ".join(f"{old} -> {new} at step {s} (epoch {e})" for s, e, old, new in changes)
