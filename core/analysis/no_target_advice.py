"""Which batch size, without a target: loss and time together, and a next step this sweep accepts.

From the after-the-fact figures of loss_level.py: the batch whose runs reached a loss every
finished run reached soonest (training time); the trade-off between the fastest steady epoch and the
loss it leaves after the same examples, and the losses at equal training time; then what to run
next to measure steps and time to a loss and the critical batch: a train_loss target at that level
(every batch reached it within this budget, so every batch can meet it), evaluated often enough,
worded for where the user is: the options on the command line, the Convergence section's fields
in the window. Every ratio is the larger over the smaller, its word says which way it goes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from batchlab.core.analysis.loss_level import SMOOTHING_BATCHES, BatchLevel, LossLevel
from batchlab.core.model import SweepData

if TYPE_CHECKING:
    from batchlab.core.analysis.analyse import Analysis

SURFACES = ("cli", "window")
EVALUATIONS_BEFORE_LEVEL = 10  # the suggested eval_every gives each batch about this many evaluations before the level
SAME = 1.005  # ratios closer to 1 than this are "about the same"
NO_LEVEL = (
    "No target was set, and no run finished with a smoothed loss yet, so the batch sizes cannot be compared at a "
    "common loss."
)
NO_STEPS = (
    "No target was set, and this file holds no per-step losses (a summary-only export left them out), so the batch "
    "sizes cannot be compared at a common loss here; the source file can."
)


def _b(value: float) -> str:
    return f"{value:,.0f}"


def _loss(value: float) -> str:
    return f"{value:.3g}"


def _s(value: float) -> str:
    return f"{value:.3g} s"


def check_surface(surface: str) -> None:
    """Raise ValueError for a surface that is not one of SURFACES."""
    if surface not in SURFACES:
        raise ValueError(f"surface {surface!r} is not known; use one of {', '.join(SURFACES)}")


def target_value(level: float) -> float:
    """The suggested train_loss target: the level rounded up to three significant figures, so every batch that
    reached the level meets it (a user's model may have a negative loss: rounded up too); NaN without a level."""
    if not math.isfinite(level) or level == 0:
        return 0.0 if level == 0 else math.nan
    digits = 2 - math.floor(math.log10(abs(level)))
    scale = 10.0**digits
    return math.ceil(level * scale - 1e-9) / scale


def eval_every(levels: list[BatchLevel]) -> int:
    """Steps between evaluations: about EVALUATIONS_BEFORE_LEVEL evaluations before the batch that needed the
    fewest steps reached the level, rounded down to one significant figure (at least 1)."""
    steps = [b.steps.mean for b in levels if b.steps.n]
    if not steps:
        return 1
    n = min(steps) / EVALUATIONS_BEFORE_LEVEL
    if n < 1:
        return 1
    power = 10 ** math.floor(math.log10(n))
    return max(1, int(n // power) * power)


def next_step_options(result: LossLevel, spec: dict[str, Any]) -> list[str]:
    """The `batchlab sweep` options to add to this sweep's own for the suggested next run (a train_loss target at
    the level and its evaluation interval; BatchLab's loop where the sweep used the fit engine); [] when no level."""
    value = target_value(result.level)
    if not math.isfinite(value) or (value <= 0 and spec.get("workload") != "keras-file"):
        return []  # a built-in workload's loss is never below 0, so such a target could never be met
    options = ["--target", f"train_loss={value:g}", "--eval-every", str(eval_every(result.by_batch()))]
    if spec.get("loop") == "fit":
        options += ["--loop", "loop"]
    return options


def _soonest(result: LossLevel, levels: list[BatchLevel]) -> str:
    reached = [b for b in levels if b.time.n]
    best = min(reached, key=lambda b: b.time.mean)
    others = [f"batch {_b(b.batch_size)} in {_s(b.time.mean)}" for b in reached if b is not best]
    never = [b for b in levels if b.reached < b.runs]
    seeds = f" (mean of {best.time.n} seeds)" if best.time.n > 1 else ""
    text = (
        f"Soonest to a common loss: batch {_b(best.batch_size)} reached a smoothed training loss of "
        f"{_loss(result.level)} in {_s(best.time.mean)} of training{seeds} ({best.steps.mean:,.0f} steps, "
        f"{best.examples.mean:,.0f} examples)"
    )
    text += f"; {', '.join(others)}." if others else "."
    if never:
        missed = [f"batch {_b(b.batch_size)} ({b.runs - b.reached} of {b.runs} runs)" for b in never]
        text += f" Never reached it: {', '.join(missed)}."
    text += (
        f" The level is the highest final loss of the {result.finished} finished runs (batch "
        f"{_b(result.level_batch)}'s), so each of them reached it; a run's smoothed loss is the mean mini-batch "
        f"loss over its last {result.window:,} training examples (the same for every batch size: "
        f"{SMOOTHING_BATCHES} x the largest batch, at most half the shortest run), and its time leaves out "
        "validation."
    )
    return text


def _examples_phrase(result: LossLevel, sweep: SweepData) -> str:
    samples = int(sweep.spec.get("samples") or 0)
    finished = [r for r in result.runs if r.status == "ok" and math.isfinite(r.final_loss)]
    same_end = finished and all(r.end_examples == result.common_examples for r in finished)
    if samples > 0 and result.common_examples % samples == 0 and same_end:
        epochs = result.common_examples // samples
        return f"after the same {epochs} epoch{'s' if epochs != 1 else ''} ({result.common_examples:,} examples)"
    return f"after the same {result.common_examples:,} examples"


def _trade_off(analysis: Analysis, result: LossLevel, levels: list[BatchLevel], sweep: SweepData) -> list[str]:
    lines = []
    epoch = {s.batch_size: s.epoch_time.mean for s in analysis.batches if s.epoch_time.n}
    losses = [b for b in levels if b.loss_at_examples.n]
    after = _examples_phrase(result, sweep)
    if len(losses) >= 2:
        lowest = min(losses, key=lambda b: b.loss_at_examples.mean)
        timed = [b for b in losses if b.batch_size in epoch]
        fastest = min(timed, key=lambda b: epoch[b.batch_size]) if timed else None
        if fastest is not None and fastest is not lowest and lowest.batch_size in epoch:
            speed = epoch[lowest.batch_size] / epoch[fastest.batch_size]
            worse = fastest.loss_at_examples.mean / lowest.loss_at_examples.mean
            pace = (
                f"is {speed:.2g}x faster per steady epoch than batch {_b(lowest.batch_size)} "
                f"({_s(epoch[fastest.batch_size])} against {_s(epoch[lowest.batch_size])})"
                if speed >= SAME
                else f"is about as fast per steady epoch as batch {_b(lowest.batch_size)}"
            )
            cost = (
                f"its loss is {worse:.2g}x higher ({_loss(fastest.loss_at_examples.mean)} against "
                f"{_loss(lowest.loss_at_examples.mean)})"
                if worse >= SAME
                else f"its loss is about the same ({_loss(fastest.loss_at_examples.mean)} against "
                f"{_loss(lowest.loss_at_examples.mean)})"
            )
            lines.append(f"Batch {_b(fastest.batch_size)} {pace}, but {after} {cost}.")
        elif fastest is not None and fastest is lowest:
            lines.append(
                f"Batch {_b(lowest.batch_size)} has both the fastest steady epoch ({_s(epoch[lowest.batch_size])}) "
                f"and the lowest loss {after} ({_loss(lowest.loss_at_examples.mean)})."
            )
        else:
            lines.append(f"Lowest loss {after}: batch {_b(lowest.batch_size)}, {_loss(lowest.loss_at_examples.mean)}.")
    at_time = [b for b in levels if b.loss_at_time.n]
    if len(at_time) >= 2:
        best = min(at_time, key=lambda b: b.loss_at_time.mean)
        others = ", ".join(f"batch {_b(b.batch_size)}: {_loss(b.loss_at_time.mean)}" for b in at_time if b is not best)
        missing = [b.batch_size for b in levels if not b.loss_at_time.n]
        ended = {r.batch_size for r in result.runs if r.end_time < result.common_time * (1 - 1e-9)}
        why = [f"batch {_b(m)}: {'ended before then' if m in ended else 'no full window yet'}" for m in missing]
        note = f" ({'; '.join(why)})" if why else ""
        lines.append(
            f"At equal training time ({_s(result.common_time)}, when the first run finished): batch "
            f"{_b(best.batch_size)} had the lowest loss, {_loss(best.loss_at_time.mean)}; {others}{note}."
        )
    return lines


def _next_step(result: LossLevel, levels: list[BatchLevel], sweep: SweepData, surface: str) -> str:
    options = next_step_options(result, sweep.spec)
    why = (
        "to measure the steps and time each batch size needs to reach that loss, the critical batch and the batch "
        "that gets there soonest"
    )
    if not options:
        return f"Next: set a target and run again, {why}."
    value, every = options[1].split("=", 1)[1], options[3]
    lower = "a lower loss may need a larger budget"
    if surface == "window":
        loop = " and Engine to BatchLab's loop" if "--loop" in options else ""
        return (
            f"Next, {why}: in the setup panel's Convergence section set Target to train_loss {value} (the level "
            f"every finished run reached here) and Evaluate every (steps) to {every}{loop}, then run the sweep again; "
            f"{lower}."
        )
    return (
        f"Next, {why}: run the same sweep again with {' '.join(options)} (train_loss at the level every finished run "
        f"reached here); {lower} (--epochs, --steps or --examples)."
    )


def no_target_recommendation(analysis: Analysis, sweep: SweepData, surface: str = "cli") -> list[str]:
    """The paragraphs that answer "which batch size" for a sweep without a target: the batch that reached a common
    loss soonest, the time/loss trade-off in numbers, and the next step in the words of `surface` ("cli" or
    "window")."""
    check_surface(surface)
    result = analysis.loss_level
    if result is None or not math.isfinite(result.level):
        return [NO_STEPS if any(r.steps_left_out for r in sweep.runs.values()) else NO_LEVEL]
    levels = result.by_batch()
    if len(levels) == 1:
        only = levels[0]
        ended = sum(r.end_time for r in result.runs) / len(result.runs)
        lines = [
            f"One batch size only (batch {_b(only.batch_size)}): its smoothed training loss ended at "
            f"{_loss(only.final_loss.mean)} after {_s(ended)} of training; with nothing to compare it to, add batch "
            "sizes to see which one reaches a loss soonest."
        ]
    else:
        lines = [_soonest(result, levels), *_trade_off(analysis, result, levels, sweep)]
    return [*lines, _next_step(result, levels, sweep, surface)]
