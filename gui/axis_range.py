"""View ranges with hysteresis for plots whose data grows while a run trains.

Auto-ranging to the data's exact extent changes a live plot's view range on every frame (the step
count grows, the loss falls), and every change regenerates both axes' tick text and the grid and
repaints the whole plot. `sticky_range` keeps the range shown while it still holds all the data
(with at least half the usual padding) and is not far too loose; when the data leaves it, the new
range leaves headroom on the side the data went past, so the next frames' growth fits without
another change. Pure arithmetic, no Qt: tested with known answers in tests/gui/test_axis_range.py.
"""

from __future__ import annotations

import math

X_HEADROOM = 0.5  # of the data's span, added past the end the data grew beyond (steps and time grow steadily)
Y_HEADROOM = 0.25  # the same for y (losses fall, memory and throughput move a little)
# A range is kept only while the data spans at least this share of it. A refit's range spans at most
# (1 + 2 * headroom) * (1 + 2 * padding) times the data's span (2.4 with X_HEADROOM and pyqtgraph's
# largest padding, 0.1), so the data spans more than this share of it: a refit is never "too loose"
# itself and the range cannot flip back and forth.
LOOSE = 0.35
KEEP_PADDING = 0.5  # a kept range must leave at least this share of the padding beside the data


def sticky_range(
    data: tuple[float, float],
    current: tuple[float, float] | None,
    *,
    padding: float,
    headroom: float,
    log: bool = False,
    loose: float = LOOSE,
    upper: float | None = None,
) -> tuple[float, float]:
    """The range to show data spanning `data` (lo, hi), given the range `current` shown now.

    Both in view coordinates (log10 of the values on a log axis). padding: the share of the data's
    span an exact fit leaves at each end (pyqtgraph's auto-range padding). Returns `current` itself
    while it holds the data with at least KEEP_PADDING of that padding and the data spans at least
    `loose` of it. Otherwise a new range: the data, `headroom` times its span added past each end the
    data went beyond (both ends without a usable current range), then padded. On a linear axis the
    headroom never takes the range past zero where the data is not: a loss or an amount gets no
    negative stretch; a log axis has no such bound. `upper`: the largest value the data can reach (the
    planned epochs, or steps, of the runs shown): a range that must grow goes straight to it, and is not
    "too loose" for reaching it, so a run's curve fills its axis without the range changing again; headroom
    never takes the range past it. Data past `upper` (a run that planned more) is never cut off.
    """
    lo, hi = float(data[0]), float(data[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return (lo, hi)
    span = hi - lo
    pad = padding * span
    planned = upper is not None and math.isfinite(upper) and upper > hi  # the range is to reach the planned end
    reach = float(upper) if planned else hi
    usable = current is not None and all(math.isfinite(c) for c in current) and current[1] > current[0]
    if usable:
        c_lo, c_hi = float(current[0]), float(current[1])
        margin = KEEP_PADDING * pad if span > 0 else 0.05 * (c_hi - c_lo)  # one point: keep it off the edge
        grow_lo, grow_hi = lo - margin < c_lo, hi + margin > c_hi
        too_loose = reach > lo and reach - lo < loose * (c_hi - c_lo)
        if not (grow_lo or grow_hi or too_loose):
            return (c_lo, c_hi)
    else:
        grow_lo = grow_hi = True
    if reach == lo:
        if log or lo == 0:
            return (lo, hi)  # one point and nowhere to keep it: pyqtgraph widens a zero span itself
        # One point (a running epoch's first marker): headroom around its value. pyqtgraph's +-0.5 made the
        # range follow the point every frame (a memory peak moving by 1 MiB, a falling loss).
        base_lo, base_hi = lo - headroom * abs(lo), lo + headroom * abs(lo)
    else:
        # Both ends are set together (one change of the range, one regeneration of the axis), padded for the
        # span the range leaves room for, so the end the data did not pass does not need a change of its own
        # as the data grows (its padding would otherwise run out first).
        base_lo = lo - (headroom * span if grow_lo else 0.0)
        base_hi = reach if planned else hi + (headroom * span if grow_hi else 0.0)
    if upper is not None and math.isfinite(upper) and hi <= upper:
        base_hi = min(base_hi, upper)  # (data past a plan that was short gets the usual headroom, not a refit a frame)
    pad = padding * (base_hi - base_lo)
    new_lo, new_hi = base_lo - pad, base_hi + pad
    if not log:
        if lo + padding * span >= 0:  # data from zero up (items' pixel padding may reach just below it)
            new_lo = max(new_lo, min(lo - pad, 0.0))
        if hi - padding * span <= 0:
            new_hi = min(new_hi, max(hi + pad, 0.0))
    return (new_lo, new_hi)
