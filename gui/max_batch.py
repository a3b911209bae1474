"""Tools > Find largest batch: `batchlab max-batch` from the window, each try in its own child process.

The search is the CLI's own (core/analysis/batch_search.find_max_batch over a
core/sweep/max_batch.BatchProber); here it runs in a QThread, so the GUI thread never waits on a
child. The dialog lists every try as the CLI prints it, Stop ends the running try's child at once,
and the answer can be put into the setup as the sweep's largest batch size.
"""

from __future__ import annotations

import traceback

from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, DEFAULT_START, SearchResult, Trial, find_max_batch
from batchlab.core.spec import SpecError, SweepSpec, parse_batch_sizes
from batchlab.core.sweep.max_batch import (
    PROBE_STEPS,
    VERIFY_STEPS,
    BatchProber,
    MaxBatchError,
    SearchStopped,
    describe_result,
    describe_trial,
    parse_memory_cap,
)
from PySide6.QtCore import QObject, Qt, QThread, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

MIB = 1 << 20


def with_largest_batch(batch_sizes: str, largest: int) -> str:
    """The setup's batch sizes with `largest` as the largest: sizes above it dropped, it added."""
    try:
        sizes = parse_batch_sizes(batch_sizes)
    except SpecError:
        sizes = ()
    kept = sorted({b for b in sizes if b < largest} | {largest})
    return ", ".join(str(b) for b in kept)


