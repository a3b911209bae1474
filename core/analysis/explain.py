"""Why bigger batches stop getting faster, in words built from a sweep's own numbers.

Every sentence states a measured or fitted number, or names what the data cannot tell apart;
nothing is said that the sweep does not show. The numbers come from the step-time and memory
fits (step_time.py, memory_fit.py) and the per-run figures (batchlab.core.figures); each
number-bearing fragment is worded from a typed claim (claims.py) that a test checks against its numbers.
Input wait has one base everywhere here: the share of the steady epochs' wall time (`input_wait_share`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from batchlab.core.analysis import claims
from batchlab.core.analysis.claims import LineFit, MemorySlope, OffLine, Seconds, Share, say
from batchlab.core.analysis.concurrency import explain_concurrency
from batchlab.core.analysis.memory_fit import MemoryFit, sweep_memory_fit
from batchlab.core.analysis.scaling import scaling_lines
from batchlab.core.analysis.startup import explain_startup
from batchlab.core.analysis.step_time import StepTimeFit, sweep_step_time
from batchlab.core.analysis.time_account import explain_total_time
from batchlab.core.model import RunData, SweepData

MIB = 1 << 20
SLOWER_THAN = 1.10  # a larger batch whose epoch is 10% slower than the smaller one's is explained
CAUSE_SHARE_POINTS = 0.10  # input wait: 10 points more of the step time than at the smaller batch
CAUSE_PER_SAMPLE = 1.15  # compute: 15% more step time per sample than at the smaller batch
OFF_LINE = 0.25  # a run more than 25% off the fitted line is named "off the line" (the stated tolerance)
EPOCH_BASE = "a steady epoch's wall time"  # the one base of every input-wait share said
RUN_BASE = "a run's time"
NVML_SOURCES = ("tf_peak_bytes", "device_memory_bytes")


def _ms(seconds: float) -> str:
    """A duration in the unit that reads best: s, ms or µs, three significant digits (a checked claim)."""
    return say(Seconds(seconds)) if seconds >= 0 else claims.duration(seconds)


_us = _ms
_mib = claims.mib


def _pct(value: float, base: str) -> str:
    return say(Share(value, base))


def _flops(rate: float) -> str:
    for unit, scale in (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if rate >= scale:
            return f"{rate / scale:.3g} {unit}"
    return f"{rate:.3g} FLOP/s"


def _sizes(sizes: Sequence[int]) -> str:
    sizes = sorted(set(sizes))
    return f"batch {sizes[0]}" if len(sizes) == 1 else f"batch {sizes[0]}-{sizes[-1]}"


def _by_size(runs: list[RunData], value) -> dict[int, float]:
    """Median over seeds of `value(run)` per batch size, finite values only."""
    grouped: dict[int, list[float]] = {}
    for run in runs:
        v = value(run)
        if v is not None and math.isfinite(v):
            grouped.setdefault(run.batch_size, []).append(v)
    return {b: statistics.median(vs) for b, vs in sorted(grouped.items())}


def explain_time(sweep: SweepData, fit: StepTimeFit | None) -> list[str]:
    """The step-time model, the two regimes and the runs off the line."""
    if fit is None:
        return [
            "Step compute time: fewer than two batch sizes have steady-state steps, so no line t(B) = alpha + beta*B."
        ]
    quality = say(LineFit(fit.median_rel_residual, fit.r2, len(set(fit.batch_sizes))))
    lines = [
        f"Step compute time t(B) = alpha + beta*B (the median time of a step's compute; input wait and the loop "
        f"between steps are not in it), fitted robustly to the steady-state steps of {len(fit.batch_sizes)} "
        f"runs ({_sizes(fit.batch_sizes)}; steps that traced left out): alpha = {claims.duration(fit.alpha)} per "
        f"step (the fixed cost: dispatch, kernel launches, the optimizer's per-variable update), "
        f"beta = {claims.duration(fit.beta)} per sample (compute); the line is {quality}."
    ]
    if not (fit.alpha > 0 and fit.beta > 0):
        lines.append(
            "The fitted line has no positive fixed cost and per-sample slope, so there is no knee: "
            "over these batch sizes the step time does not follow alpha + beta*B."
        )
        return lines
    knee = fit.knee
    throughput = _by_size(sweep.ordered_runs(), lambda r: r.figures.samples_per_s)
    below = [b for b in throughput if b < knee]
    above = [b for b in throughput if b >= knee]
    lines.append(f"Knee B* = alpha/beta = {knee:.0f} samples: there the fixed cost and the compute are equal.")
    if below:
        share = (fit.overhead_share(below[0]), fit.overhead_share(below[-1]))
        text = f"{_sizes(below)}: the fixed per-step cost is {_pct(share[0], 'each step')}"
        if len(below) > 1:
            text += f"-{_pct(share[1], 'each step')} of each step, so time per sample falls almost as 1/B"
            text += f" (steady throughput {throughput[below[0]]:,.0f} -> {throughput[below[-1]]:,.0f} samples/s)"
        else:
            text += " of each step"
        lines.append(text + ".")
    if above:
        share = (1 - fit.overhead_share(above[0]), 1 - fit.overhead_share(above[-1]))
        text = f"{_sizes(above)}: compute is {_pct(share[0], 'each step')}"
        text += f"-{_pct(share[1], 'each step')}" if len(above) > 1 else ""
        text += (
            f" of each step; a bigger batch can only approach beta's {1 / fit.beta:,.0f} samples/s "
            f"(steady throughput {throughput[above[-1]]:,.0f} at batch {above[-1]}), "
            "so epochs stop getting much faster."
        )
        lines.append(text)
    off = []
    for b, t in zip(fit.batch_sizes, fit.step_times, strict=True):
        predicted = float(fit.predict(b))
        if predicted > 0 and abs(t - predicted) > OFF_LINE * predicted:  # outside the stated tolerance only
            off.append(say(OffLine(b, t, predicted, OFF_LINE)))
    if off:
        lines.append(
            f"Off the line by more than {OFF_LINE:.0%} (noise, another process, or a real change of regime): "
            + "; ".join(off)
            + "."
        )
    return lines


def _compute_per_epoch(run: RunData) -> float:
    """Seconds of step compute in a steady epoch (NaN when not every step was timed)."""
    split = epoch_split(run)
    return split[0] * split[1] if split is not None else math.nan


def explain_slowdowns(sweep: SweepData) -> list[str]:
    """For each batch size whose steady epoch is slower than the next smaller size's: what the data show."""
    runs = [r for r in sweep.ordered_runs() if r.status == "ok"]
    epoch = _by_size(runs, lambda r: r.figures.epoch_time)
    per_sample = _by_size(runs, lambda r: r.figures.step_time / r.batch_size)
    wait = _by_size(runs, input_wait_share)
    peak = _by_size(runs, lambda r: r.figures.steady_peak_bytes if r.figures.steady_peak_bytes > 0 else math.nan)
    compute = _by_size(runs, lambda r: _compute_per_epoch(r))
    sizes = list(epoch)
    lines = []
    for small, big in zip(sizes, sizes[1:], strict=False):
        if epoch[big] <= SLOWER_THAN * epoch[small]:
            continue
        text = f"Batch {big} is slower than batch {small} (steady epoch {epoch[big]:.3g} s vs {epoch[small]:.3g} s)"
        causes = []
        if big in wait and small in wait and wait[big] - wait[small] > CAUSE_SHARE_POINTS:
            causes.append(
                f"it waited for input {_pct(wait[big], EPOCH_BASE)} of {EPOCH_BASE} "
                f"(vs {_pct(wait[small], EPOCH_BASE)})"
            )
        if big in per_sample and small in per_sample and per_sample[big] > CAUSE_PER_SAMPLE * per_sample[small]:
            cause = (
                f"its step computed {_us(per_sample[big])} per sample vs {_us(per_sample[small])}, "
                "slower per sample, which the line does not predict"
            )
            if big in peak and small in peak:
                cause += f" (steady peak memory {_mib(peak[small])} -> {_mib(peak[big])})"
            causes.append(cause + "; the data do not tell apart cache or memory pressure from contention")
        if not causes and big in compute and small in compute and compute[big] > SLOWER_THAN * compute[small]:
            causes.append(
                f"its steps' compute added up to {compute[big]:.3g} s per epoch vs {compute[small]:.3g} s, "
                "although its median step per sample was not slower: the difference is in the spread of the "
                "step times, not the typical step (on a shared machine, often contention)"
            )
        if causes:
            lines.append(text + ": " + "; ".join(causes) + ".")
        else:
            lines.append(
                text + ": neither input wait nor the steps' compute explains it; the extra time is outside the "
                "steps (taking batches, the loop, per-epoch start-up), or noise on a shared machine."
            )
    return lines


