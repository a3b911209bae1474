"""The training child's step batches carry the running epoch's memory peaks so far (for the live memory plot)."""

from batchlab.core.training.hooks import StepLog


def test_each_batch_of_steps_carries_the_memory_read_when_it_was_sent():
    sent, readings = [], iter([100, 250])
    log = StepLog(3, sent.append, flush_seconds=0.5, memory=lambda: {"rss_peak_bytes": next(readings)})
    for step, wall in enumerate((0.1, 0.6, 0.7)):
        log.on_train_batch_end(step, {"step": step, "epoch": 0 if step < 2 else 1, "loss": 1.0, "wall_time": wall})
    log.on_run_end({})
    assert [e["step"] for e in sent] == [[0, 1], [2]]
    assert [e["memory"] for e in sent] == [{"epoch": 0, "rss_peak_bytes": 100}, {"epoch": 1, "rss_peak_bytes": 250}]
    plain = []
    StepLog(0, plain.append, flush_seconds=0.0).on_train_batch_end(0, {"step": 0, "epoch": 0, "wall_time": 0.1})
    assert "memory" not in plain[0]
