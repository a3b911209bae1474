"""The one sweep model: every per-run figure by one set of rules, the same live, reopened and in `report`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from batchlab.core import cli
from batchlab.core.events import EPOCH_ENDED, RUN_ENDED, RUN_STARTED, SKIPPED_MESSAGE, STEPS, make_event
from batchlab.core.model import FIGURE_NAMES, SweepData, run_figures
from batchlab.core.runfile import RunFileWriter, read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.table import summary_rows

from tests.core.test_runfile import DOC, documented_sweep, full_sweep, sweep_started

MIB = 1 << 20


def _steps(n_per_epoch: int, epochs: int, batch: int = 10, traced=None, step_time: float = 0.01) -> dict:
    """n_per_epoch steps per epoch, each taking 20 ms of wall time; validation adds 1 s between epochs."""
    n = n_per_epoch * epochs
    step = np.arange(n)
    epoch = step // n_per_epoch
    wall = 0.02 * (step + 1) + 1.0 * epoch
    table = {
        "step": step,
        "epoch": epoch.astype(np.int32),
        "loss": (1.0 / (1 + step)).astype(np.float32),
        "batch_size": np.full(n, batch, dtype=np.int32),
        "step_time": np.full(n, step_time),
        "wall_time": wall,
    }
    if traced is not None:
        table["traced"] = np.asarray(traced, dtype=np.int8)
    return table


def _same(a, b) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


# ---------------------------------------------------------------------- the rules, on known numbers


def test_final_loss_is_the_last_finished_epoch_else_the_weighted_mean_of_the_unfinished_one():
    steps = _steps(4, 2)
    epochs = {"epoch": np.array([0], dtype=np.int32), "train_loss": np.array([0.5])}
    assert run_figures(steps, epochs).final_loss == 0.5  # epoch 1 is unfinished: its steps do not count
    epochs["train_loss"][0] = np.nan
    later = steps["loss"][4:].astype(float)
    assert run_figures(steps, epochs).final_loss == pytest.approx(later.mean())  # the steps after epoch 0
    one_epoch = _steps(4, 1)
    loss = one_epoch["loss"].astype(float)
    one_epoch["batch_size"][-1] = 2  # a smaller last batch weighs less
    one_epoch["loss"][1] = np.nan  # a diverged step has no loss to average
    assert run_figures(one_epoch, {}).final_loss == pytest.approx(np.average(loss[[0, 2, 3]], weights=[10, 10, 2]))
    assert math.isnan(run_figures({}, {}).final_loss)


def test_total_time_is_run_ended_s_else_the_last_wall_time():
    steps = _steps(4, 2)
    assert run_figures(steps, {}).total_time == pytest.approx(0.02 * 8 + 1.0)
    assert run_figures(steps, {"epoch": np.array([0]), "wall_time": np.array([9.0])}).total_time == 9.0
    assert run_figures(steps, {}, {"total_time": 3.5}).total_time == 3.5
    assert run_figures(steps, {}, {"total_time": math.nan}).total_time == pytest.approx(1.16)


def test_steady_throughput_and_step_time_leave_out_traced_steps_and_validation_gaps():
    traced = [1, 0, 0, 1, 0, 0, 0, 0]  # step 0 and a retrace for the partial last batch of epoch 0
    steps = _steps(4, 2, traced=traced)
    durations = np.array([0.9, 0.02, 0.02, 0.35, 0.02, 0.02, 0.02, 0.02])  # traced steps are slow
    steps["wall_time"] = np.cumsum(durations) + 1.0 * steps["epoch"]
    steps["step_time"][[0, 3]] = [0.85, 0.31]
    figures = run_figures(steps, {})
    # untraced steps 1, 2 and 5-7 (step 4 starts epoch 1: its gap holds validation): 20 ms each
    assert figures.samples_per_s == pytest.approx(10 / 0.02)
    assert figures.step_time == pytest.approx(0.01)
    assert figures.tracing_time == pytest.approx(0.85 + 0.31 - 2 * 0.01)


def test_an_epoch_s_start_up_counts_towards_throughput_but_validation_does_not():
    steps = _steps(4, 2)  # 20 ms steps; 1 s between epochs
    steps["wall_time"][4:] += 0.04  # the first step of epoch 1 waits 40 ms for a fresh input iterator
    epochs = {"epoch": np.array([0], dtype=np.int32), "wall_time": np.array([0.08 + 0.98])}  # 0.98 s validation
    # epoch 1's first step: 0.02 s after validation + 0.04 s waiting + its 0.02 s; then 3 steps of 0.02 s
    assert run_figures(steps, epochs).samples_per_s == pytest.approx(40 / (0.08 + 3 * 0.02))
    assert run_figures(steps, {}).samples_per_s == pytest.approx(10 / 0.02)  # no epoch row: that step is unknown


def test_a_pause_between_epochs_is_not_training_time_when_the_epoch_clock_timed_the_first_step():
    """Seen in the window: the child paused 1 s after its first epoch (outside every clock); counting
    that pause made batch 512's steady throughput 9x too low. The first step of a later epoch takes
    its own fetch + compute time, which the trainer measures from the start of the epoch's clock."""
    steps = _steps(4, 2)
    steps["fetch_time"] = np.full(8, 0.005)
    steps["fetch_time"][4] = 0.045  # a fresh input iterator: 40 ms more, on the epoch's clock
    steps["wall_time"][4:] += 1.04  # ...and a 1 s pause before the epoch's clock started
    epochs = {"epoch": np.array([0], dtype=np.int32), "wall_time": np.array([0.08 + 0.98])}
    # no traced column: epoch 1 is the steady one; its first step 0.045 + 0.01 s, then 3 steps of 0.02 s
    assert run_figures(steps, epochs).samples_per_s == pytest.approx(40 / (0.055 + 3 * 0.02))


