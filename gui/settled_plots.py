"""Which live plots show everything due: a plot drawn up to date is skipped in O(1) until something changes.

Returning to the Live tab of a 504-run file asked, per plot and run, whether the run was drawn as it is now
(`LivePlots._state`): twice (`has_pending`, then `update_plot`), 12,000 calls and ~55 ms before the first paint,
though nothing had changed. A plot is *settled* when its last update drew every run (no slice left, no restyle
due); it stays so while the snapshot, the drawn-state table and the live/static mode are those it was drawn at.
"""

from __future__ import annotations


class SettledPlots:
    """A mixin of LivePlots: generation counters for the snapshot and the drawn-state table, and per plot the
    generations it was last drawn up to date at."""

    _settled: dict[str, tuple]
    _snap_gen: int
    _drawn_gen: int

    def init_settled(self) -> None:
        self._settled = {}
        self._snap_gen = 0
        self._drawn_gen = 0
        self._statuses: dict[tuple[str, int], str] = {}

    @property
    def _drawn(self) -> dict[tuple[str, int, str], tuple]:
        """(source, run, plot) -> (rows, status) drawn. Replacing the table (runs to draw again) unsettles every
        plot; update_plot's own entries (a run drawn) are set in place and do not."""
        return self._drawn_table

    @_drawn.setter
    def _drawn(self, table: dict[tuple[str, int, str], tuple]) -> None:
        self._drawn_table = table
        self._drawn_gen += 1

    def note_snapshot(self, snapshot: dict, statuses: dict[tuple[str, int], str]) -> None:
        """A new snapshot was taken: the plots are unsettled if its rows or the runs' statuses changed."""
        if snapshot != self._snapshot or statuses != self._statuses:
            self._snap_gen += 1
        self._statuses = statuses

    def settle_key(self, sticky: bool) -> tuple:
        return (self._snap_gen, self._drawn_gen, sticky)

    def is_settled(self, plot_id: str, sticky: bool) -> bool:
        """True if this plot was drawn up to date at the current snapshot, table and mode, no restyle due."""
        return plot_id not in self.restyle_due and self._settled.get(plot_id) == self.settle_key(sticky)

    def mark_settled(self, plot_id: str, key: tuple) -> None:
        """The plot's update that began at `key` drew every run: settled, if nothing changed meanwhile."""
        if plot_id not in self.unfinished and plot_id not in self.restyle_due and key == self.settle_key(key[2]):
            self._settled[plot_id] = key
        else:
            self._settled.pop(plot_id, None)
