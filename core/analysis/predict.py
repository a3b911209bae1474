"""Predict, then verify: time to target at every batch size from one short profile, checked by a later sweep.

A profile (`batchlab profile`) trains a few hundred steps at two or three batch sizes, measuring the
gradient noise scale (noise_scale.py) and the steady wall time per step. McCandlish et al. (2018)
model the steps to a target as S(B) = Smin (1 + Bcrit / B) with Bcrit ~ B_simple; the step time is
t_step(B) = alpha + beta B (step_time.py). So the time to target is

    T(B) = S(B) t_step(B) = Smin (1 + Bcrit / B) (alpha + beta B),

smallest at B_opt = sqrt(Bcrit alpha / beta) (critical.optimal_batch). Smin is not known before a
run reaches the target, so T(B) is given relative to its minimum. B_simple grows as the loss falls,
so a short profile tends to predict a smaller Bcrit than a sweep to a late target finds.

A later sweep with a target verifies it (`batchlab report SWEEP --profile PROFILE`): its fastest
measured batch and its own fitted optimum against B_opt, in powers of two (the goal: within one).
The model assumes a learning rate tuned for each batch size: a profile (or a sweep) that trains every
batch at one fixed rate gets no predicted best batch, but what to run instead (lr_policy.py).
numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from batchlab.core.analysis.claims import PowersApart, Prediction, say
from batchlab.core.analysis.critical import optimal_batch
from batchlab.core.analysis.lr_policy import LrPolicy, lr_policy, sweep_lr_policy
from batchlab.core.analysis.noise_scale import noise_scale_series
from batchlab.core.analysis.step_time import StepTimeFit, fit_step_time

PROFILE_MODE = "profile"  # root attribute `mode` of a profile's run file
CANDIDATE_REACH = 4  # the predicted table spans powers of two from this factor below the smallest profiled batch
# Spec fields that change what is trained: a profile predicts for a sweep only when these agree. (Batch sizes,
# budget, target and measurement settings differ between a profile and its sweep by design.)
TASK_FIELDS = (
    "workload",
    "model_file",
    "data",
    "samples",
    "optimizer",
    "lr",
    "momentum",
    "nesterov",
    "weight_decay",
    "lr_from",
    "lr_rule",
    "lr_base_batch",
    "warmup",
    "warmup_unit",
    "lr_schedule",
    "batch_schedule",
    "accumulate",
    "mixed_precision",
    "scale",
    "shuffle",
    "device",
    "loop",
)


@dataclass(frozen=True)
class ProfilePrediction:
    """What a profile predicts: Bcrit (= B_simple), t_step(B), T(B) relative to its minimum, the best batch."""

    b_simple: float  # samples: median over the profile's runs of their final B_simple
    step_time: StepTimeFit  # s per step: alpha + beta B, from the runs' steady wall time per step
    batch_sizes: tuple[int, ...]  # powers of two the table covers
    relative_time: tuple[float, ...]  # T(B) / T(B_opt), same order
    best_batch: float  # samples: B_opt = sqrt(Bcrit alpha / beta); NaN when alpha or beta is not positive
    settings: dict = field(default_factory=dict)  # the profile's spec values of TASK_FIELDS
    lr_policy: LrPolicy | None = None  # the profile's learning-rate policy (None: from `settings`)

    @property
    def policy(self) -> LrPolicy:
        """The profile's learning-rate policy: whether its prediction's assumption can hold."""
        return self.lr_policy if self.lr_policy is not None else lr_policy(self.settings)

    def as_dict(self) -> dict:
        """Plain JSON values (NaN becomes None) for `batchlab report --json`."""

        def plain(value: float) -> float | None:
            return float(value) if math.isfinite(value) else None

        fit = self.step_time
        return {
            "b_simple": plain(self.b_simple),
            "step_time_alpha_s": plain(fit.alpha),
            "step_time_beta_s_per_sample": plain(fit.beta),
            "profiled_batch_sizes": list(fit.batch_sizes),
            "batch_sizes": list(self.batch_sizes),
            "relative_time": [plain(v) for v in self.relative_time],
            "best_batch": plain(self.best_batch),
            "best_power_of_two": self.best_power_of_two,
            "lr_policy": self.policy.kind,
            "applies": self.policy.tuned,  # False: one fixed rate, the best batch is not predicted for it
        }

    @property
    def best_power_of_two(self) -> int | None:
        """The power of two nearest B_opt (on a log scale); None when B_opt is not known."""
        if not (math.isfinite(self.best_batch) and self.best_batch > 0):
            return None
        return 1 << max(0, round(math.log2(self.best_batch)))


def _wall_per_step(run) -> float:
    """Steady wall time per step (s): the batch over the steady throughput (as core/analysis/analyse.py)."""
    rate = run.figures.samples_per_s
    return run.batch_size / rate if rate > 0 and math.isfinite(rate) else math.nan


def relative_time(batch_sizes, bcrit: float, alpha: float, beta: float) -> np.ndarray:
    """(1 + Bcrit / B)(alpha + beta B) for each B, divided by its value at B_opt; NaN unless Bcrit, alpha
    and beta are all positive (a step-time line that falls, or starts below 0, predicts no time)."""
    b = np.asarray(batch_sizes, dtype=np.float64)
    best = optimal_batch(bcrit, alpha, beta)
    if not math.isfinite(best):
        return np.full(len(b), np.nan)
    return (1 + bcrit / b) * (alpha + beta * b) / ((1 + bcrit / best) * (alpha + beta * best))


def predict_from_profile(sweep) -> ProfilePrediction | None:
    """The prediction of a profile's runs (a core.model.SweepData); None without a finite B_simple or with
    fewer than two batch sizes that report a steady step time."""
    finals = []
    for run in sweep.ordered_runs():
        series = noise_scale_series(run.noise_scale.as_dict())
        if series is not None and math.isfinite(series.final) and series.final > 0:
            finals.append(series.final)
    points = [(r.batch_size, _wall_per_step(r)) for r in sweep.ordered_runs() if r.batch_size > 0]
    points = [(b, t) for b, t in points if math.isfinite(t) and t > 0]
    if not finals or len({b for b, _ in points}) < 2:
        return None
    fit = fit_step_time(*zip(*points, strict=True))
    if fit is None:
        return None
    bcrit = float(np.median(finals))
    low = max(1, min(b for b, _ in points) // CANDIDATE_REACH)
    high = max(b for b, _ in points) * CANDIDATE_REACH
    sizes = tuple(1 << k for k in range(int(math.log2(low)), int(math.log2(high)) + 1))
    rel = relative_time(sizes, bcrit, fit.alpha, fit.beta)
    best = optimal_batch(bcrit, fit.alpha, fit.beta)
    settings = {name: sweep.spec.get(name) for name in TASK_FIELDS}
    return ProfilePrediction(bcrit, fit, sizes, tuple(float(v) for v in rel), best, settings, sweep_lr_policy(sweep))


def describe_prediction(p: ProfilePrediction) -> list[str]:
    """The prediction in words and a small table, for `batchlab profile` and `batchlab report`."""
    fit, policy = p.step_time, p.policy
    wall = (
        f"steady wall time per step t_step(B) = {fit.alpha * 1e3:.3g} ms + {fit.beta * 1e6:.3g} us x B (batch / "
        f"steady throughput at batch sizes {', '.join(map(str, fit.batch_sizes))}: a step's compute plus its input "
        "wait and the loop, what time to target pays; the step compute time line of the explanation leaves "
        "those out)"
    )
    if not policy.tuned:
        return [
            f"measured B_simple ~ {p.b_simple:,.0f} (the gradient noise scale at the profile's end)",
            wall,
            policy.refusal(
                "predicted critical batch and best batch for time to target", "a sweep with this profile's settings"
            ),
        ]
    lines = [
        f"predicted critical batch ~ {say(Prediction('critical batch', p.b_simple, policy.tuned))} (B_simple from "
        "the profile; a prediction, usually low: B_simple grows as training goes on; "
        f"{policy.assumption()})",
        wall,
    ]
    if p.best_power_of_two is not None:
        lines.append(
            f"predicted best batch for time to target: ~{p.best_batch:,.0f} (nearest power of two "
            f"{p.best_power_of_two:,}); T(B) = Smin (1 + Bcrit/B) t_step(B), relative to its minimum:"
        )
        lines.append("  batch  " + " ".join(f"{b:>7,}" for b in p.batch_sizes))
        lines.append("  T/Tmin " + " ".join(f"{t:>7.2f}" for t in p.relative_time))
    else:
        lines.append(
            "no best batch predicted: T(B) needs a step time alpha + beta x B with alpha > 0 and beta > 0 "
            "(profile larger batch sizes apart, or more steps, on a quiet machine)"
        )
    return lines


def powers_of_two_apart(a: float, b: float) -> float:
    """|log2(a / b)|: how many powers of two apart two batch sizes are; NaN unless both are positive."""
    if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
        return abs(math.log2(a / b))
    return math.nan


@dataclass(frozen=True)
class ProfileCheck:
    """A profile's prediction against a sweep to a target: best batch and Bcrit, predicted and found."""

    predicted_best: float  # samples: the profile's B_opt (NaN: it predicted none)
    predicted_bcrit: float  # samples: the profile's B_simple
    measured_best: int | None  # the sweep's fastest batch to the target (every run met it); None: none
    measured_off: float  # powers of two between predicted_best and measured_best (NaN: not comparable)
    fitted_best: float  # samples: the minimum of the sweep's own fitted T(B) (NaN: not fitted)
    fitted_off: float  # powers of two between predicted_best and fitted_best
    fitted_bcrit: float  # samples: the sweep's fitted Bcrit; NaN when the fit gives only a bound or none
    differences: dict = field(default_factory=dict)  # spec field -> [profile's value, sweep's value] (TASK_FIELDS)
    has_target: bool = True  # False: the sweep had no target, so nothing to check against
    lr_policy: LrPolicy | None = None  # the sweep's learning-rate policy (None: not known)
    profile_tuned: bool = True  # False: the profile trained at one fixed rate, so it printed no best batch

    @property
    def within_one(self) -> bool | None:
        """Whether the predicted best batch was within one power of two of the measured fastest (the goal)."""
        return None if math.isnan(self.measured_off) else bool(self.measured_off <= 1)


