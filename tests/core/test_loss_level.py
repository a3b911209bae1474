"""Loss and time together (core/analysis/loss_level.py): time, steps and examples to a loss every run reached,
and the loss at equal time and examples, on a recorded sweep (against a hand computation from the file's raw
columns) and on synthetic runs with known answers."""

import math
from pathlib import Path

import h5py
import numpy as np
import pytest
from batchlab.core.analysis.loss_level import (
    MAX_WINDOW_SHARE,
    SMOOTHING_BATCHES,
    format_loss_level,
    loss_level,
    smoothed_loss,
)
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

from tests.core.analysis_sweeps import steps_event

RECORDED = Path(__file__).parent / "data" / "autoencoder-16-64-256.h5"  # mnist-autoencoder, 1,000 samples, 3 epochs


def _hand_smoothed(loss, batch, window):
    """The smoothed loss step by step, as a person would: walk back from each step until `window` examples."""
    out = []
    for i in range(len(loss)):
        seen = sum(batch[: i + 1])
        if seen < window:
            out.append(math.nan)
            continue
        total = examples = 0.0
        k = i
        while k >= 0 and seen - sum(batch[: k + 1]) < window:  # step k ends within `window` examples of step i
            total += loss[k] * batch[k]
            examples += batch[k]
            k -= 1
        out.append(total / examples)
    return out


def _hand_clock(group):
    """Training time at each step's end: wall_time gaps inside an epoch; an epoch's first step its own fetch_time +
    step_time (the validation pass between epochs left out); the run's first step its wall_time."""
    wall, epoch = group["wall_time"][:], group["epoch"][:]
    own = group["fetch_time"][:] + group["step_time"][:]
    clock, total = [], 0.0
    for i in range(len(wall)):
        if i == 0:
            total = wall[0]
        elif epoch[i] != epoch[i - 1]:
            total += own[i]
        else:
            total += wall[i] - wall[i - 1]
        clock.append(total)
    return clock


def test_time_to_the_common_level_on_a_recorded_sweep_matches_a_hand_computation():
    result = loss_level(SweepData.from_file(RECORDED))
    with h5py.File(RECORDED, "r") as f:
        groups = [f["runs"][name]["steps"] for name in sorted(f["runs"])]
        batch_sizes = [int(g["batch_size"][0]) for g in groups]
        assert batch_sizes == [16, 64, 256]
        window = min(SMOOTHING_BATCHES * 256, MAX_WINDOW_SHARE * 3000)  # 4 x the largest batch, runs of 3,000 ex.
        assert result.window == window == 1024
        curves = [
            _hand_smoothed(g["loss"][:].astype(float).tolist(), g["batch_size"][:].tolist(), window) for g in groups
        ]
        clocks = [_hand_clock(g) for g in groups]
        batches = [g["batch_size"][:].tolist() for g in groups]
    # the level: the worst final smoothed loss (batch 256 ended highest)
    finals = [c[-1] for c in curves]
    assert result.level == pytest.approx(max(finals)) and result.level_batch == 256
    assert result.finished == 3
    for run, curve, clock, batch in zip(result.runs, curves, clocks, batches, strict=True):
        first = next(i for i, v in enumerate(curve) if v <= result.level)
        assert run.steps == first + 1
        assert run.examples == sum(batch[: first + 1])
        assert run.time == pytest.approx(clock[first])
        assert run.final_loss == pytest.approx(curve[-1])
    # by hand: batch 64 got there first in time, batch 256 only at its very end (it set the level)
    assert [r.steps for r in result.runs] == [65, 18, 12]
    times = [r.time for r in result.runs]
    assert min(times) == result.runs[1].time
    # equal examples: every run saw 3,000, so the loss there is each run's final smoothed loss
    assert result.common_examples == 3000
    assert [r.loss_at_examples for r in result.runs] == pytest.approx(finals)
    # equal time: when the first run finished (batch 256); batch 16 had not seen a full window by then
    assert result.common_time == pytest.approx(min(c[-1] for c in clocks)) == pytest.approx(clocks[2][-1])
    at = [
        next((curve[i] for i in reversed(range(len(c))) if c[i] <= result.common_time), math.nan)
        for curve, c in zip(curves, clocks, strict=True)
    ]
    assert math.isnan(result.runs[0].loss_at_time) and math.isnan(at[0])
    assert result.runs[1].loss_at_time == pytest.approx(at[1])
    table = format_loss_level(result)
    assert "level 429" in table and "smoothed over the last 1,024 examples" in table
    assert table.splitlines()[-2].split() == ["64", "1.39", "18", "1,128", "259", "211"]


