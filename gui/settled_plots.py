"""Which live plots show everything due: a plot drawn up to date is skipped in O(1) until something changes.

Returning to the Live tab of a 504-run file asked, per plot and run, whether the run was drawn as it is now
(`LivePlots._state`): twice (`has_pending`, then `update_plot`), 12,000 calls and ~55 ms before the first paint,
though nothing had changed. A plot is *settled* when its last update drew every run (no slice left, no restyle
due); it stays so while the snapshot, the drawn-state table and the live/static mode are those it was drawn at.

A slice of a plot's runs (a refresher tick's `budget_s`) also pays for handing its runs' points to their group
curves after the loop (`FinishedCurves.flush`: new group items, setData with symbols), ~0.13 ms a run in a
loss-per-epoch plot: 27 ms beyond a 15 ms budget in one tick. Each plot's flush cost per run is measured and
counted in the budget while runs are drawn.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The flush cost a run is guessed at before a plot's first slice measured it (a loss-per-epoch plot: 0.13 ms)
FLUSH_GUESS_S = 1e-4


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
        self._per_snapshot: dict[str, tuple[tuple, object]] = {}
        self._flush_per_run: dict[str, float] = {}  # plot id -> seconds its last flush took per run drawn

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
        """What a settled plot was drawn at. Beside the snapshot, each source's runs started or ended
        (`summary_version`): a plot drawn without a new snapshot (a caller's own update_plot) sees a run's status."""
        sweeps = tuple((source, id(data), data.summary_version, data.status) for source, data in self.sources.items())
        return (self._snap_gen, self._drawn_gen, sticky, sweeps)

    def is_settled(self, plot_id: str, sticky: bool) -> bool:
        """True if this plot was drawn up to date at the current snapshot, table and mode, no restyle due."""
        return plot_id not in self.restyle_due and self._settled.get(plot_id) == self.settle_key(sticky)

    def mark_settled(self, plot_id: str, key: tuple) -> None:
        """The plot's update that began at `key` drew every run: settled, if nothing changed meanwhile."""
        if plot_id not in self.unfinished and plot_id not in self.restyle_due and key == self.settle_key(key[2]):
            self._settled[plot_id] = key
        else:
            self._settled.pop(plot_id, None)

    def slice_full(self, plot_id: str, runs_drawn: int, deadline: float) -> bool:
        """True when the runs drawn so far, and the flush of their points to come, fill the slice's budget."""
        per_run = self._flush_per_run.get(plot_id, FLUSH_GUESS_S)
        return time.perf_counter() + runs_drawn * per_run > deadline

    def note_flush(self, plot_id: str, runs_drawn: int, seconds: float) -> None:
        if runs_drawn:
            self._flush_per_run[plot_id] = seconds / runs_drawn

    def per_snapshot(self, name: str, compute: Callable[[], object]) -> object:
        """compute() once per snapshot and set of sources: each slice of a 504-run file's plot asked for the runs'
        planned end again, an O(runs) walk (~7 ms) in every refresher tick."""
        key = (self._snap_gen, tuple(map(id, self.sources.values())))
        cached = self._per_snapshot.get(name)
        if cached is None or cached[0] != key:
            cached = self._per_snapshot[name] = (key, compute())
        return cached[1]
