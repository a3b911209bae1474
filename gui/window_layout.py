"""The main window's widgets and how they are laid out: the setup panel beside the views (Live, Summary with its
Why and Where-the-time-went tabs, Analysis), the runs table and log under them, the status bar. A mixin of
gui/main_window.py's MainWindow."""

from __future__ import annotations

from batchlab.gui import run_folder
from batchlab.gui.analysis_view import AnalysisView
from batchlab.gui.explain_panel import ExplanationPanel
from batchlab.gui.live_plots import LivePlots
from batchlab.gui.oom_offer import OomOfferBar
from batchlab.gui.runs_table import RunsTable
from batchlab.gui.setup_panel import SetupPanel
from batchlab.gui.summary_view import SummaryView
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

LOG_LIMIT = 5000  # lines kept in the log panel


class WindowLayout:
    """Builds MainWindow's widgets (see the module docstring)."""

    def _room_for_why_tab(self, index: int) -> None:
        """Showing the time bars, the pane under the plots grows to the bars and their legend, at most two thirds of
        the Summary (beyond that it scrolls); the plots keep the rest. A pane the user made taller stays."""
        if self.why_tabs.widget(index) is not self.explanation:
            bars = self.summary.time_bars
            legend = bars.legend.heightForWidth(max(1, self.why_tabs.width() - 20)) if bars.legend.text() else 0
            need = bars.plot_widget.maximumHeight() + legend + self.why_tabs.tabBar().sizeHint().height() + 8
            top, bottom = self.summary_splitter.sizes()
            if bottom < need:
                bottom = min(need, (top + bottom) * 2 // 3)
                self.summary_splitter.setSizes([top + self.summary_splitter.sizes()[1] - bottom, bottom])

    def _build_widgets(self) -> None:
        output_dir = str(self.settings.value("files/output_dir", run_folder.default_output_dir()))
        self.setup = SetupPanel(output_dir)
        self.live = LivePlots(self.colours, pacer=self.refresher.pacer, live=lambda: self.refresher.live)
        self.summary = SummaryView(self.colours)
        self.views = QTabWidget()
        self.views.addTab(self.live, "Live")
        # The summary plots over "why" (core/analysis/explain.py) and "where each run's time went" (the stacked
        # bars), a tab each: with both under the plots, the four plots were 120 px tall even at 1440x900.
        self.explanation = ExplanationPanel()
        self.why_tabs = QTabWidget()
        self.why_tabs.setObjectName("why_tabs")
        self.why_tabs.setDocumentMode(True)
        self.why_tabs.addTab(self.explanation, "Why")
        bars = QScrollArea()  # many runs: the bars scroll rather than push the plots above off their height
        bars.setWidgetResizable(True)
        bars.setFrameShape(QFrame.Shape.NoFrame)
        bars.setWidget(self.summary.time_bars.widget)
        self.why_tabs.addTab(bars, "Where the time went")
        self.summary_splitter = QSplitter(Qt.Orientation.Vertical)
        self.summary_splitter.addWidget(self.summary)
        self.summary_splitter.addWidget(self.why_tabs)
        self.summary_splitter.setStretchFactor(0, 3)
        self.summary_splitter.setStretchFactor(1, 1)
        self.summary_splitter.setChildrenCollapsible(False)
        self.summary_splitter.setSizes([450, 150])
        self.why_tabs.currentChanged.connect(self._room_for_why_tab)
        self.views.addTab(self.summary_splitter, "Summary")
        self.analysis = AnalysisView(self.colours)
        self.views.addTab(self.analysis, "Analysis")
        self.banner = QLabel()
        self.banner.setObjectName("compare_banner")
        self.banner.setProperty("role", "banner")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setVisible(False)
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.setSpacing(2)
        top_layout.addWidget(self.banner)
        self.oom_offer = OomOfferBar()  # a batch out of memory, offered as micro-batch x k (gui/oom_offer.py)
        self.oom_offer.rerun.connect(self.start_sweep)
        top_layout.addWidget(self.oom_offer)
        top_layout.addWidget(self.views, 1)
        self._build_bottom(top)
        self._build_status_bar()

    def _build_bottom(self, top: QWidget) -> None:
        """The runs table and the log under the views, the setup panel beside them, in splitters."""
        self.table = RunsTable(self.colours)
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LIMIT)
        self.bottom = QTabWidget()
        self.bottom.addTab(self.table, "Runs")
        self.bottom.addTab(self.log_view, "Log")
        self.right_splitter = QSplitter(Qt.Orientation.Vertical)
        self.right_splitter.addWidget(top)
        self.right_splitter.addWidget(self.bottom)
        self.right_splitter.setStretchFactor(0, 3)
        self.right_splitter.setStretchFactor(1, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.setup)
        self.splitter.addWidget(self.right_splitter)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        self.right_splitter.setChildrenCollapsible(False)
        self.right_splitter.setSizes([620, 220])
        self.setCentralWidget(self.splitter)

    def _build_status_bar(self) -> None:
        """The status text, the progress bar and the ETA; the window's first size."""
        self.status_label = QLabel("Ready")
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setMaximumWidth(220)
        self.progress_bar.setTextVisible(True)
        self.progress_bar.setVisible(False)
        self.eta_label = QLabel()
        # Fixed widths: a label whose text changes size re-lays out the status bar on every tick.
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status_label.setMinimumWidth(200)
        self.eta_label.setFixedWidth(self.eta_label.fontMetrics().horizontalAdvance("ETA 00:00:00 ") + 8)
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.progress_bar)
        self.statusBar().addPermanentWidget(self.eta_label)
        available = self.screen().availableGeometry()
        self.resize(min(1440, int(available.width() * 0.95)), min(900, int(available.height() * 0.95)))
