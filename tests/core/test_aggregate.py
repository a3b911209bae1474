"""Repeats over seeds: the one aggregation (mean and min-max per batch size) on synthetic run figures."""

import math

import pytest
from batchlab.core.aggregate import aggregate_by_batch, spread
from batchlab.core.table import format_seed_table, seeds_line

MIB = 1 << 20


def _row(batch, seed, status="ok", **figures):
    row = {"batch_size": batch, "seed": seed, "status": status, "message": "", "target_reached": -1}
    row.update(figures)
    return row


ROWS = [
    _row(32, 0, final_loss=0.30, total_time=10.0, steady_peak_bytes=100 * MIB),
    _row(32, 1, final_loss=0.20, total_time=14.0, steady_peak_bytes=-1),  # memory not available
    _row(32, 2, final_loss=0.40, total_time=12.0, steady_peak_bytes=120 * MIB),
    _row(64, 0, final_loss=0.50, total_time=6.0, steady_peak_bytes=200 * MIB),
    _row(64, 1, "diverged", final_loss=math.nan, total_time=2.0, steady_peak_bytes=210 * MIB),
    _row(16, 0, final_loss=0.10, total_time=20.0, steady_peak_bytes=50 * MIB),
]


def test_spread_is_mean_min_max_of_the_finite_values():
    assert spread([1.0, 2.0, 6.0, math.nan]) == pytest.approx(spread([1.0, 2.0, 6.0]))
    s = spread([1.0, 2.0, 6.0])
    assert (s.mean, s.low, s.high, s.n) == (3.0, 1.0, 6.0, 3)
    assert spread([]).n == 0 and math.isnan(spread([math.nan]).mean)


def test_each_batch_size_gets_mean_and_range_over_its_ok_seeds():
    groups = aggregate_by_batch(ROWS, ["final_loss", "total_time", "steady_peak_bytes"])
    assert [g["batch_size"] for g in groups] == [16, 32, 64]
    b32 = groups[1]
    assert (b32["runs"], b32["ok"], b32["seeds"]) == (3, 3, [0, 1, 2])
    assert b32["final_loss"].mean == pytest.approx(0.30)
    assert (b32["final_loss"].low, b32["final_loss"].high) == (0.20, 0.40)
    assert b32["total_time"].mean == pytest.approx(12.0)
    assert b32["steady_peak_bytes"].n == 2  # -1 is "not available", not a value
    assert b32["steady_peak_bytes"].mean == pytest.approx(110 * MIB)
    b64 = groups[2]
    assert (b64["runs"], b64["ok"]) == (2, 1)  # the diverged seed is left out of every figure
    assert b64["total_time"].mean == 6.0 and b64["total_time"].n == 1


def test_target_figures_average_the_runs_that_reached_it():
    rows = [
        _row(8, 0, target_reached=1, steps_to_target=100.0),
        _row(8, 1, target_reached=1, steps_to_target=140.0),
        _row(8, 2, target_reached=0, steps_to_target=math.nan),
    ]
    (g,) = aggregate_by_batch(rows, ["steps_to_target"])
    assert g["reached"] == 2 and g["ok"] == 3
    s = g["steps_to_target"]
    assert (s.mean, s.low, s.high, s.n) == (120.0, 100.0, 140.0, 2)
    text = format_seed_table(rows)
    assert "120 [100-140]" in text and "2/3" in text


def test_the_seed_table_shows_mean_and_range_in_the_figures_units():
    assert seeds_line(ROWS) is not None
    assert seeds_line([_row(32, 0, final_loss=1.0), _row(64, 0, final_loss=2.0)]) is None
    lines = format_seed_table(ROWS).splitlines()
    assert lines[0].split()[:2] == ["batch", "n"]
    b32 = next(line for line in lines if line.split()[0] == "32")
    assert "3/3" in b32
    assert "0.3 [0.2-0.4]" in b32  # final loss, format {:.4g}
    assert "12.0 [10.0-14.0]" in b32  # time, {:.1f}
    assert "110.0 [100.0-120.0]" in b32  # steady memory in MiB
    b64 = next(line for line in lines if line.split()[0] == "64")
    assert "1/2" in b64


def test_report_prints_the_per_batch_size_table_for_a_file_with_seeds(tmp_path):
    """Two seeds of batch 16 whose runs differ only in total_time: report shows their mean and range."""
    from batchlab.core.events import RUN_ENDED, SWEEP_ENDED, make_event
    from batchlab.core.spec import build_spec

    from tests.core.test_cli import batchlab
    from tests.core.test_runfile import epoch_ended, run_started, steps, sweep_started, write

    spec = build_spec({"preset": "mnist-mlp", "batch_sizes": "16", "seeds": "0,1", "samples": 1024})
    events = [sweep_started(spec)]
    for run, total in ((0, 10.0), (1, 14.0)):
        start = run_started(run, 16, steps_per_epoch=64, epochs=1)
        start["seed"] = run
        events += [start, steps(run, 0, 0, 64, 16), epoch_ended(run, 0)]
        events.append(make_event(RUN_ENDED, run=run, status="ok", message="", ended="x", total_time=total))
    events.append(make_event(SWEEP_ENDED, status="complete", message="2 runs", ended="y"))
    path = write(tmp_path / "seeds.h5", events)
    result = batchlab("report", path)
    assert result.returncode == 0, result.stderr
    assert "mean [min-max]" in result.stdout
    line = next(line for line in result.stdout.splitlines() if line.split()[:2] == ["16", "2/2"])
    assert "12.0 [10.0-14.0]" in line
