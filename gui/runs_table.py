"""The runs table: one row per run of the shown sweeps; selecting rows highlights their curves."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from typing import NamedTuple

from batchlab.core.figures import FIGURE_NAMES
from batchlab.core.model import FAILED_STATUSES, RunData, SweepData
from batchlab.core.spec_diff import flat_settings, spec_differences
from batchlab.core.table import metric_names
from batchlab.gui import theme
from batchlab.gui.files import write_export
from batchlab.gui.plot_style import BatchColours
from batchlab.gui.summary_view import metric_value
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

RunKey = tuple[str, int]
_ROOT = QModelIndex()


class TableUpdate(NamedTuple):
    """What one RunsModel.refresh did: rows updated on screen, and whether a run's status changed."""

    shown: bool
    status_changed: bool


def _num(fmt: str) -> Callable[[float], str]:
    return lambda v: "" if not math.isfinite(v) else format(v, fmt)


# column title -> (value of a run, how to show it); the numbers are the core model's RunFigures
COLUMNS: list[tuple[str, Callable[[str, RunData], object], Callable[[object], str]]] = [
    ("sweep", lambda s, r: s, str),
    ("run", lambda s, r: r.index, str),
    ("status", lambda s, r: r.status, str),
    ("batch size", lambda s, r: r.batch_size, str),
    ("seed", lambda s, r: r.seed, str),
    ("time (s)", lambda s, r: metric_value(r, "total_time"), _num(".2f")),
    ("steady throughput (samples/s)", lambda s, r: metric_value(r, "throughput"), _num(",.0f")),
    ("step time (ms)", lambda s, r: r.figures.step_time * 1e3, _num(".3g")),
    ("tracing (s)", lambda s, r: r.figures.tracing_time, _num(".2f")),
    ("peak memory (MiB)", lambda s, r: metric_value(r, "peak_memory"), _num(",.1f")),
    ("final loss", lambda s, r: metric_value(r, "final_loss"), _num(".5g")),
]
SWEEP_COLUMN = 0  # shown only while two sweeps are compared
SEED_COLUMN = 4  # shown only when the runs have more than one seed
SWEEP_COLUMN_MAX_PX = 220  # longer sweep names are elided (the full name is in the tooltip)
NUMBER_PAD_PX = 8  # room for a running run's numbers to grow a digit between column fits
# Rows measured when all columns are fitted (rows come or go; the visible ones first): every row of a long
# sweep took ~0.2 s at 60 runs; a column's numbers share their format, so a sample finds its width. 64 rows took
# 75-110 ms when a 504-run file was shown (Qt asks each cell for ~8 roles); a run that ends widens its columns itself.
FIT_ROWS = 24
# The roles data() answers; Qt's delegate asks for ~8 per cell (font, check state, ...): the others return at once.
_ROLES = frozenset(
    {
        Qt.ItemDataRole.DisplayRole,
        Qt.ItemDataRole.UserRole,
        Qt.ItemDataRole.DecorationRole,
        Qt.ItemDataRole.BackgroundRole,
        Qt.ItemDataRole.ToolTipRole,
        Qt.ItemDataRole.TextAlignmentRole,
    }
)
STATUS_COLOURS = dict(theme.LIGHT.status_backgrounds)  # the window sets its theme's (set_status_colours)


# Figures the table already shows as a column (in its units): the CSV has them once, under the table's name
SHOWN_FIGURES = {
    "final_loss": "final loss",
    "total_time": "time (s)",
    "samples_per_s": "steady throughput (samples/s)",
    "step_time": "step time (ms)",
    "tracing_time": "tracing (s)",
    "peak_memory_bytes": "peak memory (MiB)",
}
CSV_FIGURES = tuple(name for name in FIGURE_NAMES if name not in SHOWN_FIGURES)
NOT_MEASURED = {"target_reached": -1, "first_epoch_peak_bytes": -1, "steady_peak_bytes": -1}  # "none": empty