def _startup_gaps(runs: list[RunData]) -> list[float]:
    """Seconds between one run's end and the next run's start (whole seconds, as the file's times)."""
    gaps = []
    for prev, run in zip(runs, runs[1:], strict=False):
        try:
            ended = datetime.fromisoformat(str(prev.attrs["ended"]))
            started = datetime.fromisoformat(str(run.attrs["started"]))
        except (KeyError, ValueError):
            continue
        gaps.append((started - ended).total_seconds())
    return [g for g in gaps if g >= 0]


def _steady_epochs(run: RunData) -> tuple[np.ndarray, float] | None:
    """(mask of the run's steps in its steady epochs, those epochs' wall time in s); None without them. Steady:
    no traced step; without that column, the epochs after the first."""
    epochs, steps = run.epochs, run.steps
    if not len(epochs) or not len(steps):
        return None
    traced = epochs.get("traced_steps")
    if traced is not None and (traced >= 0).any():
        steady = epochs["epoch"][traced == 0]
    else:
        steady = epochs["epoch"][1:]
    in_steady = np.isin(steps["epoch"], steady)
    total = float(np.nansum(epochs["epoch_time"][np.isin(epochs["epoch"], steady)]))
    if not in_steady.any() or not total > 0:
        return None
    return in_steady, total


