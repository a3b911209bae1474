"""Batch-size schedules (issue 9 item 3): known answers for the pure math (core/batch_rules.py), the
hook on synthetic rows, the spec's one-line errors, and one real run (a shared child) whose steps
table shows the batch and the rate changing at the right steps with real examples counted."""

import json
import math

import pytest
from batchlab.core import cli
from batchlab.core.batch_rules import (
    BatchPlan,
    batch_changes,
    describe_changes,
    should_switch,
    step_batches,
    training_bounds,
)
from batchlab.core.errors import SpecError
from batchlab.core.events import LOG
from batchlab.core.lr_rules import LrPlan, sweep_preview, sweep_preview_batches
from batchlab.core.model import SweepData
from batchlab.core.spec import SweepSpec, build_spec, spec_errors
from batchlab.core.sweep.runner import run_sweep
from batchlab.core.table import batch_schedule_lines
from batchlab.core.training.batch_schedule import BatchSchedule
from batchlab.core.training.hooks import LearningRateLog

# ---------------------------------------------------------------- the schedule math: known answers


def test_grow_multiplies_the_batch_every_interval_then_the_rate_takes_the_rest_past_max_batch():
    plan = BatchPlan("grow", start=16, growth_factor=2.0, growth_every=2, max_batch=100)
    assert [plan.batch(e) for e in range(10)] == [16, 16, 32, 32, 64, 64, 100, 100, 100, 100]
    # raw batch 128 at epoch 6, 256 at epoch 8: the rate is multiplied by max / raw, so rate / batch
    # falls by the factor at every change point, as a step decay of the rate would make it
    assert [plan.rate_scale(e) for e in range(10)] == [1, 1, 1, 1, 1, 1, 100 / 128, 100 / 128, 100 / 256, 100 / 256]
    smith = BatchPlan("grow", start=10, growth_factor=5.0, growth_every=1, max_batch=1000)
    assert [smith.batch(e) for e in range(5)] == [10, 50, 250, 1000, 1000]
    assert [smith.rate_scale(e) for e in range(5)] == pytest.approx([1, 1, 1, 0.8, 0.16])
    assert plan.attrs() == {
        "batch_schedule": "grow",
        "batch_growth_factor": 2.0,
        "batch_growth_every": 2,
        "max_batch": 100,
        "batch_switch_to": 0,
        "batch_patience": 2,
        "batch_min_delta": 1e-4,
    }


def test_the_steps_of_a_grow_schedule_under_each_budget_count_real_batches():
    plan = BatchPlan("grow", start=16, growth_factor=2.0, growth_every=1, max_batch=64)
    # 100 samples: epoch 0 is 6 x 16 + 4, epoch 1 is 3 x 32 + 4, epoch 2 is 64 + 36
    epochs, batches = step_batches(plan, 16, 100, "epochs", 3)
    assert batches == [16] * 6 + [4] + [32] * 3 + [4] + [64, 36]
    assert epochs == [0] * 7 + [1] * 4 + [2] * 2
    assert step_batches(plan, 16, 100, "steps", 9)[1] == [16] * 6 + [4, 32, 32]
    # 150 examples: 100 in epoch 0, then 132, 164 >= 150: the run ends after that step
    assert step_batches(plan, 16, 100, "examples", 150)[1] == [16] * 6 + [4, 32, 32]
    assert step_batches(None, 16, 100, "examples", 150)[1] == [16] * 6 + [4, 16, 16, 16, 16]
    # the loop's bounds: (epochs at most, max steps, max examples)
    assert training_bounds(plan, 100, "epochs", 3) == (3, None, None)
    assert training_bounds(plan, 100, "steps", 12) == (3, 12, None)
    assert training_bounds(plan, 100, "examples", 150) == (2, None, 150)
    two = BatchPlan("two_phase", start=16, switch_to=64, patience=1)
    assert training_bounds(two, 100, "steps", 12) == (12, 12, None)  # the switch may come any epoch
    assert step_batches(two, 16, 100, "epochs", 3, switched_at=1)[1] == [16] * 6 + [4] + [64, 36] * 2


