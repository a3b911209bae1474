"""Plot colours in both themes (issue 11, item 4): every batch-size colour at least 3:1 against the plot
background (WCAG's minimum for graphics), text in a run's colour and the plots' own text at least 4.5:1."""

from __future__ import annotations

import pytest
from batchlab.gui import theme as themes


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_line_colour_and_text_colour_meets_its_contrast_in_both_themes(qapp, name):
    from batchlab.gui.epoch_bars import OTHER_COLOUR
    from batchlab.gui.plot_style import PALETTE, PLOT_COLOURS, BatchColours, set_plot_colours, text_colour

    saved = dict(PLOT_COLOURS)
    theme = themes.THEMES[name]
    set_plot_colours(theme.plot_background, theme.plot_foreground, theme.plot_neutral)
    try:
        background = theme.plot_background
        batches = [2**i for i in range(len(PALETTE))]
        colours = BatchColours()
        colours.update(batches)
        lines = {b: colours.colour(b) for b in batches}
        assert len({c.name() for c in lines.values()}) == len(PALETTE)  # still one colour per batch size
        ratios = {b: themes.contrast_ratio(c, background) for b, c in lines.items()}
        assert min(ratios.values()) >= 3.0, {b: round(r, 2) for b, r in ratios.items()}
        assert themes.contrast_ratio(OTHER_COLOUR, background) >= 3.0
        for b, colour in lines.items():
            assert themes.contrast_ratio(text_colour(colour), background) >= 4.5, b
        for text in (theme.plot_foreground, theme.plot_neutral):
            assert themes.contrast_ratio(text, background) >= 4.5, text
        if name == "light":  # the palette itself is what the light plots draw, every colour >= 3:1 on white
            assert [c.name().upper() for c in lines.values()][:7] == [p.upper() for p in PALETTE[:7]]
            assert min(themes.contrast_ratio(p, "#FFFFFF") for p in PALETTE) >= 3.0
    finally:
        set_plot_colours(saved["background"], saved["foreground"], saved["neutral"])
