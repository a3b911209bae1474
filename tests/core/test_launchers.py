"""The scheduler with a launcher of its own (no TensorFlow, no process): two runs in flight at once."""

import io

import pytest
from batchlab.core import cli
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.progress import ProgressPrinter
from batchlab.core.sweep.runner import SweepRunner, run_sweep

from tests.core.fake_launcher import TARGET, FakeLauncher

SIZES = "8,16,32,48,64,128,256,512"
SPEC = {"preset": "mnist-mlp", "samples": 2048, "val_samples": 64, "epochs": 1, "device": "cpu"}
SPEC |= {"batch_sizes": SIZES, "target": TARGET, "eval_every": 10}
TIMES = ("started", "ended", "created", "updated", "writer_pid", "writer_host", "writer_started")


def _sweep(tmp_path, name, launcher, **values):
    spec = build_spec({**SPEC, **values})
    stream, seen = io.StringIO(), SweepData()
    printer = ProgressPrinter(spec, stream)  # not a terminal: a line per finished run
    most = []

    def sink(event):
        printer.handle(event)
        seen.handle(event)
        most.append(len(seen.in_flight))

    path = tmp_path / f"{name}.h5"
    assert run_sweep(spec, path, sink=sink, runner=SweepRunner(spec, launcher=launcher)) == "complete"
    printer.close()
    return path, printer, stream.getvalue().splitlines(), max(most)


def _plain(value):
    """A value as comparable text (NaN equals NaN, numpy scalars as Python's)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value.item() if hasattr(value, "item") else value)


def _file(path):
    """What a run file holds, less the clock times and the writer's identity."""
    record = read_run_file(path)
    runs = {}
    for run in record.runs:
        attrs = {k: v for k, v in run.attrs.items() if k not in TIMES}
        tables = {name: {k: list(v) for k, v in getattr(run, name).items()} for name in ("steps", "epochs", "evals")}
        runs[run.index] = (run.status, run.message, attrs, tables)
    return record.status, _plain(runs)


def _report(path, capsys):
    capsys.readouterr()
    assert cli.main(["report", str(path)]) == 0
    return capsys.readouterr().out.replace(str(path), "FILE")


def test_two_runs_in_flight_give_the_same_file_progress_and_report_as_one_at_a_time(tmp_path, capsys):
    serial, printer1, notes1, most1 = _sweep(tmp_path, "serial", FakeLauncher(slots=1))
    paired, printer2, notes2, most2 = _sweep(tmp_path, "paired", FakeLauncher(slots=2))
    assert (most1, most2) == (1, 2)  # the model saw two runs in flight at once
    assert _file(paired) == _file(serial)
    assert sorted(notes2) == sorted(notes1) and len(notes1) == len(SIZES.split(","))
    for printer in (printer1, printer2):
        assert printer.progress.fraction == 1.0 and printer.progress.done_runs == 8 and not printer.progress.in_flight
    assert _report(paired, capsys) == _report(serial, capsys)


def test_a_sink_that_fails_mid_run_leaves_a_failed_file_and_nothing_in_flight(tmp_path):
    spec = build_spec(SPEC)
    launcher = FakeLauncher(slots=2)
    seen = []

    def sink(event):
        seen.append(event["type"])
        if seen.count("steps") == 3:
            raise RuntimeError("a view broke")

    runner = SweepRunner(spec, launcher=launcher)
    with pytest.raises(RuntimeError):
        run_sweep(spec, tmp_path / "x.h5", sink=sink, runner=runner)
    assert not launcher.flying  # the launcher was told that each run in flight is over
    record = read_run_file(tmp_path / "x.h5")
    assert record.status == "failed" and "a view broke" in record.message
