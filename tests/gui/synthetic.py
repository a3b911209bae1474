"""Schema-true event streams for GUI tests that need many runs or a file being written, without TensorFlow."""

from __future__ import annotations

import math

import numpy as np
from batchlab.core.events import make_event, now_iso
from batchlab.core.spec import build_spec


def sweep_events(
    batch_sizes=(16, 64, 256), statuses=None, epochs=2, samples=512, seed=0, eval_every=None, target=None, seeds=None
):
    """Yield a plausible sweep's events: per run a few step chunks, one epoch_ended per epoch, run_ended.

    `statuses` gives each run's ending (default all "ok"); an "oom" run ends after its first chunk.
    With `eval_every` (steps) each run also has evaluation points every that many steps and at each
    epoch's end (val_loss = loss + 0.05, val_accuracy = 1 - loss / 2.2), with `target` (e.g.
    "val_accuracy=0.9") as its run attribute. `seeds` (a list) repeats every batch size per seed, the
    seed changing the loss a little (loss x (1 + 0.05 x seed)).
    """
    seeds = list(seeds) if seeds is not None else [seed]
    plan = [(b, s) for b in batch_sizes for s in seeds]
    statuses = list(statuses or ["ok"] * len(plan))
    fields = {"preset": "mnist-mlp", "samples": samples, "epochs": epochs, "batch_sizes": list(batch_sizes)}
    if eval_every:
        fields.update(eval_every=eval_every, target=target or "")
    spec = build_spec(fields)
    yield make_event(
        "sweep_started",
        spec=spec.to_dict(),
        runs=[{"index": i, "batch_size": b, "seed": s} for i, (b, s) in enumerate(plan)],
        environment={"devices": [{"name": "cpu", "kind": "CPU", "description": "test CPU", "memory_bytes": 1 << 34}]},
        started=now_iso(),
    )
    for index, ((batch, seed), status) in enumerate(zip(plan, statuses, strict=True)):
        steps_per_epoch = math.ceil(samples / batch)
        yield make_event(
            "run_started",
            run=index,
            batch_size=batch,
            seed=seed,
            target=target or "",
            pid=1,
            device="cpu",
            steps_per_epoch=steps_per_epoch,
            epochs=epochs,
            samples=samples,
            started=now_iso(),
        )
        t = 0.0
        for epoch in range(epochs):
            step = np.arange(epoch * steps_per_epoch, (epoch + 1) * steps_per_epoch)
            loss = (2.0 * np.exp(-step / (40.0 + batch / 4)) + 0.1) * (1 + 0.05 * seed)
            wall = t + 0.001 * batch**0.5 * (step - step[0] + 1)
            t = float(wall[-1])
            yield make_event(
                "steps",
                run=index,
                step=step.tolist(),
                epoch=[epoch] * len(step),
                loss=loss.tolist(),
                batch_size=[batch] * len(step),
                step_time=[0.002] * len(step),
                input_wait=[0.0005] * len(step),
                wall_time=wall.tolist(),
            )
            if status == "oom":
                break
            if eval_every:
                ends = [i for i in range(len(step)) if (step[i] + 1) % eval_every == 0] + [len(step) - 1]
                for i in sorted(set(ends)):
                    yield _evaluation(index, step, i, loss, batch, samples, wall, at_epoch_end=i == len(step) - 1)
            yield make_event(
                "epoch_ended",
                run=index,
                epoch=epoch,
                epoch_time=0.01 * steps_per_epoch,
                compute_time=0.007 * steps_per_epoch,
                input_wait_time=0.002 * steps_per_epoch,
                train_loss=float(loss.mean()),
                train_accuracy=0.9,
                val_loss=float(loss[-1]),
                val_accuracy=0.9,
                val_time=0.01,
                samples_per_s=samples / (0.01 * steps_per_epoch),
                tf_peak_bytes=-1,
                device_memory_bytes=-1,
                rss_peak_bytes=(500 + batch) << 20,
                wall_time=t,
            )
        if status == "ok":
            yield make_event(
                "run_ended",
                run=index,
                status="ok",
                message="",
                ended=now_iso(),
                final_loss=float(loss[-1]),
                total_time=t,
                samples_per_s=samples * epochs / t,
            )
        else:
            yield make_event("log", level="warning", message=f"run {index} ended: {status}", run=index)
            yield make_event("run_ended", run=index, status=status, message=f"synthetic {status}", ended=now_iso())
    yield make_event("sweep_ended", status="complete", message="done", ended=now_iso())


def _evaluation(run, step, i, loss, batch, samples, wall, at_epoch_end):
    done = int(step[i]) + 1
    val_loss = float(loss[i]) + 0.05
    accuracy = 1.0 - val_loss / 2.2
    return make_event(
        "evaluation",
        run=run,
        steps=done,
        examples=done * batch,
        epochs=done * batch / samples,
        wall_time=float(wall[i]),
        train_wall_time=float(wall[i]),
        eval_time=0.01,
        at_epoch_end=int(at_epoch_end),
        train_loss=float(loss[i]),
        val_loss=val_loss,
        val_accuracy=accuracy,
        val_error=1.0 - accuracy,
    )


def write_run_file(path, **kwargs) -> str:
    """A finished synthetic run file written by the real RunFileWriter."""
    from batchlab.core.runfile import RunFileWriter

    with RunFileWriter(path) as writer:
        for event in sweep_events(**kwargs):
            writer.handle(event)
    return str(path)
