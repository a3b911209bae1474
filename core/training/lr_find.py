"""One LR range test (`batchlab lr-find`) at one batch size, in the training child; imports TensorFlow.

A fresh model (the run's seed, built and compiled as a sweep's run would be) trains one step per
rate of core/lr_find.py's exponential range, its mini-batches drawn from the run's own input
pipeline (repeated past the epoch's end). The rate is a variable the optimizer reads in every step,
so the step function is traced once. The math (smoothing, the stop rule, the suggestions) is
core/lr_find.py's. The points go to the parent as ``lr_range`` events; the suggestions ride on
``run_ended``. Afterwards the model's weights are restored to their values before the test; the
child exits after the run anyway, so each batch size starts from a fresh model in a fresh process.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import keras
from batchlab.core.events import LR_RANGE, RUN_ENDED, RUN_STARTED, STEP_FLUSH_SECONDS, log_event, make_event, now_iso
from batchlab.core.lr_find import RangeSettings, RangeTest
from batchlab.core.spec import RunSpec
from batchlab.core.training.failures import StopRequested, classify_failure, first_line, traceback_text
from batchlab.core.training.input_pipeline import make_input_pipeline
from batchlab.core.training.trainer import make_step_function, prepare_run

Emit = Callable[[dict[str, Any]], None]
STOPPED = "stopped by the user"


def _send_points(emit: Emit, run_index: int, test: RangeTest, start: int) -> int:
    """Send the points from `start` on as one lr_range event; return the new start."""
    end = len(test.lrs)
    if end > start:
        emit(
            make_event(
                LR_RANGE,
                run=run_index,
                step=list(range(start, end)),
                lr=test.lrs[start:end],
                loss=test.losses[start:end],
                smoothed_loss=test.smoothed[start:end],
            )
        )
    return end


def range_test_run(
    run: RunSpec,
    settings: RangeSettings,
    emit: Emit,
    should_stop: Callable[[], bool],
    device_name: str,
) -> None:
    """Run the range test of one batch size; emits run_started, lr_range points and run_ended (also on failure)."""
    test = RangeTest()
    end: dict[str, Any] = {"status": "ok", "message": ""}
    sent = 0
    t0 = time.perf_counter()
    try:
        setup = prepare_run(run, emit)
        emit(_run_started(run, settings, setup, device_name))
        sent = _raise_the_rate(run, settings, setup, test, emit, should_stop)
    except StopRequested:
        test.stop_reason = test.stop_reason or STOPPED
        end.update(status="interrupted", message="stopped by the user; the points so far are kept")
    except Exception as e:  # OOM and any other failure end this batch size only
        end.update(status=classify_failure(e), message=first_line(e))
        emit(log_event("error", traceback_text(e), run=run.index))
    _send_points(emit, run.index, test, sent)
    emit(_run_ended(run, test, end, time.perf_counter() - t0))


def _run_started(run: RunSpec, settings: RangeSettings, setup, device_name: str) -> dict[str, Any]:
    return make_event(
        RUN_STARTED,
        run=run.index,
        batch_size=run.batch_size,
        seed=run.seed,
        pid=os.getpid(),
        nice=os.getpriority(os.PRIO_PROCESS, 0),
        device=device_name,
        steps_per_epoch=setup.steps_per_epoch,
        epochs=math.ceil(settings.lr_steps / setup.steps_per_epoch),
        samples=setup.samples,
        started=now_iso(),
        **settings.to_dict(),
    )


def _raise_the_rate(run: RunSpec, settings: RangeSettings, setup, test: RangeTest, emit: Emit, should_stop) -> int:
    """One step at each rate of the range until the loss blows up or the range ends; the model's weights are
    restored afterwards. Returns how many points were already sent."""
    model = setup.model
    sent = 0
    saved = model.get_weights()
    rate = keras.Variable(settings.lr_min, dtype="float32", trainable=False, name="lr_range_rate")
    # A callable rate is read in every step (a schedule in the spec would not be settable).
    model.optimizer.learning_rate = lambda: rate
    step_fn = make_step_function(model)
    pipeline = make_input_pipeline(setup.x_train, setup.y_train, run.batch_size, run.sweep.shuffle, run.seed)
    batches = iter(pipeline.repeat())
    flushed = time.monotonic()
    for lr in settings.rates():
        if should_stop():
            raise StopRequested()
        rate.assign(float(lr))
        xb, yb, _made = next(batches)
        stop = test.add(float(lr), float(step_fn(xb, yb)["loss"]))
        if time.monotonic() - flushed > STEP_FLUSH_SECONDS * 8:  # a few events per run: each one is flushed
            sent, flushed = _send_points(emit, run.index, test, sent), time.monotonic()
        if stop:
            break
    test.finish()
    model.set_weights(saved)  # the model as it was before the test (the child ends after it anyway)
    return sent


def _run_ended(run: RunSpec, test: RangeTest, end: dict[str, Any], seconds: float) -> dict[str, Any]:
    result = test.result()
    finite = [v for v in test.losses if math.isfinite(v)]
    if end["status"] == "ok":
        text = f"{result.steepest_lr:.3g}" if math.isfinite(result.steepest_lr) else "none (too few points)"
        end["message"] = (
            f"range test: {len(test.lrs)} steps, stopped: {test.stop_reason}; suggested lr {text} (steepest), "
            f"{result.min10_lr:.3g} (min/10)"
        )
    return make_event(
        RUN_ENDED,
        run=run.index,
        ended=now_iso(),
        final_loss=finite[-1] if finite else math.nan,
        total_time=seconds,
        suggested_lr=result.steepest_lr,
        suggested_lr_min10=result.min10_lr,
        loss_at_suggestion=result.loss_at_steepest,
        stop_reason=test.stop_reason or "not started",
        range_steps=len(test.lrs),
        **end,
    )
