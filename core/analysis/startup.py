"""What each run paid once, before its first step: the start-up phases its training child measured.

The child (core/training/startup.py) records each phase's seconds as run attributes: process start,
TensorFlow import, data, model build, input pipeline, and `startup_s`, the time from the parent's
request for the run to the start of its first step. The first step itself traces the step function
(`tracing_time_s`). A standby child (or the probe's child, which checked the spec first) did its process
start, import and data before the request (`startup_prepared_s`), so its run paid only the rest; a reused
child (the process that trained the run before, on the CPU) pays no process start, import or data at all;
a forked child (Linux CPU) pays only its fork: the sweep's fork server imported TensorFlow and loaded the
data once, before any run.
Numbers only; no TensorFlow, no Qt.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from batchlab.core.analysis.claims import Seconds, say
from batchlab.core.model import RunData

# (attribute, words) in the order a child goes through them
PHASES = (
    ("startup_process_s", "process start"),
    ("startup_import_s", "TensorFlow import"),
    ("startup_data_s", "data"),
    ("startup_model_s", "model build"),
    ("startup_pipeline_s", "input pipeline"),
)
LATE_SHOWN_S = 0.05  # a standby still starting when its run was asked for: said from this many seconds
AHEAD = ("startup_process_s", "startup_import_s", "startup_data_s")  # what a standby child can do before its run


@dataclass(frozen=True)
class OneTimeCosts:
    """One run's costs before its first step ended (s). `paid` is what the run waited for after its request."""

    child: str  # "fresh", "standby", "probe", "reused" or "forked"
    phases: dict[str, float]  # attribute name -> seconds the phase took, wherever it fell
    tracing: float  # tracing and compiling the step function, in the first step (NaN: not known)
    ahead: float  # of process start, import and data: seconds done before the request (standby)
    paid: float  # request -> end of the first step

    @property
    def rest(self) -> float:
        """What the paid time holds besides the phases run after the request and tracing (spec checks, pipes,
        the first step's own compute), never below 0."""
        after = sum(self.phases.values()) - self.ahead
        return max(0.0, self.paid - after - (self.tracing if math.isfinite(self.tracing) else 0.0))


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def one_time_costs(run: RunData) -> OneTimeCosts | None:
    """The run's measured start-up, or None for a run file made before it was recorded (or a run that never
    trained a step)."""
    attrs = run.attrs
    startup = _float(attrs.get("startup_s"))
    walls = run.steps.get("wall_time")
    if not math.isfinite(startup) or walls is None or not len(walls) or not math.isfinite(float(walls[0])):
        return None
    phases = {name: _float(attrs.get(name)) for name, _ in PHASES}
    phases = {k: v for k, v in phases.items() if math.isfinite(v)}
    ahead_total = sum(phases.get(k, 0.0) for k in AHEAD)
    ahead = min(max(0.0, _float(attrs.get("startup_prepared_s")) or 0.0), ahead_total)
    return OneTimeCosts(
        child=str(attrs.get("child", "fresh")),
        phases=phases,
        tracing=run.figures.tracing_time,
        ahead=ahead if math.isfinite(ahead) else 0.0,
        paid=startup + float(walls[0]),
    )


def _s(seconds: float) -> str:
    """Seconds as start-up says them (0.43 s, 2.1 s), a checked claim (claims.Seconds)."""
    return say(Seconds(seconds, "short"))


def _runs(numbers: list[int]) -> str:
    return f"run {numbers[0]}" if len(numbers) == 1 else "runs " + ", ".join(str(n) for n in numbers)


def _median_costs(costs: list[OneTimeCosts]) -> dict[str, float]:
    out = {}
    for name, _ in PHASES:
        values = [c.phases[name] for c in costs if name in c.phases]
        if values:
            out[name] = statistics.median(values)
    return out