def test_the_preview_gives_every_steps_batch_and_rate_per_run_and_keeps_its_old_shape():
    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 256, "epochs": 3, "batch_sizes": "16,32", "optimizer": "sgd"}
        | {"lr": 0.05, "batch_schedule": "grow", "batch_growth_every": 1, "max_batch": 32}
    )
    both = sweep_preview_batches(spec)
    rates16, batches16 = both[16]
    assert batches16 == [16] * 16 + [32] * 16
    assert rates16 == pytest.approx([0.05] * 24 + [0.025] * 8)  # epoch 2: raw batch 64 > 32, the rate halves
    rates32, batches32 = both[32]
    assert batches32 == [32] * 24
    assert rates32 == pytest.approx([0.05] * 8 + [0.025] * 8 + [0.0125] * 8)
    assert sweep_preview(spec) == {16: rates16, 32: rates32}  # still {batch: rates}
    plain = build_spec({"preset": "mnist-mlp", "samples": 256, "epochs": 1, "batch_sizes": "100", "lr": ""})
    assert sweep_preview_batches(plain) == {100: ([], [100, 100, 56])}


def test_two_phase_switches_after_patience_validations_without_a_better_loss():
    # 0.79995 is not better than 0.8 by more than 1e-4: the first stalled validation; 0.8 the second
    assert should_switch([1.0, 0.8, 0.79995, 0.8, 0.7], patience=2) == 3
    assert should_switch([1.0, 0.8, 0.79995, 0.7, 0.6999, 0.5], patience=2) is None
    assert should_switch([1.0, 0.9, 0.8, 0.7], patience=1) is None
    assert should_switch([1.0, math.nan, math.nan], patience=2) == 2  # NaN is never better
    assert should_switch([1.0, 1.0], patience=1, min_delta=0.0) == 1


def test_batch_changes_come_from_each_epochs_first_step_not_its_short_last_batch():
    epochs, batches = step_batches(BatchPlan("grow", 16, 2.0, 1, 64), 16, 100, "epochs", 3)
    changes = batch_changes(range(len(batches)), epochs, batches)
    assert changes == [(7, 1, 16, 32), (11, 2, 32, 64)]
    assert describe_changes(changes) == "16 -> 32 at step 7 (epoch 1), 32 -> 64 at step 11 (epoch 2)"
    assert describe_changes(batch_changes([0, 1, 2], [0, 0, 1], [16, 4, 16])) == "unchanged"


def test_the_hook_switches_two_phase_at_the_next_epoch_and_hands_grows_decay_to_the_rate():
    events = []
    two = BatchSchedule(BatchPlan("two_phase", start=16, switch_to=64, patience=1), 0, events.append)
    assert two.batch_for_epoch(0, 0) == 16
    two.on_epoch_end(0, {"val_loss": 1.0})
    assert two.batch_for_epoch(1, 7) == 16
    two.on_epoch_end(1, {"val_loss": 1.0})  # stalled: the next epoch trains at 64
    assert two.batch_for_epoch(2, 14) == 64 and two.switched_at == 2
    two.on_epoch_end(2, {"val_loss": 5.0})
    assert two.batch_for_epoch(3, 16) == 64  # once
    assert [e["message"] for e in events if e["type"] == LOG] == [
        "batch size 16 -> 64 from step 14 (epoch 2, two_phase)"
    ]
    # with eval_every, evaluation points inside an epoch count too; the switch waits for the next epoch
    mid = BatchSchedule(BatchPlan("two_phase", start=16, switch_to=64, patience=2), 0, events.append)
    assert mid.batch_for_epoch(0, 0) == 16
    for loss in (1.0, 1.0, 1.0):  # two evaluation points not better than the first
        mid.observe(loss)
    assert mid.switched_at == 1
    mid.on_epoch_end(0, {"val_loss": 0.1})  # the epoch end no longer matters
    assert mid.batch_for_epoch(1, 7) == 64
    rates = LearningRateLog(LrPlan(0.1, 0.1, 0, "constant", 100, 0.1, 10))
    grow = BatchSchedule(BatchPlan("grow", start=16, growth_factor=2.0, growth_every=1, max_batch=32), 0, print, rates)
    row: dict = {}
    for epoch, step in ((0, 0), (1, 7), (2, 11)):
        grow.batch_for_epoch(epoch, step)
        rates.on_train_batch_end(step, row)
        assert row["lr"] == pytest.approx([0.1, 0.1, 0.05][epoch])


# ---------------------------------------------------------------- the spec: round trip and bad input

MLP = {"preset": "mnist-mlp", "samples": 256, "val_samples": 64, "epochs": 3, "batch_sizes": "16,32"}