def input_wait_share(run: RunData) -> float:
    """Input wait as a share (0..1) of the steady epochs' wall time: the one base of every input-wait share the
    explanation says (the epoch split uses the same); NaN without steady epochs or an input_wait column."""
    steady = _steady_epochs(run)
    wait = run.steps.get("input_wait")
    if steady is None or wait is None:
        return math.nan
    mask, total = steady
    return min(1.0, float(np.nansum(wait[mask])) / total)


def epoch_split(run: RunData) -> tuple[float, float, float, float] | None:
    """(epoch s, compute share, input-wait share, rest share) over the run's steady epochs (no traced step;
    without that column, those after the first); None when a step of them has no compute time (sampled sync)."""
    found = _steady_epochs(run)
    if found is None:
        return None
    in_steady, total = found
    steps = run.steps
    step_time = steps["step_time"][in_steady]
    if not np.isfinite(step_time).all():
        return None
    count = len(np.unique(steps["epoch"][in_steady]))
    compute = min(1.0, float(step_time.sum()) / total)
    waited = min(1.0 - compute, input_wait_share(run))
    waited = waited if math.isfinite(waited) else 0.0
    return total / count, compute, waited, max(0.0, 1.0 - compute - waited)


def explain_one_time(sweep: SweepData) -> list[str]:
    """Costs paid once per run (starting the process and TensorFlow, tracing) and how a steady epoch splits."""
    runs = sweep.ordered_runs()
    lines = []
    splits = {r.batch_size: epoch_split(r) for r in runs if r.status == "ok"}
    splits = {b: v for b, v in sorted(splits.items()) if v is not None}
    if splits:
        parts = [
            f"batch {b}: {v[0]:.3g} s = {_pct(v[1], EPOCH_BASE)} step compute, {_pct(v[2], EPOCH_BASE)} input wait, "
            f"{_pct(v[3], EPOCH_BASE)} the rest"
            for b, v in splits.items()
            if b in (min(splits), max(splits))
        ]
        lines.append(
            "A steady epoch at " + "; at ".join(parts) + " (the rest: taking ready batches from the pipeline and "
            "the loop's own work per step, so it grows with the number of steps)."
        )
    gaps = _startup_gaps(runs)
    measured = explain_startup(runs)  # what each run's child measured; older files have only the gaps
    lines.extend(measured)
    if gaps and not measured:
        lines.append(
            f"Starting each run (a new process, TensorFlow import, data, model build) took about "
            f"{statistics.median(gaps):.0f} s (median of {len(gaps)} gaps between runs, whole seconds)."
        )
    tracing = [r.figures.tracing_time for r in runs if math.isfinite(r.figures.tracing_time)]
    total = [r.figures.total_time for r in runs if math.isfinite(r.figures.tracing_time)]
    if tracing:
        shares = [t / s for t, s in zip(tracing, total, strict=True) if s > 0 and math.isfinite(s) and t <= s]
        low, high = f"{min(tracing):.2g}", f"{max(tracing):.2g}"
        share = f"; up to {_pct(max(shares), RUN_BASE)} of {RUN_BASE}" if shares else ""
        lines.append(
            f"Tracing and compiling the step function cost {low if low == high else f'{low}-{high}'} s per run, "
            f"once (left out of the steady-state figures{share})."
        )
    wait = _by_size(runs, input_wait_share)
    if wait:
        worst = max(wait, key=wait.get)
        lines.append(
            f"Input wait: at most {_pct(wait[worst], EPOCH_BASE)} of {EPOCH_BASE} (batch {worst})"
            + ("; the input pipeline keeps up." if wait[worst] < CAUSE_SHARE_POINTS else ".")
        )
    return lines


