"""The LR range test in the window (issue 9 item 8): an lr-find file opens in the range-test view (loss vs
rate per batch size, the suggestions marked and tabled) and its rates go to the setup as `lr_from`. The file
is written by the one writer from the events a range-test child sends, its curves and suggestions computed
by core.lr_range from a synthetic loss curve (no TensorFlow)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from batchlab.core.events import make_event, now_iso
from batchlab.core.lr_range import RangeSettings, RangeTest, exponential_rates
from batchlab.core.lr_rules import sweep_preview
from batchlab.core.runfile.writer import RunFileWriter
from batchlab.core.spec import build_spec
from batchlab.core.sweep.lr_find import LR_FIND_MODE, suggested_rates
from batchlab.core.sweep.lr_find_runner import LrFindRunner
from batchlab.gui.lr_find_view import LrFindWorker, RangeTestDialog
from batchlab.gui.worker import TRAINING_NICENESS

BATCHES = (16, 64)
SETUP = {"preset": "mnist-mlp", "samples": "256", "val_samples": "64", "batch_sizes": "16, 64", "epochs": "1"}


def synthetic_range_test(batch: int) -> RangeTest:
    """A loss that falls fastest near 0.01 x sqrt(B/16) and explodes past 1 (a range test's usual shape)."""
    test = RangeTest()
    centre = 0.01 * math.sqrt(batch / 16)
    for lr in exponential_rates(1e-5, 10.0, 120):
        loss = 2.3 - 1.8 / (1 + (centre / lr) ** 1.5) + (lr / 0.5) ** 3
        if test.add(float(lr), float(loss)):
            break
    else:
        test.finish()
    return test


@pytest.fixture(scope="module")
def lr_find_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lr_find") / "find.h5"
    spec = build_spec({**SETUP, "batch_sizes": list(BATCHES)})
    tests = {}
    with RunFileWriter(path) as writer:
        runs = [{"index": i, "batch_size": b, "seed": 0} for i, b in enumerate(BATCHES)]
        writer.handle(make_event("sweep_started", spec=spec.to_dict(), runs=runs, environment={}, mode=LR_FIND_MODE))
        for i, batch in enumerate(BATCHES):
            test = tests[batch] = synthetic_range_test(batch)
            writer.handle(make_event("run_started", run=i, batch_size=batch, seed=0, started=now_iso()))
            n = len(test.lrs)
            writer.handle(
                make_event(
                    "lr_range", run=i, step=list(range(n)), lr=test.lrs, loss=test.losses, smoothed_loss=test.smoothed
                )
            )
            result = test.result()
            writer.handle(
                make_event(
                    "run_ended",
                    run=i,
                    status="ok",
                    suggested_lr=result.steepest_lr,
                    suggested_lr_min10=result.min10_lr,
                    loss_at_suggestion=result.loss_at_steepest,
                    stop_reason=test.stop_reason,
                )
            )
        writer.handle(make_event("sweep_ended", status="ok", ended=now_iso()))
    return str(path), tests


def test_opening_an_lr_find_file_shows_its_curves_and_suggestions(main_window, lr_find_file):
    path, tests = lr_find_file
    w = main_window
    view = w.open_file(path) and w.range_view
    assert isinstance(view, RangeTestDialog) and view.isVisible()
    assert w.data is None  # not shown as a sweep of runs without steps
    assert w.open_compare(path) is False and "LR range test" in w.error_dialog.text()
    curves = [c for c in view.items if c.name()]
    assert [c.name() for c in curves] == [f"B={b}" for b in BATCHES]
    for curve, batch in zip(curves, BATCHES, strict=True):
        x, y = curve.xData, curve.yData
        assert np.allclose(x, tests[batch].lrs) and np.allclose(y, tests[batch].smoothed)
    table = view.table
    assert table.rowCount() == 2
    for row, batch in enumerate(BATCHES):
        suggestion = tests[batch].result().steepest_lr
        assert 1e-4 < suggestion < 1
        assert table.item(row, 0).text() == str(batch)
        assert table.item(row, 2).text() == f"{suggestion:.3g}"
    lines = [i for i in view.items if hasattr(i, "angle")]  # the suggested and min/10 marks
    assert len(lines) == 4
    assert sorted(10 ** line.value() for line in lines)[1] == pytest.approx(
        sorted(r for b in BATCHES for r in (tests[b].result().steepest_lr, tests[b].result().min10_lr))[1]
    )


def test_its_rates_become_the_setups_lr_from_and_the_preview_follows(main_window, lr_find_file):
    path, tests = lr_find_file
    w = main_window
    w.setup.set_values(SETUP)
    view = w.open_file(path) and w.range_view
    assert view.use_button.isEnabled()
    view.use_button.click()
    assert w.setup.lr_from.text() == path and not view.isVisible()
    assert w.setup.valid, w.setup.errors
    assert not w.setup.lr.isEnabled()  # the file's rate per batch size replaces it
    spec = w.setup.spec()
    assert spec.lr_from == path
    rates = suggested_rates(path)
    assert rates == pytest.approx({b: tests[b].result().steepest_lr for b in BATCHES})
    assert {b: r[0] for b, r in sweep_preview(spec).items()} == pytest.approx(rates)
    w.setup.preview.update_now()
    assert {b: c.yData[0] for b, c in w.setup.preview.curves.items()} == pytest.approx(rates)


def test_the_range_test_takes_the_setup_and_checks_its_range_like_lr_find(main_window, qtbot):
    s = main_window.setup
    s.set_values(SETUP)
    dialog = s.open_range_test()
    qtbot.addWidget(dialog)
    assert dialog.isModal() and dialog.spec.batch_sizes == BATCHES and dialog.out_path.endswith(".h5")
    assert "lr-find-mnist-mlp" in dialog.out_path
    dialog.fields["lr_min"].setText("1")
    dialog.fields["lr_max"].setText("0.1")
    assert dialog.field_errors["lr_max"].text().startswith("0.1 is not above lr_min 1")
    assert not dialog.run_button.isEnabled() and dialog.start() is False
    dialog.fields["lr_min"].setText("")
    assert dialog.run_button.isEnabled()
    # the worker is the window's sweep worker with lr-find's runner (not started here: no training in this test)
    worker = LrFindWorker(dialog.spec, dialog.settings(), dialog.out_path)
    runner = worker.make_runner()
    assert isinstance(runner, LrFindRunner) and runner.niceness == TRAINING_NICENESS
    assert runner.settings.lr_max == 0.1
    dialog.close()
    s.apply_preset("shallue-mnist")  # a preset with its own range: shown as the blank fields' values, and used
    shallue = s.open_range_test()
    qtbot.addWidget(shallue)
    assert [shallue.fields[n].placeholderText() for n in ("lr_min", "lr_max", "lr_steps")] == ["0.0001", "1", "400"]
    assert shallue.settings() == RangeSettings(1e-4, 1.0, 400)
    shallue.close()
    s.set_values({**SETUP, "batch_sizes": "16, 9999"})  # an invalid setup: said under its field, no dialog
    assert s.open_range_test() is None and "batch_sizes" in s.errors
