"""The recommendation in words: which batch size to use on this device, and why, from measurements only.

Each paragraph states its numbers: the batch that met the target soonest (measured) and where the
fitted T(B) = S(B) t_step(B) puts the minimum; the critical batch (a value with its interval, or a
bound); the regimes; how far memory allows; the learning rate that goes with the recommended
batch (the one its runs used); loss noise and the generalization gap; what was not measured; and,
given a profile (`batchlab report --profile`), how far its predicted best batch was from the measured one.
Sweeps without a target get loss and time together (no_target_advice.py), memory, and what to run next.
Predictions (the minimum of T(B), the Bcrit that B_simple predicts, a profile's best batch) are made only
under a learning-rate policy that meets their assumption (lr_policy.py); numbers are worded from claims.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from batchlab.core.analysis.claims import MemorySlope, Prediction, StepsRatio, say
from batchlab.core.analysis.concurrency import shared_cores_caveat
from batchlab.core.analysis.critical import BOOTSTRAP_RESAMPLES, CONFIDENCE, MIN_BATCH_SIZES
from batchlab.core.analysis.explain import _mib, _ms
from batchlab.core.analysis.lr_policy import ASSUMPTION, LrPolicy
from batchlab.core.analysis.no_target_advice import NO_LEVEL, check_surface, no_target_recommendation
from batchlab.core.analysis.regimes import PERFECT_RATIO, PLATEAU_RATIO, REGIMES, fit_borders
from batchlab.core.model import SweepData

if TYPE_CHECKING:
    from batchlab.core.analysis.analyse import Analysis

NO_TARGET = NO_LEVEL  # without a target and without a finished run's loss: nothing to compare yet


def _b(value: float) -> str:
    return f"{value:,.0f}"


def _sizes(sizes) -> str:
    sizes = sorted(sizes)
    return ", ".join(_b(s) for s in sizes)


def _seeds(n: int) -> str:
    return f"mean of {n} seeds" if n > 1 else "one run"


def _policy(analysis: Analysis) -> LrPolicy:
    return analysis.lr_policy if analysis.lr_policy is not None else LrPolicy("unknown")


def time_fit_given(analysis: Analysis) -> bool:
    """Whether the recommendation gives the fitted T(B) (and so the table its "T(B) fit" column): a finite
    minimum under a policy that meets the prediction's assumption. One rule for the text and the table."""
    return math.isfinite(analysis.best_predicted) and _policy(analysis).tuned


def memory_line(fit) -> str:
    """peak(B) = m0 + m1 x B, or what the data do not resolve (claims.MemorySlope)."""
    if fit.slope_resolved:
        return f"peak(B) = {_mib(fit.m0)} + {say(MemorySlope(fit.m1, True), 'term')}"
    return f"peak(B) about {_mib(fit.m0)} whatever the batch: {say(MemorySlope(fit.m1, False))}"


def _fastest(analysis: Analysis) -> list[str]:
    by_size = {s.batch_size: s for s in analysis.batches}
    lines = []
    best = analysis.best_measured
    if best is not None:
        s = by_size[best]
        text = (
            f"Fastest to the target on this device (measured): batch {_b(best)}, {s.time_to_target.mean:.3g} s of "
            f"training ({_seeds(s.time_to_target.n)}, {s.steps_to_target.mean:,.0f} steps)"
        )
        others = [
            f"{_b(o.batch_size)}: {o.time_to_target.mean:.3g} s"
            for o in analysis.batches
            if o.batch_size != best and o.reached == o.ok and o.ok and o.time_to_target.n
        ]
        lines.append(text + (f"; the other batch sizes that always met it: {', '.join(others)}." if others else "."))
    elif analysis.batches:
        lines.append("No batch size met the target in every one of its runs, so none is measured fastest.")
    step = analysis.step_time
    if step is not None:
        model = f"t_step(B) = {_ms(step.alpha)} + {_ms(step.beta)} x B per step (steady wall time)"
        policy = _policy(analysis)
        if analysis.critical is not None and not policy.tuned:
            lines.append(policy.refusal(f"Predicted T(B) = S(B) x t_step(B) and its best batch ({model})"))
        elif math.isfinite(analysis.best_predicted):
            fixed = analysis.prediction.fixed_time if analysis.prediction is not None else 0.0
            tracing = f" with {fixed:.2g} s of one-time tracing" if fixed > 0 else ""
            sizes = [s.batch_size for s in analysis.batches]
            where = (
                "within the measured batch sizes"
                if min(sizes) <= analysis.best_predicted <= max(sizes)
                else f"outside the measured batch sizes ({_b(min(sizes))}-{_b(max(sizes))}): an extrapolation "
                "to check with a run there"
            )
            best = say(Prediction("best batch", analysis.best_predicted, policy.tuned))
            lines.append(
                f"Predicted: T(B) = S(B) x t_step(B), with S(B) from the fit below and {model}, is lowest at "
                f"batch {best} = sqrt(Bcrit x alpha/beta) = "
                f"sqrt({_b(analysis.critical.bcrit.value)} x {step.knee:,.0f}) ({analysis.best_predicted_time:.3g} s"
                f"{tracing}), "
                f"{where}; {policy.assumption()}."
            )
        elif analysis.critical is not None and analysis.critical.bcrit.kind != "=":
            lines.append(f"Predicted T(B): not given, because the critical batch is only bounded ({model}).")
        elif analysis.critical is not None:
            way = "grows with B: by this model the smallest batch"
            if step.beta <= 0:
                way = "falls with B: by this model the largest batch"
            lines.append(
                f"Predicted T(B): no minimum between batch sizes, because the step-time line {model} has no "
                f"positive fixed cost and per-sample slope; T(B) then only {way} is fastest."
            )
    return lines


