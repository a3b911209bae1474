"""A setup panel on its own, for the tests of its sections (no window, no training)."""

from __future__ import annotations

from batchlab.gui.setup_panel import SetupPanel

# A small valid setup the section tests start from and change one field of.
MLP = {"preset": "mnist-mlp", "samples": "256", "val_samples": "64", "batch_sizes": "16, 64"}


def shown_panel(qtbot, folder, height: int = 700, values: dict | None = MLP) -> SetupPanel:
    """A SetupPanel 420 px wide, shown (so visibility and focus behave as in the window), with `values` set."""
    p = SetupPanel(str(folder))
    qtbot.addWidget(p)
    p.resize(420, height)
    p.show()
    if values is not None:
        p.set_values(values)
    return p
