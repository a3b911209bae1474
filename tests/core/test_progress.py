"""The CLI's progress bar: fraction, ETA and the line a user sees."""

import io

from batchlab.core.events import make_event
from batchlab.core.spec import build_spec
from batchlab.core.sweep.progress import ProgressPrinter, SweepProgress, format_duration


def test_progress_counts_samples_across_runs():
    spec = build_spec({"preset": "mnist-mlp", "samples": 100, "epochs": 2, "batch_sizes": "50,100"})
    p = SweepProgress(spec)
    assert p.fraction == 0
    p.handle(make_event("run_started", run=0, batch_size=50, seed=0, epochs=2))
    p.handle(make_event("steps", run=0, batch_size=[50, 50], loss=[2.0, 1.5], epoch=[0, 0]))
    assert p.fraction == 0.25  # 100 of 400 samples in the sweep
    assert "run 1/2" in p.line() and "batch 50" in p.line() and "loss 1.5" in p.line()
    p.handle(make_event("run_ended", run=0, status="ok"))
    assert p.fraction == 0.5
    assert p.eta_seconds() >= 0


def test_printer_without_a_terminal_prints_one_line_per_run():
    spec = build_spec({"preset": "mnist-mlp", "samples": 100, "epochs": 1, "batch_sizes": "50"})
    out = io.StringIO()
    printer = ProgressPrinter(spec, out)
    printer.handle(make_event("run_started", run=0, batch_size=50, seed=0, epochs=1))
    printer.handle(make_event("run_ended", run=0, status="oom", message="OOM when allocating"))
    printer.close()
    assert out.getvalue() == "run 1/1: oom OOM when allocating\n"


def test_durations_read_naturally():
    assert format_duration(5) == "5s"
    assert format_duration(75) == "1m15s"
    assert format_duration(3700) == "1h01m"
    assert format_duration(float("nan")) == "--"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_printer_on_a_terminal_draws_a_bar_and_keeps_notes_above_it():
    spec = build_spec({"preset": "mnist-mlp", "samples": 100, "epochs": 1, "batch_sizes": "50,100"})
    out = _Terminal()
    printer = ProgressPrinter(spec, out)
    printer.handle(make_event("run_started", run=0, batch_size=50, seed=0, epochs=1))
    printer.handle(make_event("steps", run=0, batch_size=[50], loss=[0.25], epoch=[0]))
    printer.handle(make_event("log", level="warning", message="val_samples=10 is ignored"))
    printer.close()
    text = out.getvalue()
    assert "warning: val_samples=10 is ignored" in text
    assert "━" in text  # the bar, drawn by rich
    assert "run 1/2" in text and "batch 50" in text and "loss 0.25" in text and "ETA" in text


def test_a_run_s_final_loss_is_the_model_s_and_a_traceback_is_one_line():
    """The note at a run's end shows the figure `batchlab report` shows (the last finished epoch's
    train loss, not the trainer's own number), and a failed run's traceback is shortened to its error."""
    spec = build_spec({"preset": "mnist-mlp", "samples": 100, "epochs": 1, "batch_sizes": "50"})
    out = io.StringIO()
    printer = ProgressPrinter(spec, out)
    printer.handle(make_event("run_started", run=0, batch_size=50, seed=0, epochs=1))
    printer.handle(make_event("steps", run=0, step=[0, 1], batch_size=[50, 50], loss=[2.0, 1.0], epoch=[0, 0]))
    printer.handle(make_event("epoch_ended", run=0, epoch=0, train_loss=1.5, epoch_time=0.1))
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad shape'
    printer.handle(make_event("log", level="error", message=trace, run=0))
    printer.handle(make_event("run_ended", run=0, status="ok", final_loss=99.0))
    printer.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "error: ValueError: bad shape (traceback in the run file's log)",
        "run 1/1: ok final loss 1.5",
    ]
