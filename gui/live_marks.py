"""The live plots' marks on the curves: where a run's batch size changed (batch schedules) and its evaluation
points. A mixin of gui/live_plots.py's LivePlots."""

from __future__ import annotations

import numpy as np
from batchlab.core.model import RunData
from batchlab.gui.live_series import (
    EVAL_PLOTS,
    examples_seen,
)


class LiveMarks:
    """Batch-change and evaluation marks of LivePlots."""

    def _draw_batch_changes(self, source: str, run: RunData, plot_id: str) -> bool:
        """Triangles where a batch-size schedule changed the run's batch (gui/batch_marks.py)."""
        n = self._rows(source, run, "steps")
        if not n:
            return False
        x_axis = self.loss_x if plot_id == "loss_step" else "wall_time"
        steps = run.steps

        def x_of(rows: np.ndarray) -> np.ndarray:
            if x_axis == "step":
                return np.asarray(steps["step"][rows], dtype=float) + 1
            if x_axis == "examples":
                return examples_seen(run, rows)
            return np.asarray(steps["wall_time"][rows], dtype=float)

        key = (source, run.index)
        return self.batch_marks.draw(
            self.plots[plot_id].getPlotItem(),
            plot_id,
            run,
            key,
            n,
            x_of,
            self.colours.colour(run.batch_size),
            dimmed=bool(self.selection) and key not in self.selection,
        )

    def _draw_evaluations(self, source: str, run: RunData, plot_id: str) -> bool:
        """The run's evaluation points and target mark in a loss plot (core.figures.evaluation_points)."""
        n = self._rows(source, run, "evals")
        if not n and (source, run.index, plot_id) not in self.evals.curves:
            return False
        x_axis = EVAL_PLOTS[plot_id] if EVAL_PLOTS[plot_id] != "loss_x" else self.loss_x
        key = (source, run.index)
        drawn = self.evals.draw(
            self.plots[plot_id].getPlotItem(),
            plot_id,
            key,
            run.evaluation_points(n) if n else None,
            x_axis,
            self.log_x,
            self.colours.colour(run.batch_size),
            rank=run.index,
            dimmed=bool(self.selection) and key not in self.selection,
            highlighted=key in self.selection,
        )
        self.set_points[plot_id] = self.set_points.get(plot_id, 0) + drawn
        return True
