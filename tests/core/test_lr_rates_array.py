"""LrPlan.rates, the array form the window's preview uses, gives exactly rate(s) at every step."""

import pytest
from batchlab.core.lr_rules import LrPlan


@pytest.mark.parametrize("schedule", ["constant", "step", "cosine", "plateau"])
@pytest.mark.parametrize(("lr0", "peak", "warmup"), [(0.1, 0.4, 0), (0.1, 0.4, 7), (0.1, 0.05, 7)])
def test_rates_equal_rate_at_every_step(schedule, lr0, peak, warmup):
    plan = LrPlan(
        lr0=lr0,
        peak=peak,
        warmup_steps=warmup,
        schedule=schedule,
        total_steps=50,
        decay_factor=0.5,
        decay_every_steps=6,
    )
    rates = plan.rates(60)  # past the budget too: cosine holds its end value
    assert rates == pytest.approx([plan.rate(s) for s in range(60)], rel=1e-12, abs=1e-15)
    assert plan.rates(0) == []
