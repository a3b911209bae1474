"""A launcher for tests: no process, no TensorFlow; each run's events are synthesised from a small model.

A run at batch B takes steps of ALPHA + BETA*B s and meets val_loss < 0.5 after SMIN (1 + BCRIT/B) steps
(tests/core/analysis_sweeps.py uses the same shape), evaluated every EVAL_EVERY steps; a batch size in
`missed` never meets it and trains its whole budget. `slots` runs may be in flight at once; each handle
gives one event per poll that finds one waiting and then says nothing until the next poll, so the
scheduler interleaves the runs in flight event by event.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from batchlab.core.events import make_event
from batchlab.core.spec import RunSpec

SMIN, BCRIT = 40.0, 64.0  # steps, samples
ALPHA, BETA = 2e-3, 25e-6  # s, s per sample
EVAL_EVERY = 10  # optimizer steps between evaluations
TARGET = "val_loss=0.5"
# The synthetic clock (UTC, as the writer's): run i starts at 10 i s and ends 9 s later.
CLOCK0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def steps_to_target(batch: int) -> int:
    return math.ceil(SMIN * (1 + BCRIT / batch) / EVAL_EVERY) * EVAL_EVERY


def step_s(batch: int) -> float:
    return ALPHA + BETA * batch


def time_to_target(batch: int) -> float:
    """s of training at the evaluation that meets the target (what the file records as time to target)."""
    return steps_to_target(batch) * step_s(batch)


def run_events(run: RunSpec, budget_steps: int, missed: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The events a training child would send for `run`: steps in chunks of EVAL_EVERY, an evaluation after
    each chunk, and run_ended once the target is met (or the budget is spent)."""
    b = run.batch_size
    reach = budget_steps + 1 if b in missed else steps_to_target(b)
    target = TARGET if run.sweep.target else ""
    events = [
        make_event(
            "run_started", run=run.index, batch_size=b, seed=run.seed, epochs=1, steps_per_epoch=budget_steps,
            samples=run.sweep.samples, target=target, pid=0, device="cpu:0", started=_at(10 * run.index),
        )
    ]  # fmt: skip
    done = 0
    while done < min(reach, budget_steps):
        n = EVAL_EVERY
        walls = [(done + k + 1) * step_s(b) for k in range(n)]
        events.append(
            make_event(
                "steps", run=run.index, step=list(range(done, done + n)), epoch=[0] * n,
                loss=[1.0 + 1.0 / (1 + done + k) for k in range(n)], batch_size=[b] * n,
                step_time=[step_s(b)] * n, fetch_time=[0.0] * n, input_wait=[0.0] * n, traced=[0] * n,
                wall_time=walls, lr=[0.01] * n,
            )
        )  # fmt: skip
        done += n
        met = done >= reach
        events.append(
            make_event(
                "evaluation", run=run.index, steps=done, examples=done * b, epochs=done * b / run.sweep.samples,
                wall_time=walls[-1], train_wall_time=walls[-1], eval_time=0.01, at_epoch_end=0,
                train_loss=0.4 if met else 0.9, val_loss=0.45 if met else 0.9, val_accuracy=0.9, val_error=0.1,
            )
        )  # fmt: skip
    total = done * step_s(b)
    ended = _at(10 * run.index + 9)
    events.append(make_event("run_ended", run=run.index, status="ok", message="", total_time=total, ended=ended))
    return events


def _at(seconds: float) -> str:
    return (CLOCK0 + timedelta(seconds=seconds)).isoformat(timespec="seconds")


class FakeHandle:
    """A run in flight whose events come from a list; stop() makes its next event run_ended "interrupted"."""

    def __init__(self, run: RunSpec, events: list[dict[str, Any]], kind: str = "fake"):
        self.run, self.kind, self.note = run, kind, ""
        self._events = list(events)
        self._quiet = False  # says nothing to the poll after one that found an event
        self._stopped = False
        self.alive = True

    def poll(self, timeout: float) -> bool:
        if self._quiet:
            self._quiet = False
            return False
        return bool(self._events) and self.alive

    def recv(self) -> dict[str, Any]:
        if not self._events or not self.alive:
            raise EOFError
        self._quiet = True
        event = self._events.pop(0)
        if event["type"] == "run_ended":
            self.alive = False
        return event

    def stop(self) -> None:
        if self._stopped or not self._events:
            return
        self._stopped = True
        end = make_event("run_ended", run=self.run.index, status="interrupted", message="stopped by the user")
        self._events = [end]

    def kill(self) -> None:
        self.alive = False

    def is_alive(self) -> bool:
        return self.alive

    def death_message(self) -> str:
        return "the fake run was killed"


class FakeLauncher:
    """Starts FakeHandles; records the most runs it had in flight at once."""

    def __init__(self, slots: int = 1, budget_steps: int = 400, missed: tuple[int, ...] = ()):
        self.slots, self.budget_steps, self.missed = slots, budget_steps, missed
        self.warnings: list[str] = []
        self.flying: set[int] = set()
        self.most_in_flight = 0
        self.started_order: list[int] = []

    def prepare(self, runs, should_stop) -> None:
        pass

    def probe(self, should_stop, data) -> dict[str, Any]:
        return {"device_description": "cpu: fake launcher", "devices": [], "tensorflow_version": "none"}

    def start(self, run: RunSpec, next_run: RunSpec | None) -> FakeHandle:
        self.flying.add(run.index)
        self.most_in_flight = max(self.most_in_flight, len(self.flying))
        self.started_order.append(run.index)
        return FakeHandle(run, run_events(run, self.budget_steps, self.missed))

    def started(self, handle, next_run) -> None:
        pass

    def finished(self, handle, status, stopping) -> None:
        self.flying.discard(handle.run.index)

    def kill(self) -> None:
        pass

    def close(self) -> None:
        pass