def explain_flops(sweep: SweepData, fit: StepTimeFit | None, peak_flops: float | None) -> list[str]:
    """Achieved FLOP/s per run from the model's FLOPs per sample, and utilisation against a measured peak."""
    runs = sweep.ordered_runs()
    per_sample = [float(r.attrs.get("flops_per_sample", math.nan)) for r in runs]
    per_sample = [f for f in per_sample if math.isfinite(f) and f > 0]
    if not per_sample:
        return ["FLOPs: the run file does not record the model's FLOPs per sample (made before they were counted)."]
    flops = statistics.median(per_sample)
    achieved = _by_size(runs, lambda r: flops * r.figures.samples_per_s)
    if not achieved:
        return []
    best = max(achieved, key=achieved.get)
    text = (
        f"FLOPs: {flops / 1e6:,.3g} MFLOP per training sample (3x the forward pass's matrix products); "
        f"achieved {_flops(achieved[min(achieved)])} at batch {min(achieved)} up to {_flops(achieved[best])} "
        f"at batch {best}"
    )
    if fit is not None and fit.beta > 0:
        text += f"; the per-sample compute alone (beta) runs at {_flops(flops / fit.beta)}"
    if peak_flops and peak_flops > 0 and achieved[best] > peak_flops:
        text += (
            f". The measured matmul peak ({_flops(peak_flops)}) is below what training achieved, so it is "
            "no ceiling: it was measured while the machine was busier; re-measure on an idle machine "
            "(`batchlab info --peak`) for a utilisation."
        )
    elif peak_flops and peak_flops > 0:
        text += (
            f". Utilisation of this device's measured matmul peak ({_flops(peak_flops)}): "
            f"{achieved[min(achieved)] / peak_flops:.1%} at batch {min(achieved)}, "
            f"{achieved[best] / peak_flops:.1%} at batch {best}."
        )
    else:
        text += ". Utilisation: no matmul peak is measured for this device (run `batchlab info --peak`)."
    uncounted = {str(r.attrs.get("flops_uncounted", "")) for r in runs} - {""}
    if uncounted:
        text += f" Not counted (a lower bound): {sorted(uncounted)[0]}."
    return [text]


