"""Predictions that say when they hold: the critical-batch and T(B) predictions assume a learning rate tuned
per batch size, so a sweep (or a profile) with one fixed rate gets what to run instead, and one with a rule or
a per-batch search gets the prediction with its assumption named."""

import math

import pytest
from batchlab.core.analysis.analyse import analyse
from batchlab.core.analysis.lr_policy import FIXED, RULE, SEARCH, UNKNOWN, lr_policy, sweep_lr_policy
from batchlab.core.analysis.noise_scale import noise_scale_report
from batchlab.core.analysis.predict import compare_with_sweep, describe_check, describe_prediction, predict_from_profile

from tests.core.analysis_sweeps import target_sweep
from tests.core.test_claims import steps_sweep
from tests.core.test_noise_scale import profile_sweep

FALLING = {8: 800, 16: 420, 32: 230, 64: 140, 128: 100}  # steps to target: Bcrit near 16
INSTEAD = "`batchlab lr-find --preset mnist-cnn-98` then `batchlab sweep --preset mnist-cnn-98 --lr-from FILE`"


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ({"lr_rule": "constant", "lr": 0.01}, FIXED),
        ({"lr_rule": "constant", "lr": None}, FIXED),  # the optimizer's own default rate: one rate too
        ({"lr_rule": "linear", "lr": 0.01}, RULE),
        ({"lr_rule": "sqrt", "lr": 0.01}, RULE),
        ({"lr_rule": "constant", "lr_from": "lr-find.h5"}, SEARCH),
        ({}, UNKNOWN),
    ],
)
def test_the_policy_is_read_from_the_spec(spec, kind):
    policy = lr_policy(spec)
    assert policy.kind == kind and policy.tuned == (kind != FIXED)


def test_a_file_without_the_rule_in_its_spec_is_read_from_its_runs():
    assert sweep_lr_policy(target_sweep(sizes=(8, 16), seeds=(0,))).kind == FIXED  # constant, 0.05 for all
    assert sweep_lr_policy(target_sweep(sizes=(8, 16), seeds=(0,), linear_from=8)).kind == RULE
    per_batch = lr_policy({}, [{"lr_rule": "constant", "lr": 0.1}, {"lr_rule": "constant", "lr": 0.02}])
    assert per_batch.kind == SEARCH  # a rate per batch size under the constant rule: an lr-find file's rates


def test_a_fixed_rate_gets_no_predicted_best_batch_but_what_to_run_instead():
    analysis = analyse(steps_sweep(FALLING, lr_rule="constant", lr=0.01))
    assert analysis.lr_policy.kind == FIXED
    assert math.isnan(analysis.best_predicted) and analysis.prediction.time == ()
    text = " ".join(analysis.recommendation)
    assert "Predicted: T(B)" not in text
    assert "not given for this sweep, because it assumes a learning rate tuned for each batch size" in text
    assert "every batch size trained at one rate, 0.01 (--lr-rule constant, no --lr-from)" in text
    assert INSTEAD in text and "`--lr-rule linear` or `--lr-rule sqrt`" in text
    assert "this Bcrit describes that rate's runs" in text
    assert analysis.as_dict()["lr_policy"]["kind"] == FIXED


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"lr_rule": "linear"}, "here the rate scaled with the batch by the linear rule (--lr-rule linear)"),
        ({"lr_rule": "sqrt"}, "here the rate scaled with the batch by the sqrt rule (--lr-rule sqrt)"),
        ({"lr_from": "lr-find.h5"}, "each batch size trained at the rate its own learning-rate range test chose"),
    ],
)
def test_a_rule_or_a_per_batch_search_gets_the_prediction_with_its_assumption(kwargs, named):
    analysis = analyse(steps_sweep(FALLING, **kwargs))
    assert analysis.lr_policy.tuned and math.isfinite(analysis.best_predicted) and analysis.prediction.time
    text = " ".join(analysis.recommendation)
    predicted = next(p for p in analysis.recommendation if p.startswith("Predicted: T(B)"))
    assert f"is lowest at batch {analysis.best_predicted:,.0f}" in predicted
    assert "it assumes a learning rate tuned for each batch size" in predicted and named in predicted
    assert "not given for this sweep" not in text


def test_the_noise_scale_predicts_bcrit_only_under_a_rule():
    fixed = noise_scale_report(target_sweep(sizes=(8, 32), seeds=(0,), b_simple=50.0))
    assert "predicted critical batch" not in " ".join(fixed) and fixed[-1].startswith("A critical batch predicted")
    assert "not given for this sweep" in fixed[-1]
    ruled = noise_scale_report(target_sweep(sizes=(8, 32), seeds=(0,), b_simple=50.0, linear_from=8))
    assert "predicted critical batch ~ 50" in ruled[0] and "it assumes a learning rate tuned" in ruled[-1]
    fixed_advice = " ".join(analyse(target_sweep(sizes=(8, 32, 128), b_simple=50.0)).recommendation)
    assert "which predicts Bcrit" not in fixed_advice and "The critical batch it predicts" in fixed_advice


def test_a_profile_with_one_fixed_rate_predicts_no_best_batch():
    profile = profile_sweep()
    profile.spec.update(lr_rule="constant", lr=0.01, preset="mnist-cnn-98")
    prediction = predict_from_profile(profile)
    text = "\n".join(describe_prediction(prediction))
    assert "predicted best batch for time to target: ~" not in text and "predicted critical batch ~" not in text
    assert "not given for a sweep with this profile's settings, because it assumes a learning rate tuned" in text
    assert "measured B_simple ~ 64" in text and INSTEAD in text
    assert prediction.as_dict()["applies"] is False
    checked = describe_check(compare_with_sweep(prediction, analyse(steps_sweep(FALLING, lr_rule="sqrt"))))
    assert not checked.startswith("Predicted") and "a prediction only for a sweep whose rate is tuned" in checked
    ruled = profile_sweep()
    ruled.spec.update(lr_rule="sqrt", lr=0.01)
    text = "\n".join(describe_prediction(predict_from_profile(ruled)))
    assert "predicted best batch for time to target: ~72" in text and "by the sqrt rule" in text


def test_report_profile_on_a_fixed_rate_sweep_says_the_prediction_does_not_apply():
    """mnist-cnn-98: predicted ~47, measured 8 with one SGD rate for every batch; the check must say why."""
    prediction = predict_from_profile(profile_sweep(b_simple=64.0))
    fixed = describe_check(compare_with_sweep(prediction, analyse(steps_sweep(FALLING, lr=0.01))))
    assert "so the prediction does not apply to this sweep" in fixed and "within one, the goal" not in fixed
    assert "for the record: the fastest to the target here was batch" in fixed
    ruled = describe_check(compare_with_sweep(prediction, analyse(steps_sweep(FALLING, lr_rule="linear"))))
    assert "powers of two apart (" in ruled and "does not apply" not in ruled


def test_two_range_test_files_are_the_same_policy_not_another_task():
    # report --profile said the profile "trained something else" when only the lr-find files' names differed
    from batchlab.core.analysis.predict import task_differences

    profile = {"lr_from": "/runs/find-a.h5", "lr": 0.02, "workload": "cnn"}
    assert task_differences(profile, {"lr_from": "/elsewhere/find-b.h5", "lr": 0.02, "workload": "cnn"}) == {}
    assert task_differences(profile, {"lr_from": None, "lr": 0.02, "workload": "cnn"}) == {
        "lr_from": ["/runs/find-a.h5", None]
    }