def _figure_text(name: str, value: object) -> str:
    """A figure's CSV cell: empty for "none" (no target, no memory reading), not -1."""
    return "" if name in NOT_MEASURED and value == NOT_MEASURED[name] else _text(value)


# settings every CSV row carries; the learning rate is the run's own ("learning rate" column)
SPEC_CONTEXT = ("preset", "optimizer", "epochs")


def _text(value: object) -> str:
    """A CSV cell: NaN and None as empty, lists and dicts as compact JSON, the rest as str()."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class RunsModel(QAbstractTableModel):
    """Rows are (source, run) pairs of the sweeps shown; values come straight from SweepData."""

    def __init__(self, colours: BatchColours, parent=None):
        super().__init__(parent)
        self.colours = colours
        self.sources: dict[str, SweepData] = {}
        self._rows: list[tuple[str, RunData]] = []
        self._versions: list[int] = []
        self._statuses: list[str] = []
        self.status_rows: tuple[int, ...] = ()  # the rows whose status the last refresh found changed

    def set_source(self, source: str, data: SweepData | None) -> None:
        if data is None:
            self.sources.pop(source, None)
        else:
            self.sources[source] = data
        self.refresh(force=True)

    def refresh(self, force: bool = False, values_due: bool = True) -> TableUpdate:
        """Show what changed: which rows were updated, and whether a run's status changed.

        A running run's numbers change with every chunk of steps; each update re-sorts and
        repaints the table, so they are shown only when values_due (the window's Refresher says
        when, gui/refresh.py), while status changes always are. Rows coming or going reset the model.
        """
        rows = [(s, r) for s in sorted(self.sources) for r in self.sources[s].ordered_runs()]
        if (
            force
            or [(s, r.index) for s, r in rows] != [(s, r.index) for s, r in self._rows]
            or any(a[1] is not b[1] for a, b in zip(rows, self._rows, strict=False))
        ):
            self.beginResetModel()
            self._rows = rows
            self._versions = [r.version for _, r in rows]
            self._statuses = [r.status for _, r in rows]
            self.endResetModel()
            return TableUpdate(shown=False, status_changed=False)
        shown = False
        status_rows = []
        for i, (_s, run) in enumerate(self._rows):
            if self._versions[i] == run.version:
                continue
            if self._statuses[i] != run.status:
                status_rows.append(i)
            elif not values_due:
                continue
            self._versions[i], self._statuses[i] = run.version, run.status
            shown = True
            self.dataChanged.emit(self.index(i, 0), self.index(i, len(COLUMNS) - 1))
        self.status_rows = tuple(status_rows)
        return TableUpdate(shown=shown, status_changed=bool(status_rows))

    def _label(self, source: str) -> str:
        data = self.sources.get(source)
        return data.label if data is not None and data.label else source

    def seeds(self) -> set[int]:
        """The seeds of the runs shown."""
        return {run.seed for _s, run in self._rows}

    def key(self, row: int) -> RunKey:
        source, run = self._rows[row]
        return (source, run.index)

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802 (Qt override)
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            # two lines (units, or the second word, below): one-line headers made the table wider
            # than a 1440 px window has room for, so "final loss" was cut off
            title = COLUMNS[section][0]
            return title.replace(" (", "\n(") if " (" in title else title.replace(" ", "\n", 1)
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if role not in _ROLES or not index.isValid():
            return None
        source, run = self._rows[index.row()]
        title, value_of, show = COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return show(value_of(self._label(source), run))
        if role == Qt.ItemDataRole.UserRole:  # sort key: the raw value, NaN last
            value = value_of(self._label(source), run)
            return math.inf if isinstance(value, float) and not math.isfinite(value) else value
        if role == Qt.ItemDataRole.DecorationRole and title == "batch size":
            return self.colours.colour(run.batch_size)
        if role == Qt.ItemDataRole.BackgroundRole and title == "status" and run.status in STATUS_COLOURS:
            return QBrush(QColor(STATUS_COLOURS[run.status]))
        if role == Qt.ItemDataRole.ToolTipRole and run.message:
            return run.message
        if role == Qt.ItemDataRole.ToolTipRole and index.column() == SWEEP_COLUMN:
            return self._label(source)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() >= 3:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def rows_as_text(self) -> list[list[str]]:
        """The table's raw values, header first (for CSV export; NaN as an empty cell)."""
        out = [[c[0] for c in COLUMNS]]
        for source, run in self._rows:
            values = [value_of(self._label(source), run) for _t, value_of, _show in COLUMNS]
            out.append(["" if isinstance(v, float) and not math.isfinite(v) else str(v) for v in values])
        return out

    def export_rows(self) -> list[list[str]]:
        """The table's columns plus each run's context, header first (the CSV export).

        Context: the sweep's file, its key settings and every setting in which the shown sweeps
        differ, the epochs and steps done, learning rate, engine, the run's message (why it ended so) and every figure.
        """
        specs = {source: data.spec for source, data in self.sources.items()}
        differing = spec_differences(specs) if len(specs) > 1 else {}
        settings = [*SPEC_CONTEXT, *(key for key in differing if key not in (*SPEC_CONTEXT, "lr"))]
        header = [*self.rows_as_text()[0], *settings, "epochs done", "steps done", "learning rate"]
        header += ["engine", "message", *CSV_FIGURES]
        metrics = metric_names([{"metrics": run.final_metrics} for _, run in self._rows])
        header += [f"final {name}" for name in metrics]  # the model's compiled metrics (core.figures)
        out = [header]
        for (source, run), table_row in zip(self._rows, self.rows_as_text()[1:], strict=True):
            data = self.sources[source]
            spec = flat_settings(data.spec)
            figures = run.figures.as_dict()
            context = [_text(spec.get(key)) for key in settings]
            context += [str(len(run.epochs)), str(len(run.steps)), _text(run.attrs.get("lr", spec.get("lr")))]
            context += [_text(run.attrs.get("engine", spec.get("loop"))), run.message]
            finals = run.final_metrics
            figures_text = [_figure_text(name, figures[name]) for name in CSV_FIGURES]
            out.append([*table_row, *context, *figures_text, *(_text(finals.get(n, math.nan)) for n in metrics)])
        return out

    def failed_rows(self) -> list[RunKey]:
        return [(s, r.index) for s, r in self._rows if r.status in FAILED_STATUSES]


