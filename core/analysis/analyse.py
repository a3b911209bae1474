"""One entry point for a sweep's analysis: `analyse(sweep) -> Analysis`. numpy only.

The window's Analysis tab, `batchlab report` and `batchlab report --json` all take their numbers
from here, so a number is computed in one place. What goes in (docs/analysis.md has the formulas):

- per batch size (seeds aggregated by core/aggregate.py: mean and min-max): steps, examples and
  time to target, wall time per step, steady epoch time, peak memory, loss noise, generalization
  gap, the learning rate the runs used, the regime;
- the McCandlish fit of steps to target (critical.py) with its bootstrap interval, or a bound;
- t_step(B) = alpha + beta*B fitted to each run's steady wall time per step (batch size / steady
  throughput: input waits and the loop count, tracing does not), so T(B) = S(B) t_step(B) is
  predicted between and beyond the measured batch sizes, and its minimum (plus the runs' median
  one-time tracing cost, which time to target includes and which does not move the minimum);
- regimes as spans a plot can shade (regimes.py): from the fit when Bcrit is a value, else between
  measured batch sizes;
- memory: the memory line (memory_fit.py), the device limit it implies, runs out of memory;
- the gradient noise scale (B_simple and the Bcrit it predicts) of the runs that measured it;
- given a profile's prediction (predict.py, `batchlab report --profile`), how far it was off;
- time, steps and examples to a loss every run reached, and the loss at equal time and examples
  (loss_level.py), with or without a target;
- the sweep's learning-rate policy (lr_policy.py): with one fixed rate for every batch size the minimum
  of T(B) is not predicted (NaN, and no T(B) curve), since its model assumes a rate tuned per batch size;
- the recommendation in words (advice.py; without a target no_target_advice.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

import numpy as np
from batchlab.core.aggregate import Spread, aggregate_by_batch, spread
from batchlab.core.analysis.critical import CriticalFit, fit_critical, optimal_batch
from batchlab.core.analysis.loss_level import LossLevel, loss_level
from batchlab.core.analysis.loss_noise import generalization_gap, loss_noise
from batchlab.core.analysis.lr_policy import LrPolicy, sweep_lr_policy
from batchlab.core.analysis.memory_fit import MemoryFit, sweep_memory_fit
from batchlab.core.analysis.noise_scale import noise_scale_series
from batchlab.core.analysis.predict import ProfileCheck, ProfilePrediction, compare_with_sweep
from batchlab.core.analysis.regimes import Span, batch_regimes, fit_spans, measured_spans
from batchlab.core.analysis.step_time import StepTimeFit, fit_step_time
from batchlab.core.model import RunData, SweepData

PREDICTION_POINTS = 97  # log-spaced batch sizes of the predicted curves
PREDICTION_REACH = 4.0  # the curves reach this factor below the smallest and above the largest batch measured
FIGURES = (
    "steps_to_target",
    "examples_to_target",
    "time_to_target",
    "epoch_time",
    "samples_per_s",
    "steady_peak_bytes",
    "peak_memory_bytes",
)


@dataclass(frozen=True)
class BatchSummary:
    """One batch size: its runs' figures as mean and min-max over the seeds (core/aggregate.py)."""

    batch_size: int
    runs: int
    ok: int
    reached: int  # ok runs that met the target; -1 when the runs had no target
    steps_to_target: Spread
    examples_to_target: Spread
    time_to_target: Spread  # s
    step_wall_time: Spread  # s per step in steady state (batch / steady throughput)
    epoch_time: Spread  # s, steady epochs
    peak_bytes: Spread  # steady peak (or the all-epoch peak for one-epoch runs)
    loss_noise: Spread  # std of step-to-step loss changes, first 1,000 steps
    gap: Spread  # val_loss - train_loss
    gap_at: str  # "target", "end", or "" unknown
    lr: float  # the peak learning rate its runs used (median; NaN: the optimizer's own default)
    regime: str | None  # on the fitted curve, for batch sizes that met the target; None otherwise