def explain_memory(sweep: SweepData, fit: MemoryFit | None) -> list[str]:
    """The memory line, the device limit it implies, and allocator vs NVML on a GPU."""
    lines = []
    runs = sweep.ordered_runs()
    if fit is not None:
        where = {"tf_peak_bytes": "TensorFlow allocator", "device_memory_bytes": "GPU process, NVML"}.get(
            fit.source or "", "host RSS"
        )
        quality = say(LineFit(fit.median_rel_residual, fit.r2, len(set(fit.batch_sizes)), digits=1))
        lines.append(
            f"Memory ({where}, {'steady epochs' if fit.steady else 'all epochs, first included'}): "
            f"peak(B) = m0 + m1*B with m0 = {_mib(fit.m0)} (held whatever the batch: runtime, data, weights, "
            f"optimizer state) and {say(MemorySlope(fit.m1, fit.slope_resolved))}; the line is {quality}."
        )
        total = _device_total(sweep)
        if total > 0 and fit.source in NVML_SOURCES:
            limit = fit.batch_for(total)
            if limit is not None:
                lines.append(
                    f"On this GPU's {_mib(total)} the line reaches the limit near batch {limit:,} "
                    "(an extrapolation; `batchlab max-batch` measures it)."
                )
    for run in runs:
        if run.status == "oom":
            text = f"Batch {run.batch_size} ran out of memory"
            if fit is not None and fit.slope_resolved:
                text += f"; the line predicts {_mib(float(fit.predict(run.batch_size)))} there"
            lines.append(text + ".")
    gap = _by_size(runs, _nvml_over_allocator)
    if gap:
        lines.append(
            f"NVML shows {_mib(min(gap.values()))}-{_mib(max(gap.values()))} more than TensorFlow's allocator "
            "peak: NVML counts the whole process on the GPU (the CUDA context and cuBLAS/cuDNN handles, "
            "the blocks the allocator keeps pooled after use and cuDNN workspace), the allocator peak only "
            "the tensors live at once."
        )
    return lines


def _nvml_over_allocator(run: RunData) -> float:
    epochs = run.epochs
    tf_peak, nvml = epochs.get("tf_peak_bytes"), epochs.get("device_memory_bytes")
    if tf_peak is None or nvml is None or not len(tf_peak):
        return math.nan
    ok = (tf_peak > 0) & (nvml > 0)
    return float((nvml[ok] - tf_peak[ok]).max()) if ok.any() else math.nan


def _device_total(sweep: SweepData) -> int:
    """Memory (bytes) of the device the sweep ran on, from the file's environment; -1 unknown."""
    name = str(sweep.environment.get("device_description", "")).split(":", 1)[0]
    if name == "gpu":
        name = str(sweep.environment.get("device_description", "")).split(" ", 1)[0].rstrip(":")
    for device in sweep.environment.get("devices", []) or []:
        if device.get("name") == name:
            return int(device.get("memory_bytes", -1) or -1)
    return -1


def explain_accumulation(sweep: SweepData) -> list[str]:
    """A note when runs accumulated gradients: the figures are per micro-batch."""
    steps = {int(r.attrs.get("accumulation_steps", 1) or 1) for r in sweep.ordered_runs()}
    steps.discard(1)
    if not steps:
        return []
    k = ", ".join(str(v) for v in sorted(steps))
    return [
        f"Gradient accumulation: each update sums {k} micro-batches, so a recorded step and the batch sizes "
        "below are micro-batches (the run file's effective_batch_size is what one update sees)."
    ]


