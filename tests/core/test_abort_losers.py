"""Early abort (issue 28 item 5): the rule on a synthetic stream, and a sweep through the scheduler with it."""

import pytest
from batchlab.core import cli
from batchlab.core.model import SweepData
from batchlab.core.spec import build_spec
from batchlab.core.sweep.policies import AbortLosers, small_batches_first
from batchlab.core.table import summary_rows
from batchlab.core.targets import parse_target

from tests.core.fake_launcher import TARGET, FakeLauncher, run_events, time_to_target
from tests.core.test_launchers import SPEC, _report, _sweep

# Time to target (s of training) of each batch size in the fake launcher's model: S(B) steps (rounded up to the
# evaluation every 10 steps) of 2 ms + 25 us x B each. Batch 48 never meets the target (`missed`).
HAND = {8: 360 * 0.0022, 16: 200 * 0.0024, 32: 120 * 0.0028, 64: 80 * 0.0036, 128: 60 * 0.0052, 256: 50 * 0.0084}
HAND[512] = 50 * 0.0148


def test_early_abort_on_a_synthetic_stream_stops_exactly_the_runs_the_rule_says():
    """Small batches first, one at a time: the best time to target falls 0.792 (8), 0.48 (16), 0.336 (32), 0.288
    (64); 48 (never meets it) passes 0.336 s, 128 (0.312), 256 (0.42) and 512 (0.74) pass 0.288 s: stopped."""
    assert {b: round(time_to_target(b), 9) for b in HAND} == {b: round(t, 9) for b, t in HAND.items()}
    spec = build_spec(SPEC)
    runs = small_batches_first(spec.runs())
    policy = AbortLosers(parse_target(TARGET))
    stopped = []
    for run in runs:
        for event in run_events(run, budget_steps=400, missed=(48,)):
            stopped += [(r, run.batch_size) for r, _why in policy.observe(event)]
            if stopped and stopped[-1][0] == run.index:
                break  # the scheduler stops it here: nothing more of it is seen
    assert [b for _r, b in stopped] == [48, 128, 256, 512]
    assert policy.best_batch == 64 and policy.best_s == pytest.approx(HAND[64])


def test_a_sweep_with_early_abort_names_the_same_fastest_batch_and_every_view_says_aborted(tmp_path, capsys):
    full, *_ = _sweep(tmp_path, "full", FakeLauncher(missed=(48,)))
    launcher = FakeLauncher(missed=(48,))
    short, _printer, notes, _ = _sweep(tmp_path, "short", launcher, abort_losers=True)
    assert launcher.started_order == [0, 1, 2, 3, 4, 5, 6, 7]  # the batch sizes are listed smallest first
    rows = {r["batch_size"]: r for r in summary_rows(SweepData.from_file(short))}
    assert {b for b, r in rows.items() if r["status"] == "aborted"} == {48, 128, 256, 512}
    assert all("cannot win" in rows[b]["message"] for b in (48, 128, 256, 512))
    kept = {r.batch_size: len(r.steps["step"]) for r in SweepData.from_file(short).runs.values()}
    assert kept[128] == 60  # what it measured is kept: 60 steps of 5.2 ms passed 0.288 s
    fastest = {
        path: min((r for r in summary_rows(SweepData.from_file(path)) if r["target_reached"] == 1),
                  key=lambda r: r["time_to_target"])["batch_size"]
        for path in (full, short)
    }  # fmt: skip
    assert fastest == {full: 64, short: 64}
    report = _report(short, capsys)
    assert "aborted: cannot win" in report and "not reached (aborted)" in report
    assert sum("aborted cannot win" in line for line in notes) == 4


def test_early_abort_without_a_target_is_one_line_naming_the_setting(capsys):
    assert cli.main(["sweep", "--preset", "mnist-mlp", "--abort-losers", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "abort_losers" in err[0] and "target" in err[0]


def test_a_real_sweep_with_early_abort_names_the_same_fastest_batch_as_without(tmp_path):
    """Batch 8 meets 80% validation accuracy within its 3 epochs; batch 256 (4 steps an epoch, 12 in all) does not,
    so it cannot be the fastest either way: with early abort it runs second and is stopped (or ends, not
    reached) once its training time passes batch 8's time to target."""
    from batchlab.core.sweep.runner import run_sweep

    values = {"preset": "mnist-mlp", "samples": 1024, "val_samples": 256, "device": "cpu", "batch_sizes": "256,8"}
    values |= {"target": "val_accuracy=0.8", "eval_every": 8, "budget_unit": "epochs", "epochs": 3}
    fastest, statuses = {}, {}
    for abort in (False, True):
        spec = build_spec({**values, "abort_losers": abort})
        path = tmp_path / f"abort-{abort}.h5"
        assert run_sweep(spec, path) == "complete"
        rows = summary_rows(SweepData.from_file(path))
        met = [r for r in rows if r["target_reached"] == 1]
        fastest[abort] = min(met, key=lambda r: r["time_to_target"])["batch_size"]
        statuses[abort] = {r["batch_size"]: r["status"] for r in rows}
    assert fastest == {False: 8, True: 8}
    assert statuses[False] == {8: "ok", 256: "ok"} and statuses[True][8] == "ok"
    assert statuses[True][256] in ("ok", "aborted")  # aborted unless its 12 steps took less than 8's time
