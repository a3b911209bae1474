"""Every second of a run accounted for: its wall time, from the request for the run to its end, in named parts.

The parts, in a fixed order (PARTS), each measured in the training child and read from the run file:

- ``startup``: process start, TensorFlow import and data loading paid after the request (startup_*_s, less
  what a standby child did ahead);
- ``model``, ``pipeline``: building the model; copying the data to the device and making the input pipeline;
- ``tracing``: tracing and compiling the step function (traced steps beyond a typical step, tracing_time);
- ``compute``, ``input_wait``, ``loop``, ``stalls``: the epochs' training time (epoch_time): steady step
  compute, waiting for the input pipeline, the loop's own work (taking ready batches, per-step hooks), and
  stalls (untraced steps longer than STALL_FACTOR typical steps: their excess over a typical step);
- ``validation``: validation passes, mid-epoch evaluations and noise-scale measurements;
- ``pipeline_close``: closing each epoch's input-pipeline iterator (epochs' close_time, and last_close_time_s
  for an epoch the run ended inside): tf.data stops its
  prefetch and map threads and waits for the batches they are making; the gap of seconds between two epochs
  that no other figure held (docs/analysis.md, "Every second accounted for");
- ``hooks``: the measurement hooks at the run's start and at epoch boundaries (metrics, memory readings,
  sending rows to the writer), as HookList timed them.

``unaccounted`` is the wall time less every part. Garbage-collection pauses (gc_time_s) fall inside the parts
and are reported beside them. Numbers only: no TensorFlow, no Qt. Every view (report, window, explanation)
takes its numbers from `time_account`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from batchlab.core.model import RunData

# (key, words) in the order of a run: one-time costs, the epochs' training time, per-epoch overheads
PARTS = (
    ("startup", "start-up (process, import, data)"),
    ("model", "model build"),
    ("pipeline", "data to device, input pipeline"),
    ("tracing", "tracing and compiling"),
    ("compute", "steady step compute"),
    ("input_wait", "input wait"),
    ("loop", "loop overhead (ready batches, per-step hooks)"),
    ("stalls", "stalls"),
    ("validation", "validation and evaluations"),
    ("pipeline_close", "closing the input pipeline (tf.data iterator)"),
    ("hooks", "measurement hooks (metrics, memory, sending rows)"),
)
PART_NAMES = tuple(key for key, _ in PARTS)
PART_WORDS = dict(PARTS)
ONE_TIME = ("startup", "model", "pipeline", "tracing")
STEADY = ("compute", "input_wait", "loop")  # what a steady epoch is made of
STALL_FACTOR = 5.0  # an untraced step this many times the median untraced step stalled
AHEAD = ("startup_process_s", "startup_import_s", "startup_data_s")


@dataclass(frozen=True)
class TimeAccount:
    """One run's wall time (s, request to end) and its parts (s, PART_NAMES order); `unaccounted` is the rest."""

    run: int
    batch_size: int
    parts: dict[str, float]
    wall: float
    gc_time: float = math.nan  # s of garbage collection, inside the parts
    steady_epoch: float = math.nan  # s, the run's steady epoch (RunFigures.epoch_time)

    @property
    def unaccounted(self) -> float:
        return self.wall - sum(self.parts.values())

    @property
    def unaccounted_share(self) -> float:
        """unaccounted / wall (NaN when the wall is not known or 0)."""
        return self.unaccounted / self.wall if math.isfinite(self.wall) and self.wall > 0 else math.nan

    @property
    def steady(self) -> float:
        """Seconds of steady training (compute, input wait, the loop's own work)."""
        return sum(self.parts[k] for k in STEADY)


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _sum(values) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(values[np.isfinite(values)].sum())


