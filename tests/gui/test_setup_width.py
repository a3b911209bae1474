"""The setup panel at the smallest window BatchLab fits (1024x700): every section expanded, its fields fit the
panel's width and it never scrolls sideways (the Execution section's widest row, a check box's text, pushed it
15 px past the panel and cut off the left edge of every section)."""

from __future__ import annotations

from batchlab.gui.collapsible import Collapsible


def test_every_section_expanded_fits_the_panel_at_1024x700(main_window, qapp):
    w = main_window
    w.resize(1024, 700)
    w.show()
    sections = w.setup.widget().findChildren(Collapsible)
    assert len(sections) >= 2
    for section in sections:
        section.set_expanded(True)
    for _ in range(5):
        qapp.processEvents()
    assert w.setup.horizontalScrollBar().maximum() == 0, [
        (s.objectName(), s.minimumSizeHint().width()) for s in sections
    ]
    assert w.setup.widget().width() <= w.setup.viewport().width()