def explain_batch_schedule(sweep: SweepData) -> list[str]:
    """A note when runs changed their batch while training (core/batch_rules.py): their figures mix batches."""
    kinds = sorted({str(r.attrs.get("batch_schedule")) for r in sweep.ordered_runs()} - {"None", "constant", ""})
    if not kinds:
        return []
    return [
        f"Batch schedule ({', '.join(kinds)}): runs changed their batch while training, so each is listed under "
        "the batch it started at, and its step time, throughput and memory below mix every batch it trained at "
        "(each step's own batch is the run file's steps/batch_size; the lines above say where it changed)."
    ]


def explain_execution(sweep: SweepData) -> list[str]:
    """A note on how the train step ran when it was not the default (one float32 step per call, Keras's XLA
    choice): fused steps, XLA, mixed precision. Compare with a default sweep to see what each one buys."""
    runs = sweep.ordered_runs()
    calls = sorted({int(r.attrs.get("steps_per_call", 1) or 1) for r in runs} - {1})
    xla = any(int(r.attrs.get("xla", 0) or 0) for r in runs)
    precision = sorted({str(r.attrs.get("precision", "float32")) for r in runs} - {"float32"})
    if not (calls or precision or sweep.spec.get("xla")):
        return []
    parts = []
    if calls:
        parts.append(
            f"fused, {', '.join(map(str, calls))} steps per call (each step's loss is its own; step times are "
            "the call's time / its steps, fetching included, so the step-time line and the time split are per call)"
        )
    if sweep.spec.get("xla") == "auto":
        on = [r.batch_size for r in runs if int(r.attrs.get("xla", 0) or 0)]
        off = [r.batch_size for r in runs if not int(r.attrs.get("xla", 0) or 0)]
        parts.append(
            "XLA where a run's steps repay its compile (--xla auto): compiled at "
            f"{', '.join(map(str, sorted(set(on)))) or 'no batch size'}, not at "
            f"{', '.join(map(str, sorted(set(off)))) or 'any'} (each run's xla_choice attribute gives the estimate)"
        )
    elif xla:
        parts.append("the train step compiled with XLA")
    if precision:
        parts.append(f"{', '.join(precision)} with loss scaling")
    return [f"Execution: {'; '.join(parts)}. Open a default sweep beside this one to compare."]


def explain_scaling(sweep: SweepData, others: Sequence[SweepData] = ()) -> list[str]:
    """Scaling efficiency against replicas (core/analysis/scaling.py) over this sweep's runs and those of
    `others` (sweeps of the same runs at other replicas); nothing when no run trained on more than one."""
    runs = [*sweep.ordered_runs(), *(run for other in others for run in other.ordered_runs())]
    return scaling_lines(runs)


def explain_sweep(
    sweep: SweepData, peak_flops: float | None = None, others: Sequence[SweepData] = (), concurrency: bool = True
) -> list[str]:
    """The explanation, one paragraph per line: time model, slow-downs, one-time costs, FLOPs, memory.

    `peak_flops` is the measured matmul peak (FLOP/s) of the device the sweep ran on, if known; `others`:
    sweeps at other replicas whose runs the scaling lines compare with this one's (explain_scaling);
    `concurrency`: open with the runs-at-once line (False where it was printed already, as `report` does).
    """
    fit = sweep_step_time(sweep)
    return [
        *(explain_concurrency(sweep) if concurrency else []),
        *explain_accumulation(sweep),
        *explain_batch_schedule(sweep),
        *explain_execution(sweep),
        *explain_scaling(sweep, others),
        *explain_time(sweep, fit),
        *explain_slowdowns(sweep),
        *explain_one_time(sweep),
        *explain_flops(sweep, fit, peak_flops),
        *explain_memory(sweep, sweep_memory_fit(sweep)),
        *explain_total_time(sweep),
    ]