def task_differences(profile: dict, spec: dict) -> dict:
    """The TASK_FIELDS on which a profile's settings and a sweep's spec disagree: field -> [profile, sweep].
    The base batch of a rate rule counts only where both scale the rate by the same rule."""
    out = {}
    for name in TASK_FIELDS:
        if name not in profile:  # a prediction made without its settings (e.g. built by hand): nothing to compare
            continue
        mine, theirs = profile.get(name), spec.get(name)
        rules = (profile.get("lr_rule"), spec.get("lr_rule"))
        if name == "lr_base_batch" and (rules[0] != rules[1] or rules[0] in ("constant", None)):
            continue
        if name == "lr_from" and mine and theirs:
            continue  # both took each batch's rate from a range test: the same policy, whatever the files' names
        if mine != theirs:
            out[name] = [mine, theirs]
    return out


def compare_with_sweep(p: ProfilePrediction, analysis, spec: dict | None = None) -> ProfileCheck:
    """How far a profile's prediction was from a sweep's analysis (a core.analysis.analyse.Analysis); `spec`,
    the sweep's spec, to say where the profile trained something else."""
    measured = analysis.best_measured
    fit = analysis.critical
    return ProfileCheck(
        predicted_best=p.best_batch,
        predicted_bcrit=p.b_simple,
        measured_best=measured,
        measured_off=powers_of_two_apart(p.best_batch, measured) if measured is not None else math.nan,
        fitted_best=analysis.best_predicted,
        fitted_off=powers_of_two_apart(p.best_batch, analysis.best_predicted),
        fitted_bcrit=fit.bcrit.value if fit is not None and not fit.bcrit.bounded else math.nan,
        differences=task_differences(p.settings, spec) if spec is not None else {},
        has_target=bool(analysis.target),
        profile_tuned=p.policy.tuned,
        lr_policy=getattr(analysis, "lr_policy", None),
    )


