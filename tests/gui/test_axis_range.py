"""Known answers for the sticky view ranges (gui/axis_range.py, pure arithmetic), and the live plots using them."""

import math

import numpy as np
import pytest
from batchlab.gui.axis_range import LOOSE, X_HEADROOM, Y_HEADROOM, sticky_range


def test_a_range_that_holds_the_data_is_kept_exactly():
    # data 0..80 with 5% padding needs (-4, 84); the range shown, (-10, 120), holds it with room to spare
    assert sticky_range((0.0, 80.0), (-10.0, 120.0), padding=0.05, headroom=0.5) == (-10.0, 120.0)


def test_growing_past_the_top_leaves_headroom_there():
    # steps 1..100 on a range that ended at 90: room for 1..149.5, padded by 5% of that (7.425) at both ends
    assert sticky_range((1.0, 100.0), (-5.0, 90.0), padding=0.05, headroom=0.5) == pytest.approx((-6.425, 156.925))


def test_a_falling_loss_moves_the_bottom_but_never_below_zero():
    # loss 0.5..2.0 under a range from 0.8: room for 0.125..2.0, padded by 5% of 1.875 at both ends
    assert sticky_range((0.5, 2.0), (0.8, 2.2), padding=0.05, headroom=0.25) == pytest.approx((0.03125, 2.09375))
    # loss 0.1..2.0: the headroom would reach -0.375 (-0.494 padded); it stops at the padding below zero
    assert sticky_range((0.1, 2.0), (0.8, 2.2), padding=0.05, headroom=0.25) == pytest.approx((-0.01875, 2.11875))


def test_data_from_zero_gets_only_its_padding_below():
    # memory from 0 (the zero anchor) up to 900 MiB, first fit: room for -225..1125 padded by 2% of 1350,
    # but nothing below zero except that padding
    assert sticky_range((0.0, 900.0), None, padding=0.02, headroom=0.25) == pytest.approx((-27.0, 1152.0))


def test_data_at_the_edge_of_the_range_is_refit_before_it_touches_it():
    # the data's top is inside the range but closer than half its padding (5% of 100 = 5, half: 2.5)
    assert sticky_range((0.0, 100.0), (-5.0, 102.0), padding=0.05, headroom=0.5) != (-5.0, 102.0)
    assert sticky_range((0.0, 100.0), (-5.0, 103.0), padding=0.05, headroom=0.5) == (-5.0, 103.0)


def test_a_far_too_loose_range_is_refit_to_the_data():
    # a new sweep's loss 0..1 on a range of 0..100 (data spans 1% of it): an exact fit, no headroom
    assert sticky_range((0.0, 1.0), (-1.0, 100.0), padding=0.05, headroom=0.25) == pytest.approx((-0.05, 1.05))


def test_a_refit_is_stable_and_holds_the_data():
    cases = [((1.0, 700.0), (0.0, 30.0)), ((0.1, 2.4), (1.9, 2.1)), ((0.0, 5.0), None), ((-3.0, -1.0), (-1.5, 0.0))]
    for data, current in cases:
        for headroom in (X_HEADROOM, Y_HEADROOM):
            first = sticky_range(data, current, padding=0.1, headroom=headroom)
            assert first[0] < data[0] and data[1] < first[1]
            assert sticky_range(data, first, padding=0.1, headroom=headroom) == first
            assert (data[1] - data[0]) >= LOOSE * (first[1] - first[0])


def test_a_run_of_frames_changes_the_range_rarely():
    # steps growing by 20 a frame to 768 (batch 32, 4096 samples, 6 epochs): far fewer changes than frames
    current, changes = None, 0
    for n in range(20, 769, 20):
        new = sticky_range((1.0, float(n)), current, padding=0.02, headroom=X_HEADROOM)
        assert new[0] <= 1.0 and n <= new[1]
        changes += new != current
        current = new
    assert changes <= 9  # of 38 frames: the exact fit changed it every frame


def test_log_axes_have_no_zero_bound():
    # log10 of losses 0.01..1 is -2..0: room for -2.5..0 padded by 0.125; "zero" (a loss of 1) is no bound
    assert sticky_range((-2.0, 0.0), (-1.0, 0.5), padding=0.05, headroom=0.25, log=True) == pytest.approx(
        (-2.625, 0.125)
    )


def test_one_point_is_kept_inside_or_given_headroom_around_its_value():
    assert sticky_range((3.0, 3.0), (0.0, 10.0), padding=0.05, headroom=0.5) == (0.0, 10.0)
    # outside (or no range yet): +-headroom of its value, padded (pyqtgraph's +-0.5 followed it every frame)
    assert sticky_range((3.0, 3.0), (3.2, 10.0), padding=0.05, headroom=0.5) == pytest.approx((1.35, 4.65))
    assert sticky_range((3.0, 3.0), None, padding=0.05, headroom=0.5) == pytest.approx((1.35, 4.65))
    # a running epoch's marker moving a little stays in it: no new range
    assert sticky_range((3.1, 3.1), (1.35, 4.65), padding=0.05, headroom=0.5) == (1.35, 4.65)
    assert sticky_range((608.5, 608.5), (607.5, 608.5), padding=0.05, headroom=0.25)[1] > 700  # 1 MiB more
    # zero, and a log axis: left to pyqtgraph, which widens a zero span itself
    assert sticky_range((0.0, 0.0), None, padding=0.05, headroom=0.5) == (0.0, 0.0)
    assert sticky_range((3.0, 3.0), None, padding=0.05, headroom=0.5, log=True) == (3.0, 3.0)


