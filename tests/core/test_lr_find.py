"""`batchlab lr-find` end to end (bundled data, the MLP, two batch sizes, ~60 steps each, on the CPU), the file
it writes, `report` on it, and a sweep that takes each batch size's suggested rate with --lr-from."""

import math

import h5py
import numpy as np
import pytest
from batchlab.core.events import LR_RANGE_COLUMNS
from batchlab.core.lr_range import STOP_REASONS, RangeTest
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.sweep.lr_find import LR_FIND_MODE, suggested_rates

from tests.core.test_cli import assert_one_line_error, batchlab

TINY_FIND = ["--preset", "mnist-mlp", "--samples", "256", "--batch-sizes", "16,64", "--device", "cpu"]
RANGE = ["--lr-min", "1e-4", "--lr-max", "10", "--lr-steps", "60"]


@pytest.fixture(scope="module")
def lr_find_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("lr_find") / "find.h5"
    result = batchlab("lr-find", *TINY_FIND, *RANGE, "--out", out, timeout=600)
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_lr_find_file_holds_each_batch_sizes_curve_and_suggestions(lr_find_file):
    path, _ = lr_find_file
    record = read_run_file(path)
    assert record.attrs["mode"] == LR_FIND_MODE
    assert [r.batch_size for r in record.runs] == [16, 64]
    for run in record.runs:
        assert run.status == "ok", run.message
        curve = run.lr_range
        assert set(curve) == {c.name for c in LR_RANGE_COLUMNS}
        n = len(curve["lr"])
        assert 10 <= n <= 60
        assert curve["lr"][0] == pytest.approx(1e-4)
        assert np.all(np.diff(curve["lr"]) > 0)
        assert list(curve["step"]) == list(range(n))
        # the stored curve and suggestions are what the range-test math gives on the stored losses
        replay = RangeTest()
        for lr, loss in zip(curve["lr"], curve["loss"], strict=True):
            replay.add(lr, loss)
        if n == 60 and not replay.stop_reason:
            replay.finish()
        np.testing.assert_allclose(curve["smoothed_loss"], replay.smoothed, rtol=1e-12)
        a = run.attrs
        assert a["stop_reason"] == replay.stop_reason and a["stop_reason"] in STOP_REASONS
        result = replay.result()
        assert a["suggested_lr"] == pytest.approx(result.steepest_lr)
        assert a["suggested_lr_min10"] == pytest.approx(result.min10_lr)
        assert 1e-4 < a["suggested_lr"] < 10
        assert (a["lr_min"], a["lr_max"], a["lr_steps"]) == (1e-4, 10.0, 60)
    with h5py.File(path, "r") as f:
        for c in LR_RANGE_COLUMNS:
            ds = f["runs/run_000/lr_range"][c.name]
            assert (ds.attrs["units"], ds.attrs["long_name"]) == (c.units, c.long_name)


def test_lr_find_prints_and_report_reprints_the_table(lr_find_file):
    path, stdout = lr_find_file
    rows = suggested_rates(path)
    for text in (stdout, batchlab("report", path).stdout):
        assert "suggested lr" in text and "min/10" in text and "stopped" in text
        for batch, rate in rows.items():
            line = next(line for line in text.splitlines() if line.split()[:1] == [str(batch)])
            assert f"{rate:.3g}" in line
    assert "--lr-from" in stdout


