"""Issue 12 in the window: the Summary's "where the time goes", Tools > Find largest batch, the out-of-memory offer.

No training child: run files and event streams are synthetic (tests/gui/synthetic.py), and the
max-batch search runs against a fake device (BatchProber._try replaced, as tests/core/test_max_batch.py does).
"""

from __future__ import annotations

import threading

import pytest
from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, Trial
from batchlab.core.analysis.explain import explain_sweep
from batchlab.core.errors import SpecError
from batchlab.core.model import SweepData
from batchlab.core.sweep.max_batch import BatchProber, describe_result, parse_margin, parse_memory_cap
from batchlab.gui.max_batch import MaxBatchWorker, with_largest_batch
from batchlab.gui.oom_offer import micro_batches

from tests.gui.synthetic import sweep_events, write_run_file

DEVICE_LIMIT = 300  # the fake device: batches above this many samples run out of memory


@pytest.fixture(autouse=True)
def _private_peak_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHLAB_CACHE_DIR", str(tmp_path / "cache"))


def test_the_summary_explains_a_reopened_file_with_cores_own_paragraphs(main_window, tmp_path):
    w = main_window
    path = write_run_file(tmp_path / "x.h5", batch_sizes=(16, 64, 256), epochs=3)
    assert w.open_file(path)
    w.views.setCurrentWidget(w.summary_splitter)
    expected = explain_sweep(SweepData.from_file(path), peak_flops=None)
    assert len(expected) >= 3 and w.explanation.paragraphs == expected
    text = w.explanation.text.toPlainText()
    assert all(p in text for p in expected) and "Step compute time t(B) = alpha + beta*B" in text
    # beside, not instead of, the plots: at 1024x700 both keep a usable height
    w.resize(1024, 700)
    w.refresh(full=True)
    assert w.summary.height() >= 200 and w.explanation.text.height() >= 40


def _fake_device(self, batch_size, verify):
    if batch_size > DEVICE_LIMIT:
        return Trial(batch_size, False, verify, message="out of memory (fake device)")
    return Trial(batch_size, True, verify, peak_bytes=batch_size << 20, step_time=0.01)


def _search_setup(w, monkeypatch, try_batch):
    monkeypatch.setattr(BatchProber, "_try", try_batch)
    monkeypatch.setattr(MaxBatchWorker, "preflight", lambda self: {"device_description": "fake device"})
    w.setup.set_values({"preset": "mnist-mlp", "samples": "1000", "batch_sizes": "8, 64, 512", "device": "cpu"})
    assert w.setup.valid


def test_find_largest_batch_shows_the_verified_answer_and_puts_it_in_the_setup(main_window, qtbot, monkeypatch):
    w = main_window
    _search_setup(w, monkeypatch, _fake_device)
    dialog = w.find_largest_batch()
    assert not dialog.running and dialog.result is None  # it waits for Start (after the margin and the cap)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: not dialog.running and dialog.result is not None, timeout=20_000)
    result = dialog.result
    assert 0.85 * DEVICE_LIMIT <= result.batch_size <= DEVICE_LIMIT and result.verification is not None
    assert max(t.batch_size for t in result.trials) <= 1000  # never more samples than the data
    assert dialog.answer.text() == "\n".join(describe_result(result, dialog.worker.cap_bytes))
    assert f"max batch: {result.batch_size:,} (10% safety margin" in dialog.answer.text()
    tries = {line.split(":")[0]: line for line in dialog.trials_view.toPlainText().splitlines()}
    assert tries["try    batch     512"].endswith("does not fit: out of memory (fake device)")  # as the CLI prints
    assert w.actions["run"].isEnabled() and w.actions["max_batch"].isEnabled()
    dialog.use_button.click()
    assert w.setup.batch_sizes.text() == f"8, 64, {result.batch_size}"


def test_stop_ends_the_search_without_an_answer_and_the_run_waits_meanwhile(main_window, qtbot, monkeypatch):
    w = main_window
    gate = threading.Event()

    def slow_device(self, batch_size, verify):
        gate.wait(20)
        return _fake_device(self, batch_size, verify)

    _search_setup(w, monkeypatch, slow_device)
    dialog = w.find_largest_batch()
    dialog.start_button.click()
    qtbot.waitUntil(lambda: dialog.status.text().startswith("Trying batch 8"), timeout=20_000)
    assert not w.actions["run"].isEnabled() and not w.actions["max_batch"].isEnabled()
    assert not w.start_sweep()  # no sweep beside the search
    dialog.stop_button.click()
    gate.set()
    qtbot.waitUntil(lambda: not dialog.running, timeout=20_000)
    qtbot.waitUntil(lambda: w.actions["run"].isEnabled(), timeout=5_000)
    assert dialog.status.text() == "Stopped; no answer." and dialog.result is None
    assert not dialog.use_button.isEnabled()


