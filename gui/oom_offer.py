"""Beyond memory from the window: a batch that ran out of memory offered again as micro-batch x k.

Gradient accumulation (`--accumulate K`, core/training; docs/performance.md): k micro-batches per
optimizer update, effective batch = micro-batch x k. The micro-batch is the largest batch size of
the sweep that ran (or, where that divides the requested batch unevenly, the requested batch / k,
which is smaller and so fits too), so the re-run's update sees the batch that was asked for. The
offer is a bar above the plots, never a dialog mid-sweep; its button starts the re-run once the
sweep has ended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchlab.core.errors import SpecError
from batchlab.core.model import SweepData
from batchlab.core.spec import SweepSpec, with_overrides
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


@dataclass(frozen=True)
class AccumulationOffer:
    """Re-run `batch_size` (the update's batch) as `micro_batch` x `k`; spec None when that cannot be (why)."""

    batch_size: int
    micro_batch: int
    k: int
    spec: SweepSpec | None
    text: str


def micro_batches(batch_size: int, largest_ran: int) -> tuple[int, int]:
    """(micro-batch, k) with micro-batch x k = batch_size where possible and micro-batch <= largest_ran.

    k is the fewest micro-batches of at most largest_ran samples; where batch_size / k is whole the
    micro-batch is that (exactly the batch asked for), else largest_ran (the update then holds
    largest_ran x k samples, slightly more).
    """
    k = max(2, math.ceil(batch_size / largest_ran))
    return (batch_size // k, k) if batch_size % k == 0 else (largest_ran, k)


def accumulation_offer(sweep: SweepData) -> AccumulationOffer | None:
    """The offer for the sweep's smallest batch size that ran out of memory, or None when none did."""
    oom = sorted({r.batch_size for r in sweep.runs.values() if r.status == "oom"})
    if not oom:
        return None
    batch = oom[0]
    ran = [r.batch_size for r in sweep.runs.values() if r.status == "ok" and r.batch_size < batch]
    also = f" (also out of memory: {', '.join(str(b) for b in oom[1:])})" if len(oom) > 1 else ""
    if not ran:
        text = f"Batch {batch} ran out of memory{also}, and no smaller batch size ran to split it into."
        return AccumulationOffer(batch, 0, 0, None, text)
    try:
        spec = SweepSpec.from_dict(sweep.spec)
    except SpecError as e:
        return AccumulationOffer(batch, 0, 0, None, f"Batch {batch} ran out of memory{also}; {e.field}: {e.message}")
    accumulated = batch * max(1, spec.accumulate)  # the update's batch the sweep asked for
    micro, k = micro_batches(accumulated, max(ran))
    head = f"Batch {batch} ran out of memory{also}."
    try:
        rerun = with_overrides(spec, batch_sizes=[micro], accumulate=k)
    except SpecError as e:
        return AccumulationOffer(batch, micro, k, None, f"{head} Gradient accumulation cannot run it: {e.message}")
    text = (
        f"{head} Re-run it as micro-batch {micro} x {k} with gradient accumulation (--accumulate {k}): "
        f"each update averages {k} micro-batches of {micro}, an effective batch of {micro * k}, in the memory "
        f"of batch {micro}."
    )
    return AccumulationOffer(batch, micro, k, rerun, text)


class OomOfferBar(QWidget):
    """The offer above the plots: its text, a re-run button (enabled when no sweep runs) and Dismiss."""

    rerun = Signal(object)  # the SweepSpec to run

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel()
        self.label.setObjectName("oom_offer")
        self.label.setProperty("role", "banner")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.button = QPushButton("Re-run")
        self.button.clicked.connect(self._rerun)
        dismiss = QPushButton("Dismiss")
        dismiss.clicked.connect(self.dismiss)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        layout.addWidget(dismiss)
        self.offer: AccumulationOffer | None = None
        self._key: tuple | None = None
        self._dismissed: tuple | None = None
        self.setVisible(False)

    def show_for(self, sweep: SweepData | None, running: bool) -> None:
        """Show (or hide) the offer for this sweep; one the user dismissed stays hidden."""
        offer = accumulation_offer(sweep) if sweep is not None else None
        key = (id(sweep), offer.batch_size) if offer is not None else None
        if offer is None or key == self._dismissed:
            self.offer = None
            self.setVisible(False)
            return
        self.offer, self._key = offer, key
        self.label.setText(offer.text)
        self.button.setVisible(offer.spec is not None)
        if offer.spec is not None:
            self.button.setText(f"Re-run as {offer.micro_batch} x {offer.k}")
        self.set_running(running)
        self.setVisible(True)

    def set_running(self, running: bool) -> None:
        """The re-run starts only once the sweep has ended."""
        self.button.setEnabled(not running and self.offer is not None and self.offer.spec is not None)
        self.button.setToolTip("Starts when this sweep has ended" if running else "Run this batch size again")

    def dismiss(self) -> None:
        if self.offer is not None:
            self._dismissed = self._key
        self.offer = None
        self.setVisible(False)

    def _rerun(self) -> None:
        if self.offer is not None and self.offer.spec is not None:
            self.rerun.emit(self.offer.spec)
