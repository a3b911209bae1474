"""No sentence contradicts its numbers: the analysis of many sweeps, every claim checked against its figures.

Each sweep (synthetic with known answers, and one real sweep through the command line) is explained,
analysed, recommended on and tabled while claims.collect() records every claim said; each claim's
check() must pass, each must cite the figure it names (the fit's points, the memory line, the measured
steps ratios, the learning-rate policy), and no text may hold "nan" or "inf"."""

import math
import re

import numpy as np
import pytest
from batchlab.core.analysis import claims
from batchlab.core.analysis.advice import analysis_table, time_fit_given
from batchlab.core.analysis.analyse import analyse
from batchlab.core.analysis.explain import EPOCH_BASE, epoch_split, explain_sweep, input_wait_share
from batchlab.core.analysis.memory_fit import sweep_memory_fit
from batchlab.core.analysis.noise_scale import noise_scale_report
from batchlab.core.analysis.predict import compare_with_sweep, describe_check, describe_prediction
from batchlab.core.analysis.robust_line import fit_line
from batchlab.core.analysis.step_time import sweep_step_time
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

from tests.core.analysis_sweeps import steps_event, target_sweep
from tests.core.test_cli import TINY, batchlab
from tests.core.test_explain import synthetic_sweep
from tests.core.test_noise_scale import profile_sweep

MIB = 2**20
NUMBER_WORDS = re.compile(r"\bnan\b|\binf\b|nan%|-inf", re.IGNORECASE)