@dataclass(frozen=True)
class Prediction:
    """The fitted curves on a log-spaced batch grid: S(B), E(B), t_step(B) and T(B) = S t_step."""

    batch_sizes: tuple[float, ...]
    steps: tuple[float, ...]
    steps_low: tuple[float, ...]  # the bootstrap band of S(B) (critical.CONFIDENCE)
    steps_high: tuple[float, ...]
    examples: tuple[float, ...]  # E(B) = B S(B); its band is B times the steps band
    step_time: tuple[float, ...]  # s; empty without a step-time fit
    time: tuple[float, ...]  # s; empty without both fits
    fixed_time: float = 0.0  # s added to every T(B): the runs' one-time tracing (median), paid once per run


@dataclass(frozen=True)
class Memory:
    """What the run's memory figures say about how large a batch fits."""

    fit: MemoryFit | None
    device_bytes: int  # the device's memory (-1 unknown, e.g. host RSS on a CPU)
    limit_batch: int | None  # the batch where the line reaches the device's memory (an extrapolation)
    largest_run: int | None  # the largest batch any run completed
    largest_peak_bytes: int  # its peak (-1 unknown)
    oom_batches: tuple[int, ...]  # batch sizes that ran out of memory


@dataclass(frozen=True)
class NoiseScale:
    """The gradient noise scale B_simple = tr(Sigma)/|G|^2 the runs measured (--noise-scale-every;
    core/analysis/noise_scale.py), and so the Bcrit it predicts (McCandlish et al.: Bcrit ~ B_simple)."""

    b_simple: float  # samples: median over the runs of each run's final estimate
    low: float  # samples: the smallest and largest final estimate over the runs
    high: float
    per_batch: dict[int, float]  # batch size -> median of its runs' final estimates
    runs: int  # runs with a finite final estimate