def _critical(analysis: Analysis) -> list[str]:
    """The fit of steps to target; with one fixed rate, said to describe that rate's runs only."""
    lines = _critical_fit(analysis)
    if lines and analysis.critical is not None and not _policy(analysis).tuned:
        lines[-1] += (
            " Every batch size trained at one learning rate, so this Bcrit describes that rate's runs, not the "
            f"critical batch of McCandlish et al.: {ASSUMPTION}."
        )
    return lines


def _critical_fit(analysis: Analysis) -> list[str]:
    fit = analysis.critical
    measured = [s for s in analysis.batches if s.steps_to_target.n]
    if fit is None:
        if analysis.target:
            return [
                f"Critical batch: not fitted; it needs steps to target at {MIN_BATCH_SIZES} or more batch sizes "
                f"(runs met the target at {len(measured)})."
            ]
        return []
    head = (
        f"Steps to target, S(B) = Smin (1 + Bcrit/B), fitted to {len(fit.steps)} runs at "
        f"{len(set(fit.batch_sizes))} batch sizes (within {math.expm1(fit.rms_log_residual):.0%} rms): "
    )
    ratios = analysis.measured_ratios
    if fit.bcrit.kind == "=":
        perfect_end, plateau_start = fit_borders(fit.bcrit.value)
        if math.isnan(fit.smin_low):
            values = (
                f"Bcrit = {fit.bcrit.value:,.0f}, Smin = {fit.smin:,.0f} steps, "
                f"Emin = Smin x Bcrit = {fit.emin:,.0f} examples "
                f"(no interval: with one run per batch size at {len(set(fit.batch_sizes))} batch sizes every "
                "bootstrap resample is the runs themselves; add --seeds or batch sizes)."
            )
        else:
            values = (
                f"{fit.bcrit.text()}, Smin = {fit.smin:,.0f} steps ({fit.smin_low:,.0f}-{fit.smin_high:,.0f}), "
                f"Emin = Smin x Bcrit = {fit.emin:,.0f} examples ({CONFIDENCE:.0%} intervals from "
                f"{BOOTSTRAP_RESAMPLES:,} bootstrap resamples of the runs)."
            )
        return [
            head + values + " At B = Bcrit a run takes 2 Smin steps and "
            f"2 Emin examples; above it, a doubled batch saves less than a third of the steps, and from about "
            f"{_b(plateau_start)} (4.5 Bcrit) less than a tenth."
        ]
    if fit.bcrit.kind == ">=":
        last = StepsRatio.of(ratios[-1][0].low, ratios[-1][0].high, ratios[-1][1]) if ratios else None
        step = f" ({say(last)})" if last is not None and last.kind == "cut" else ""
        return [
            head + f"{fit.bcrit.text()}: the steps still fell nearly as 1/B up to the largest batch that met the "
            f"target{step}, so larger batches may still save steps; runs above {_b(max(fit.batch_sizes))} would "
            "show where that stops."
        ]
    if fit.bcrit.kind == "<=":
        first = StepsRatio.of(ratios[0][0].low, ratios[0][0].high, ratios[0][1]) if ratios else None
        fell = "the steps hardly fell" if first is None or first.kind == "cut" else "the steps did not fall"
        step = f" ({say(first)})" if first is not None else ""
        return [
            head + f"{fit.bcrit.text()}: even from the smallest batch {fell}{step}, so a larger batch "
            "buys almost no fewer steps; smaller batches would show where the scaling ends."
        ]
    return [head + "the critical batch is not determined by these runs (the steps scatter more than they trend)."]


