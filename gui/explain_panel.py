"""The Summary tab's "where the time goes": core/analysis/explain.py's paragraphs, as `batchlab report` prints them.

The text is `explain_sweep(sweep, peak_flops=cached_peak(device))`, the CLI's own call, recomputed
when a run starts or ends (the sweep's summary_version) and only while the tab is shown. Only the
main sweep is explained; an opened comparison enters only its scaling lines (`explain_sweep(..., others=)`,
as `batchlab report FILE --scaling-with OTHER`): a sweep at other --replicas to compare throughput with.
"""

from __future__ import annotations

from collections.abc import Callable

from batchlab.core.analysis.explain import explain_sweep
from batchlab.core.model import SweepData
from batchlab.core.sweep.peak import cached_peak
from batchlab.gui.refresh import MainSweepView
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

TITLE = "Why the times and memory came out this way"
COMPUTING = "Computing the explanation…"
WAITING = "The explanation appears here once runs have ended (the same text as `batchlab report`)."


def explanation(sweep: SweepData, others: tuple[SweepData, ...] = ()) -> list[str]:
    """The paragraphs `batchlab sweep` and `report` print for this sweep (peak FLOP/s from the device's cache);
    `others`: sweeps whose runs the scaling lines compare with (report's --scaling-with)."""
    peak = cached_peak(sweep.environment.get("device_description", ""))
    return explain_sweep(sweep, peak_flops=peak, others=others)


def explanation_or_error(data: SweepData | None, compare: SweepData | None) -> tuple[list[str], str]:
    """(paragraphs, "") once runs have ended ([] before), or ([], "No explanation: why") where it fails: the plots
    stay usable and the panel says what went wrong. Qt-free (the window computes it in a worker thread)."""
    ended = data is not None and any(r.status not in ("pending", "running") for r in data.runs.values())
    try:
        return (explanation(data, (compare,) if compare is not None else ()) if ended else []), ""
    except Exception as e:  # noqa: BLE001 - see above
        return [], f"No explanation: {type(e).__name__}: {e}"


class ExplanationPanel(MainSweepView):
    """Selectable text under the summary plots; `refresh(force)` recomputes when the main sweep changed."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 0)
        layout.setSpacing(2)
        self.title = QLabel(f"<b>{TITLE}</b>")
        self.text = QPlainTextEdit()
        self.text.setObjectName("explanation")
        self.text.setReadOnly(True)  # read-only text stays selectable and copyable
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setMinimumHeight(48)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        self.paragraphs: list[str] = []
        self.compare: SweepData | None = None  # an opened comparison: only its scaling lines enter the text
        self.text.setPlainText(WAITING)

    def set_source(self, source: str, data: SweepData | None) -> None:
        if source == "compare":
            self.compare = data
            self.invalidate_when_shown()  # hidden, when shown (it was 0.75 s of a 504-run comparison's opening)
            return
        super().set_source(source, data)

    def data_version(self) -> object:
        compare = self.compare.summary_version if self.compare is not None else -1
        return (super().data_version(), compare)

    def data_ids(self) -> object:
        return (id(self.data), id(self.compare))

    def figures_job(self) -> Callable[[], tuple[list[str], str]]:
        data, compare = self.data, self.compare
        return lambda: explanation_or_error(data, compare)

    def show_computing(self) -> None:
        self.paragraphs = []
        self.text.setPlainText(COMPUTING)

    def draw(self, figures: tuple[list[str], str]) -> None:
        self.paragraphs, error = figures
        if error:
            self.text.setPlainText(error)
            return
        body = "\n\n".join(f"- {p}" for p in self.paragraphs)
        self.text.setPlainText(body or WAITING)
