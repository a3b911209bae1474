"""A titled section whose body shows or hides under a header button (the setup panel's Convergence section)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget


class Collapsible(QFrame):
    """A header (arrow + title) and, under it, a one-line summary while collapsed or a form while expanded."""

    expanded_changed = Signal(bool)

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        self.header = QToolButton()
        self.header.setObjectName("convergence_header")
        self.header.setText(title)
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.RightArrow)
        self.header.setAutoRaise(True)
        self.header.setStyleSheet("QToolButton { font-weight: bold; border: none; }")
        self.header.toggled.connect(self.set_expanded)
        layout.addWidget(self.header)
        self.summary = QLabel()
        self.summary.setObjectName("convergence_summary")
        self.summary.setProperty("role", "muted")
        self.summary.setWordWrap(True)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.summary)
        self.body = QWidget()
        self.form = QFormLayout(self.body)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.body)
        self.body.setVisible(False)

    @property
    def expanded(self) -> bool:
        return self.header.isChecked()

    def set_expanded(self, expanded: bool) -> None:
        if self.header.isChecked() != expanded:
            self.header.setChecked(expanded)  # comes back here through toggled
            return
        self.header.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.body.setVisible(expanded)
        self.summary.setVisible(not expanded)
        self.expanded_changed.emit(expanded)
