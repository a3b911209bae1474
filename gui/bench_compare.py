"""File > Compare of two benchmark files (batchlab bench): the comparison table `batchlab compare` prints.

The numbers and the noise verdicts come from core/bench/compare.py (one place for both views); this module
only lays them out: a table of B/A per workload and batch size, the machines, the step-time models and the
sentences under it.
"""

from __future__ import annotations

from batchlab.core.bench.compare import (
    Comparison,
    compare_benches,
    model_lines,
    noise_rule_text,
    side_lines,
    summary_lines,
    table_cells,
    table_headers,
)
from batchlab.core.errors import SpecError
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

BEYOND_TOOLTIP = "* beyond the noise"


def is_bench_file(path: str | None) -> bool:
    """True for a run file batchlab bench wrote (root attribute bench_suite); False for others or unreadable."""
    from batchlab.core.runfile.reader import read_root_attrs

    if not path:
        return False
    try:  # the root attributes alone: reading a whole 504-run file to ask took 3.2 s of the GUI thread
        return bool(read_root_attrs(path).get("bench_suite"))
    except (SpecError, OSError):
        return False


class BenchCompareDialog(QDialog):
    """The comparison of two benchmarks: B/A per workload and batch size, with spreads and * beyond the noise."""

    def __init__(self, parent, comparison: Comparison):
        super().__init__(parent)
        self.setObjectName("bench_compare")
        self.setWindowTitle("Benchmark comparison (B/A)")
        self.comparison = comparison
        layout = QVBoxLayout(self)
        header = QLabel("\n".join([*comparison.notes, *side_lines(comparison)]))
        header.setWordWrap(True)
        header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(header)
        self.table = QTableWidget(len(comparison.rows), len(table_headers()))
        self.table.setObjectName("bench_compare_table")
        self.table.setHorizontalHeaderLabels(table_headers())
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for i, row in enumerate(comparison.rows):
            for j, text in enumerate(table_cells(row)):
                item = QTableWidgetItem(text)
                if 0 < j < len(table_headers()) - 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if text.endswith(" *"):
                    item.setToolTip(BEYOND_TOOLTIP)
                self.table.setItem(i, j, item)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.table, 1)
        lines = [*model_lines(comparison), *summary_lines(comparison), f"Noise: {noise_rule_text(comparison)}."]
        self.summary = QLabel("\n".join(lines))
        self.summary.setObjectName("bench_compare_summary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.summary)
        self.resize(900, 520)


def show_bench_compare(window, a_path: str | None, b_path: str | None) -> BenchCompareDialog | None:
    """When both files are benchmarks, show their comparison beside the overlaid curves; None otherwise.

    Files of different suite versions are refused with the one-line message `batchlab compare` prints.
    """
    if not (is_bench_file(a_path) and is_bench_file(b_path)):
        return None
    try:
        comparison = compare_benches(a_path, b_path)
    except SpecError as e:
        window.show_error("Cannot compare the benchmarks", str(e))
        return None
    dialog = BenchCompareDialog(window, comparison)
    dialog.show()
    return dialog
