"""Learning-rate rules and schedules as pure math: the rate of every step of a run.

Free of TensorFlow and Qt, so the window can preview a schedule, tests have known answers, and the
trainer records each step's rate (the `lr` step column) without reading the optimizer on the device.
core/training/schedules.py builds the Keras schedule that applies exactly these numbers.

A run's rate, for batch size B (docs/learning-rates.md):

1. The rule scales the base rate lr0 (the spec's `lr`, the rate at batch size B0 = `lr_base_batch`):
   constant (BLR): lr0; linear (LSR, Goyal et al. 2017): lr0 * B/B0; sqrt (SRSR): lr0 * sqrt(B/B0).
   That is the run's peak rate.
2. Warmup (Goyal et al.): over the first W steps the rate rises linearly from lr0 to the peak,
   rate(s) = lr0 + (peak - lr0) * s / W, and is the peak from step W on (Keras's CosineDecay warmup
   formula). Where the peak is not above lr0 (the constant rule, or B <= B0) the rate starts at the peak.
3. The schedule after warmup: constant; step (peak * factor ** floor(s / N), N = lr_decay_every epochs
   in steps, counted from step 0 like Keras's ExponentialDecay with staircase=True); cosine (Keras's
   CosineDecay: from the peak at step W to COSINE_ALPHA * peak at the last step of the budget);
   plateau (the peak times a scale that `Plateau` lowers by `factor` when the validation loss has not
   improved for `patience` epochs, as Keras's ReduceLROnPlateau does).

Steps count from 0 over the whole run; the optimizer applies rate(s) in step s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from batchlab.core import batch_rules
from batchlab.core.plateau import PLATEAU_MIN_DELTA, Plateau  # noqa: F401 (the rate's plateau, read here)

LR_RULES = ("constant", "linear", "sqrt")
LR_RULE_ALIASES = {"blr": "constant", "lsr": "linear", "srsr": "sqrt"}  # the names used by Golmant et al.
LR_SCHEDULES = ("constant", "step", "cosine", "plateau")
WARMUP_UNITS = ("epochs", "steps")
COSINE_ALPHA = 0.0  # cosine decay ends at this fraction of the peak rate


def scaled_lr(lr0: float, rule: str, batch_size: int, base_batch: int) -> float:
    """The rate a rule gives batch size `batch_size` from `lr0` at `base_batch` (the run's peak rate)."""
    if rule == "constant":
        return lr0
    ratio = batch_size / base_batch
    if rule == "linear":
        return lr0 * ratio
    if rule == "sqrt":
        return lr0 * math.sqrt(ratio)
    raise ValueError(f"unknown learning-rate rule {rule!r}")


def warmup_steps(warmup: float, unit: str, steps_per_epoch: int) -> int:
    """Warmup length in steps: `warmup` steps, or `warmup` epochs rounded to whole steps."""
    if unit == "steps":
        return int(warmup)
    return int(round(warmup * steps_per_epoch))


@dataclass(frozen=True)
class LrPlan:
    """One run's learning rate per step: everything needed for `rate(step)`; stored in run_started."""

    lr0: float  # the base rate, at lr_base_batch
    peak: float  # the rule's rate for this batch size
    warmup_steps: int
    schedule: str
    total_steps: int  # the run's budget in steps (cosine decays over it)
    decay_factor: float  # step decay and plateau: the rate is multiplied by this
    decay_every_steps: int  # step decay: every this many steps
    patience: int = 1  # plateau: epochs without improvement before the rate is lowered
    rule: str = "constant"  # for the record: how peak came from lr0
    base_batch: int = 0  # for the record: B0

    @property
    def warmup_start(self) -> float:
        """Where warmup begins: lr0, or the peak itself when the peak is not above lr0."""
        return min(self.lr0, self.peak)

    def rate(self, step: int, scale: float = 1.0) -> float:
        """The learning rate applied in `step` (from 0); `scale` is the plateau factor in force."""
        w = self.warmup_steps
        if step < w:
            start = self.warmup_start
            return scale * (start + (self.peak - start) * step / w)
        if self.schedule == "step":
            return scale * self.peak * self.decay_factor ** (step // self.decay_every_steps)
        if self.schedule == "cosine":
            span = max(1, self.total_steps - w)
            done = min(step - w, span) / span
            return scale * self.peak * ((1 - COSINE_ALPHA) * 0.5 * (1 + math.cos(math.pi * done)) + COSINE_ALPHA)
        return scale * self.peak  # constant and plateau (whose changes are the scale)

    def rates(self, steps: int) -> list[float]:
        """rate(s) for s = 0 .. steps-1 at scale 1 (a preview; plateau reductions depend on the run).

        The formulas of `rate` on arrays: a 100k-step budget previews in milliseconds, not seconds."""
        import numpy as np  # only here: rate() stays plain Python for the trainer's per-step use

        s = np.arange(int(steps), dtype=float)
        w = self.warmup_steps
        if self.schedule == "step":
            out = self.peak * self.decay_factor ** np.floor(s / self.decay_every_steps)
        elif self.schedule == "cosine":
            span = max(1, self.total_steps - w)
            done = np.minimum(s - w, span) / span
            out = self.peak * ((1 - COSINE_ALPHA) * 0.5 * (1 + np.cos(np.pi * done)) + COSINE_ALPHA)
        else:
            out = np.full(len(s), float(self.peak))
        if w > 0:
            start = self.warmup_start
            ramp = s < w
            out[ramp] = start + (self.peak - start) * s[ramp] / w
        return out.tolist()

    def attrs(self) -> dict[str, Any]:
        """The plan as run_started fields (prefixed lr_, so they read as one group in the run file)."""
        return {f"lr_{k}" if not k.startswith("lr") else k: v for k, v in asdict(self).items()}


def base_batch_size(lr_base_batch: int | None, batch_sizes: tuple[int, ...]) -> int:
    """B0: the spec's lr_base_batch, or (blank) the sweep's smallest batch size."""
    return int(lr_base_batch) if lr_base_batch else int(min(batch_sizes))


def plan_for(
    spec: Any, batch_size: int, steps_per_epoch: int, total_steps: int, lr0: float | None = None
) -> LrPlan | None:
    """The plan of one run of `spec` (a SweepSpec), or None when the run has no learning rate set
    (blank lr: the optimizer's own default, or the model file's optimizer). `lr0` replaces spec.lr
    (a run's lr-find suggestion, RunSpec.lr)."""
    lr0 = spec.lr if lr0 is None else lr0
    if lr0 is None:
        return None
    b0 = base_batch_size(spec.lr_base_batch, spec.batch_sizes)
    return LrPlan(
        lr0=float(lr0),
        peak=scaled_lr(float(lr0), spec.lr_rule, batch_size, b0),
        warmup_steps=warmup_steps(spec.warmup, spec.warmup_unit, steps_per_epoch),
        schedule=spec.lr_schedule,
        total_steps=int(total_steps),
        decay_factor=float(spec.lr_decay_factor),
        decay_every_steps=max(1, int(spec.lr_decay_every) * steps_per_epoch),
        patience=int(spec.lr_patience),
        rule=spec.lr_rule,
        base_batch=b0,
    )


def sweep_preview(spec: Any, samples: int | None = None) -> dict[int, list[float]]:
    """The rate of every step of each batch size's run, at plateau scale 1 (what a plateau run starts
    from), for a preview before Run; `samples` defaults to the spec's. Empty lists where the run
    sets no rate (the optimizer's own default). With a batch schedule (core/batch_rules.py) the steps
    are those of the schedule and grow's rate decay past max_batch is in the rates; two_phase is shown
    before its switch (when it comes depends on the run)."""
    return {b: rates for b, (rates, _batches) in _preview(spec, samples).items()}


def sweep_preview_batches(spec: Any, samples: int | None = None) -> dict[int, tuple[list[float], list[int]]]:
    """(rates, batches) of every step of each run, keyed by the run's starting batch size: the rates as
    `sweep_preview` gives them (empty where the run sets no rate) and the real batch of every step (an
    epoch's last batch may be short), the same steps as the rates, for a preview plot of both."""
    return _preview(spec, samples)


def _preview(spec: Any, samples: int | None) -> dict[int, tuple[list[float], list[int]]]:
    n = int(samples if samples is not None else spec.samples)
    # with lr_from each batch size's rate from the lr-find file, read once by the spec (core/spec_checks.py)
    rates = spec.run_rates() if spec.lr_from else {}
    out = {}
    for b in spec.batch_sizes:
        steps_per_epoch = math.ceil(n / b)
        bplan = batch_rules.plan_for(spec, b, n)
        epochs, batches = batch_rules.step_batches(bplan, b, n, spec.budget.unit, spec.budget.amount)
        plan = plan_for(spec, b, steps_per_epoch, len(batches), lr0=rates.get(b))
        if plan is None:
            out[b] = ([], batches)
        elif bplan is None:
            out[b] = (plan.rates(len(batches)), batches)
        else:
            import numpy as np  # as in LrPlan.rates: arrays keep a long budget's preview fast

            scales = np.array([bplan.rate_scale(e) for e in range(epochs[-1] + 1)])
            out[b] = ((np.asarray(plan.rates(len(batches))) * scales[np.asarray(epochs)]).tolist(), batches)
    return out