def _regimes(analysis: Analysis) -> list[str]:
    rule = f"S(B)/S(2B) >= {PERFECT_RATIO} perfect scaling, <= {PLATEAU_RATIO} plateau, diminishing returns between"
    if analysis.regime_source == "fit":
        groups = {r: [s.batch_size for s in analysis.batches if s.regime == r] for r in REGIMES}
        parts = [f"{r} at {_sizes(g)}" for r, g in groups.items() if g]
        return [f"Regimes on the fitted curve ({rule}): " + "; ".join(parts) + "."]
    if analysis.regime_source == "measured":
        parts = [
            f"{_b(span.low)}-{_b(span.high)}: {ratio:.2f}x, {span.regime}" for span, ratio in analysis.measured_ratios
        ]
        return [f"Regimes between measured batch sizes (steps ratio per doubling; {rule}): " + "; ".join(parts) + "."]
    return []


def _memory(analysis: Analysis) -> list[str]:
    memory = analysis.memory
    parts = []
    if memory.oom_batches:
        parts.append(
            f"batch {_sizes(memory.oom_batches)} ran out of memory, so the limit is below {_b(min(memory.oom_batches))}"
        )
    if memory.limit_batch is not None:
        fit = memory.fit
        parts.append(
            f"the memory line {memory_line(fit)} reaches this device's "
            f"{_mib(memory.device_bytes)} near batch {_b(memory.limit_batch)} (an extrapolation; `batchlab max-batch` "
            "measures it)"
        )
    elif memory.largest_run is not None:
        peak = f" peaked at {_mib(memory.largest_peak_bytes)}" if memory.largest_peak_bytes > 0 else " ran"
        text = f"batch {_b(memory.largest_run)}, the largest that ran,{peak}"
        if memory.fit is not None:
            text += f" ({memory_line(memory.fit)})"
        if not memory.oom_batches:
            text += "; no run ran out of memory"
        parts.append(text + "; the device's limit is not known from these runs (`batchlab max-batch` measures it)")
    if not parts:
        return []
    return ["Memory: " + "; ".join(parts) + "."]


def _learning_rate(analysis: Analysis, sweep: SweepData, batch: int | None) -> list[str]:
    if batch is None:
        return []
    summary = next(s for s in analysis.batches if s.batch_size == batch)
    runs = [r for r in sweep.ordered_runs() if r.batch_size == batch and r.status == "ok"]
    if not math.isfinite(summary.lr):
        return [f"Learning rate for batch {_b(batch)}: its runs used the optimizer's own default (no rate was set)."]
    attrs = runs[0].attrs if runs else {}
    how = []
    rule, lr0, base = attrs.get("lr_rule"), attrs.get("lr0"), attrs.get("lr_base_batch")
    if rule and rule != "constant" and lr0 is not None:
        how.append(f"the {rule} rule from {float(lr0):g} at batch {base}")
    warmup = int(attrs.get("lr_warmup_steps", 0) or 0)
    if warmup > 0:
        how.append(f"{warmup} warmup steps")
    schedule = attrs.get("lr_schedule")
    if schedule and schedule != "constant":
        how.append(f"{schedule} schedule")
    detail = f" ({', '.join(how)})" if how else ""
    return [f"Learning rate for batch {_b(batch)}: {summary.lr:g}, the peak rate its runs used{detail}."]


def _noise_and_gap(analysis: Analysis) -> list[str]:
    noise = [s for s in analysis.batches if s.loss_noise.n]
    lines = []
    if len(noise) >= 2:
        lo, hi = noise[0], noise[-1]
        lines.append(
            f"Loss noise (std of step-to-step loss changes, first 1,000 steps): {lo.loss_noise.mean:.3g} at batch "
            f"{_b(lo.batch_size)}, {hi.loss_noise.mean:.3g} at batch {_b(hi.batch_size)}."
        )
    gap = [s for s in analysis.batches if s.gap.n]
    if len(gap) >= 2:
        lo, hi = gap[0], gap[-1]
        at = {s.gap_at for s in gap}
        where = "at the target" if at == {"target"} else ("at the end" if at == {"end"} else "at the target or the end")
        lines.append(
            f"Generalization gap (val_loss - train_loss, {where}): {lo.gap.mean:+.3g} at batch {_b(lo.batch_size)}, "
            f"{hi.gap.mean:+.3g} at batch {_b(hi.batch_size)}."
        )
    return lines


