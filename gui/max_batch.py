"""Tools > Find largest batch: `batchlab max-batch` from the window, each try in its own child process.

The search is the CLI's own (core/analysis/batch_search.find_max_batch over a
core/sweep/max_batch.BatchProber); here it runs in a QThread, so the GUI thread never waits on a
child. The dialog opens with the CLI's two settings, the safety margin (--margin) and the host
memory cap (--memory-cap), filled with the CLI's defaults and checked by the CLI's own parsers (a
bad value is one line under its field, and Start waits for a good one). It lists every try as the
CLI prints it, Stop ends the running try's child at once, and the answer can be put into the setup
as the sweep's largest batch size.
"""

from __future__ import annotations

import traceback

from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, DEFAULT_START, SearchResult, Trial, find_max_batch
from batchlab.core.errors import SpecError
from batchlab.core.spec import SweepSpec, parse_batch_sizes
from batchlab.core.sweep.max_batch import (
    DEFAULT_CAP_FRACTION,
    PROBE_STEPS,
    VERIFY_STEPS,
    BatchProber,
    MaxBatchError,
    SearchStopped,
    describe_result,
    describe_trial,
    parse_margin,
    parse_memory_cap,
)
from batchlab.gui.field_rows import add_field_row, error_line
from PySide6.QtCore import QObject, Qt, QThread, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

MIB = 1 << 20
DEFAULT_MARGIN_TEXT = f"{DEFAULT_MARGIN:g}"  # the CLI's defaults, as the fields show them
DEFAULT_CAP_TEXT = f"{DEFAULT_CAP_FRACTION:.0%}"  # of the memory available when the search starts
# an invalid field's border and its message in red, as in the setup panel
FIELD_STYLE = 'QLineEdit[invalid="true"] { border: 1px solid #B00020; }\nQLabel[role="error"] { color: #B00020; }'


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
    """Non-modal: the margin and memory cap, Start, the search's tries as they end, Stop, and the answer
    with a button to use it. `blocked()` gives a reason not to start now (the window: a sweep is running)."""

    use_batch = Signal(int)  # the user wants this size as the sweep's largest batch
    search_started = Signal()

    def __init__(self, spec: SweepSpec, parent: QWidget | None = None, cap_bytes: int | None = None):
        super().__init__(parent)
        self.setWindowTitle("Find the largest batch size")
        self.setModal(False)
        self.setStyleSheet(FIELD_STYLE)
        self.result: SearchResult | None = None
        self.blocked = lambda: None
        cap = parse_memory_cap(None) if cap_bytes is None else cap_bytes
        self.worker = MaxBatchWorker(spec, cap, parent=self)
        layout = QVBoxLayout(self)
        intro = QLabel(
            f"{spec.preset}, {spec.samples:,} training samples, device {spec.device}: batch sizes from "
            f"{self.worker.start_size} grow by powers of two until one does not fit, then bisect. Each try trains "
            f"{PROBE_STEPS} steps and a validation pass in its own process, ended if it passes the host memory cap; "
            f"the answer is the largest fit less the safety margin, verified with {VERIFY_STEPS} steps. Same search "
            "as `batchlab max-batch`."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.margin_edit, self.margin_error = self._field(
            form, "Safety margin", DEFAULT_MARGIN_TEXT, "margin", "fraction off the largest size that fitted, 0 to 0.9"
        )
        self.cap_edit, self.cap_error = self._field(
            form, "Host memory cap", DEFAULT_CAP_TEXT, "memory_cap", "e.g. 80% (of the memory available now), 6GiB"
        )
        self.cap_note = QLabel()
        self.cap_note.setProperty("role", "muted")
        form.addRow("", self.cap_note)
        layout.addLayout(form)
        if cap_bytes is not None:
            self.cap_edit.setText(f"{cap_bytes / MIB:g}MiB")
        self.status = QLabel("Set the margin and the memory cap, then Start.")
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)  # no percentage: the number of tries is not known in advance
        self.trials_view = QPlainTextEdit()
        self.trials_view.setReadOnly(True)
        self.trials_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))  # the CLI's columns
        self.trials_view.setMinimumHeight(80)
        self.answer = QLabel()
        self.answer.setWordWrap(True)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer.setVisible(False)
        buttons = QDialogButtonBox()
        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.use_button = QPushButton("Use as largest batch size")
        self.use_button.setToolTip("Put this size into the setup's batch sizes; larger sizes are removed")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self._use)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for button in (self.start_button, self.stop_button, self.use_button, self.close_button):
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        for widget in (self.status, self.progress, self.trials_view, self.answer):
            layout.addWidget(widget)
        layout.addWidget(buttons)
        self.resize(620, 480)
        w = self.worker
        w.checked.connect(self._on_checked)
        w.trying.connect(self._on_trying)
        w.trial.connect(self._on_trial)
        w.found.connect(self._on_found)
        w.failed.connect(lambda message: self._end(f"The search stopped: {message}"))
        w.stopped.connect(lambda: self._end("Stopped; no answer."))
        w.finished.connect(self._on_finished)
        self.margin_edit.textChanged.connect(self.settings)
        self.cap_edit.textChanged.connect(self.settings)
        self.settings()

    def _field(self, form: QFormLayout, label: str, text: str, name: str, hint: str) -> tuple[QLineEdit, QLabel]:
        """A line edit with its error line underneath (hidden while the value is good)."""
        edit = QLineEdit(text)
        edit.setObjectName(name)
        edit.setPlaceholderText(hint)
        edit.setToolTip(hint)
        error = error_line(name)
        add_field_row(form, label, edit, error)
        return edit, error

    def settings(self) -> tuple[float, int] | None:
        """The margin and the cap in bytes from the fields, by the CLI's parsers; None when either is bad
        (its message shown under it, Start disabled)."""
        margin = self._check(self.margin_edit, self.margin_error, parse_margin)
        cap = self._check(self.cap_edit, self.cap_error, parse_memory_cap)
        self.cap_note.setText(f"= {cap / MIB:,.0f} MiB a try may use" if cap is not None else "")
        ok = margin is not None and cap is not None
        self.start_button.setEnabled(ok and not self.running and not self.worker.isFinished())
        return (margin, cap) if ok else None

    @staticmethod
    def _check(edit: QLineEdit, error: QLabel, parse):
        """parse(edit's text), or None with the SpecError's line shown under the field."""
        try:
            value, message = parse(edit.text()), ""
        except SpecError as e:
            value, message = None, e.message  # the field is named by its label
        error.setText(message)
        error.setVisible(bool(message))
        if edit.property("invalid") != bool(message):
            edit.setProperty("invalid", bool(message))
            edit.style().unpolish(edit)
            edit.style().polish(edit)
        return value

    @property
    def running(self) -> bool:
        return self.worker.isRunning()

    def start(self) -> bool:
        """Start the search with the fields' margin and cap; False when a field is bad, a search ran already
        or `blocked()` gives a reason (shown as the status)."""
        values = self.settings()
        if values is None or self.running or self.worker.isFinished():
            return False
        reason = self.blocked()
        if reason:
            self.status.setText(reason)
            return False
        margin, cap = values
        self.worker.margin = margin
        self.worker.cap_bytes = self.worker.prober.cap_bytes = cap
        for widget in (self.margin_edit, self.cap_edit, self.start_button):
            widget.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.status.setText("Checking data and model (starting TensorFlow in a child process)…")
        self.progress.setRange(0, 0)  # the number of tries is not known in advance
        self.worker.start()
        self.search_started.emit()
        return True

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