@pytest.mark.parametrize(
    "values",
    [
        {"batch_schedule": "grow", "batch_growth_factor": "5", "batch_growth_every": 1, "max_batch": 128},
        {"batch_schedule": "two-phase", "batch_switch_to": "128", "batch_patience": 3},
    ],
)
def test_a_batch_schedule_round_trips_through_the_run_files_json(values):
    spec = build_spec({**MLP, **values})
    assert SweepSpec.from_dict(json.loads(spec.to_json())) == spec
    assert spec.batch_schedule in ("grow", "two_phase")


@pytest.mark.parametrize(
    "values, field, words",
    [
        ({"batch_schedule": "grow", "max_batch": 512}, "max_batch", "512 is larger than the 256 training samples"),
        ({"batch_schedule": "two_phase", "batch_switch_to": 300}, "batch_switch_to", "larger than the 256 training"),
        ({"batch_schedule": "grow", "batch_growth_factor": 1}, "batch_growth_factor", "not above 1"),
        ({"batch_schedule": "grow", "batch_growth_factor": 0.5}, "batch_growth_factor", "must be a number > 1"),
        ({"batch_schedule": "grow", "batch_growth_every": 3}, "batch_growth_every", "beyond the budget of batch"),
        ({"batch_schedule": "grow", "max_batch": 16}, "max_batch", "smaller than batch size 32"),
        ({"batch_schedule": "two_phase", "batch_switch_to": 32}, "batch_switch_to", "not larger than batch size 32"),
        ({"batch_schedule": "two_phase"}, "batch_switch_to", "needs the larger batch"),
        ({"batch_schedule": "two_phase", "batch_switch_to": 64, "val_samples": 0}, "batch_schedule", "val_samples"),
        ({"batch_schedule": "grow", "loop": "fit"}, "batch_schedule", "needs loop 'loop'"),
        ({"batch_schedule": "grow", "fused": 4}, "batch_schedule", "with fused 4 is not supported"),
        ({"batch_schedule": "grow", "lr_schedule": "step"}, "lr_schedule", "use lr_schedule constant"),
        ({"batch_schedule": "grow", "lr": ""}, "batch_schedule", "give lr"),
        ({"batch_schedule": "shrink"}, "batch_schedule", "choose constant, grow"),
        ({"max_batch": 64}, "max_batch", "64 applies to batch_schedule grow only"),
        ({"batch_schedule": "grow", "batch_switch_to": 64}, "batch_switch_to", "applies to batch_schedule two_phase"),
    ],
)
def test_bad_batch_schedules_name_the_field_the_value_and_what_is_allowed(values, field, words):
    errors = spec_errors({**MLP, **values})
    assert field in errors, errors
    assert words in str(errors[field])
    with pytest.raises(SpecError):
        build_spec({**MLP, **values})


def test_the_cli_prints_one_line_and_exits_2_for_a_batch_larger_than_the_data(capsys):
    args = ["sweep", "--preset", "mnist-mlp", "--samples", "256", "--batch-sizes", "16"]
    assert cli.main([*args, "--batch-schedule", "grow", "--max-batch", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "batchlab: max_batch: 1000 is larger than the 256 training samples; "
        "use at most 256 (empty = the training samples)"
    )


# ---------------------------------------------------------------- one real run


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """One real run (one child): batch 16 on 256 samples, x2 every epoch up to 32 (then the rate halves),
    a budget of 608 examples (16 steps of 16, 8 of 32, then 3 of 32: it ends inside epoch 2),
    evaluated every 10 steps."""
    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 256, "val_samples": 64, "batch_sizes": "16", "device": "cpu"}
        | {"budget_unit": "examples", "epochs": 608, "eval_every": 10, "optimizer": "sgd", "lr": 0.05}
        | {"batch_schedule": "grow", "batch_growth_every": 1, "max_batch": 32}
    )
    out = tmp_path_factory.mktemp("grow") / "grow.h5"
    assert run_sweep(spec, out) == "complete"
    return spec, out, SweepData.from_file(out)


