"""What the live window costs the GUI thread per minute of a sweep, on a fixed replayed event stream.

    .venv/bin/python bench/bench_gui_frame_cost.py                 # offscreen, Live tab, ~1 min
    .venv/bin/python bench/bench_gui_frame_cost.py --profile 25    # and the 25 costliest functions

No training runs: a synthetic stream shaped like bench_gui_responsiveness.py's reference sweep (mnist-cnn,
4096 samples, 6 epochs, batch sizes 32 / 128 / 512: 2 s start-up per run, steps +-5% around their batch
size's mean time, step records every 0.25 s with the child's memory peaks so far, a 0.5 s validation
pause at each epoch's end; about 70 s in all) is fed to a
real MainWindow on a simulated clock. Every 50 ms of simulated time the events due are handed to the
window as the sweep worker hands them, the window's refresh tick runs, and Qt paints what changed.
The GUI thread's CPU time for the whole stream (time.thread_time: handlers, plot updates, paints)
is the cost; it does not depend on how loaded the machine is, so it is comparable across changes.

Printed: GUI-thread CPU seconds per minute of stream (and as % of one core), the share spent in plot
updates, in the other tick work and in painting, and for every live plot how often it changed on
screen while a run trained (simulated seconds between changes: median and longest; the window must
not redraw a step-driven plot less than twice a second).
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH_SIZES = (32, 128, 512)
SAMPLES = 4096
EPOCHS = 6
STEP_S = {32: 0.026, 128: 0.095, 512: 0.36}  # simulated seconds per step: ~1,230-1,420 samples/s, as measured
START_S = 2.0  # child start-up before a run's first step
VALIDATION_S = 0.5  # the pause at an epoch's end
FLUSH_S = 0.25  # the child's step flush (core.events.STEP_FLUSH_SECONDS)
TICK_S = 0.05  # the window's refresh tick and the worker's event batching (RefreshPolicy)


def event_stream() -> list[tuple[float, dict]]:
    """(simulated time, event) of the whole reference sweep, in order."""
    from batchlab.core.events import make_event, now_iso
    from batchlab.core.spec import build_spec

    spec = build_spec(
        {"preset": "mnist-cnn", "samples": SAMPLES, "epochs": EPOCHS, "batch_sizes": list(BATCH_SIZES), "device": "cpu"}
    )
    out = [
        (
            0.0,
            make_event(
                "sweep_started",
                spec=spec.to_dict(),
                runs=[{"index": i, "batch_size": b, "seed": 0} for i, b in enumerate(BATCH_SIZES)],
                environment={"devices": [{"name": "cpu", "kind": "CPU", "description": "bench", "memory_bytes": 1}]},
                started=now_iso(),
            ),
        )
    ]
    t = 0.0
    for index, batch in enumerate(BATCH_SIZES):
        t += START_S
        per_epoch = math.ceil(SAMPLES / batch)
        out.append(
            (
                t,
                make_event(
                    "run_started",
                    run=index,
                    batch_size=batch,
                    seed=0,
                    pid=1,
                    device="cpu",
                    steps_per_epoch=per_epoch,
                    epochs=EPOCHS,
                    samples=SAMPLES,
                    started=now_iso(),
                    rss_before_training_bytes=(560 + batch // 8) << 20,  # a CPU run's baseline, as the child sends
                ),
            )
        )
        run_t0, step, rss = t, 0, (600 + batch // 4) << 20
        for epoch in range(EPOCHS):
            pending: list[tuple[int, float]] = []
            flushed_at = t
            for _ in range(per_epoch):
                t += _step_s(step, batch)
                pending.append((step, t))
                step += 1
                if t - flushed_at >= FLUSH_S:
                    rss += (1 << 20) * (len(out) % 4 == 0)  # the peak so far grows now and then, as a real one
                    out.append((t, _steps_event(index, epoch, batch, pending, run_t0, rss)))
                    pending, flushed_at = [], t
            if pending:
                out.append((t, _steps_event(index, epoch, batch, pending, run_t0, rss)))
            t += VALIDATION_S
            epoch_time = per_epoch * STEP_S[batch]
            out.append(
                (
                    t,
                    make_event(
                        "epoch_ended",
                        run=index,
                        epoch=epoch,
                        epoch_time=epoch_time,
                        compute_time=0.8 * epoch_time,
                        input_wait_time=0.05 * epoch_time,
                        train_loss=_loss(step - 1, batch),
                        train_accuracy=0.9,
                        val_loss=_loss(step - 1, batch) + 0.05,
                        val_accuracy=0.9,
                        val_time=VALIDATION_S,
                        samples_per_s=SAMPLES / epoch_time,
                        tf_peak_bytes=-1,
                        device_memory_bytes=-1,
                        rss_peak_bytes=rss,
                        wall_time=t - run_t0,
                    ),
                )
            )
        total = t - run_t0
        out.append(
            (
                t,
                make_event(
                    "run_ended",
                    run=index,
                    status="ok",
                    message="",
                    ended=now_iso(),
                    final_loss=_loss(step - 1, batch),
                    total_time=total,
                    samples_per_s=SAMPLES * EPOCHS / total,
                ),
            )
        )
    out.append((t, make_event("sweep_ended", status="complete", message="done", ended=now_iso())))
    return out


def _step_s(step: int, batch: int) -> float:
    """A step's simulated duration: the batch size's mean, +-5% (real steps vary; the throughput markers move)."""
    return STEP_S[batch] * (1 + 0.05 * math.sin(step * 0.7))


def _loss(step: int, batch: int) -> float:
    return 2.0 * math.exp(-step / (40.0 + batch / 4)) + 0.1 + 0.02 * math.sin(step * 1.7)


def _steps_event(run: int, epoch: int, batch: int, rows: list[tuple[int, float]], run_t0: float, rss: int) -> dict:
    from batchlab.core.events import make_event

    return make_event(
        "steps",
        run=run,
        step=[s for s, _ in rows],
        epoch=[epoch] * len(rows),
        loss=[_loss(s, batch) for s, _ in rows],
        batch_size=[batch] * len(rows),
        step_time=[_step_s(s, batch) * 0.8 for s, _ in rows],
        input_wait=[STEP_S[batch] * 0.05] * len(rows),
        wall_time=[w - run_t0 for _, w in rows],
        memory={"epoch": epoch, "tf_peak_bytes": -1, "device_memory_bytes": -1, "rss_peak_bytes": rss},
    )


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _ReplayWorker:
    """Stands in for the sweep worker: the window counts as running while the stream plays."""

    stop_requested = False

    def __init__(self):
        self.alive = True

    def isRunning(self) -> bool:  # noqa: N802 (Qt's name)
        return self.alive


def replay(tab: str, profile: cProfile.Profile | None) -> dict:
    """Feed the stream to a fresh window on a simulated clock; the GUI thread's CPU seconds, split by phase."""
    from batchlab.core.model import SweepData
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.progress import SweepProgress
    from batchlab.gui.main_window import MainWindow
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    stream = event_stream()
    window = MainWindow(QSettings(tempfile.mktemp(suffix=".ini"), QSettings.Format.IniFormat))
    window.resize(1440, 900)
    window.show()
    clock = _Clock()
    for holder in (window.refresher, window.refresher.pacer):
        holder._clock = clock
    window.live.position.clock = clock
    window.views.setCurrentWidget(getattr(window, tab))
    for _ in range(5):
        app.processEvents()
    spec = build_spec(
        {"preset": "mnist-cnn", "samples": SAMPLES, "epochs": EPOCHS, "batch_sizes": list(BATCH_SIZES), "device": "cpu"}
    )
    window.data = SweepData(label="replay.h5", path="replay.h5")
    window.progress = SweepProgress(spec, clock=clock)
    window.worker, window._worker_done = _ReplayWorker(), False
    window._show_sweep(window.data, "main")
    refresher = window.refresher
    refresher.start()
    refresher.timer.stop()  # the simulated clock ticks instead of the timer
    refresher.timer.start = lambda *_a: None
    refresher.timer.isActive = lambda: True  # (a tree from before the single-shot ticks asks its timer)
    # Ticks run when the refresher schedules them (at the next 50 ms step of the simulated clock); a tree
    # without a schedule ticks every 50 ms, as its periodic timer did.
    scheduled = hasattr(refresher, "next_tick_at")
    ticks = deliveries = 0
    tick_costs: list[tuple[float, float, str]] = []  # (GUI CPU of a tick with its paints, when, what it drew)
    drew: list[str] = []
    changes: dict[str, list[float]] = {p: [] for p in window.live.plot_ids}
    update = window.live.update_plot
    spent = {"plot updates": 0.0, "other tick work": 0.0, "events": 0.0, "paint": 0.0}

    def timed_update(plot_id: str) -> bool:
        t0 = time.thread_time()
        changed = update(plot_id)
        spent["plot updates"] += time.thread_time() - t0
        if changed:
            changes[plot_id].append(clock.now)
            drew.append(plot_id)
        return changed

    window.live.update_plot = timed_update
    painted = PaintCounter(window.live.plots)
    regenerated = _count_axis_regenerations(window.live.plots)
    end = stream[-1][0] + 1.0
    i = 0
    start = time.thread_time()
    if profile is not None:
        profile.enable()
    while clock.now < end:
        clock.now += TICK_S
        batch = []
        while i < len(stream) and stream[i][0] <= clock.now:
            batch.append(stream[i][1])
            i += 1
        t0 = time.thread_time()
        if batch:
            deliveries += 1
            window._on_events(batch)
        t1 = time.thread_time()
        drew.clear()
        if not scheduled or clock.now >= refresher.next_tick_at - 1e-9:
            ticks += 1
            window.refresh()
        t2 = time.thread_time()
        app.processEvents()
        t3 = time.thread_time()
        spent["events"] += t1 - t0
        spent["other tick work"] += t2 - t1
        spent["paint"] += t3 - t2
        tick_costs.append((t3 - t0, clock.now, "+".join(drew) or ("events" if batch else "")))
    if profile is not None:
        profile.disable()
    total = time.thread_time() - start
    spent["other tick work"] -= spent["plot updates"]
    window.worker.alive, window._worker_done = False, True
    refresher.timer.isActive = lambda: False
    if scheduled:
        refresher.stop()
    window.close()
    paints = dict(painted.count)
    regenerated.stop()
    return {
        "total": total,
        "stream_s": end,
        "spent": spent,
        "changes": changes,
        "runs": _run_spans(stream),
        "paints": paints,
        "axes": dict(regenerated.count),
        "ticks": ticks,
        "deliveries": deliveries,
        "longest": sorted(tick_costs, reverse=True)[:8],
        "by_plot": _by_plot(tick_costs),
    }