@dataclass(frozen=True)
class Analysis:
    """Everything `analyse` finds about a sweep; `as_dict()` is what `report --json` prints as "analysis"."""

    target: str | None
    batches: list[BatchSummary]
    critical: CriticalFit | None
    step_time: StepTimeFit | None  # wall time per step: alpha + beta*B
    prediction: Prediction | None
    best_measured: int | None  # the batch whose runs all met the target soonest (mean time to target)
    best_predicted: float  # samples, the minimum of T(B) (NaN when not predicted)
    best_predicted_time: float  # s
    regime_spans: list[Span]
    regime_source: str  # "fit", "measured" or ""
    measured_ratios: list[tuple[Span, float]]  # per-doubling steps ratio between measured batch sizes
    memory: Memory
    noise_scale: NoiseScale | None = None  # the gradient noise scale slot (None: not measured)
    profile_check: ProfileCheck | None = None  # a profile's prediction against this sweep (None: none given)
    loss_level: LossLevel | None = None  # time, steps and examples to a loss every run reached (loss_level.py)
    lr_policy: LrPolicy | None = None  # how each batch size's rate was set: whether predictions apply
    recommendation: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values: NaN and infinities become None, Spreads {mean, low, high, n}."""
        return _plain(self)


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in fields(value) if f.metadata.get("json", True)}
        for name in ("emin", "knee", "bounded"):  # derived values scripts want too
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                out[name] = _plain(getattr(value, name))
        if hasattr(value, "text") and callable(value.text):
            out["text"] = value.text()
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _target(sweep: SweepData) -> str | None:
    texts = {str(r.attrs.get("target") or "") for r in sweep.runs.values()} - {""}
    return str(sweep.spec.get("target") or "") or (sorted(texts)[0] if texts else None)


def _row(run: RunData) -> dict[str, Any]:
    return {"batch_size": run.batch_size, "seed": run.seed, "status": run.status, **run.figures.as_dict()}


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _step_wall(run: RunData) -> float:
    rate = run.figures.samples_per_s
    return run.batch_size / rate if rate > 0 and math.isfinite(rate) else math.nan


def _peak_lr(run: RunData) -> float:
    """The rate the run trained at after warmup: `lr_peak` (its rule's rate for its batch size), else `lr` (the
    rate as given; with a rule and warmup that is where warmup starts, not the peak)."""
    peak = _float(run.attrs.get("lr_peak"))
    return peak if math.isfinite(peak) else _float(run.attrs.get("lr"))


def _batches(sweep: SweepData, target: str | None) -> list[BatchSummary]:
    runs = [r for r in sweep.ordered_runs() if r.batch_size > 0]
    out = []
    for entry in aggregate_by_batch([_row(r) for r in runs], FIGURES):
        b = entry["batch_size"]
        ok = [r for r in runs if r.batch_size == b and r.status == "ok"]
        gaps = [generalization_gap(r.evals.as_dict(), r.epochs.as_dict(), target) for r in ok]
        where = {w for _, w in gaps if w}
        steady = entry["steady_peak_bytes"]
        lrs = [v for v in (_peak_lr(r) for r in ok) if math.isfinite(v)]
        out.append(
            BatchSummary(
                batch_size=b,
                runs=entry["runs"],
                ok=entry["ok"],
                reached=entry["reached"],
                steps_to_target=entry["steps_to_target"],
                examples_to_target=entry["examples_to_target"],
                time_to_target=entry["time_to_target"],
                step_wall_time=spread(_step_wall(r) for r in ok),
                epoch_time=entry["epoch_time"],
                peak_bytes=steady if steady.n else entry["peak_memory_bytes"],
                loss_noise=spread(loss_noise(r.steps["loss"]) for r in ok),
                gap=spread(g for g, w in gaps if w),
                gap_at="target" if where == {"target"} else ("end" if where else ""),
                lr=float(np.median(lrs)) if lrs else math.nan,
                regime=None,
            )
        )
    return out


def _memory(sweep: SweepData) -> Memory:
    from batchlab.core.analysis.explain import NVML_SOURCES, _device_total  # the one reading of the device's size

    fit = sweep_memory_fit(sweep)
    total = _device_total(sweep)
    limit = fit.batch_for(total) if fit is not None and total > 0 and fit.source in NVML_SOURCES else None
    done = [r for r in sweep.ordered_runs() if r.status == "ok" and r.batch_size > 0]
    largest = max(done, key=lambda r: r.batch_size) if done else None
    oom = sorted({r.batch_size for r in sweep.ordered_runs() if r.status == "oom"})
    return Memory(
        fit=fit,
        device_bytes=total if fit is not None and fit.source in NVML_SOURCES else -1,
        limit_batch=limit,
        largest_run=largest.batch_size if largest else None,
        largest_peak_bytes=int(largest.figures.peak_memory_bytes) if largest else -1,
        oom_batches=tuple(oom),
    )


def _noise_scale(sweep: SweepData) -> NoiseScale | None:
    """B_simple from the runs' noise_scale tables: each run's final estimate (noise_scale.noise_scale_series)."""
    per_run = []
    for run in sweep.ordered_runs():
        series = noise_scale_series(run.noise_scale.as_dict())
        if series is not None and math.isfinite(series.final) and series.final > 0:
            per_run.append((run.batch_size, series.final))
    if not per_run:
        return None
    by_batch: dict[int, list[float]] = {}
    for b, v in per_run:
        by_batch.setdefault(b, []).append(v)
    values = [v for _, v in per_run]
    return NoiseScale(
        b_simple=float(np.median(values)),
        low=min(values),
        high=max(values),
        per_batch={b: float(np.median(v)) for b, v in sorted(by_batch.items())},
        runs=len(per_run),
    )


def _tracing(sweep: SweepData) -> float:
    """Median one-time tracing cost (s) of the runs that reached the target: part of their time to target."""
    values = [r.figures.tracing_time for r in sweep.ordered_runs() if r.figures.target_reached == 1]
    values = [v for v in values if math.isfinite(v) and v > 0]
    return float(np.median(values)) if values else 0.0


def _prediction(
    batches: list[BatchSummary], critical: CriticalFit | None, step: StepTimeFit | None, fixed: float, tuned: bool
) -> Prediction | None:
    """The fitted curves; T(B) only when `tuned`: the sweep's learning-rate policy meets T(B)'s assumption."""
    sizes = [s.batch_size for s in batches]
    if critical is None or not sizes:
        return None
    grid = np.geomspace(min(sizes) / PREDICTION_REACH, max(sizes) * PREDICTION_REACH, PREDICTION_POINTS)
    steps = critical.steps_at(grid)
    low, high = critical.band(grid)
    times = step.predict(grid) if step is not None else np.array([])
    times = np.where(times > 0, times, np.nan)  # a line with a negative slope or intercept: no time there
    return Prediction(
        batch_sizes=tuple(float(v) for v in grid),
        steps=tuple(float(v) for v in steps),
        steps_low=tuple(float(v) for v in low),
        steps_high=tuple(float(v) for v in high),
        examples=tuple(float(v) for v in critical.examples_at(grid)),
        step_time=tuple(float(v) for v in times),
        time=tuple(float(v) for v in steps * times + fixed) if len(times) and tuned else (),
        fixed_time=fixed,
    )


def _best_measured(batches: list[BatchSummary]) -> int | None:
    """The batch with the lowest mean time to target among those whose every ok run met it."""
    full = [s for s in batches if s.ok and s.reached == s.ok and s.time_to_target.n]
    return min(full, key=lambda s: s.time_to_target.mean).batch_size if full else None


def analyse(sweep: SweepData, profile: ProfilePrediction | None = None, surface: str = "cli") -> Analysis:
    """The analysis of a sweep (live or from a file); see the module docstring. With `profile` (what a
    `batchlab profile` file predicts, predict.predict_from_profile) it also says how far that was off.
    `surface`: where the recommendation is read, "cli" or "window" (advice.recommendation)."""
    from batchlab.core.analysis.advice import recommendation

    target = _target(sweep)
    batches = _batches(sweep, target)
    reached = [r for r in sweep.ordered_runs() if r.status == "ok" and r.figures.target_reached == 1]
    critical = fit_critical([r.batch_size for r in reached], [r.figures.steps_to_target for r in reached])
    walls = [(r.batch_size, _step_wall(r)) for r in sweep.ordered_runs() if r.status == "ok" and r.batch_size > 0]
    step = fit_step_time(*zip(*walls, strict=True)) if walls else None
    best_b, best_t, fixed = math.nan, math.nan, _tracing(sweep)
    policy = sweep_lr_policy(sweep)
    if critical is not None and step is not None and not critical.bcrit.bounded and policy.tuned:
        best_b = optimal_batch(critical.bcrit_fit, step.alpha, step.beta)
        if math.isfinite(best_b):
            best_t = float(critical.steps_at(best_b) * step.predict(best_b)) + fixed
    measured = measured_spans(
        [s.batch_size for s in batches if s.steps_to_target.n],
        [s.steps_to_target.mean for s in batches if s.steps_to_target.n],
    )
    spans, source = [], ""
    if critical is not None and not critical.bcrit.bounded:
        sizes = [s.batch_size for s in batches]
        spans, source = (
            fit_spans(critical.bcrit_fit, min(sizes) / PREDICTION_REACH, max(sizes) * PREDICTION_REACH),
            "fit",
        )
        regimes = batch_regimes([s.batch_size for s in batches if s.steps_to_target.n], critical.bcrit_fit)
        batches = [replace(s, regime=regimes.get(s.batch_size)) for s in batches]
    elif measured:
        spans, source = [span for span, _ in measured], "measured"
    analysis = Analysis(
        target=target,
        batches=batches,
        critical=critical,
        step_time=step,
        prediction=_prediction(batches, critical, step, fixed, policy.tuned),
        best_measured=_best_measured(batches),
        best_predicted=best_b,
        best_predicted_time=best_t,
        regime_spans=spans,
        regime_source=source,
        measured_ratios=measured,
        memory=_memory(sweep),
        noise_scale=_noise_scale(sweep),
        loss_level=loss_level(sweep),
        lr_policy=policy,
    )
    if profile is not None:
        analysis = replace(analysis, profile_check=compare_with_sweep(profile, analysis, sweep.spec))
    return replace(analysis, recommendation=recommendation(analysis, sweep, surface))
