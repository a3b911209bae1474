"""The LR range test in the window: open an lr-find run file, or run one for the setup's batch sizes, see
each batch size's loss against the rate with its suggested rates, and take the file as the setup's
`lr_from`. The test is `batchlab lr-find`'s own (core/sweep/lr_find.py: LrFindRunner, one child per
batch size and seed, the one writer) run by the window's sweep worker; nothing here imports TensorFlow."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from batchlab.core import events as ev
from batchlab.core.errors import SpecError
from batchlab.core.lr_range import (
    SKIP_FRACTION,
    STOP_FACTOR,
    RangeSettings,
    parse_range_settings,
    range_defaults,
)
from batchlab.core.spec import SweepSpec
from batchlab.gui.field_rows import add_field_row, error_line
from batchlab.gui.plot_style import BatchColours, add_legend_below, sync_legend
from batchlab.gui.worker import TRAINING_NICENESS, SweepWorker
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

TABLE_COLUMNS = ("batch", "seed", "suggested lr", "min/10", "loss there", "steps", "stopped")
RAW_ALPHA = 70  # the raw loss per step, faint under its smoothed curve
STOP_WAIT_MS = 60_000


def is_lr_find_file(path: str) -> bool:
    """True for a run file `batchlab lr-find` wrote (root attribute mode = "lr_find")."""
    from batchlab.core.runfile.reader import read_root_attrs
    from batchlab.core.sweep.lr_find import LR_FIND_MODE

    return read_root_attrs(path).get("mode") == LR_FIND_MODE


class LrFindWorker(SweepWorker):
    """The sweep worker with lr-find's runner: same event batches, stop and one writer."""

    def __init__(self, spec: SweepSpec, settings: RangeSettings, out_path: str, parent=None):
        super().__init__(spec, out_path, overwrite=False, parent=parent)
        self.settings = settings

    def make_runner(self):
        from batchlab.core.sweep.lr_find_runner import LrFindRunner

        # as the window's sweeps: painting is never queued behind TensorFlow
        return LrFindRunner(self.spec, self.settings, niceness=TRAINING_NICENESS)

    def execute(self, runner) -> str:
        from batchlab.core.sweep.lr_find_runner import run_lr_find

        return run_lr_find(self.spec, self.settings, self.out_path, sink=self._sink, runner=runner)


