"""The toolbar's Run and Stop icons stay visible in both themes (they were black on dark grey in the dark one)."""

from __future__ import annotations

import pytest
from batchlab.gui import theme as themes
from PySide6.QtCore import QSize
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QToolBar

MIN_ICON_CONTRAST = 3.0  # WCAG's minimum for graphical objects


def _ink(pixmap) -> QColor:
    """The mean colour of the icon's opaque pixels."""
    image = pixmap.toImage()
    total, r, g, b = 0, 0, 0, 0
    for y in range(image.height()):
        for x in range(image.width()):
            c = image.pixelColor(x, y)
            if c.alpha() > 200:
                total, r, g, b = total + 1, r + c.red(), g + c.green(), b + c.blue()
    assert total, "the icon has no opaque pixel"
    return QColor(r // total, g // total, b // total)


@pytest.mark.parametrize("choice", ["light", "dark"])
def test_run_and_stop_icons_contrast_with_the_toolbar(main_window, choice):
    main_window.apply_theme(choice)
    toolbar = main_window.findChild(QToolBar, "main_toolbar")
    background = QColor(main_window.theme.window)  # Fusion draws the toolbar in the window colour
    for name in ("run", "stop"):
        action = main_window.actions[name]
        assert action in toolbar.actions()
        ink = _ink(action.icon().pixmap(QSize(24, 24)))
        ratio = themes.contrast_ratio(ink, background)
        assert ratio >= MIN_ICON_CONTRAST, f"{choice}: {name} icon {ink.name()} on {background.name()}: {ratio:.2f}:1"


def test_switching_the_theme_redraws_the_icons(main_window):
    main_window.apply_theme("light")
    light = _ink(main_window.actions["run"].icon().pixmap(QSize(24, 24)))
    main_window.apply_theme("dark")
    dark = _ink(main_window.actions["run"].icon().pixmap(QSize(24, 24)))
    assert themes.relative_luminance(dark) > themes.relative_luminance(light)