def test_a_real_grow_run_changes_batch_and_rate_at_the_planned_steps_counting_real_examples(grown):
    spec, _out, sweep = grown
    (run,) = sweep.ordered_runs()
    assert run.status == "ok", run.message
    steps = run.steps
    assert steps["batch_size"].tolist() == [16] * 16 + [32] * 11
    assert steps["batch_size"].sum() == 608  # the examples budget counted real examples
    assert steps["epoch"].tolist() == [0] * 16 + [1] * 8 + [2] * 3
    assert steps["lr"].tolist() == pytest.approx([0.05] * 24 + [0.025] * 3)  # past max_batch the rate halves
    # the new batch shape retraced the step function: that step is marked, so steady figures leave it out
    assert steps["traced"][0] == 1 and steps["traced"][16] == 1
    assert steps["traced"][1:16].sum() == 0 and steps["traced"][17:].sum() == 0
    assert run.epochs["epoch"].tolist() == [0, 1]  # the budget ended inside epoch 2: no row for it
    assert run.epochs["traced_steps"].tolist() == [1, 1]  # epoch 1's first step traced the new shape
    evals = run.evals
    assert evals["steps"].tolist() == [10, 16, 20, 24, 27]
    assert evals["examples"].tolist() == [160, 256, 384, 512, 608]
    attrs = run.attrs
    assert (attrs["planned_steps"], attrs["epochs"], attrs["steps_per_epoch"]) == (27, 3, 16)
    assert (attrs["batch_schedule"], attrs["max_batch"], attrs["batch_growth_every"]) == ("grow", 32, 1)
    # the preview planned exactly what ran
    rates, batches = sweep_preview_batches(spec)[16]
    assert batches == steps["batch_size"].tolist() and rates == pytest.approx(steps["lr"].tolist())


def test_report_says_where_the_batch_changed_and_the_rate_took_over(grown, capsys):
    _spec, out, sweep = grown
    assert batch_schedule_lines(sweep) == [
        "run 0 (batch 16, grow): batch 16 -> 32 at step 16 (epoch 1); past max_batch rate x0.5 from step 24 (epoch 2)"
    ]
    assert cli.main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert batch_schedule_lines(sweep)[0] in text
    assert "Batch schedule (grow): runs changed their batch while training" in " ".join(text.split())


@pytest.fixture(scope="module")
def two_phase(tmp_path_factory):
    """One real two_phase run (one child): batch 16 on 256 samples (16 steps an epoch), validated on 64
    every 4 steps and at epoch ends, switching to 64 after 2 evaluations in a row without a better
    validation loss, at most 6 epochs. A rate of 0.2 makes the small validation loss stall early."""
    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 256, "val_samples": 64, "batch_sizes": "16", "device": "cpu"}
        | {"epochs": 6, "eval_every": 4, "optimizer": "sgd", "lr": 0.2}
        | {"batch_schedule": "two_phase", "batch_switch_to": 64, "batch_patience": 2}
    )
    out = tmp_path_factory.mktemp("two_phase") / "two_phase.h5"
    assert run_sweep(spec, out) == "complete"
    return out, SweepData.from_file(out)


def test_a_real_two_phase_run_switches_batch_the_epoch_after_its_recorded_validation_loss_stalls(two_phase):
    out, sweep = two_phase
    (run,) = sweep.ordered_runs()
    assert run.status == "ok", run.message
    evals, steps = run.evals, run.steps
    # By hand from the file's own evaluation rows (every 4 steps and each epoch end, in order): the first
    # evaluation that is the second in a row not below the best so far by more than 1e-4.
    best, stalled, at = math.inf, 0, None
    for k, loss in enumerate(evals["val_loss"].tolist()):
        if loss < best - 1e-4:
            best, stalled = loss, 0
        else:
            stalled += 1
            if stalled == 2:
                at = k
                break
    assert at is not None, f"the validation loss never stalled: {evals['val_loss'].tolist()}"
    # steps taken before that evaluation, all at 16 a step: it lies in epoch (steps - 1) // 16, and the
    # larger batch starts with the next epoch
    switch_epoch = (int(evals["steps"][at]) - 1) // 16 + 1
    assert switch_epoch < 6, "the stall came in the last epoch: nothing left to switch"
    first = 16 * switch_epoch  # the first step at the larger batch
    assert steps["batch_size"][:first].tolist() == [16] * first
    assert steps["epoch"][first] == switch_epoch and steps["traced"][first] == 1  # the new shape retraced
    assert set(steps["batch_size"][first:].tolist()) == {64}  # once switched, it stays (256 / 64: 4 a step)
    assert steps["epoch"][first:].tolist() == [e for e in range(switch_epoch, 6) for _ in range(4)]
    # the evaluation points count real steps: every 4 steps at 16, then every epoch end (4 steps at 64)
    assert evals["examples"][-1] == steps["batch_size"].sum() == 256 * 6
    assert (run.attrs["batch_schedule"], run.attrs["batch_switch_to"], run.attrs["batch_patience"]) == (
        "two_phase",
        64,
        2,
    )
    assert batch_schedule_lines(sweep) == [
        f"run 0 (batch 16, two_phase): batch 16 -> 64 at step {first} (epoch {switch_epoch})"
    ]