def explain_startup(runs: list[RunData]) -> list[str]:
    """One sentence per kind of child: what a run paid before its first step, phase by phase (medians)."""
    measured = [(r.index, c) for r in runs if (c := one_time_costs(r)) is not None]
    # runs prepared ahead (--prepare-ahead) paid their build and tracing while the run before trained: said apart
    ahead_s = {r.index: _float(r.attrs.get("prepared_ahead_s")) for r in runs}
    prepared = [(n, c) for n, c in measured if math.isfinite(ahead_s.get(n, math.nan))]
    measured = [(n, c) for n, c in measured if not math.isfinite(ahead_s.get(n, math.nan))]
    lines = []
    for kind in ("fresh", "probe", "standby", "reused", "forked"):
        group = [(n, c) for n, c in measured if c.child == kind]
        if not group:
            continue
        costs = [c for _, c in group]
        phases = _median_costs(costs)
        tracing = [c.tracing for c in costs if math.isfinite(c.tracing)]
        paid = statistics.median(c.paid for c in costs)
        ahead = statistics.median(c.ahead for c in costs)
        numbers = _runs([n for n, _ in group])
        who = (
            numbers
            + {
                "fresh": " (a fresh child, started when its run was asked for)",
                "probe": " (the probe's child: it checked the spec, then took the first run)",
                "standby": " (a standby child, started ahead: during the previous run or the spec's check)",
                "reused": " (a reused child: the process that trained the run before, which ended ok)",
                "forked": " (a forked child: a process of its own, forked from the sweep's fork server)",
            }[kind]
        )
        shown = [(name, words) for name, words in PHASES if name in phases]
        if kind in ("standby", "probe"):
            before = [f"{words} {_s(phases[name])}" for name, words in shown if name in AHEAD]
            after = [f"{words} {_s(phases[name])}" for name, words in shown if name not in AHEAD]
            late = statistics.median(sum(c.phases.get(k, 0.0) for k in AHEAD) - c.ahead for c in costs)
            if late >= LATE_SHOWN_S:
                child = "standby" if kind == "standby" else "probe child"
                after.insert(0, f"waiting for the {child} to finish its start-up {_s(late)}")
        elif kind == "reused":  # no process start, no import; the data only if this run's differ
            before = []
            after = [f"{words} {_s(phases[name])}" for name, words in shown if name not in AHEAD or phases[name] > 0]
        elif kind == "forked":  # the fork; no import; the data only if the server could not load them
            before = []
            words_of = {"startup_process_s": "fork"}
            after = [
                f"{words_of.get(name, words)} {_s(phases[name])}"
                for name, words in shown
                if name == "startup_process_s" or name not in AHEAD or phases[name] > 0
            ]
        else:
            before, after = [], [f"{words} {_s(phases[name])}" for name, words in shown]
        if tracing:
            after.append(f"tracing {_s(statistics.median(tracing))}")
        after.append(f"the rest {_s(statistics.median(c.rest for c in costs))}")
        text = f"Before its first step ended, {who} paid {_s(paid)}"
        text += (" (median)" if len(costs) > 1 else "") + ": " + ", ".join(after)
        if before and kind == "probe":
            text += f"; its {', '.join(before)} were paid once, for the spec's check before the first run"
        elif before:
            text += f"; its {', '.join(before)} ({_s(ahead)} of them ahead of the request) were off the sweep's clock"
        if kind == "reused":
            text += "; no process start or TensorFlow import"
        elif kind == "forked":
            text += "; TensorFlow was imported and the data loaded once, by the fork server, before the first run"
        lines.append(text + ".")
    if prepared:
        seconds = [ahead_s[n] for n, _ in prepared]
        span = _s(seconds[0]) if len(seconds) == 1 else f"{_s(min(seconds))} to {_s(max(seconds))}"
        paid = statistics.median(c.paid for _, c in prepared)
        who = _runs([n for n, _ in prepared]).capitalize()
        lines.append(
            f"{who} (prepared ahead: forked while the run before trained, built its model "
            f"and traced, with XLA compiled, its first call, {span} each, off the sweep's clock) paid "
            f"{_s(paid)}{' (median)' if len(prepared) > 1 else ''} from its turn to its first step's end, any wait "
            "for a preparation still under way included."
        )
    return lines