class _Prober(BatchProber):
    """The CLI's prober, also saying which size it is about to try (the dialog's progress line)."""

    def __init__(self, *args, on_start=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_start = on_start

    def __call__(self, batch_size: int, verify: bool) -> Trial:
        if self.on_start is not None and not self._stopped.is_set():
            self.on_start(batch_size, verify)
        return super().__call__(batch_size, verify)


class MaxBatchWorker(QThread):
    """Runs one search: the data and model checked in a probe child, then find_max_batch over a BatchProber."""

    checked = Signal(dict)  # the environment the probe child reported
    trying = Signal(int, bool)  # batch size, verify: a try is starting
    trial = Signal(object)  # a Trial that ended
    found = Signal(object)  # the SearchResult
    failed = Signal(str)  # one line: why the search could not go on
    stopped = Signal()

    def __init__(self, spec: SweepSpec, cap_bytes: int, parent: QObject | None = None):
        super().__init__(parent)
        self.spec = spec
        self.cap_bytes = cap_bytes
        self.limit = spec.samples  # never more samples than the data has
        self.start_size = min(DEFAULT_START, self.limit)
        self.margin = DEFAULT_MARGIN
        self.prober = _Prober(spec, cap_bytes, on_trial=self.trial.emit, on_start=self.trying.emit)
        self._runner = None
        self._stop_requested = False

    def preflight(self) -> dict:
        """Check the data and build the model in a child (as the CLI does first); the environment."""
        from batchlab.core.sweep.runner import SweepRunner

        self._runner = SweepRunner(self.spec)
        if self._stop_requested:
            self._runner.stop()
        return self._runner.preflight()

    def run(self) -> None:  # QThread override: runs in the worker thread
        try:
            environment = self.preflight()
            if self._stop_requested:
                raise SearchStopped("stopped before the first try")
            self.checked.emit(dict(environment or {}))
            result = find_max_batch(self.prober, limit=self.limit, start=self.start_size, margin=self.margin)
        except SearchStopped:
            self.stopped.emit()
        except (SpecError, MaxBatchError) as e:
            self.failed.emit(str(e) if not isinstance(e, SpecError) else f"{e.field}: {e.message}")
        except Exception:  # noqa: BLE001 - shown in the dialog instead of killing the thread silently
            self.failed.emit(traceback.format_exc().strip().splitlines()[-1])
        else:
            self.found.emit(result)

    def stop(self) -> None:
        """Thread-safe: end the running try (or the data check) now; the search gives no answer."""
        self._stop_requested = True
        self.prober.stop()
        if self._runner is not None:
            self._runner.stop()


class MaxBatchDialog(QDialog):
    """Non-modal: the search's tries as they end, Stop, and the answer with a button to use it."""

    use_batch = Signal(int)  # the user wants this size as the sweep's largest batch

    def __init__(self, spec: SweepSpec, parent: QWidget | None = None, cap_bytes: int | None = None):
        super().__init__(parent)
        self.setWindowTitle("Find the largest batch size")
        self.setModal(False)
        self.result: SearchResult | None = None
        cap = parse_memory_cap(None) if cap_bytes is None else cap_bytes
        self.worker = MaxBatchWorker(spec, cap, parent=self)
        layout = QVBoxLayout(self)
        intro = QLabel(
            f"{spec.preset}, {spec.samples:,} training samples, device {spec.device}: batch sizes from "
            f"{self.worker.start_size} grow by powers of two until one does not fit, then bisect. Each try trains "
            f"{PROBE_STEPS} steps and a validation pass in its own process (host memory capped at "
            f"{cap / MIB:,.0f} MiB); the answer is the largest fit less a {self.worker.margin:.0%} safety margin, "
            f"verified with {VERIFY_STEPS} steps. Same search as `batchlab max-batch`."
        )
        intro.setWordWrap(True)
        self.status = QLabel("Checking data and model (starting TensorFlow in a child process)…")
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # the number of tries is not known in advance
        self.trials_view = QPlainTextEdit()
        self.trials_view.setReadOnly(True)
        self.trials_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))  # the CLI's columns
        self.trials_view.setMinimumHeight(80)
        self.answer = QLabel()
        self.answer.setWordWrap(True)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer.setVisible(False)
        buttons = QDialogButtonBox()
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.use_button = QPushButton("Use as largest batch size")
        self.use_button.setToolTip("Put this size into the setup's batch sizes; larger sizes are removed")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self._use)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for button in (self.stop_button, self.use_button, self.close_button):
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        for widget in (intro, self.status, self.progress, self.trials_view, self.answer):
            layout.addWidget(widget)
        layout.addWidget(buttons)
        self.resize(620, 420)
        w = self.worker
        w.checked.connect(self._on_checked)
        w.trying.connect(self._on_trying)
        w.trial.connect(self._on_trial)
        w.found.connect(self._on_found)
        w.failed.connect(lambda message: self._end(f"The search stopped: {message}"))
        w.stopped.connect(lambda: self._end("Stopped; no answer."))
        w.finished.connect(self._on_finished)

    @property
    def running(self) -> bool:
        return self.worker.isRunning()

    def start(self) -> None:
        self.worker.start()

    def stop(self) -> None:
        if self.running:
            self.worker.stop()
            self.status.setText("Stopping (the running try is ended)…")
            self.stop_button.setEnabled(False)

    def _on_checked(self, environment: dict) -> None:
        device = environment.get("device_description")
        if device:
            self.trials_view.appendPlainText(f"device: {device}")

    def _on_trying(self, batch_size: int, verify: bool) -> None:
        what = "Verifying" if verify else "Trying"
        self.status.setText(f"{what} batch {batch_size:,}…")

    def _on_trial(self, trial: Trial) -> None:
        self.trials_view.appendPlainText(describe_trial(trial).strip())

    def _on_found(self, result: SearchResult) -> None:
        self.result = result
        lines = describe_result(result, self.worker.cap_bytes)
        self.answer.setText("\n".join(lines))
        self.answer.setVisible(True)
        self.use_button.setEnabled(result.batch_size is not None)
        if result.batch_size is not None:
            self.use_button.setText(f"Use {result.batch_size:,} as largest batch size")
        self._end("Done." if result.batch_size is not None else "No batch size fits.")

    def _end(self, text: str) -> None:
        self.status.setText(text)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.stop_button.setEnabled(False)

    def _on_finished(self) -> None:
        self.stop_button.setEnabled(False)

    def _use(self) -> None:
        if self.result is not None and self.result.batch_size is not None:
            self.use_batch.emit(self.result.batch_size)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        """Closing stops the search and waits for its child to be gone."""
        if self.running:
            self.worker.stop()
            self.worker.wait()
        super().closeEvent(event)