def describe_check(check: ProfileCheck) -> str:
    """The check in words, with its numbers: the paragraph of the recommendation when a profile is given."""
    return _check_text(check) + _differences_text(check.differences)


def _differences_text(differences: dict) -> str:
    if not differences:
        return ""

    def shown(value) -> str:
        return "the default" if value is None else str(value)

    parts = [f"{name} {shown(mine)} there, {shown(theirs)} here" for name, (mine, theirs) in differences.items()]
    return f" The profile trained something else than this sweep ({'; '.join(parts)}), so this compares two tasks."


def _check_text(check: ProfileCheck) -> str:
    head = f"Predicted before this sweep by the profile (B_simple ~ {check.predicted_bcrit:,.0f} as Bcrit)"
    if not (math.isfinite(check.predicted_best) and check.predicted_best > 0):
        return head + ": no best batch (its step-time line had no positive fixed cost and slope), so nothing to check."
    head += f": best batch ~{check.predicted_best:,.0f}"
    neutral = (
        f"The profile's B_simple ~ {check.predicted_bcrit:,.0f} and its step time give "
        f"sqrt(B_simple x alpha/beta) ~{check.predicted_best:,.0f} as the best batch"
    )
    if not check.profile_tuned:  # the profile itself said it predicts nothing at its fixed rate
        head = neutral + " (a prediction only for a sweep whose rate is tuned per batch size)"
    if not check.has_target:
        return head + (
            "; this sweep has no target, so it can neither confirm nor refute it (a sweep with --target "
            "measures the time to target per batch size)."
        )
    policy = check.lr_policy
    if policy is not None and not policy.tuned:
        seen = (
            f" (for the record: the fastest to the target here was batch {check.measured_best:,}, "
            f"{check.measured_off:.1f} powers of two from it)"
            if check.measured_best is not None and math.isfinite(check.measured_off)
            else ""
        )
        return f"{neutral}, but as a prediction {policy.assumption()}{seen}; {policy.instead()}."
    if check.measured_best is None:
        return head + (
            "; no batch size of this sweep met its target in every run, so it can neither confirm nor refute it."
        )
    apart = say(PowersApart(check.measured_off, bool(check.within_one)))
    text = f"{head}; the fastest to the target here was batch {check.measured_best:,}: {apart}"
    if math.isfinite(check.fitted_off):
        text += (
            f". This sweep's own fit puts the best at ~{check.fitted_best:,.0f}, "
            f"{check.fitted_off:.1f} powers of two from the prediction"
        )
    if math.isfinite(check.fitted_bcrit):
        text += (
            f"; its fitted Bcrit is {check.fitted_bcrit:,.0f}, "
            f"{check.fitted_bcrit / check.predicted_bcrit:.2g}x the profile's B_simple"
        )
    return text + "."


def check_prediction(p: ProfilePrediction, analysis) -> str:
    """How far a profile's best batch was from a sweep's (a core.analysis.analyse.Analysis): its fastest
    measured batch to the target and, when its fit has one, its fitted optimum."""
    return describe_check(compare_with_sweep(p, analysis))