def test_the_search_takes_the_clis_margin_and_memory_cap_checked_as_the_cli_checks_them(
    main_window, qtbot, monkeypatch
):
    w = main_window
    _search_setup(w, monkeypatch, _fake_device)
    dialog = w.find_largest_batch()
    # the CLI's defaults: --margin 0.1, --memory-cap 80% of the memory available
    assert dialog.margin_edit.text() == "0.1" and parse_margin(dialog.margin_edit.text()) == DEFAULT_MARGIN
    assert dialog.cap_edit.text() == "80%" and dialog.settings()[1] == pytest.approx(parse_memory_cap(None), rel=0.05)
    for edit, error, bad, parse in (
        (dialog.margin_edit, dialog.margin_error, "1.5", parse_margin),
        (dialog.cap_edit, dialog.cap_error, "lots", parse_memory_cap),
    ):
        edit.setText(bad)
        with pytest.raises(SpecError) as cli:  # what `batchlab max-batch` says for the same value
            parse(bad)
        assert error.isVisibleTo(dialog) and error.text() == cli.value.message and "\n" not in error.text()
        assert not dialog.start_button.isEnabled() and not dialog.start() and not dialog.running
        edit.setText("")  # blank: the default again, as the CLI
        assert not error.isVisibleTo(dialog) and dialog.start_button.isEnabled()
    dialog.blocked = lambda: "A sweep is running."
    assert not dialog.start() and dialog.status.text() == "A sweep is running." and not dialog.running
    dialog.blocked = lambda: None
    dialog.margin_edit.setText("0.25")
    dialog.cap_edit.setText("512MiB")
    dialog.start_button.click()
    assert not dialog.margin_edit.isEnabled() and not dialog.cap_edit.isEnabled()  # fixed while it searches
    qtbot.waitUntil(lambda: not dialog.running and dialog.result is not None, timeout=20_000)
    result = dialog.result
    assert dialog.worker.prober.cap_bytes == dialog.worker.cap_bytes == 512 << 20 and result.margin == 0.25
    assert result.batch_size <= 0.75 * DEVICE_LIMIT and "(25% safety margin" in dialog.answer.text()
    assert not dialog.start_button.isEnabled()  # one search per dialog


def test_largest_batch_replaces_the_larger_sizes():
    assert with_largest_batch("8, 16, 256, 512", 300) == "8, 16, 256, 300"
    assert with_largest_batch("not sizes", 64) == "64"


@pytest.mark.parametrize(
    "batch, largest_ran, expected",
    [(512, 256, (256, 2)), (1024, 256, (256, 4)), (300, 256, (150, 2)), (7, 4, (4, 2)), (256, 64, (64, 4))],
)
def test_micro_batch_and_k(batch, largest_ran, expected):
    micro, k = micro_batches(batch, largest_ran)
    assert (micro, k) == expected and micro <= largest_ran


def test_an_oom_run_in_a_live_stream_offers_micro_batch_times_k(main_window, qtbot, monkeypatch):
    from batchlab.gui import main_window as main_window_module
    from PySide6.QtCore import QThread, Signal

    w = main_window
    events = list(sweep_events(batch_sizes=(16, 64, 256), statuses=("ok", "ok", "oom"), epochs=2))
    w.data = SweepData(label="live")
    w._show_sweep(w.data, "main")
    assert not w.oom_offer.isVisible()
    w._on_events(events)
    old = w.data
    assert w.oom_offer.isVisible()
    offer = w.oom_offer.offer
    assert (offer.batch_size, offer.micro_batch, offer.k) == (256, 64, 4)
    assert "Re-run it as micro-batch 64 x 4 with gradient accumulation (--accumulate 4)" in offer.text
    spec = offer.spec  # the sweep's own settings, but one batch size
    assert spec.batch_sizes == (64,) and spec.accumulate == 4
    assert (spec.samples, spec.epochs, spec.preset) == (512, 2, "mnist-mlp")
    started = []

    class RecordingWorker(QThread):  # the sweep worker, minus the training children
        events, sweep_failed, crashed = Signal(list), Signal(str, str), Signal(str)
        stop_requested, status = False, "ok"

        def __init__(self, spec, out_path, overwrite=False, parent=None, policy=None, pulled=False):
            super().__init__(parent)
            self.spec, self.out_path = spec, out_path
            started.append(spec)

        def run(self):  # QThread's own run would wait in an event loop
            pass

        def stop(self):
            pass

    monkeypatch.setattr(main_window_module, "SweepWorker", RecordingWorker)
    w.oom_offer.button.click()
    qtbot.waitUntil(lambda: not w.running, timeout=5_000)
    assert started == [spec]
    w._show_sweep(old, "main")
    w.oom_offer.dismiss()
    w._show_sweep(w.data, "main")
    assert not w.oom_offer.isVisible()  # dismissed stays dismissed for this sweep


def test_a_reopened_file_with_an_oom_run_offers_it_too(main_window, tmp_path):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "o.h5", batch_sizes=(16, 64), statuses=("ok", "oom")))
    assert w.oom_offer.isVisible() and w.oom_offer.button.isEnabled()
    assert w.oom_offer.button.text() == "Re-run as 16 x 4"


def test_an_opened_comparison_at_other_replicas_gives_the_scaling_line(main_window):
    """The window's explanation and `batchlab report --scaling-with` are one function (explain_sweep's others)."""
    from tests.core.test_scaling import _sweep

    w = main_window
    two, one = _sweep([(2, 128, 0, 0.016)]), _sweep([(1, 128, 0, 0.020)])
    w.views.setCurrentWidget(w.summary_splitter)
    w._show_sweep(two, "main")
    assert any(p.startswith("Scaling:") for p in w.explanation.paragraphs)
    w._show_sweep(one, "compare")
    assert w.explanation.paragraphs == explain_sweep(two, peak_flops=None, others=[one])
    assert "2 replicas at global batch 128: 1.2x the throughput of one" in w.explanation.text.toPlainText()