def test_without_a_traced_column_steady_figures_use_the_epochs_after_the_first():
    steps = _steps(4, 2)
    steps["wall_time"][:4] += 5.0  # epoch 0 slowed by tracing; later epochs untouched relative to each other
    figures = run_figures(steps, {}, {"tracing_time_s": 0.7})
    assert figures.samples_per_s == pytest.approx(10 / 0.02)
    assert figures.tracing_time == 0.7  # no traced column: the trainer's own figure
    assert math.isnan(run_figures(steps, {}).tracing_time)
    assert run_figures(_steps(4, 1), {}).samples_per_s == pytest.approx(10 / 0.02)  # one epoch: all its steps


def test_steady_epoch_time_and_first_versus_steady_peak_memory():
    epochs = {
        "epoch": np.arange(3, dtype=np.int32),
        "epoch_time": np.array([3.0, 1.0, 1.2]),
        "traced_steps": np.array([2, 0, 0], dtype=np.int32),
        "tf_peak_bytes": np.array([90, 40, 41], dtype=np.int64) * MIB,
        "rss_peak_bytes": np.array([500, 510, 520], dtype=np.int64) * MIB,
    }
    figures = run_figures({}, epochs)
    assert figures.epoch_time == pytest.approx(1.1)
    assert figures.peak_memory_source == "tf_peak_bytes"
    assert (figures.first_epoch_peak_bytes, figures.steady_peak_bytes, figures.peak_memory_bytes) == (
        90 * MIB,
        41 * MIB,
        90 * MIB,
    )
    del epochs["traced_steps"]  # an older file: the epochs after the first are the steady ones
    assert run_figures({}, epochs).epoch_time == pytest.approx(1.1)
    one = {k: v[:1] for k, v in epochs.items()}
    assert (run_figures({}, one).steady_peak_bytes, math.isnan(run_figures({}, one).epoch_time)) == (-1, True)
    assert run_figures({}, {}).peak_memory_bytes == -1


# ---------------------------------------------------------------------- one model, three places


def _figures_of(model: SweepData) -> dict[int, dict]:
    return {r.index: r.figures.as_dict() for r in model.ordered_runs()}


def _assert_identical(live: SweepData, path, capsys) -> None:
    """The live model, the file reopened and `batchlab report --json` give identical figures."""
    reopened = SweepData.from_file(path)
    assert cli.main(["report", str(path), "--json"]) == 0
    reported = {row["index"]: row for row in json.loads(capsys.readouterr().out)["runs"]}
    assert {i: r["status"] for i, r in reported.items()} == {r.index: r.status for r in live.ordered_runs()}
    expected = _figures_of(live)
    assert set(expected) == set(_figures_of(reopened)) == set(reported)
    for index, figures in expected.items():
        for name in FIGURE_NAMES:
            values = (figures[name], _figures_of(reopened)[index][name], reported[index][name])
            assert _same(values[0], values[1]) and _same(values[0], values[2]), (index, name, values)
    live_rows, file_rows = summary_rows(live), summary_rows(reopened)
    assert len(live_rows) == len(file_rows)
    for a, b in zip(live_rows, file_rows, strict=True):
        assert a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a), (a, b)