def test_a_sweep_with_lr_from_trains_each_batch_size_at_its_suggested_rate(lr_find_file, tmp_path):
    path, _ = lr_find_file
    rates = suggested_rates(path)
    out = tmp_path / "sweep.h5"
    result = batchlab(
        "sweep", *TINY_FIND, "--val-samples", "32", "--epochs", "1", "--lr-from", path, "--out", out, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    record = read_run_file(out)
    assert record.spec["lr_from"] == str(path)
    for run in record.runs:
        assert run.status == "ok"
        assert run.attrs["lr"] == rates[run.batch_size]
        # every step trained at it (the lr step column; float32 in the optimizer, so to float32 precision)
        np.testing.assert_allclose(run.steps["lr"], rates[run.batch_size], rtol=1e-6)
    assert rates[16] != rates[64]


def test_lr_from_refuses_a_batch_size_the_file_lacks_and_a_sweep_file(lr_find_file, tmp_path):
    path, _ = lr_find_file
    result = batchlab("sweep", *TINY_FIND, "--batch-sizes", "16,32", "--lr-from", path, "--out", tmp_path / "x.h5")
    assert_one_line_error(result, "lr_from", "batch size 32", "16, 64")
    assert not (tmp_path / "x.h5").exists()
    missing = batchlab("sweep", *TINY_FIND, "--lr-from", tmp_path / "nope.h5")
    assert_one_line_error(missing, "lr_from", "does not exist")


def test_lr_find_settings_are_one_line_errors(tmp_path):
    result = batchlab("lr-find", *TINY_FIND, "--lr-min", "1", "--lr-max", "0.1", "--out", tmp_path / "x.h5")
    assert_one_line_error(result, "lr_max", "lr_min")
    assert not (tmp_path / "x.h5").exists()
    assert_one_line_error(batchlab("lr-find", *TINY_FIND, "--lr-steps", "3"), "lr_steps", "10")


def test_nan_losses_end_the_test_without_losing_the_points():
    test = RangeTest()
    for lr, loss in ((1e-3, 2.0), (1e-2, 1.5), (1e-1, math.inf)):
        stopped = test.add(lr, loss)
    assert stopped and len(test.losses) == 3 and test.result().min10_lr == pytest.approx(1e-3)


def test_the_format_document_names_what_an_lr_find_file_holds(lr_find_file):
    """docs/runfile-format.md's lr-find tables against the real file: root and run attributes, lr_range/ columns."""
    from tests.core.test_runfile import DOC, _doc_table, _doc_tables

    path, _ = lr_find_file
    tables = _doc_tables()
    text = DOC.read_text(encoding="utf-8")
    sweep_run = _doc_table(tables, "Run attributes")
    lr_find_run = _doc_table(tables, "LR range test files")  # the root table comes first under that heading
    with h5py.File(path, "r") as f:
        assert set(f.attrs) - set(_doc_table(tables, "Root attributes")) == {"mode"}
        assert "mode" in lr_find_run
        run = f["runs/run_000"]
        assert set(run) == {"steps", "epochs", "lr_range"}
        undocumented = set(run.attrs) - set(sweep_run) - set(lr_find_run)
        assert not undocumented, f"run attributes missing from docs/runfile-format.md: {undocumented}"
        assert set(run["lr_range"]) == {c.name for c in LR_RANGE_COLUMNS}
    for column in LR_RANGE_COLUMNS:
        row = f"| `{column.name}` | {column.dtype} | {column.units or '—'} | {column.long_name} |"
        assert row in text, f"docs/runfile-format.md lacks the row {row}"


def test_a_stopped_range_test_keeps_its_points_and_skips_the_rest(tmp_path):
    from batchlab.core.lr_range import parse_range_settings
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.lr_find_runner import LrFindRunner, run_lr_find

    spec = build_spec({"preset": "mnist-mlp", "samples": 256, "batch_sizes": "16,64", "device": "cpu"})
    settings = parse_range_settings("1e-6", "1e-3", "5000")  # long and gentle: it would run for minutes
    runner = LrFindRunner(spec, settings)

    def sink(event):
        if event["type"] == "lr_range":
            runner.stop()  # as Ctrl-C would, after the first points arrived

    out = tmp_path / "stopped.h5"
    assert run_lr_find(spec, settings, out, sink=sink, runner=runner) == "interrupted"
    first, second = read_run_file(out).runs
    assert (first.status, second.status) == ("interrupted", "skipped")
    assert first.attrs["stop_reason"] == "stopped by the user"
    assert 0 < len(first.lr_range["lr"]) < 5000
    assert first.attrs["suggested_lr_min10"] > 0  # suggestions from the points it has


def test_lr_from_with_a_scaling_rule_is_one_line(lr_find_file):
    path, _ = lr_find_file
    result = batchlab("sweep", *TINY_FIND, "--lr-from", path, "--lr-rule", "linear")
    assert_one_line_error(result, "lr_rule", "lr_from", "constant")


def test_lr_pick_min10_takes_each_batch_sizes_min10_rate_from_the_file(lr_find_file):
    """--lr-pick min10: the runs, the preview and the window's spec take the file's min/10 rates, not the
    steepest (no training: the file's stored suggestions are the known answer)."""
    from batchlab.core.lr_rules import sweep_preview
    from batchlab.core.spec import build_spec, spec_errors

    path, _ = lr_find_file
    runs = read_run_file(path).runs
    min10 = {r.batch_size: r.attrs["suggested_lr_min10"] for r in runs}
    steepest = {r.batch_size: r.attrs["suggested_lr"] for r in runs}
    assert suggested_rates(path, "min10") == min10 and suggested_rates(path) == steepest
    values = {"preset": "mnist-mlp", "samples": 256, "batch_sizes": "16,64", "epochs": 1, "lr_from": str(path)}
    picked = build_spec({**values, "lr_pick": "min/10"})
    assert picked.lr_pick == "min10"
    assert {r.batch_size: r.lr for r in picked.runs()} == min10
    assert {b: rates[0] for b, rates in sweep_preview(picked).items()} == pytest.approx(min10)
    default = build_spec(values)
    assert default.lr_pick == "steepest" and {r.batch_size: r.lr for r in default.runs()} == steepest
    assert "lr_pick" in spec_errors({**values, "lr_pick": "median"})
    result = batchlab("sweep", *TINY_FIND, "--lr-from", path, "--lr-pick", "median")
    assert_one_line_error(result, "lr_pick", "median", "steepest, min10")