def _or0(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def _wall(attrs: dict) -> float:
    """Request to run_ended (s): start-up plus the run's span; older files: start-up plus total_time."""
    startup, span, total = (_float(attrs.get(k)) for k in ("startup_s", "run_span_s", "total_time"))
    inside = span if math.isfinite(span) else total
    if math.isfinite(startup) and math.isfinite(inside):
        return startup + inside
    return inside


def _startup_parts(attrs: dict) -> dict[str, float]:
    ahead_done = sum(_or0(_float(attrs.get(k))) for k in AHEAD)
    prepared = min(max(0.0, _or0(_float(attrs.get("startup_prepared_s")))), ahead_done)
    made_ahead = math.isfinite(_float(attrs.get("prepared_ahead_s")))  # model and pipeline built before its turn
    return {
        "startup": max(0.0, ahead_done - prepared),
        "model": 0.0 if made_ahead else _or0(_float(attrs.get("startup_model_s"))),
        "pipeline": 0.0 if made_ahead else _or0(_float(attrs.get("startup_pipeline_s"))),
    }


def _training_parts(run: RunData, tracing: float) -> dict[str, float]:
    """The epochs' training time split into compute, input wait, loop overhead and stalls (s); steps after the
    last epoch row (a budget that ends inside an epoch) count from their wall_time."""
    steps, epochs = run.steps, run.epochs
    epoch_rows = np.asarray(epochs["epoch"], dtype=np.int64)
    trained = _sum(epochs["epoch_time"])
    step_epoch = np.asarray(steps["epoch"], dtype=np.int64)
    tail = ~np.isin(step_epoch, epoch_rows)
    if tail.any():
        walls = np.asarray(epochs["wall_time"], dtype=np.float64)
        since = float(walls[-1]) if len(walls) and math.isfinite(walls[-1]) else 0.0
        last = np.asarray(steps["wall_time"], dtype=np.float64)[tail]
        trained += max(0.0, float(last[-1]) - since) if math.isfinite(last[-1]) else 0.0
    step_time = np.asarray(steps["step_time"], dtype=np.float64)
    wait = _sum(steps["input_wait"])
    if not len(step_time) or not np.isfinite(step_time).all():  # sampled sync or fit: compute is the rest
        return {"compute": trained - tracing - wait, "input_wait": wait, "loop": 0.0, "stalls": 0.0}
    untraced = step_time[np.asarray(steps["traced"]) != 1]
    typical = float(np.median(untraced)) if len(untraced) else 0.0
    slow = untraced[untraced > STALL_FACTOR * typical] if typical > 0 else untraced[:0]
    stalls = float((slow - typical).sum())
    return {
        "compute": float(step_time.sum()) - tracing - stalls,
        "input_wait": wait,
        "loop": trained - float(step_time.sum()) - wait,
        "stalls": stalls,
    }


def _validation(run: RunData) -> float:
    """Validation passes at epoch ends, evaluations inside epochs and noise-scale measurements (s)."""
    mid = np.asarray(run.evals["at_epoch_end"]) == 0
    return (
        _sum(run.epochs["val_time"])
        + _sum(np.asarray(run.evals["eval_time"], dtype=np.float64)[mid])
        + _sum(run.noise_scale["measure_time"])
    )


def time_account(run: RunData) -> TimeAccount:
    """The run's time account from its run attributes and tables; parts not measured (older files, a run that
    failed before training) are 0 and their time is unaccounted."""
    attrs = run.attrs
    figures = run.figures
    tracing = _or0(figures.tracing_time)
    parts = dict.fromkeys(PART_NAMES, 0.0)
    parts.update(_startup_parts(attrs))
    parts["tracing"] = tracing
    if len(run.steps):
        parts.update(_training_parts(run, tracing))
    parts["validation"] = _validation(run)
    parts["pipeline_close"] = _sum(run.epochs["close_time"]) + _or0(_float(attrs.get("last_close_time_s")))
    parts["hooks"] = _or0(_float(attrs.get("hooks_run_begin_s"))) + _or0(_float(attrs.get("hooks_epoch_s")))
    return TimeAccount(
        run=run.index,
        batch_size=run.batch_size,
        parts=parts,
        wall=_wall(attrs),
        gc_time=_float(attrs.get("gc_time_s")),
        steady_epoch=figures.epoch_time,
    )


def sweep_accounts(runs: list[RunData]) -> list[TimeAccount]:
    """The accounts of the runs that ran (a finite wall time), in run order; none for a run whose steps a
    summary-only export left out (the account's training parts come from them)."""
    accounts = [time_account(r) for r in runs if r.status not in ("pending", "skipped") and not r.steps_left_out]
    return [a for a in accounts if math.isfinite(a.wall)]


# ---------------------------------------------------------------------- the explanation

SHOWN_PARTS = 4  # parts named one by one in the sentence; the others are summed
MIN_SHOWN_S = 0.05  # a part under this many seconds is summed with the others


def _s(seconds: float) -> str:
    return f"{seconds:.2g} s" if abs(seconds) < 1 else f"{seconds:.1f} s"


def _listed(account: TimeAccount) -> str:
    """The account's largest parts by name, then the rest summed, then what is unaccounted."""
    ranked = sorted(PART_NAMES, key=lambda k: -account.parts[k])
    shown = [k for k in ranked[:SHOWN_PARTS] if account.parts[k] >= MIN_SHOWN_S]
    rest = [k for k in PART_NAMES if k not in shown]
    words = [f"{_s(account.parts[k])} {PART_WORDS[k]}" for k in shown]
    if rest:
        words.append(f"{_s(sum(account.parts[k] for k in rest))} in {len(rest)} other parts")
    words.append(f"{_s(account.unaccounted)} unaccounted ({100 * account.unaccounted_share:.1f}%)")
    return ", ".join(words)


def explain_total_time(sweep) -> list[str]:
    """Why the slowest run in total was the slowest, from the runs' time accounts: where its seconds went, how
    its steady epoch compares, and which parts made the difference to the run fastest in total. [] with fewer
    than two runs that ran, or when no run is strictly the slowest."""
    accounts = [a for a in sweep_accounts(sweep.ordered_runs()) if math.isfinite(a.unaccounted_share)]
    if len(accounts) < 2:
        return []
    slow = max(accounts, key=lambda a: a.wall)
    fast = min(accounts, key=lambda a: a.wall)
    if sum(a.wall == slow.wall for a in accounts) > 1 or slow.wall == fast.wall:
        return []
    lines = [
        f"Where the time went: batch {slow.batch_size} took {_s(slow.wall)} in total (from the request for the "
        f"run to its end), the slowest run: {_listed(slow)}."
    ]
    diff = {k: slow.parts[k] - fast.parts[k] for k in PART_NAMES}
    grew = sorted((k for k in PART_NAMES if diff[k] >= MIN_SHOWN_S), key=lambda k: -diff[k])[:2]
    more = _s(slow.wall - fast.wall)
    text = f"Against batch {fast.batch_size} ({_s(fast.wall)}, the fastest in total) it took {more} more"
    if grew:
        text += "; the parts that grew most: " + " and ".join(f"{PART_WORDS[k]} (+{_s(diff[k])})" for k in grew)
    steady = [a for a in accounts if math.isfinite(a.steady_epoch)]
    if slow in steady and len(steady) > 1:
        quickest = min(steady, key=lambda a: a.steady_epoch)
        if quickest is slow and sum(a.steady_epoch == slow.steady_epoch for a in steady) == 1:
            others = ", ".join(f"batch {a.batch_size}: {_s(a.steady_epoch)}" for a in steady if a is not slow)
            text += f"; in steady state it is the fastest ({_s(slow.steady_epoch)} an epoch; {others})"
        else:
            text += (
                f"; in steady state it takes {_s(slow.steady_epoch)} an epoch "
                f"(the fastest: batch {quickest.batch_size}, {_s(quickest.steady_epoch)})"
            )
    if slow.steady < fast.steady:
        text += (
            f"; its training steps (compute, input wait, loop) took {_s(slow.steady)} against {_s(fast.steady)}, "
            "so its one-time and per-epoch costs made it the slowest here"
        )
    else:
        text += f"; its training steps (compute, input wait, loop) alone took {_s(slow.steady)}"
        text += f" against {_s(fast.steady)}"
    lines.append(text + ".")
    return lines + _bigger_but_slower(accounts, slow)


SLOWER_IN_TOTAL = 1.05  # a bigger batch 5% slower in total than a smaller one, though faster per epoch, is said


def _bigger_but_slower(accounts: list[TimeAccount], said: TimeAccount) -> list[str]:
    """The seed question, "why did the bigger batch take longer?": the largest batch that took longer in total
    than a smaller one whose steady epochs are slower, against the quickest such smaller batch, with the parts
    that made the difference. [] when no run is like that (or it is the slowest run, said already)."""
    pairs = [
        (big, small)
        for big in accounts
        for small in accounts
        if big.batch_size > small.batch_size
        and big.wall > SLOWER_IN_TOTAL * small.wall
        and math.isfinite(big.steady_epoch)
        and math.isfinite(small.steady_epoch)
        and big.steady_epoch < small.steady_epoch
    ]
    if not pairs:
        return []
    big = max((b for b, _ in pairs), key=lambda a: a.batch_size)
    small = min((s for b, s in pairs if b is big), key=lambda a: a.wall)
    if big is said and small.wall == min(a.wall for a in accounts):
        return []  # the sentences above compare these two already
    diff = {k: big.parts[k] - small.parts[k] for k in PART_NAMES}
    grew = sorted((k for k in PART_NAMES if diff[k] >= MIN_SHOWN_S), key=lambda k: -diff[k])[:3]
    text = (
        f"Why the bigger batch took longer: batch {big.batch_size} took {_s(big.wall)} in total, "
        f"{_s(big.wall - small.wall)} more than batch {small.batch_size} ({_s(small.wall)}), though its steady "
        f"epochs are faster ({_s(big.steady_epoch)} against {_s(small.steady_epoch)})"
    )
    if grew:
        text += "; the difference is " + ", ".join(f"{PART_WORDS[k]} (+{_s(diff[k])})" for k in grew)
    text += f"; its training steps (compute, input wait, loop) took {_s(big.steady)} against {_s(small.steady)}."
    return [text]
