"""Which batch size without a target (core/analysis/no_target_advice.py): loss and time together, ratios the right
way round, and a next step this sweep's preset accepts, worded for the command line or the window."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from batchlab.core.analysis.analyse import analyse
from batchlab.core.cli import _build_parser, sweep_values
from batchlab.core.events import make_event
from batchlab.core.model import SweepData
from batchlab.core.presets import PRESETS
from batchlab.core.spec import build_spec

from tests.core.helpers import save_keras_model

RECORDED = Path(__file__).parent / "data" / "autoencoder-16-64-256.h5"  # mnist-autoencoder, 1,000 samples, 3 epochs
SAMPLES = 1024
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _sweep(spec, runs, epochs=2):
    """Runs of (batch, s per step, loss as a function of examples seen), `epochs` epochs of SAMPLES each."""
    data = SweepData()
    data.handle(make_event("sweep_started", spec={"samples": SAMPLES, **spec}, runs=[], environment={}))
    for index, (b, seconds, loss) in enumerate(runs):
        data.handle(make_event("run_started", run=index, batch_size=b, seed=0, samples=SAMPLES, epochs=epochs))
        n, wall = SAMPLES // b, 0.0
        for epoch in range(epochs):
            steps = np.arange(epoch * n, (epoch + 1) * n)
            walls = wall + seconds * np.arange(1, n + 1)
            data.handle(
                make_event(
                    "steps",
                    run=index,
                    step=steps.tolist(),
                    epoch=[epoch] * n,
                    loss=[loss(s * b) for s in steps],
                    batch_size=[b] * n,
                    step_time=[seconds] * n,
                    fetch_time=[0.0] * n,
                    input_wait=[0.0] * n,
                    traced=[0] * n,
                    wall_time=walls.tolist(),
                )
            )
            data.handle(
                make_event(
                    "epoch_ended",
                    run=index,
                    epoch=epoch,
                    train_loss=float(np.mean([loss(s * b) for s in steps])),
                    epoch_time=seconds * n,
                    wall_time=float(walls[-1]),
                    traced_steps=0,
                )
            )
            wall = float(walls[-1])
        data.handle(make_event("run_ended", run=index, status="ok", message="", total_time=wall))
    return data


def _trade_off_sweep(spec=None):
    """Batch 8: 1 ms a step (128 ms an epoch), loss 100/(1 + e/100); batch 128: 2 ms a step (16 ms an epoch), loss
    four times as high at the same examples."""
    return _sweep(
        spec or {"preset": "mnist-autoencoder", "workload": "autoencoder", "loop": "loop"},
        [(8, 1e-3, lambda e: 100 / (1 + e / 100)), (128, 2e-3, lambda e: 400 / (1 + e / 100))],
    )


def _suggested_options(text: str) -> list[str]:
    match = re.search(r"run the same sweep again with (.+?) \(train_loss", text)
    assert match, text
    return match.group(1).split()


def _parse(argv: list[str]):
    """The options as `batchlab sweep` parses and validates them (core/cli.py, core/spec.py)."""
    return build_spec(sweep_values(_build_parser().parse_args(["sweep", *argv])))


def _assert_every_number_finite(paragraphs):
    for p in paragraphs:
        assert "nan" not in p.lower().split() and "inf" not in p.lower(), p
        for token in NUMBER.findall(p):
            assert math.isfinite(float(token.replace(",", ""))), p


def test_the_recommendation_names_the_level_loss_and_time_on_a_recorded_sweep():
    sweep = SweepData.from_file(RECORDED)
    analysis = analyse(sweep)
    text = analysis.recommendation
    level = analysis.loss_level
    by = {b.batch_size: b for b in level.by_batch()}
    assert text[0].startswith(
        f"Soonest to a common loss: batch 64 reached a smoothed training loss of {level.level:.3g} in "
        f"{by[64].time.mean:.3g} s of training (18 steps, 1,128 examples); batch 16 in {by[16].time.mean:.3g} s, "
        f"batch 256 in {by[256].time.mean:.3g} s."
    )
    assert "highest final loss of the 3 finished runs (batch 256's)" in text[0]
    assert "last 1,024 training examples" in text[0]
    # the trade-off: the fastest epoch (256) against the lowest loss after the same examples (16), both ratios > 1
    trade = next(p for p in text if "per steady epoch" in p)
    m = re.match(
        r"Batch 256 is ([\d.]+)x faster per steady epoch than batch 16 \(([\d.]+) s against ([\d.]+) s\), "
        r"but after the same 3 epochs \(3,000 examples\) its loss is ([\d.]+)x higher \(([\d.]+) against "
        r"([\d.]+)\)\.",
        trade,
    )
    assert m, trade
    faster, fast, slow, higher, worse, best = (float(g) for g in m.groups())
    assert faster > 1 and faster == pytest.approx(slow / fast, rel=0.02)
    assert higher > 1 and higher == pytest.approx(worse / best, rel=0.02)
    assert worse == pytest.approx(level.level, rel=2e-3)
    _assert_every_number_finite(text)
    assert not any("val_accuracy" in p for p in text)  # the autoencoder has no accuracy


def test_no_ratio_says_faster_or_higher_when_it_is_not():
    # the fastest epoch is also the lowest loss: no "but", no ratio of a rise called a cut
    sweep = _sweep(
        {"preset": "mnist-mlp", "workload": "mlp"},
        [(8, 1e-3, lambda e: 5 / (1 + e / 100)), (64, 2e-3, lambda e: 1 / (1 + e / 100))],
    )
    text = analyse(sweep).recommendation
    both = next(p for p in text if "fastest steady epoch" in p)
    assert both.startswith(
        "Batch 64 has both the fastest steady epoch (0.032 s) and the lowest loss after the same "
        "2 epochs (2,048 examples)"
    )
    assert not any(re.search(r"0\.\d+x (faster|higher)", p) for p in text)
    _assert_every_number_finite(text)


def test_the_trade_off_states_both_ratios_the_right_way_round():
    analysis = analyse(_trade_off_sweep())
    trade = next(p for p in analysis.recommendation if "per steady epoch" in p)
    # batch 128's epoch: 8 steps of 2 ms = 16 ms; batch 8's: 128 steps of 1 ms; its loss is 4x batch 8's
    assert trade.startswith(
        "Batch 128 is 8x faster per steady epoch than batch 8 (0.016 s against 0.128 s), but "
        "after the same 2 epochs (2,048 examples) its loss is "
    )
    higher = float(re.search(r"its loss is ([\d.]+)x higher", trade).group(1))
    assert higher > 1


@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "keras-file"])
def test_the_suggested_next_step_parses_for_every_bundled_preset(preset):
    defaults = PRESETS[preset].defaults
    spec = {"preset": preset, "workload": defaults["workload"], "loop": "loop", "target": None}
    text = "\n".join(analyse(_trade_off_sweep(spec)).recommendation)
    options = _suggested_options(text)
    assert options[0] == "--target" and options[1].startswith("train_loss=") and "--eval-every" in options
    parsed = _parse(["--preset", preset, *options])
    value = float(options[1].split("=")[1])
    assert parsed.target == f"train_loss={value!r}" and parsed.eval_every == int(options[3])
    # at or above the level, so every batch that reached it can meet it
    assert value >= analyse(_trade_off_sweep(spec)).loss_level.level


def test_a_sweep_run_with_the_fit_engine_is_told_to_use_the_loop_which_takes_a_target():
    spec = {"preset": "mnist-mlp", "workload": "mlp", "loop": "fit"}
    options = _suggested_options("\n".join(analyse(_trade_off_sweep(spec)).recommendation))
    assert options[-2:] == ["--loop", "loop"]
    assert _parse(["--preset", "mnist-mlp", "--loop", "fit", *options]).loop == "loop"


def test_the_suggested_next_step_parses_for_a_user_model(tmp_path):
    path = save_keras_model(
        """
        inputs = keras.Input((784,))
        model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(inputs))
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        """,
        tmp_path / "user.keras",
    )
    spec = {"preset": "keras-file", "workload": "keras-file", "model_file": str(path), "loop": "loop"}
    options = _suggested_options("\n".join(analyse(_trade_off_sweep(spec)).recommendation))
    assert _parse(["--model", str(path), *options]).target.startswith("train_loss=")
    # a user's loss may be negative (e.g. a cosine similarity): the target is still one it accepts
    negative = _sweep(spec, [(8, 1e-3, lambda e: -1 + 1 / (1 + e)), (64, 1e-3, lambda e: -0.5 + 1 / (1 + e))])
    options = _suggested_options("\n".join(analyse(negative).recommendation))
    assert float(options[1].split("=")[1]) < 0
    assert _parse(["--model", str(path), *options]).target.startswith("train_loss=-")


def test_the_window_names_its_convergence_fields_and_the_command_line_its_options():
    sweep = _trade_off_sweep()
    cli = "\n".join(analyse(sweep).recommendation)
    window = "\n".join(analyse(sweep, surface="window").recommendation)
    value = _suggested_options(cli)[1].split("=")[1]
    assert f"--target train_loss={value}" in cli
    assert "--" not in window
    assert f"Convergence section set Target to train_loss {value}" in window
    assert "Evaluate every (steps) to " in window
    with pytest.raises(ValueError, match="surface 'web' is not known; use one of cli, window"):
        analyse(sweep, surface="web")


def test_one_run_only_says_there_is_nothing_to_compare_and_still_suggests_a_target():
    sweep = _sweep({"preset": "mnist-mlp", "workload": "mlp"}, [(32, 1e-3, lambda e: 2.0)])
    text = analyse(sweep).recommendation
    assert text[0].startswith("One batch size only (batch 32): its smoothed training loss ended at 2 after 0.064 s")
    assert "--target train_loss=2 " in text[1]
    _assert_every_number_finite(text)


def test_a_run_that_never_reached_the_level_is_named_and_left_out_of_the_ratios():
    from tests.core.test_loss_level import _sweep as steps_only_sweep

    def falling(e):
        return 100.0 / (1 + e / 1000)

    sweep = steps_only_sweep(
        [(8, 2048, 1e-3, falling, "ok"), (64, 256, 4e-3, falling, "ok"), (32, 16, 2e-3, falling, "crashed")]
    )
    text = analyse(sweep).recommendation
    assert "Never reached it: batch 32 (1 of 1 runs)." in text[0]
    assert "the 2 finished runs (batch 64's)" in text[0]
    assert "batch 32 in" not in text[0]
    _assert_every_number_finite(text)