def test_synthetic_sweep_gives_the_same_figures_live_reopened_and_reported(tmp_path, capsys):
    events = documented_sweep()
    # run 0 also gets a third epoch that is stopped midway, as runner.stop() would leave it
    cut = next(i for i, e in enumerate(events) if e["type"] == RUN_ENDED and e["run"] == 0)
    events[cut:cut] = [make_event(STEPS, run=0, step=[128, 129], epoch=[2, 2], loss=[0.3, 0.2], wall_time=[2, 3])]
    live = SweepData()
    path = tmp_path / "sweep.h5"
    with RunFileWriter(path) as writer:
        for event in events:
            writer.handle(event)
            live.handle(event)
    assert live.runs[0].figures.final_loss == pytest.approx(0.7)  # the last finished epoch, not the last step
    assert live.runs[1].figures.final_loss == pytest.approx(np.mean(live.runs[1].steps["loss"]))
    _assert_identical(live, path, capsys)


def test_a_run_still_being_written_reads_the_same_live_and_from_the_file(tmp_path, capsys):
    events = [sweep_started(), *[e for e in full_sweep() if e["type"] in (RUN_STARTED, STEPS, EPOCH_ENDED)][:4]]
    live = SweepData()
    path = tmp_path / "sweep.h5"
    writer = RunFileWriter(path)
    for event in events:
        writer.handle(event)
        live.handle(event)
    writer.flush()  # what the window sees when it opens a file mid-sweep
    assert live.runs[0].status == "running" and math.isfinite(live.runs[0].figures.total_time)
    _assert_identical(live, path, capsys)
    writer.close()


TINY = {"preset": "mnist-mlp", "val_samples": 64, "device": "cpu"}


def test_an_interrupted_real_sweep_gives_the_same_figures_live_reopened_and_reported(tmp_path, capsys):
    """A real sweep stopped in its second epoch: the window, a reopened file and `report` agree."""
    spec = build_spec({**TINY, "samples": 2048, "epochs": 3, "batch_sizes": "16,32"})
    runner = SweepRunner(spec)
    live = SweepData()

    def sink(event: dict) -> None:
        live.handle(event)
        if event["type"] == STEPS and min(event["epoch"]) >= 1:
            runner.stop()  # as the Stop button would: the run ends "interrupted" in its second epoch

    out = tmp_path / "stopped.h5"
    assert run_sweep(spec, out, sink=sink, runner=runner) == "interrupted"
    run, skipped = live.ordered_runs()
    # the run never started is "skipped", live, in the file and in `report --json` (checked below)
    assert (run.status, skipped.status, skipped.message) == ("interrupted", "skipped", SKIPPED_MESSAGE)
    figures = run.figures
    assert len(run.epochs) == 1 and run.steps["epoch"].max() >= 1  # stopped mid-epoch
    assert figures.final_loss == pytest.approx(float(run.epochs["train_loss"][0]))
    assert math.isfinite(figures.total_time) and figures.samples_per_s > 0
    _assert_identical(live, out, capsys)
    # every name the real file holds is one the format document describes
    text = DOC.read_text(encoding="utf-8")
    for name, value in read_run_file(out).runs[0].attrs.items():
        assert f"`{name}`" in text, f"run attribute {name}={value!r} is not in docs/runfile-format.md"


def test_from_file_pauses_after_each_run_built_and_each_runs_figures_with_the_same_numbers(tmp_path):
    """The window's reader thread gives the GUI thread the interpreter in these pauses (gui/file_reader.py)."""
    from tests.gui.synthetic import write_run_file

    path = write_run_file(tmp_path / "p.h5", batch_sizes=(16, 32), seeds=(0, 1))
    calls = []
    paused = SweepData.from_file(path, pause=lambda: calls.append(1))
    plain = SweepData.from_file(path)
    assert len(calls) == 2 * len(plain.runs) == 8  # after each run built, after each run's figures
    assert [r.figures.epoch_time for r in paused.ordered_runs()] == [r.figures.epoch_time for r in plain.ordered_runs()]