def _by_plot(tick_costs) -> dict[str, list[float]]:
    """plot id -> GUI CPU (s) of each step that drew it and nothing else (its update and its repaint)."""
    out: dict[str, list[float]] = {}
    for cost, _when, what in tick_costs:
        if what and "+" not in what and what != "events":
            out.setdefault(what, []).append(cost)
    return out


def _run_spans(stream) -> list[tuple[float, float]]:
    """(first steps, run ended) of each run in simulated seconds: when plots must keep moving."""
    first, spans = {}, []
    for t, e in stream:
        if e["type"] == "steps":
            first.setdefault(e["run"], t)
        elif e["type"] == "run_ended":
            spans.append((first[e["run"]], t))
    return spans


class _AxisCounter:
    """Counts how often each live plot's axes regenerate their tick text (a range change does it): load-independent."""

    def __init__(self, plots: dict):
        import pyqtgraph as pg

        self._cls, self._original = pg.AxisItem, pg.AxisItem.generateDrawSpecs
        owners = {id(w.getPlotItem().getAxis(n)): name for name, w in plots.items() for n in ("left", "bottom")}
        self.count = dict.fromkeys(plots, 0)
        original, count = self._original, self.count

        def counted(axis, painter):
            name = owners.get(id(axis))
            if name is not None:
                count[name] += 1
            return original(axis, painter)

        self._cls.generateDrawSpecs = counted

    def stop(self) -> None:
        self._cls.generateDrawSpecs = self._original