def steps_sweep(reach, memory=None, lr_rule="constant", lr=0.01, lr_from=None, statuses=None, missed=(), seed=5):
    """A train-to-target sweep with one run per batch size: run B meets val_loss 0.5 after reach[B] steps of
    2 ms + 20 µs x B (missed: never; statuses[B]: the run ended so); host memory memory[B] bytes (default
    300 MiB + 0.2 MiB x B); the spec records the learning-rate policy (lr_rule, lr, lr_from)."""
    rng = np.random.default_rng(seed)
    memory, statuses = memory or {}, statuses or {}
    data = SweepData()
    spec = {"target": "val_loss=0.5", "eval_every": 10, "lr_rule": lr_rule, "lr": lr, "lr_from": lr_from}
    spec["preset"] = "mnist-cnn-98"
    data.handle(make_event("sweep_started", spec=spec, runs=[], environment={"device_description": "cpu: test"}))
    for index, (b, n_reach) in enumerate(sorted(reach.items())):
        n = 2 * n_reach if b in missed else n_reach
        data.handle(
            make_event("run_started", run=index, batch_size=b, seed=0, samples=20_000, target="val_loss=0.5", lr=lr)
        )
        step_time = np.full(n, 2e-3 + 20e-6 * b) * np.exp(rng.normal(0, 0.01, n))
        step_time[0] = 0.5
        traced = np.zeros(n, dtype=int)
        traced[0] = 1
        wall = np.cumsum(step_time)
        loss = 1.0 + np.exp(-np.arange(n) / n_reach) + rng.normal(0, 0.1, n)
        data.handle(steps_event(index, b, loss, step_time, traced, wall))
        if statuses.get(b) not in (None, "ok"):
            data.handle(make_event("run_ended", run=index, status=statuses[b], message="out of memory"))
            continue
        for s in sorted({n_reach // 2, n_reach, n}):
            met = s >= n_reach and b not in missed
            data.handle(
                make_event(
                    "evaluation",
                    run=index,
                    steps=s,
                    examples=s * b,
                    epochs=s * b / 20_000,
                    wall_time=float(wall[s - 1]),
                    train_wall_time=float(wall[s - 1]),
                    eval_time=0.1,
                    at_epoch_end=0,
                    train_loss=0.4,
                    val_loss=0.45 if met else 0.9,
                )
            )
        data.handle(
            make_event(
                "epoch_ended",
                run=index,
                epoch=0,
                train_loss=1.0,
                val_loss=1.1,
                epoch_time=float(wall[-1]),
                wall_time=float(wall[-1]),
                traced_steps=1,
                rss_peak_bytes=int(memory.get(b, (300 + 0.2 * b) * MIB)),
            )
        )
        data.handle(make_event("run_ended", run=index, status="ok", message="", total_time=float(wall[-1])))
    return data


def everything(sweep: SweepData, profile=None):
    """Every text the analysis makes of a sweep, its Analysis, and every claim said while making it."""
    with claims.collect() as said:
        analysis = analyse(sweep, profile)
        texts = [*explain_sweep(sweep), *analysis.recommendation, *noise_scale_report(sweep)]
        if analysis.target and analysis.batches:
            texts.append(analysis_table(analysis))
        if profile is not None:
            texts += describe_prediction(profile)
    return texts, analysis, said


def check_all(sweep: SweepData, profile=None):
    """Check every claim against its own numbers and the figures it cites; no NaN or infinity in any text."""
    texts, analysis, said = everything(sweep, profile)
    for text in texts:
        assert not NUMBER_WORDS.search(text), text
    fit = sweep_step_time(sweep)
    memory = sweep_memory_fit(sweep)
    runs = [r for r in sweep.ordered_runs() if r.status == "ok"]
    shares = {input_wait_share(r) for r in runs} | {v for r in runs if (s := epoch_split(r)) for v in s[1:]}
    ratios = [1 / ratio for _, ratio in analysis.measured_ratios]
    for claim in said:
        claim.check()
        if isinstance(claim, claims.OffLine):  # a point of the fit, against the fit's line there
            assert claim.measured in fit.step_times and claim.fitted == pytest.approx(float(fit.predict(claim.batch)))
        elif isinstance(claim, claims.Share) and claim.base == EPOCH_BASE:  # the one input-wait base
            assert any(claim.value == pytest.approx(s) for s in shares)
        elif isinstance(claim, claims.StepsRatio):
            assert any(claim.value == pytest.approx(r) for r in ratios)
        elif isinstance(claim, claims.MemorySlope):
            assert claim.value == pytest.approx(memory.m1) and claim.resolved == memory.slope_resolved
        elif isinstance(claim, claims.Prediction):
            assert analysis.lr_policy is None or analysis.lr_policy.tuned or profile is not None
    # one rule for the T(B) column and the T(B) sentence
    table = analysis_table(analysis) if analysis.batches else ""
    column = [line.split()[4] for line in table.splitlines()[1:]] if table else []
    if not time_fit_given(analysis):
        assert set(column) <= {"-"}
        assert not any(p.startswith("Predicted: T(B)") for p in analysis.recommendation)
    return texts, analysis, said


SWEEPS = {
    "on the line, no target": lambda: synthetic_sweep(),
    "two batch sizes": lambda: synthetic_sweep(sizes=(8, 16)),
    "input wait at the big batch": lambda: synthetic_sweep(wait={512: 0.02}),
    "a few slow steps": lambda: synthetic_sweep(slow={512: (3, 20.0)}),
    "one seed, fixed rate": lambda: target_sweep(seeds=(0,)),
    "never reached the target, rule": lambda: target_sweep(missed=(256, 512), linear_from=8),
    "noisy steps": lambda: target_sweep(noise=0.4, rng_seed=11, linear_from=8),
    "noise scale, fixed rate": lambda: target_sweep(sizes=(8, 32, 128), b_simple=50.0),
    "noise scale, rule": lambda: target_sweep(sizes=(8, 32, 128), b_simple=50.0, linear_from=8),
    "steps rise with the batch": lambda: steps_sweep({8: 5800, 16: 7100, 32: 9000}),
    "steps fall with the batch": lambda: steps_sweep({8: 800, 16: 420, 32: 230, 64: 140}, lr_rule="sqrt"),
    "an out-of-memory run": lambda: steps_sweep({8: 800, 16: 420, 32: 230}, statuses={32: "oom"}),
    "a crashed run": lambda: steps_sweep({8: 800, 16: 420, 32: 230}, statuses={16: "crashed"}, lr_rule="linear"),
    "memory falls over two batch sizes": lambda: steps_sweep(
        {8: 800, 64: 300}, memory={8: 700 * MIB, 64: int(693.2 * MIB)}
    ),
    "memory flat within noise": lambda: steps_sweep(
        {8: 800, 16: 420, 32: 230}, memory={8: 700 * MIB, 16: int(700.2 * MIB), 32: int(700.3 * MIB)}
    ),
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_claim_of_every_sweep_agrees_with_its_numbers(name):
    texts, analysis, said = check_all(SWEEPS[name]())
    assert said  # the numbers were worded from claims


@pytest.mark.parametrize("name", ["one seed, fixed rate", "steps fall with the batch"])
def test_every_claim_with_a_profile_agrees_with_its_numbers(name):
    from batchlab.core.analysis.predict import predict_from_profile

    check_all(SWEEPS[name](), predict_from_profile(profile_sweep(b_simple=100.0)))


def test_a_real_sweep_says_nothing_its_numbers_contradict(tmp_path):
    """The listed contradictions came from real files: a real three-batch sweep with a target, then `report`."""
    out = tmp_path / "real.h5"
    args = [*TINY, "--batch-sizes", "8,16,64", "--samples", "256", "--epochs", "2", "--target", "train_loss=2.0"]
    env = {"BATCHLAB_CACHE_DIR": str(tmp_path / "cache")}
    sweep = batchlab("sweep", *args, "--eval-every", "4", "--out", out, "--quiet", env=env)
    assert sweep.returncode == 0, sweep.stderr
    check_all(SweepData.from_file(out))
    report = batchlab("report", out, env=env)
    assert report.returncode == 0, report.stderr
    assert not NUMBER_WORDS.search(report.stdout), report.stdout
    text = " ".join(report.stdout.split())
    assert "Step compute time t(B)" in text  # the explanation's line, named apart from the wall time per step
    assert "does not apply" in text or "not given for this sweep" in text  # mnist-mlp: one Adam rate for all


# ------------------------------------------------------------------- each contradiction the issue listed


def test_a_near_exact_three_point_line_keeps_its_points_so_its_residual_is_a_number():
    """'the line is within nan% of the runs (median), R² = 1.00': bisquare weights all went to 0."""
    line = fit_line([16.0, 64.0, 128.0], [0.00322968, 0.00342686, 0.00376726])
    assert math.isfinite(line.median_rel_residual) and len(line.outliers) < 3
    two = fit_line([16.0, 64.0], [0.00315628, 0.00344304])
    assert math.isfinite(two.median_rel_residual) and not two.outliers


def test_runs_within_the_tolerance_are_not_called_off_the_line():
    """'Off the line: batch 32 (3.57 ms measured, 3.53 ms on the line)' listed runs 1-3% from the fit."""
    sweep = steps_sweep({8: 800, 16: 420, 32: 230, 64: 140})  # step times with 1% noise
    text = " ".join(explain_sweep(sweep))
    assert "Off the line" not in text
    with pytest.raises(claims.ClaimError, match="within the stated 25%"):
        claims.OffLine(32, 3.57e-3, 3.53e-3, 0.25).check()
    far = claims.OffLine(512, 32.3e-3, 25.3e-3, 0.25)
    far.check()
    assert far.text() == "batch 512 (32.3 ms measured, 25.3 ms on the line, +28%)"


def test_steps_that_went_up_are_not_said_to_be_cut():
    """'doubling the batch cut the steps only 0.82x between 8 and 16' when steps went up from 5,800 to 7,100."""
    texts, analysis, _ = check_all(steps_sweep({8: 5800, 16: 7100, 32: 9000}))
    text = " ".join(texts)
    assert "cut the steps" not in text
    assert analysis.critical.bcrit.kind == "<=" and "the steps did not fall" in text
    assert "doubling the batch raised the steps 1.22x between 8 and 16" in text
    with pytest.raises(claims.ClaimError, match="'cut'"):
        claims.StepsRatio(8, 16, 1.22, "cut").check()
    assert claims.StepsRatio.of(8, 16, 5800 / 7100).kind == "rise"


def test_no_t_of_b_column_when_the_text_gives_no_t_of_b():
    """A 'T(B) fit' column with values while the text said 'Predicted T(B): not given'."""
    bounded = analyse(target_sweep(sizes=(1, 2, 4), seeds=(0,), linear_from=1))  # Bcrit only bounded
    assert any("only bounded" in p for p in bounded.recommendation)
    assert [line.split()[4] for line in analysis_table(bounded).splitlines()[1:]] == ["-"] * 3
    given = analyse(target_sweep(sizes=(8, 32, 128, 512), linear_from=8))
    assert time_fit_given(given) and "-" not in [line.split()[4] for line in analysis_table(given).splitlines()[1:]]


def test_a_negative_memory_slope_is_not_explained_as_activations():
    """With two batch sizes, 'm1 = -0.121 MiB per sample (activations kept for the backward pass)'."""
    sweep = steps_sweep({8: 800, 64: 300}, memory={8: 700 * MIB, 64: int(693.2 * MIB)})
    texts, analysis, _ = check_all(sweep)
    text = " ".join(texts)
    assert "-0.121 MiB per sample" in text and "m1 not resolved by these runs" in text
    assert "activations kept" not in text
    with pytest.raises(claims.ClaimError):
        claims.MemorySlope(-0.121 * MIB, True).check()
    resolved = " ".join(explain_sweep(synthetic_sweep()))  # 700 MiB + 0.5 MiB x B: resolved
    assert "m1 = 0.5 MiB per sample (activations kept for the backward pass)" in resolved


def test_input_wait_has_one_base_in_every_sentence():
    """'52% step compute, 42% input wait' next to 'input wait: at most 30% of the steps' time'."""
    sweep = synthetic_sweep(wait={512: 0.02})
    text = " ".join(explain_sweep(sweep))
    split = re.search(r"at batch 512: [\d.]+ s = \d+% step compute, (\d+)% input wait", text)
    most = re.search(r"Input wait: at most (\d+)% of a steady epoch's wall time \(batch 512\)", text)
    assert split and most and split.group(1) == most.group(1)
    assert "of the steps' time" not in text


def test_the_two_step_time_lines_of_a_profile_have_two_names():
    """'2.32 ms + 53.2 us x B' and '3.05 ms + 59.5 us x B' for the same runs, unnamed."""
    from batchlab.core.analysis.predict import predict_from_profile

    profile = profile_sweep()
    explained = " ".join(explain_sweep(profile))
    predicted = " ".join(describe_prediction(predict_from_profile(profile)))
    assert "Step compute time t(B) = alpha + beta*B" in explained
    assert "steady wall time per step t_step(B) = " in predicted and "step compute time line" in predicted


def test_a_profile_checked_against_a_sweep_without_a_target_says_so():
    """report --profile on a sweep without a target said 'no batch size of this sweep met its target'."""
    from batchlab.core.analysis.predict import predict_from_profile

    analysis = analyse(synthetic_sweep())
    text = describe_check(compare_with_sweep(predict_from_profile(profile_sweep()), analysis))
    assert "this sweep has no target" in text and "met its target" not in text


def test_powers_apart_never_reads_one_when_it_is_more_than_one():
    # "1.0 powers of two apart (not within one)" was printed for 1.016
    from batchlab.core.analysis.claims import PowersApart

    claim = PowersApart(1.016, within_one=False)
    claim.check()
    assert claim.text().startswith("1.02 powers of two apart (not within one")
    assert PowersApart(0.7, within_one=True).text().startswith("0.7 powers of two apart (within one")
