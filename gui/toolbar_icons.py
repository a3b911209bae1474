"""Toolbar icons drawn in the theme's text colour.

Qt's standard media pixmaps (SP_MediaPlay, SP_MediaStop) are fixed black images: in the dark theme the Run
button was black on dark grey, nearly invisible. These two are drawn as plain shapes in the theme's text
colour instead, and drawn again when the theme changes; disabled, Qt fades them as it does any icon.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap, QPolygonF

SIZES = (16, 24, 32, 48)  # pixels: toolbar and menu sizes at 100-200% scaling
SHAPES = ("play", "stop")


def _pixmap(shape: str, colour: QColor, size: int) -> QPixmap:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    m = size * 0.2  # margin, as Qt's own icons leave
    if shape == "play":
        painter.drawPolygon(QPolygonF([QPointF(m * 1.2, m), QPointF(size - m, size / 2), QPointF(m * 1.2, size - m)]))
    else:
        painter.drawRect(QRectF(m * 1.1, m * 1.1, size - 2.2 * m, size - 2.2 * m))
    painter.end()
    return pixmap


def media_icon(shape: str, colour: str) -> QIcon:
    """`shape` ("play" or "stop") filled with `colour` (a theme's text colour), at every toolbar size."""
    if shape not in SHAPES:
        raise ValueError(f"toolbar icon shape {shape!r}: one of {', '.join(SHAPES)}")
    icon = QIcon()
    for size in SIZES:
        icon.addPixmap(_pixmap(shape, QColor(colour), size))
    return icon