def _not_measured(analysis: Analysis, sweep: SweepData) -> list[str]:
    notes = []
    missed = [s.batch_size for s in analysis.batches if analysis.target and s.ok and s.reached == 0]
    met = [s.batch_size for s in analysis.batches if s.reached > 0]
    if met and missed and min(missed) > max(met):
        notes.append(f"no run reached the target above batch {_b(max(met))} (batch {_sizes(missed)} did not)")
    elif missed:
        notes.append(f"batch {_sizes(missed)}: no run reached the target within its budget")
    partial = [s.batch_size for s in analysis.batches if 0 < s.reached < s.ok]
    if partial:
        notes.append(f"batch {_sizes(partial)}: only some seeds reached the target")
    failed = sorted({r.batch_size for r in sweep.ordered_runs() if r.status not in ("ok", "pending", "running")})
    if failed:
        notes.append(f"batch {_sizes(failed)}: some runs did not finish (their figures are left out)")
    waiting = sorted({r.batch_size for r in sweep.ordered_runs() if r.status in ("pending", "running")})
    if waiting:
        notes.append(f"batch {_sizes(waiting)}: runs still to come or running")
    if analysis.batches and max(s.runs for s in analysis.batches) <= 1:
        notes.append("one run per batch size, so the spread between seeds is not measured (add --seeds)")
    if analysis.noise_scale is None:
        notes.append("the gradient noise scale (B_simple, which predicts Bcrit from one run) was not measured")
    return ["Not measured: " + "; ".join(notes) + "."] if notes else []


def _noise_scale(analysis: Analysis) -> list[str]:
    ns = analysis.noise_scale
    if ns is None:
        return []
    spread = f", {_b(ns.low)}-{_b(ns.high)}" if ns.runs > 1 else ""
    head = f"Gradient noise scale: B_simple = {_b(ns.b_simple)} (the final estimate, median of {ns.runs} runs{spread})"
    policy = _policy(analysis)
    if not policy.tuned:
        return [f"{head}. " + policy.refusal("The critical batch it predicts (McCandlish et al.: Bcrit ~ B_simple)")]
    predicted = say(Prediction("critical batch", ns.b_simple, policy.tuned))
    text = f"{head}, which predicts Bcrit ~ {predicted} (McCandlish et al.; {policy.assumption()})"
    bcrit = analysis.critical.bcrit if analysis.critical is not None else None
    if bcrit is not None and bcrit.kind == "=":
        text += f"; the fit of steps to target gives {_b(bcrit.value)}, {bcrit.value / ns.b_simple:.2g}x the prediction"
    elif bcrit is not None and bcrit.kind in (">=", "<="):
        agrees = ns.b_simple >= bcrit.value if bcrit.kind == ">=" else ns.b_simple <= bcrit.value
        verdict = "meets" if agrees else "does not meet"
        text += f"; the fit of steps to target says {bcrit.text()}, which the prediction {verdict}"
    return [text + "."]


def _profile(analysis: Analysis) -> list[str]:
    from batchlab.core.analysis.predict import describe_check

    return [describe_check(analysis.profile_check)] if analysis.profile_check is not None else []


def recommendation(analysis: Analysis, sweep: SweepData, surface: str = "cli") -> list[str]:
    """The recommendation, one paragraph per item; every claim carries the numbers it rests on. `surface`: where it
    is read, "cli" (next steps as options) or "window" (as the setup panel's fields)."""
    check_surface(surface)
    caveat = shared_cores_caveat(sweep, surface)  # times of runs trained beside others on shared cores
    first = [caveat] if caveat else []
    if not analysis.target:
        lines = no_target_recommendation(analysis, sweep, surface)
        return [*first, *lines, *_memory(analysis), *_noise_scale(analysis), *_profile(analysis)]
    lines = [*first, *_fastest(analysis), *_profile(analysis), *_critical(analysis), *_regimes(analysis)]
    lines += _noise_scale(analysis)
    lines += _memory(analysis)
    lines += _learning_rate(analysis, sweep, analysis.best_measured)
    lines += _noise_and_gap(analysis)
    lines += _not_measured(analysis, sweep)
    return lines


def _cell(value: float, fmt: str) -> str:
    return fmt.format(value) if math.isfinite(value) else "-"


def analysis_table(analysis: Analysis) -> str:
    """Per batch size: measured and fitted steps to target, measured and predicted time, regime, loss noise, gap."""
    fit, step = analysis.critical, analysis.step_time
    fixed = analysis.prediction.fixed_time if analysis.prediction is not None else 0.0
    if not time_fit_given(analysis):  # the text gives no T(B): neither does the table
        step = None
    header = ("batch", "steps", "S(B) fit", "time (s)", "T(B) fit", "regime", "loss noise", "gap")
    rows = [header]
    for s in analysis.batches:
        fitted = float(fit.steps_at(s.batch_size)) if fit is not None else math.nan
        predicted = fitted * float(step.predict(s.batch_size)) + fixed if step is not None else math.nan
        rows.append(
            (
                _b(s.batch_size),
                _cell(s.steps_to_target.mean, "{:,.0f}"),
                _cell(fitted, "{:,.0f}"),
                _cell(s.time_to_target.mean, "{:.3g}"),
                _cell(predicted, "{:.3g}"),
                s.regime or "-",
                _cell(s.loss_noise.mean, "{:.3g}"),
                _cell(s.gap.mean, "{:+.3g}") + (f" ({s.gap_at})" if s.gap.n else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 5 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    )