class RunsTable(QTableView):
    """Sortable table of runs; emits the keys of the selected runs."""

    selection_changed = Signal(object)  # set[RunKey]

    def __init__(self, colours: BatchColours, parent: QWidget | None = None):
        super().__init__(parent)
        self.runs_model = RunsModel(colours, self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.runs_model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setAlternatingRowColors(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # Always there: a scroll bar that appears after the columns were fitted takes its width from
        # the stretched last column, which then runs past the view ("final loss" cut off)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        # Sized to the contents when rows come or a run ends, not on every change: ResizeToContents
        # would measure every cell each time a running row's numbers change (up to 12 ms a time).
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setStretchLastSection(True)
        self.horizontalHeader().setResizeContentsPrecision(FIT_ROWS)
        self.selectionModel().selectionChanged.connect(self._emit_selection)
        self.runs_model.modelReset.connect(self._emit_selection)
        # A table of more than FIT_ROWS rows is fitted a turn of the event loop after its rows came: not in the
        # same step as the rest of showing a 504-run file (the fit alone took 25-60 ms there).
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self.fit_columns)
        self.runs_model.modelReset.connect(self._fit_after_reset)
        self.fit_columns()  # headers whole before the first row (an empty table cut "steady throughput (samples/s)")

    def set_status_colours(self, colours: dict[str, str]) -> None:
        """Backgrounds of the status cells, by status (the theme's, so their text stays readable)."""
        STATUS_COLOURS.clear()
        STATUS_COLOURS.update(colours)
        self.viewport().update()

    def refresh(self, values_due: bool = True) -> bool:
        """Bring the rows up to date (see RunsModel.refresh); re-fit the columns when a run ended.

        True if any row changed on screen (the Refresher counts the table's interval from then).
        """
        update = self.runs_model.refresh(values_due=values_due)
        if update.status_changed:
            self.widen_to_rows(self.runs_model.status_rows)
        return update.shown

    def widen_to_rows(self, rows: tuple[int, ...]) -> None:
        """Widen the columns that these model rows' cells no longer fit (a run ended: its numbers came). Only
        these rows are measured: fitting every row each time a run ended grew with the sweep (0.18 s at 60 runs)."""
        header = self.horizontalHeader()
        grid = 1 if self.showGrid() else 0
        last = self.runs_model.columnCount() - 1
        for column in range(last):  # the last column stretches to fill the rest
            if self.isColumnHidden(column):
                continue
            width = max(
                self.sizeHintForIndex(self.proxy.mapFromSource(self.runs_model.index(row, column))).width()
                for row in rows
            )
            width += grid + (NUMBER_PAD_PX if column else 0)
            if column == SWEEP_COLUMN:
                width = min(width, SWEEP_COLUMN_MAX_PX)
            if width > header.sectionSize(column):
                header.resizeSection(column, width)

    def _fit_after_reset(self) -> None:
        if self.runs_model.rowCount() > FIT_ROWS:
            self._fit_timer.start()
        else:
            self.fit_columns()

    def fit_columns(self) -> None:
        """Size the columns to their contents and headers, the last one still filling the rest of the width.

        The seed column shows only when there is more than one seed, the sweep column only while
        sweeps are compared, at most SWEEP_COLUMN_MAX_PX wide (its names are elided, whole in the
        tooltip), so a long file name never pushes the numbers out.
        """
        self.setColumnHidden(SWEEP_COLUMN, len(self.runs_model.sources) < 2)
        self.setColumnHidden(SEED_COLUMN, len(self.runs_model.seeds()) < 2)
        header = self.horizontalHeader()
        header.setStretchLastSection(False)  # sized to contents first, then it fills the rest again
        self.resizeColumnsToContents()
        for column in range(1, self.runs_model.columnCount()):
            header.resizeSection(column, header.sectionSize(column) + NUMBER_PAD_PX)
        header.resizeSection(SWEEP_COLUMN, min(header.sectionSize(SWEEP_COLUMN), SWEEP_COLUMN_MAX_PX))
        header.setStretchLastSection(True)
        self._fit_timer.stop()  # fitted: a fit still due after a reset is done

    def selected_keys(self) -> set[RunKey]:
        rows = {self.proxy.mapToSource(i).row() for i in self.selectionModel().selectedRows()}
        return {self.runs_model.key(r) for r in rows if 0 <= r < self.runs_model.rowCount()}

    def _emit_selection(self, *_args) -> None:
        self.selection_changed.emit(self.selected_keys())

    def select_keys(self, keys: set[RunKey]) -> None:
        """Select the rows of these runs (used by tests and when a sweep is reloaded)."""
        self.clearSelection()
        mode = self.selectionModel().SelectionFlag.Select | self.selectionModel().SelectionFlag.Rows
        for row in range(self.runs_model.rowCount()):
            if self.runs_model.key(row) in keys:
                self.selectionModel().select(self.proxy.mapFromSource(self.runs_model.index(row, 0)), mode)

    def export_csv(self, path: str) -> str:
        """Write every row (in run order) with its context columns to a CSV file; returns the path.

        Raises OSError if the file cannot be written (a half-written file is removed).
        """
        text = io.StringIO(newline="")
        csv.writer(text).writerows(self.runs_model.export_rows())
        return write_export(path, text.getvalue().encode("utf-8"))