def test_the_smoothed_loss_averages_over_examples_so_batch_sizes_compare_fairly():
    # a batch of 4 and a batch of 1: a window of 4 examples is one step of the first, four of the second
    assert smoothed_loss(np.array([8.0, 4.0]), np.array([4, 4]), 4).tolist() == [8.0, 4.0]
    small = smoothed_loss(np.array([9.0, 7.0, 5.0, 3.0, 1.0]), np.ones(5), 4)
    assert np.isnan(small[:3]).all() and small[3:].tolist() == [6.0, 4.0]
    # a last smaller batch counts by its samples; a non-finite loss makes its windows unknown, not zero
    assert smoothed_loss(np.array([2.0, 4.0]), np.array([3, 1]), 4)[1] == pytest.approx((2 * 3 + 4) / 4)
    assert np.isnan(smoothed_loss(np.array([1.0, np.inf, 1.0, 1.0]), np.ones(4), 2)[:3]).all()


def _sweep(runs, samples=1000):
    """Synthetic runs: (batch, steps, step seconds, loss(examples seen before the step), status)."""
    data = SweepData()
    data.handle(make_event("sweep_started", spec={"samples": samples}, runs=[], environment={}))
    for index, (b, n, seconds, loss, status) in enumerate(runs):
        data.handle(make_event("run_started", run=index, batch_size=b, seed=0, samples=samples))
        seen = np.arange(n) * b
        data.handle(steps_event(index, b, [loss(e) for e in seen], [seconds] * n))
        data.handle(make_event("run_ended", run=index, status=status, message="", total_time=seconds * n))
    return data


def test_synthetic_runs_reach_the_level_when_their_loss_says_and_a_failed_run_never_does():
    def falling(e):
        return 100.0 / (1 + e / 1000)

    # the same loss against examples, different speeds: batch 8 steps 1 ms, batch 64 steps 4 ms (2x per example);
    # batch 64 trains only 256 steps and ends highest; batch 32 crashed after 16 steps
    data = _sweep(
        [
            (8, 2048, 1e-3, falling, "ok"),
            (64, 256, 4e-3, falling, "ok"),
            (32, 16, 2e-3, falling, "crashed"),
        ]
    )
    result = loss_level(data)
    assert result.window == 256 and result.finished == 2  # 4 x 64
    # batch 64's final window: its last 4 steps, losses at 16,128 ... 16,320 examples seen before each
    final_64 = np.mean([falling(e) for e in (252 * 64, 253 * 64, 254 * 64, 255 * 64)])
    assert result.level == pytest.approx(final_64) and result.level_batch == 64
    by = {r.batch_size: r for r in result.runs}
    # batch 8 reaches it where its own window mean first is at or below it: by hand, step index i
    curve = [np.mean([falling(8 * k) for k in range(i - 31, i + 1)]) if i >= 31 else math.inf for i in range(2048)]
    i = next(k for k, v in enumerate(curve) if v <= result.level)
    assert by[8].steps == i + 1 and by[8].examples == 8 * (i + 1) and by[8].time == pytest.approx(1e-3 * (i + 1))
    assert by[64].steps == 256 and by[64].time == pytest.approx(256 * 4e-3)
    # the crashed run never got there: NaN, and "never" in the report's table
    assert math.isnan(by[32].time) and math.isnan(by[32].steps) and math.isnan(by[32].loss_at_time)
    assert format_loss_level(result).splitlines()[-2].split()[:4] == ["32", "never", "never", "never"]
    # equal examples: the fewest a finished run saw (batch 64's 16,384); equal time: batch 64's end, 1.024 s
    assert result.common_examples == 64 * 256 and result.common_time == pytest.approx(1.024)
    assert by[8].loss_at_examples == pytest.approx(curve[64 * 256 // 8 - 1])
    assert by[8].loss_at_time == pytest.approx(curve[1023])  # 1,024 steps of 1 ms


def test_one_run_is_its_own_level_and_a_sweep_without_steps_has_none():
    data = _sweep([(16, 100, 1e-3, lambda e: 5.0, "ok")])
    result = loss_level(data)
    (run,) = result.runs
    assert result.level == pytest.approx(5.0) and run.final_loss == pytest.approx(5.0)
    assert run.steps == result.window / 16  # the first full window is already at the level
    assert loss_level(SweepData()) is None
