"""Light and dark themes: the Qt palette, a few named colours (muted text, errors, the compare banner,
the runs table's status backgrounds) and the plots' colours, chosen together so that every text is
readable (WCAG contrast >= 4.5:1, checked by tests/gui/test_theme.py from the applied colours).

"system" (the default) picks light or dark from the desktop's colour scheme.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

THEME_KEY = "view/theme"
THEME_CHOICES = ("system", "light", "dark")
MIN_CONTRAST = 4.5  # WCAG AA for normal text


@dataclass(frozen=True)
class Theme:
    """Every colour the window and its plots use (hex strings)."""

    name: str
    window: str
    base: str
    alternate_base: str
    text: str
    muted_text: str  # preset description, hints
    error_text: str  # messages under invalid fields
    button: str
    highlight: str
    highlighted_text: str
    link: str
    banner_background: str  # the compare banner ("these sweeps differ in ...")
    banner_text: str
    plot_background: str
    plot_foreground: str  # axes, tick labels, titles, legend text
    plot_neutral: str  # grey marks drawn in no batch size's colour
    status_backgrounds: dict[str, str] = field(default_factory=dict)  # runs table: status -> cell background


LIGHT = Theme(
    name="light",
    window="#EFEFEF",
    base="#FFFFFF",
    alternate_base="#F5F5F5",
    text="#1A1A1A",
    muted_text="#5A5A5A",
    error_text="#B00020",
    button="#E6E6E6",
    highlight="#2F65CA",
    highlighted_text="#FFFFFF",
    link="#1A4FB5",
    banner_background="#FFF3CD",
    banner_text="#5C3B00",
    plot_background="#FFFFFF",
    plot_foreground="#000000",
    plot_neutral="#555555",
    status_backgrounds={
        "oom": "#F8D0C8",
        "diverged": "#F8E0B0",
        "crashed": "#F8C8D8",
        "error": "#F8C8D8",
        "interrupted": "#E8E8E8",
        "aborted": "#E8E8E8",  # stopped early by abort_losers: as a stopped run
        "skipped": "#F0F0F0",  # never ran: lighter than interrupted
        "running": "#D8ECF8",
    },
)

DARK = Theme(
    name="dark",
    window="#2B2D31",
    base="#1F2023",
    alternate_base="#26282C",
    text="#E6E6E6",
    muted_text="#A9AFB7",
    error_text="#FF8A80",
    button="#383A3F",
    highlight="#3D6FD1",
    highlighted_text="#FFFFFF",
    link="#8AB4F8",
    banner_background="#3D3420",
    banner_text="#FFE08A",
    plot_background="#1F2023",
    plot_foreground="#D4D7DC",
    plot_neutral="#A0A4AA",
    status_backgrounds={
        "oom": "#5A2A24",
        "diverged": "#5A4320",
        "crashed": "#5A2438",
        "error": "#5A2438",
        "interrupted": "#3A3C40",
        "aborted": "#3A3C40",
        "skipped": "#323438",
        "running": "#244458",
    },
)

THEMES = {"light": LIGHT, "dark": DARK}
_current: Theme = LIGHT


def current() -> Theme:
    """The theme last applied (light until one is)."""
    return _current


def relative_luminance(colour: QColor | str) -> float:
    """WCAG 2.x relative luminance of an sRGB colour, 0 (black) to 1 (white)."""
    c = QColor(colour)

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast_ratio(foreground: QColor | str, background: QColor | str) -> float:
    """WCAG contrast ratio of two colours, 1 (none) to 21 (black on white)."""
    hi, lo = sorted((relative_luminance(foreground), relative_luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def system_theme_name() -> str:
    """ "dark" or "light" as the desktop says (Qt's colour scheme, else the lightness of its palette)."""
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else Qt.ColorScheme.Unknown
    if scheme == Qt.ColorScheme.Dark:
        return "dark"
    if scheme == Qt.ColorScheme.Light:
        return "light"
    window = QApplication.style().standardPalette().color(QPalette.ColorRole.Window)
    return "dark" if window.lightness() < 128 else "light"


def resolve(choice: str) -> Theme:
    """The theme for a menu choice ("system", "light" or "dark"; anything else counts as "system")."""
    return THEMES.get(choice) or THEMES[system_theme_name()]


def palette(theme: Theme) -> QPalette:
    """A complete QPalette for the theme (disabled text greyed but still distinguishable)."""
    p = QPalette()
    role = QPalette.ColorRole
    colours = {
        role.Window: theme.window,
        role.WindowText: theme.text,
        role.Base: theme.base,
        role.AlternateBase: theme.alternate_base,
        role.ToolTipBase: theme.base,
        role.ToolTipText: theme.text,
        role.PlaceholderText: theme.muted_text,
        role.Text: theme.text,
        role.Button: theme.button,
        role.ButtonText: theme.text,
        role.BrightText: theme.error_text,
        role.Highlight: theme.highlight,
        role.HighlightedText: theme.highlighted_text,
        role.Link: theme.link,
        role.LinkVisited: theme.link,
        role.Light: QColor(theme.button).lighter(130).name(),
        role.Midlight: QColor(theme.button).lighter(115).name(),
        role.Mid: QColor(theme.button).darker(130).name(),
        role.Dark: QColor(theme.button).darker(160).name(),
        role.Shadow: "#000000",
    }
    for r, colour in colours.items():
        p.setColor(r, QColor(colour))
    disabled = QColor(theme.muted_text)
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, disabled)
    return p


def stylesheet(theme: Theme) -> str:
    """Rules for the few labels that are not plain text: muted hints, field errors, the compare banner."""
    return (
        f'QLabel[role="muted"] {{ color: {theme.muted_text}; }}\n'
        f'QLabel[role="error"] {{ color: {theme.error_text}; }}\n'
        f'QLineEdit[invalid="true"], QComboBox[invalid="true"] {{ border: 1px solid {theme.error_text}; }}\n'
        f'QLabel[role="banner"] {{ background: {theme.banner_background}; color: {theme.banner_text}; '
        f"border: 1px solid {theme.banner_text}; border-radius: 3px; padding: 4px 6px; }}\n"
    )


def apply_theme(app: QApplication, choice: str) -> Theme:
    """Give the whole application the chosen theme's palette; returns the theme.

    The label rules (stylesheet()) are set by the window on the widgets that hold such labels only:
    an application-wide style sheet would route every widget, plots included, through Qt's slower
    style-sheet style.
    """
    global _current
    theme = resolve(choice)
    if theme.name == "dark" and app.style().name().lower() not in ("fusion",):
        app.setStyle("Fusion")  # native styles (Windows, macOS) draw parts of widgets ignoring the palette
    app.setPalette(palette(theme))
    _current = theme
    return theme
