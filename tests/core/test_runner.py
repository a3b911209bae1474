"""The sweep runner's preflight, without TensorFlow: data checked in this process, a stop before any run."""

import multiprocessing

import numpy as np
import pytest
from batchlab.core.datasets import DataError
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import STOPPED_BEFORE_FIRST_RUN, SweepRunner, _Flight, run_sweep

TINY = {"preset": "mnist-mlp", "samples": 64, "val_samples": 16, "epochs": 1, "batch_sizes": "32,64", "device": "cpu"}


def test_a_sweep_stopped_before_it_starts_starts_no_child_and_skips_every_run(tmp_path):
    spec = build_spec(TINY)
    runner = SweepRunner(spec)
    runner.stop()
    events = []
    assert run_sweep(spec, tmp_path / "x.h5", sink=events.append, runner=runner) == "interrupted"
    assert not multiprocessing.active_children()
    record = read_run_file(tmp_path / "x.h5")
    assert record.status == "interrupted" and record.message == STOPPED_BEFORE_FIRST_RUN
    assert [r.status for r in record.runs] == ["skipped", "skipped"]
    assert [e["type"] for e in events] == ["sweep_started", "sweep_ended"]


def test_bad_data_is_found_in_this_process_and_no_file_is_left(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((64, 4, 4)), y_train=-np.ones(64, dtype="int64"))
    spec = build_spec({**TINY, "preset": "mlp", "data": str(bad)})  # sized from the data: its labels are checked
    with pytest.raises(DataError) as e:
        run_sweep(spec, tmp_path / "x.h5", on_preflight=lambda: pytest.fail("TensorFlow was started"))
    assert "negative label" in e.value.message
    assert not multiprocessing.active_children()
    assert not (tmp_path / "x.h5").exists()


def test_missing_validation_split_becomes_a_warning_when_the_sweep_starts(tmp_path):
    data = tmp_path / "train_only.npz"
    np.savez(data, x_train=np.zeros((64, 28, 28), np.uint8), y_train=np.arange(64) % 10)
    runner = SweepRunner(build_spec({**TINY, "data": str(data)}))
    runner.check_data()
    assert len(runner.warnings) == 1 and "val_samples=16 is ignored" in runner.warnings[0]
    runner.stop()
    events = []
    runner.run(events.append)
    warnings = [e for e in events if e["type"] == "log" and e["level"] == "warning"]
    assert [w["message"] for w in warnings] == runner.warnings


def test_the_data_is_read_with_short_gil_slices_and_the_interval_is_restored_even_on_bad_data(tmp_path, monkeypatch):
    """The window's worker thread reads the data while the GUI thread paints: it hands the GIL back within
    0.5 ms, not Python's 5 ms, while reading, and leaves the process's switch interval as it found it."""
    import sys

    import batchlab.core.datasets as datasets
    from batchlab.core.sweep.runner import DATA_READ_SWITCH_INTERVAL_S

    seen = []
    load = datasets.load_spec_data

    def spying_load(spec):
        seen.append(sys.getswitchinterval())
        return load(spec)

    monkeypatch.setattr(datasets, "load_spec_data", spying_load)
    before = sys.getswitchinterval()
    SweepRunner(build_spec(TINY)).check_data()
    assert seen == [pytest.approx(DATA_READ_SWITCH_INTERVAL_S)] and sys.getswitchinterval() == before
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((64, 4, 4)), y_train=-np.ones(64, dtype="int64"))
    with pytest.raises(DataError):
        SweepRunner(build_spec({**TINY, "preset": "mlp", "data": str(bad)})).check_data()
    assert len(seen) == 2 and sys.getswitchinterval() == before


class _StreamingChild:
    """A run's handle as the scheduler sees it: a step event always waiting; alive until killed."""

    def __init__(self, events_before_giving_up: int = 1000):
        self.alive, self.kills, self.sent, self.stops = True, 0, 0, 0
        self.limit = events_before_giving_up
        self.run = build_spec(TINY).runs()[0]

    def poll(self, _timeout=0.0) -> bool:
        return self.alive

    def recv(self) -> dict:
        self.sent += 1
        if self.sent > self.limit:
            raise EOFError("the pump never looked at the stop flag")
        return {"type": "steps", "run": 0}

    def stop(self) -> None:
        self.stops += 1

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.kills += 1
        self.alive = False


def _pump_until_over(runner, handle, sink) -> _Flight:
    """Pump one run as the scheduler does (waking every PUMP_WAIT_SECONDS) until it is over."""
    flight = _Flight(handle, None)
    while not runner._pump(flight, sink, 0.0)[0]:
        pass
    return flight


def test_a_child_that_streams_steps_but_ignores_a_stop_is_killed_after_the_grace_period(monkeypatch):
    """The pump waits up to PUMP_WAIT_SECONDS for each event, so while steps keep coming it never times out:
    it must still look at the stop flag after every event, or a child that ignores the stop runs forever."""
    import batchlab.core.sweep.runner as runner_module

    monkeypatch.setattr(runner_module, "STOP_GRACE_SECONDS", 0.0)
    runner = SweepRunner(build_spec(TINY))
    runner.stop()
    child, seen = _StreamingChild(), []
    assert _pump_until_over(runner, child, seen.append).ended is None  # ended: no run_ended came
    assert child.stops >= 1 and child.kills == 1 and child.sent < child.limit
    assert seen and all(e["type"] == "steps" for e in seen)  # what came before the kill was forwarded


def test_the_pump_forwards_events_in_order_and_returns_the_run_ended_event():
    events = [{"type": "steps", "run": 0, "i": i} for i in range(3)] + [{"type": "run_ended", "run": 0}]

    class Receiver(_StreamingChild):
        def poll(self, _timeout=0.0):
            return bool(events)

        def recv(self):
            return events.pop(0)

    expected = list(events)
    seen = []
    child = Receiver()
    assert _pump_until_over(SweepRunner(build_spec(TINY)), child, seen.append).ended == expected[-1]
    assert seen == expected and child.kills == 0 and child.stops == 0