def test_no_usable_data_is_handed_back_unchanged():
    nan = float("nan")
    out = sticky_range((nan, 1.0), (0.0, 1.0), padding=0.05, headroom=0.5)
    assert math.isnan(out[0]) and out[1] == 1.0


def _live_one_run(live_now: list[bool]):
    """Shown LivePlots (sticky while live_now[0]), an empty live sweep in it, and the events of a 4-epoch
    batch-8 run over 1,024 samples in 16-row chunks (32 frames)."""
    from batchlab.core.model import SweepData
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    from tests.gui.synthetic import sweep_events
    from tests.gui.test_live_plots import _in_chunks

    live = LivePlots(BatchColours(), live=lambda: live_now[0])
    live.show()
    data = SweepData(label="live")
    live.set_source("main", data)
    return live, data, _in_chunks(sweep_events(batch_sizes=(8,), epochs=4, samples=1024), 16)


def test_live_plot_ranges_hold_while_data_arrives_and_fit_exactly_after(qapp):
    """A streamed sweep through LivePlots: while `live`, the loss plot's x range changes far less often than
    its data, always holds every point, and once the data stops the plot fits its data again."""
    live_now = [True]
    live, data, events = _live_one_run(live_now)
    view = live.plots["loss_step"].getPlotItem().getViewBox()
    ranges, updates = [], 0
    for event in events:  # 32 frames
        data.handle(event)
        if event["type"] != "steps":
            continue
        live.take_snapshot()
        if live.update_plot("loss_step"):
            updates += 1
            x_range = tuple(view.targetRange()[0])
            curve = live._curves[("main", 0, "loss_step")]
            assert x_range[0] <= float(np.min(curve.xData)) and float(np.max(curve.xData)) <= x_range[1]
            if not ranges or ranges[-1] != x_range:
                ranges.append(x_range)
    assert updates == 32
    assert len(ranges) <= updates // 2, (len(ranges), updates)
    steps = float(np.max(live._curves[("main", 0, "loss_step")].xData))
    live_now[0] = False
    live.take_snapshot()
    live.update_plot("loss_step")  # nothing new, but the plot is no longer live: an exact fit
    lo, hi = view.targetRange()[0]
    assert hi < steps * 1.12 and lo > -0.12 * steps
    live.close()


def test_headroom_stops_at_the_last_planned_epoch():
    # epochs 1..3 of a 3-epoch run, first fit: headroom would reach epoch 4 (4.2 padded), an empty tick;
    # with the planned epochs as the upper bound the range ends at 3 plus its padding (5% of 0..3)
    assert sticky_range((1.0, 3.0), None, padding=0.05, headroom=0.5) == pytest.approx((0.0, 4.2))
    assert sticky_range((1.0, 3.0), None, padding=0.05, headroom=0.5, upper=3.0) == pytest.approx((0.0, 3.15))
    # data past the bound (a run that planned more) is never cut off, and gets headroom as without a bound:
    # capped at the data, the range would change again on every frame while the data grows past the plan
    assert sticky_range((1.0, 5.0), None, padding=0.05, headroom=0.5, upper=3.0)[1] >= 5.0 + 0.5 * 4.0


def test_a_range_that_must_grow_goes_straight_to_the_planned_end_and_stays():
    # steps 1..20 of a run planning 500: the first fit already reaches 500 (padded), and it is not "too loose"
    first = sticky_range((1.0, 20.0), None, padding=0.02, headroom=X_HEADROOM, upper=500.0)
    assert 500.0 < first[1] < 500.0 * 1.03 and first[0] < 1.0
    for n in range(21, 501, 7):  # every later frame of the run keeps it
        assert sticky_range((1.0, float(n)), first, padding=0.02, headroom=X_HEADROOM, upper=500.0) == first
    # without a plan the same frames move the range several times
    current, changes = None, 0
    for n in range(20, 501, 7):
        new = sticky_range((1.0, float(n)), current, padding=0.02, headroom=X_HEADROOM)
        changes += new != current
        current = new
    assert changes >= 5


def test_the_loss_plots_step_axis_is_set_once_per_run_while_it_trains(qapp):
    """The first loss plot's x axis (steps) reaches the runs' planned end at their first frame and holds there;
    the time axis goes to the run's end forecast from its pace; once the sweep is over both fit the data."""
    live_now = [True]
    live, data, events = _live_one_run(live_now)
    view = live.plots["loss_step"].getPlotItem().getViewBox()
    time_view = live.plots["loss_time"].getPlotItem().getViewBox()
    ranges, time_ranges = [], []
    for event in events:  # 128 steps an epoch
        data.handle(event)
        if event["type"] != "steps":
            continue
        live.take_snapshot()
        live.update_plot("loss_step")
        live.update_plot("loss_time")
        for seen, v in ((ranges, view), (time_ranges, time_view)):
            x_range = tuple(v.targetRange()[0])
            if not seen or seen[-1] != x_range:
                seen.append(x_range)
            assert x_range[1] >= float(
                np.max(
                    live._curves[("main", 0, "loss_step")].xData
                    if v is view
                    else live._curves[("main", 0, "loss_time")].xData
                )
            )
    assert data.runs[0].planned_steps() == 512
    assert len(ranges) == 1 and 512 <= ranges[0][1] < 512 * 1.1, ranges
    assert len(time_ranges) <= 3, time_ranges  # growing with headroom: 7 changes over these 32 frames
    live_now[0] = False
    live.take_snapshot()
    live.update_plot("loss_step")
    assert view.targetRange()[0][1] < 512 * 1.12  # the exact fit of steps 1..512 (pyqtgraph's own padding)
    live.close()