def _count_axis_regenerations(plots: dict) -> _AxisCounter:
    return _AxisCounter(plots)


class PaintCounter(QObject):
    """Counts the paint events of each live plot: a count of work that does not depend on the machine's load."""

    def __init__(self, plots: dict):
        super().__init__()
        self.count = dict.fromkeys(plots, 0)
        self._names = {widget.viewport(): name for name, widget in plots.items()}
        for viewport in self._names:
            viewport.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint:
            self.count[self._names[watched]] += 1
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tab", default="live", choices=("live", "summary_splitter", "analysis"), help="tab shown")
    parser.add_argument("--repeat", type=int, default=3, help="replays (the CPU figure is their median)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions")
    args = parser.parse_args(argv)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    profile = cProfile.Profile() if args.profile else None
    results = sorted((replay(args.tab, profile) for _ in range(max(1, args.repeat))), key=lambda r: r["total"])
    result = results[len(results) // 2]
    total, minutes = result["total"], result["stream_s"] / 60
    print(f"platform: {os.environ.get('QT_QPA_PLATFORM') or 'xcb'}; tab: {args.tab}; stream {result['stream_s']:.1f} s")
    print(f"load average (1 min, at the end): {os.getloadavg()[0]:.1f}; replays: {len(results)}")
    each = ", ".join(f"{r['total'] / minutes:.2f}" for r in results)
    print(f"GUI thread, CPU-s per minute of stream, each replay: {each}")
    share = 100 * total / result["stream_s"]
    print(f"GUI thread (median replay): {total / minutes:.2f} CPU-s per minute = {share:.1f}% of a core")
    for name, value in result["spent"].items():
        print(f"  {name:>16}: {value / minutes:6.2f} CPU-s/min ({100 * value / total:4.1f}%)")
    print(
        f"GUI thread wake-ups per second of stream: refresh ticks {result['ticks'] / result['stream_s']:.1f}, "
        f"event deliveries {result['deliveries'] / result['stream_s']:.1f}"
    )
    print(
        "costliest 50 ms steps (GUI CPU of events + tick + paints; the longest-gap candidates): "
        + ", ".join(f"{1000 * c:.1f} ms at {t:.2f} s ({what or 'nothing drawn'})" for c, t, what in result["longest"])
    )
    print("GUI CPU of the steps that drew one plot (its update and repaint): count, median, 95th percentile, longest")
    for plot_id, costs in sorted(result["by_plot"].items()):
        costs = sorted(costs)
        print(
            f"  {plot_id:>12}: {len(costs):4d}  {1000 * statistics.median(costs):5.1f} ms  "
            f"{1000 * costs[int(0.95 * (len(costs) - 1))]:5.1f} ms  {1000 * costs[-1]:5.1f} ms"
        )
    print(
        f"paints of the live plots: {sum(result['paints'].values())} in all, "
        + ", ".join(f"{k} {v}" for k, v in result["paints"].items())
    )
    print(
        f"axis tick-text regenerations of the live plots (left + bottom): {sum(result['axes'].values())} in all, "
        + ", ".join(f"{k} {v}" for k, v in result["axes"].items())
    )
    print("plot changes while a run trained (simulated s between changes): median / longest / count")
    for plot_id, times in result["changes"].items():
        gaps = [
            b - a
            for lo, hi in result["runs"]
            for a, b in zip([t for t in times if lo <= t <= hi], [t for t in times if lo <= t <= hi][1:], strict=False)
        ]
        if gaps:
            print(f"  {plot_id:>12}: {statistics.median(gaps):5.2f} / {max(gaps):5.2f} / {len(times)}")
        else:
            print(f"  {plot_id:>12}: no changes while runs trained ({len(times)} in all)")
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