class RangeTestDialog(QDialog):
    """Loss against learning rate per batch size (log x), the suggestions marked, a table of them.

    With `path`: shows that lr-find file. With `spec` and `out_path`: asks for the range (lr min, max,
    steps, checked by lr-find's own parser), runs the test live and then shows its file.
    `rates_chosen(path)` when the user takes the file as the setup's rates.
    """

    rates_chosen = Signal(str)

    def __init__(self, parent: QWidget | None, path: str | None = None, spec: SweepSpec | None = None, out_path=None):
        super().__init__(parent)
        self.setObjectName("range_test_dialog")
        self.setWindowTitle("LR range test")
        self.path = path
        self.spec = spec
        self.out_path = out_path
        self.worker: LrFindWorker | None = None
        self.colours = BatchColours()
        self.curves: dict[int, dict[str, list]] = {}  # run -> columns received live
        self.runs: dict[int, dict[str, Any]] = {}  # run -> batch_size, seed
        self.items: list = []
        layout = QVBoxLayout(self)
        self._build_settings(layout, spec)
        self._build_plot_and_table(layout)
        self._build_notes(layout)
        self._build_buttons(layout, spec)
        self.resize(760, 640)
        if spec is not None:
            batches = ", ".join(map(str, spec.batch_sizes))
            self.status.setText(
                f"{spec.preset}: batch sizes {batches}, seeds {', '.join(map(str, spec.seeds))}; each test trains a "
                f"fresh model in its own process. The file: {out_path}"
            )
        if path:
            self.load(path)

    def _build_settings(self, layout: QVBoxLayout, spec: SweepSpec | None) -> None:
        """The range fields (blank: lr-find's defaults), shown when the dialog runs a test."""
        self.settings_box = QWidget()
        form = QFormLayout(self.settings_box)
        form.setContentsMargins(0, 0, 0, 0)
        self.fields: dict[str, QLineEdit] = {}
        self.field_errors: dict[str, QLabel] = {}
        defaults = range_defaults(spec.preset if spec is not None else None)  # a preset may have its own
        for name, label, default in (
            ("lr_min", "Lowest rate", f"{defaults.lr_min:g}"),
            ("lr_max", "Highest rate", f"{defaults.lr_max:g}"),
            ("lr_steps", "Steps", str(defaults.lr_steps)),
        ):
            edit = QLineEdit()
            edit.setObjectName(name)
            edit.setPlaceholderText(default)
            edit.textChanged.connect(self.check_settings)
            error = error_line()
            add_field_row(form, label, edit, error)
            self.fields[name], self.field_errors[name] = edit, error
        layout.addWidget(self.settings_box)
        self.settings_box.setVisible(spec is not None)

    def _build_plot_and_table(self, layout: QVBoxLayout) -> None:
        """Loss against rate over the table of suggestions, in a splitter."""
        splitter = QSplitter(Qt.Orientation.Vertical)
        self.plot = pg.PlotWidget(title="Loss vs learning rate")
        self.plot.setObjectName("range_plot")
        item = self.plot.getPlotItem()
        item.setLogMode(x=True, y=False)
        item.setLabel("bottom", "learning rate")
        item.getAxis("bottom").enableAutoSIPrefix(False)  # "x1e-06" on a log axis of rates reads wrong
        item.setLabel("left", "loss (smoothed; raw faint)")
        item.showGrid(x=True, y=True, alpha=0.25)
        add_legend_below(item)
        self.plot.setMinimumSize(300, 220)
        splitter.addWidget(self.plot)
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setObjectName("range_table")
        self.table.setHorizontalHeaderLabels(list(TABLE_COLUMNS))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        splitter.addWidget(self.table)
        splitter.setSizes([360, 140])
        layout.addWidget(splitter, 1)

    def _build_notes(self, layout: QVBoxLayout) -> None:
        """What the suggestions mean, and the status line."""
        self.note = QLabel(
            f"Suggested lr (solid line): where the smoothed loss falls fastest per unit of log(lr), the first "
            f"{SKIP_FRACTION:.0%} of the points skipped. min/10 (dotted): the rate of the lowest smoothed loss / 10. "
            f"A test stops when the smoothed loss exceeds {STOP_FACTOR:g}x its best."
        )
        self.note.setWordWrap(True)
        self.note.setProperty("role", "muted")
        layout.addWidget(self.note)
        self.status = QLabel()
        self.status.setObjectName("range_status")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)

    def _build_buttons(self, layout: QVBoxLayout, spec: SweepSpec | None) -> None:
        """Run/Stop (with a spec), Use these rates, Close."""
        buttons = QHBoxLayout()
        self.run_button = QPushButton("Run the range test")
        self.run_button.setObjectName("run_range_test")
        self.run_button.clicked.connect(self.start)
        self.run_button.setVisible(spec is not None)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setVisible(False)
        self.use_button = QPushButton("Use these rates")
        self.use_button.setObjectName("use_rates")
        self.use_button.setToolTip("Put this file under Rates from: each batch size trains at its suggested rate")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self._use)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        for b in (self.run_button, self.stop_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.use_button)
        buttons.addWidget(close)
        layout.addLayout(buttons)

    # ------------------------------------------------------------ settings and running

    def settings(self) -> RangeSettings:
        """The range as typed (blank: lr-find's defaults); SpecError naming the field otherwise."""
        typed = (self.fields[n].text().strip() or None for n in ("lr_min", "lr_max", "lr_steps"))
        return parse_range_settings(*typed, preset=self.spec.preset if self.spec is not None else None)

    def check_settings(self, *_args) -> bool:
        """Show lr-find's message under the field it names; Run only while the range is valid."""
        try:
            self.settings()
            problem = None
        except SpecError as e:
            problem = e
        for name, label in self.field_errors.items():
            text = problem.message if problem is not None and problem.field == name else ""
            label.setText(text)
            label.setVisible(bool(text))
        self.run_button.setEnabled(problem is None and self.worker is None)
        return problem is None

    def start(self) -> bool:
        """Run the range test in the worker thread; False if the range is invalid or one is running."""
        if self.spec is None or self.worker is not None or not self.check_settings():
            return False
        self.curves.clear()
        self.runs.clear()
        self.worker = LrFindWorker(self.spec, self.settings(), str(self.out_path), parent=self)
        self.worker.events.connect(self._on_events)
        self.worker.sweep_failed.connect(lambda field, message: self.status.setText(f"Cannot run: {field}: {message}"))
        self.worker.crashed.connect(self._on_crash)
        self.worker.finished.connect(self._on_finished)
        self.run_button.setEnabled(False)
        self.stop_button.setVisible(True)
        self.settings_box.setEnabled(False)
        self.status.setText("Starting TensorFlow / building the model…")
        self.worker.start()
        return True

    def _on_crash(self, text: str) -> None:
        self.crash_text = text
        last = next((line for line in reversed(text.splitlines()) if line.strip()), "unknown error")
        self.status.setText(f"The range test failed: {last.strip()}")

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.status.setText("Stopping after the current step…")

    @property
    def running(self) -> bool:
        return self.worker is not None

    def _on_events(self, batch: list) -> None:
        changed = False
        for event in batch:
            kind = event.get("type")
            if kind == ev.SWEEP_STARTED:
                for run in event.get("runs") or []:
                    self.runs[int(run["index"])] = run
            elif kind == ev.RUN_STARTED:
                run = self.runs.get(int(event["run"]), {})
                self.status.setText(f"Run {int(event['run']) + 1}/{len(self.runs)} · batch {run.get('batch_size')}…")
            elif kind == ev.LR_RANGE:
                columns = self.curves.setdefault(int(event["run"]), {c.name: [] for c in ev.LR_RANGE_COLUMNS})
                for c in ev.LR_RANGE_COLUMNS:
                    columns[c.name].extend(event.get(c.name) or [])
                changed = True
            elif kind == ev.RUN_ENDED:
                self.status.setText(f"Run {int(event['run']) + 1}/{len(self.runs)}: {event.get('message') or ''}")
        if changed:
            self.draw_live()

    def draw_live(self) -> None:
        """The points received so far (a file is drawn again from disk when the test ends)."""
        runs = [
            (self.runs.get(index, {}).get("batch_size", 0), self.runs.get(index, {}).get("seed", 0), columns, {})
            for index, columns in sorted(self.curves.items())
        ]
        self._draw(runs)

    def _on_finished(self) -> None:
        worker, self.worker = self.worker, None
        self.stop_button.setVisible(False)
        self.settings_box.setEnabled(True)
        self.check_settings()
        if worker is not None and Path(worker.out_path).exists():
            self.load(worker.out_path)
            self.status.setText(f"Range test {worker.status or 'ended'}; written to {worker.out_path}")

    # ------------------------------------------------------------ a file

    def load(self, path: str) -> None:
        """Show an lr-find file: every run's curve and suggestions, and the table."""
        from batchlab.core.runfile.reader import read_run_file
        from batchlab.core.sweep.lr_find import range_rows

        record = read_run_file(path)
        self.path = path
        self.setWindowTitle(f"LR range test — {Path(path).name}")
        rows = range_rows(record)
        runs = [(run.batch_size, run.seed, run.lr_range, dict(run.attrs)) for run in record.runs]
        self._draw(runs)
        self._fill_table(rows)
        usable = any(r["status"] == "ok" and math.isfinite(r["suggested_lr"]) for r in rows)
        self.use_button.setEnabled(usable)

    def _fill_table(self, rows: list[dict[str, Any]]) -> None:
        def num(v: float) -> str:
            return f"{v:.3g}" if math.isfinite(v) else "—"

        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            stop = r["stop_reason"] if r["status"] == "ok" else f"{r['status']}: {r['stop_reason'] or '-'}"
            cells = [r["batch_size"], r["seed"], num(r["suggested_lr"]), num(r["suggested_lr_min10"])]
            cells += [num(r["loss_at_suggestion"]), r["points"], stop]
            for j, value in enumerate(cells):
                cell = QTableWidgetItem(str(value))
                if j < len(cells) - 1:
                    cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if j == 0:
                    cell.setForeground(self.colours.colour(int(r["batch_size"])))
                self.table.setItem(i, j, cell)

    def _draw(self, runs: list[tuple[int, int, dict, dict]]) -> None:
        """runs: (batch size, seed, lr_range columns, run attributes with the suggestions)."""
        item = self.plot.getPlotItem()
        for old in self.items:
            item.removeItem(old)
        item.legend.clear()
        self.items = []
        self.colours.update([int(b) for b, *_ in runs])
        lows, highs = [], []
        named = set()
        for batch, _seed, columns, attrs in runs:
            lr = np.asarray(columns.get("lr", ()), dtype=float)
            smoothed = np.asarray(columns.get("smoothed_loss", ()), dtype=float)
            raw = np.asarray(columns.get("loss", ()), dtype=float)
            if len(lr) == 0:
                continue
            colour = self.colours.colour(int(batch))
            faint = pg.mkColor(colour)
            faint.setAlpha(RAW_ALPHA)
            keep = np.isfinite(raw)
            raw_curve = pg.PlotDataItem(lr[keep], raw[keep], pen=pg.mkPen(faint, width=1))
            item.addItem(raw_curve, ignoreBounds=True)  # a diverged step's loss would squash the rest
            name = None if batch in named else f"B={batch}"
            named.add(batch)
            curve = item.plot(lr, smoothed, pen=pg.mkPen(colour, width=2), name=name)
            self.items += [raw_curve, curve]
            finite = smoothed[np.isfinite(smoothed)]
            if len(finite):
                best = float(finite.min())
                lows.append(best)
                highs.append(min(float(finite.max()), STOP_FACTOR * best if best > 0 else float(finite.max())))
            for key, style in (("suggested_lr", Qt.PenStyle.SolidLine), ("suggested_lr_min10", Qt.PenStyle.DotLine)):
                rate = float(attrs.get(key, math.nan))
                if math.isfinite(rate) and rate > 0:
                    line = pg.InfiniteLine(math.log10(rate), angle=90, pen=pg.mkPen(colour, width=1, style=style))
                    line.setToolTip(f"batch {batch}: {key.replace('_', ' ')} {rate:.3g}")
                    item.addItem(line, ignoreBounds=True)
                    self.items.append(line)
            rate, loss = float(attrs.get("suggested_lr", math.nan)), float(attrs.get("loss_at_suggestion", math.nan))
            if math.isfinite(rate) and math.isfinite(loss) and rate > 0:
                dot = pg.PlotDataItem([rate], [loss], pen=None, symbol="o", symbolSize=9, symbolBrush=colour)
                item.addItem(dot)
                self.items.append(dot)
        if lows:
            low, high = min(lows), max(highs)
            pad = 0.05 * max(high - low, abs(high) * 0.01, 1e-12)
            item.setYRange(low - pad, high + pad, padding=0)
            item.enableAutoRange(axis="x")
        sync_legend(item)

    def _use(self) -> None:
        if self.path:
            self.rates_chosen.emit(str(self.path))
            self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        if self.worker is not None:
            self.worker.stop()
            self.worker.wait(STOP_WAIT_MS)
            self._on_finished()
        event.accept()
