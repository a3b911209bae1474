"""GUI-thread stalls during a live sweep, and training throughput with the window open vs headless.

    .venv/bin/python bench/bench_gui_responsiveness.py            # offscreen unless a display is set
    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python bench/bench_gui_responsiveness.py

Each round runs the same spec three times on the real runner: headless (batchlab.core.sweep.runner.run_sweep,
as the CLI does) and twice from the window, Live tab showing, plotting as events arrive. During
one of the window's sweeps a 10 ms QTimer heartbeat records every gap on the GUI thread; no stall can be longer than
the longest gap (target: stalls < 50 ms). The heartbeat itself wakes the GUI thread 100 times a
second, so throughput is compared on window sweeps without it ("window"), and the probed sweeps
("probed") are shown beside them. Throughput is each run's steady-state samples/s as
the run file records it (targets: window / headless >= 0.95 per batch size). Each window sweep is
paired with the headless sweep next to it; the median of those paired ratios is the verdict,
because on a shared machine speed drifts by more than 5% over a few minutes; all pairs pooled
are shown too.

It also prints the GUI thread's own CPU during the window's sweeps (as a share of one core) and how
often it woke up (voluntary context switches a second, from /proc), how
often each live plot was redrawn while a run's steps kept arriving (target: at least once a second),
and how long after a run's first steps reached the window they were on screen (target: the first
points within 2 s of the child's first step; the child adds at most its 0.25 s flush).

--explain N prints the N longest gaps split by the kernel's per-thread schedstat into time the
GUI thread ran (handlers and paints), time it was runnable but queued behind other threads,
and the rest (waiting for the GIL or the timer), with the window refresh ticks inside each gap.
With --stacks, a watchdog thread also samples the GUI thread's Python stack (and the other threads')
every 5 ms while the heartbeat is more than 30 ms late, and --explain prints the stacks seen most
often in each gap: what the GUI thread was doing, or which thread held the GIL.

Before the rounds an untimed headless sweep warms the machine up (file cache, the first fork server):
the first sweep of a process is slower, and it must not count against whichever side goes first.
Each round's throughputs are printed as it ends. `--no-probed` runs rounds of window and headless
sweeps only (which goes first alternates), so more pairs fit in the same time for the throughput verdict.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEARTBEAT_MS = 10
STALL_TARGET_MS = 50.0
THROUGHPUT_TARGET = 0.95
DEFAULT_SPEC = "preset=mnist-cnn,samples=4096,val_samples=512,epochs=6,batch_sizes=32 128 512,device=cpu"


def parse_spec(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(","))


def throughputs(path: Path) -> dict[int, float]:
    from batchlab.core.runfile.reader import read_run_file

    return {r.batch_size: r.samples_per_s for r in read_run_file(path).runs if r.status == "ok"}


def parent_cpu_seconds() -> float:
    """User + system CPU time of this (parent) process so far, all threads, children excluded."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def headless(values: dict[str, str], out: Path) -> float:
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import run_sweep

    t0 = time.monotonic()
    status = run_sweep(build_spec(values), out)
    if status != "complete":
        raise SystemExit(f"headless sweep ended {status}")
    return time.monotonic() - t0


def schedstat() -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting for one) of the calling thread; None where unsupported."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            on_cpu, waiting, _slices = f.read().split()
        return int(on_cpu), int(waiting)
    except (OSError, ValueError):
        return None


def wakeups() -> int | None:
    """Times the calling thread went to sleep and was woken (voluntary context switches; Linux), or None."""
    try:
        text = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return None


def with_window(
    values: dict[str, str],
    out: Path,
    settings_dir: Path,
    beats: list | None = None,
    ticks: list | None = None,
    probe: bool = True,
    stats: dict | None = None,
    stacks: list | None = None,
) -> tuple[float, list[float]]:
    """Run the sweep from the window; returns (seconds, heartbeat gaps in ms).

    probe=False runs it without the heartbeat (which wakes the GUI thread 100 times a second and so
    costs training some throughput itself). beats, if given, collects (time, schedstat) at each
    heartbeat, ticks (start, end) of each refresh. stats, if given, gets "gui_cpu" (CPU seconds the
    GUI thread used during the sweep), "redraws" (plot id -> (time, run index, its step rows drawn)
    of each redraw) and "first_steps" (run index -> when its first steps event reached the window).
    """
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.main_window import MainWindow
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    if ticks is not None and not hasattr(MainWindow.refresh, "timed"):
        original = MainWindow.refresh

        def timed_refresh(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                self._bench_ticks.append((t0, time.perf_counter()))

        timed_refresh.timed = True
        MainWindow.refresh = timed_refresh

    if not hasattr(LivePlots.update_plot, "timed"):
        update_plot = LivePlots.update_plot

        def timed_update(self, plot_id):
            changed = update_plot(self, plot_id)
            data = self.sources.get("main")
            if changed and data is not None:
                running = [r for r in data.ordered_runs() if r.status == "running"]
                run = running[0].index if running else -1
                rows = self._snapshot.get(("main", run), (0, 0))[0]
                self._bench_redraws.setdefault(plot_id, []).append((time.monotonic(), run, rows))
            return changed

        timed_update.timed = True
        LivePlots.update_plot = timed_update

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    window = MainWindow(QSettings(str(settings_dir / "settings.ini"), QSettings.Format.IniFormat))
    window._bench_ticks = ticks if ticks is not None else []
    window.live._bench_redraws = {}
    first_steps: dict[int, float] = {}
    on_events = window._on_events

    arrivals: list[tuple[float, int, int]] = []  # (time, run, its step rows then) as steps reach the window

    def noted_events(batch):
        on_events(batch)
        now = time.monotonic()
        for event in batch:
            if event.get("type") == "steps":
                first_steps.setdefault(event["run"], now)
                arrivals.append((now, event["run"], len(window.data.runs[event["run"]].steps)))

    window.show()
    window.setup.set_values(values)
    window.setup.out.setText(str(out))
    gaps: list[float] = []
    last = [time.perf_counter()]

    def beat() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000)
        last[0] = now
        if beats is not None:
            beats.append((now, schedstat()))

    heartbeat = QTimer()
    heartbeat.setTimerType(heartbeat.timerType().PreciseTimer)
    heartbeat.setInterval(HEARTBEAT_MS)
    heartbeat.timeout.connect(beat)
    for _ in range(20):
        app.processEvents()
    t0 = time.monotonic()
    if not window.start_sweep():
        raise SystemExit(f"the window refused the spec: {window.setup.errors}")
    window.worker.events.disconnect(window._on_events)
    window.worker.events.connect(noted_events)
    last[0] = time.perf_counter()
    if beats is not None:
        beats.append((last[0], schedstat()))
    if probe:
        heartbeat.start()
    stop_sampling = threading.Event()
    if stacks is not None:
        sampler = threading.Thread(
            target=sample_late_stacks, args=(last, threading.get_ident(), stacks, stop_sampling), daemon=True
        )
        sampler.start()

    # The loop ends once the window has handled the worker's end. Not a 50 ms poll: until 2026-12-01 it woke
    # the GUI thread 20 times a second in every window sweep, a cost the real window does not have and that
    # this bench counted against it. The worker's `finished` asks at once; a 1 s poll catches a thread that
    # still read as running then.
    def end_if_done() -> None:
        if not window.running:
            heartbeat.stop()  # the sweep has ended: Qt's and pyqtgraph's teardown on quit is not a stall a user sees
            app.quit()

    window.worker.finished.connect(lambda: QTimer.singleShot(0, end_if_done))
    done = QTimer()
    done.setInterval(1000)
    done.timeout.connect(end_if_done)
    done.start()
    cpu0, woke0 = time.thread_time(), wakeups()
    app.exec()
    stop_sampling.set()
    elapsed = time.monotonic() - t0
    if stats is not None:
        stats["gui_cpu"] = time.thread_time() - cpu0
        woke = wakeups()
        stats["wakeups"] = (woke - woke0) if woke is not None and woke0 is not None else None
        stats["redraws"] = window.live._bench_redraws
        stats["first_steps"] = first_steps
        stats["arrivals"] = arrivals
    heartbeat.stop()
    done.stop()
    if window.worker.status != "complete":
        raise SystemExit(f"window sweep ended {window.worker.status}")
    window.close()
    return elapsed, gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"comma-separated field=value (default {DEFAULT_SPEC})")
    parser.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="rounds of window, headless, probed window (or two); order rotating (default 2)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="noise floor: run headless against headless (the 'window' column is a second headless sweep)",
    )
    parser.add_argument(
        "--niceness", type=int, help="nice value above the window's for its training children (default: the window's)"
    )
    parser.add_argument(
        "--frame-s",
        type=float,
        help="the window's frame period in seconds (default: gui.refresh.DEFAULT_POLICY's frame_s, 0.8 s since "
        "2026-12-02, 0.5 s before)",
    )
    parser.add_argument(
        "--no-probed",
        action="store_true",
        help="throughput only: rounds of window and headless sweeps (no heartbeat, no gaps), so more pairs fit",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the untimed headless sweep before the rounds (the first sweep of a process pays for cold caches)",
    )
    parser.add_argument("--explain", type=int, default=0, metavar="N", help="break down the N longest gaps")
    parser.add_argument("--stacks", action="store_true", help="with --explain: the GUI thread's stacks in each gap")
    args = parser.parse_args(argv)
    if args.frame_s is not None:
        from dataclasses import replace

        import batchlab.gui.refresh

        batchlab.gui.refresh.DEFAULT_POLICY = replace(batchlab.gui.refresh.DEFAULT_POLICY, frame_s=args.frame_s)
    if args.niceness is not None:
        import batchlab.gui.worker

        batchlab.gui.worker.TRAINING_NICENESS = args.niceness
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    values = parse_spec(args.spec)
    modes = ("window", "headless") if (args.control or args.no_probed) else ("window", "headless", "probed")
    gaps: list[float] = []
    times: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    tps: dict[str, dict[int, list[float]]] = {m: {} for m in modes}
    paired: dict[str, dict[int, list[float]]] = {"window": {}, "probed": {}}  # X/headless within a round
    worst_gaps: list[tuple] = []  # (gap ms, on-CPU, queued, start, end, sweep start)
    stacks: list[tuple[float, str]] = []  # (time, stack text) sampled while the heartbeat was late (--stacks)
    ticks: list[tuple[float, float]] = []
    gui_cpu: dict[str, list[float]] = {m: [] for m in modes if m != "headless"}  # GUI-thread share of a core
    gui_wakeups: dict[str, list[float]] = {m: [] for m in modes if m != "headless"}  # GUI thread's per second
    redraws: dict[str, list[float]] = {}  # plot id -> seconds between its redraws while a run's steps arrived
    first_points: list[float] = []  # seconds from a run's first steps reaching the window to them on screen
    lateness: list[float] = []  # seconds from step rows reaching the window to the loss plot showing them
    queued: list[tuple[float, float]] = []  # (ms queued for a CPU, s) of the GUI thread over each probed sweep
    with tempfile.TemporaryDirectory(prefix="batchlab-bench-") as tmp:
        tmp = Path(tmp)
        if not args.no_warmup:
            headless(values, tmp / "warmup.h5")  # cold file cache, first fork server, first imports: on no side
        for i in range(args.repeat):
            # headless in the middle, the window sweeps around it in alternating order, so warm-up and
            # machine drift favour neither side and each window sweep has a headless neighbour; with two
            # modes, which one goes first alternates
            order = [m for m in modes if m != "headless"]
            order = order if i % 2 == 0 else order[::-1]
            sequence = [order[0], "headless", *order[1:]]
            if len(modes) == 2 and i % 2 == 1:
                sequence = sequence[::-1]
            this: dict[str, dict[int, float]] = {}
            for mode in sequence:
                out = tmp / f"{mode}-{i}.h5"
                cpu0 = parent_cpu_seconds()
                if mode == "headless" or args.control:
                    seconds = headless(values, out)
                else:
                    beats: list = []
                    probed = mode == "probed"
                    stats: dict = {}
                    seconds, run_gaps = with_window(
                        values,
                        out,
                        tmp,
                        beats if (args.explain and probed) else None,
                        ticks,
                        probe=probed,
                        stats=stats,
                        stacks=stacks if (args.stacks and args.explain and probed) else None,
                    )
                    gaps += run_gaps
                    gui_cpu[mode].append(stats["gui_cpu"] / seconds)
                    if stats.get("wakeups") is not None:
                        gui_wakeups[mode].append(stats["wakeups"] / seconds)
                    for plot_id, when in stats["redraws"].items():
                        redraws.setdefault(plot_id, []).extend(
                            b[0] - a[0]
                            for a, b in zip(when, when[1:], strict=False)
                            if a[1] == b[1] >= 0 and a[2] > 0 and b[2] > a[2]  # one run, its steps growing
                        )
                    shown_steps = stats["redraws"].get("loss_step", [])
                    for arrived, run, rows in stats["arrivals"]:
                        later = [t for t, r, n in shown_steps if r == run and n >= rows and t >= arrived]
                        if later:
                            lateness.append(later[0] - arrived)
                    for run, arrived in stats["first_steps"].items():
                        shown = [t for t, r, rows in stats["redraws"].get("loss_step", []) if r == run and rows]
                        if shown:
                            first_points.append(shown[0] - arrived)
                    explained = explain_gaps(beats)
                    worst_gaps = sorted(worst_gaps + explained, reverse=True)[: args.explain]
                    if explained:
                        queued.append((sum(g[2] for g in explained), explained[-1][4] - explained[0][3]))
                times[mode].append(seconds)
                cpu[mode].append(parent_cpu_seconds() - cpu0)
                this[mode] = throughputs(out)
                for batch, value in this[mode].items():
                    tps[mode].setdefault(batch, []).append(value)
            print(
                f"round {i + 1}: "
                + "; ".join(
                    f"{mode} " + " / ".join(f"{v:,.0f}" for _b, v in sorted(this[mode].items())) for mode in sequence
                )
                + " samples/s",
                flush=True,
            )
            for mode in paired:
                for batch, h in this["headless"].items():
                    if batch in this.get(mode, {}):
                        paired[mode].setdefault(batch, []).append(this[mode][batch] / h)
    platform = os.environ.get("QT_QPA_PLATFORM") or "xcb"
    print(f"spec: {args.spec}   platform: {platform}   {args.repeat} rounds of {', '.join(modes)} sweeps")
    if gaps:
        worst, p99 = max(gaps), sorted(gaps)[int(0.99 * (len(gaps) - 1))]
        print(
            f"GUI thread during the probed sweeps: {len(gaps)} heartbeats of {HEARTBEAT_MS} ms; longest gap "
            f"{worst:.1f} ms (no stall can be longer), p99 gap {p99:.1f} ms, median {statistics.median(gaps):.1f} ms "
            f"(target: stalls < {STALL_TARGET_MS:.0f} ms: {'OK' if worst < STALL_TARGET_MS else 'MISSED'})"
        )
    elif args.control:
        print("control run: both columns are headless sweeps; their ratios show the noise floor")
    else:
        print("throughput only (--no-probed): no heartbeat, no gaps measured")
    if queued:
        print(
            "GUI thread queued for a CPU (runnable, not running; schedstat) during the probed sweeps: "
            f"{sum(q for q, _s in queued) / sum(s for _q, s in queued):.1f} ms a second"
        )
    for mode in modes:
        t, c = statistics.median(times[mode]), statistics.median(cpu[mode])
        print(f"{mode:>8}: sweep wall time {t:.1f} s, parent-process CPU {c:.1f} s ({100 * c / t:.0f}% of a core)")
    for mode, shares in gui_cpu.items():
        if shares:
            print(
                f"{mode:>8}: GUI thread used {100 * statistics.median(shares):.1f}% of a core during the sweep (median)"
            )
    for mode, rates in gui_wakeups.items():
        if rates:
            print(
                f"{mode:>8}: GUI thread woke {statistics.median(rates):.1f} times a second during the sweep "
                "(voluntary context switches, median; each takes a core from training for a moment)"
            )
    for plot_id, waits in redraws.items():
        if waits:
            waits = sorted(waits)
            print(
                f"{plot_id:>12}: redrawn every {statistics.median(waits):.2f} s while its run's steps arrived "
                f"(median; 90th percentile {waits[int(0.9 * (len(waits) - 1))]:.2f} s, longest {waits[-1]:.2f} s; "
                f"target <= 1 s)"
            )
    if lateness:
        late = sorted(lateness)
        print(
            f"step rows on the loss plot {statistics.median(late):.2f} s after reaching the window (median; "
            f"99th percentile {late[int(0.99 * (len(late) - 1))]:.2f} s, longest {late[-1]:.2f} s, "
            f"{sum(x > 1.0 for x in late)} of {len(late)} over 1 s)"
        )
    if first_points:
        print(
            f"first points of a run on screen {statistics.median(first_points):.2f} s (median), at most "
            f"{max(first_points):.2f} s after its first steps reached the window ({len(first_points)} runs)"
        )
    header = f"{'batch':>6} {'headless':>9} {'window':>9} {'window/headless paired: median (quartiles)':>44}"
    if "probed" in modes:
        header += f" {'probed':>9} {'probed/headless':>16}"
    print(header + "   (samples/s, medians)")
    ratios = []
    for batch in sorted(tps["headless"]):
        med = {m: statistics.median(tps[m].get(batch, [float("nan")])) for m in modes}
        pairs = sorted(paired["window"].get(batch, [float("nan")]))
        ratios.append(statistics.median(pairs))
        q1, q3 = statistics.quantiles(pairs, n=4)[0::2] if len(pairs) > 1 else (pairs[0], pairs[0])
        line = f"{batch:>6} {med['headless']:>9,.0f} {med['window']:>9,.0f} {ratios[-1]:>25.3f} ({q1:.3f}-{q3:.3f})"
        if "probed" in modes:
            probed = statistics.median(paired["probed"].get(batch, [float("nan")]))
            line += f" {med['probed']:>9,.0f} {probed:>16.3f}"
        print(line)
    pooled = sorted(r for pairs in paired["window"].values() for r in pairs)
    if len(pooled) > 1:
        q1, q3 = statistics.quantiles(pooled, n=4)[0::2]
        print(
            f"all {len(pooled)} window/headless pairs: median {statistics.median(pooled):.3f}, "
            f"mean {statistics.fmean(pooled):.3f}, quartiles {q1:.3f}-{q3:.3f}"
        )
    verdict = "OK" if min(ratios) >= THROUGHPUT_TARGET else "MISSED"
    print(
        f"window/headless, median of paired ratios: mean over batch sizes {statistics.fmean(ratios):.3f}, "
        f"min {min(ratios):.3f} (target >= {THROUGHPUT_TARGET}: {verdict})"
    )
    for gap, on_cpu, queued, start, end, sweep_start in worst_gaps:
        inside = [(b - a) * 1000 for a, b in ticks if a < end and b > start]
        print(
            f"gap {gap:5.1f} ms, {start - sweep_start:5.1f} s into the sweep: GUI thread ran {on_cpu:5.1f} ms, "
            f"queued for a CPU {queued:5.1f} ms, "
            f"asleep (the {HEARTBEAT_MS} ms interval, GIL) {gap - on_cpu - queued:5.1f} ms; refresh ticks inside: "
            + (", ".join(f"{t:.1f} ms" for t in inside) or "none")
        )
        seen = Counter(text for when, text in stacks if start <= when <= end)
        for text, n in seen.most_common(2):
            print(f"  stack sampled {n}x in this gap:\n" + text)
    return 0


def sample_late_stacks(last: list, gui_ident: int, out: list, stop: threading.Event) -> None:
    """While the GUI thread's heartbeat (last[0], perf_counter) is over 30 ms late, note every 5 ms its
    Python stack and the other threads' (which one holds the GIL shows) as (time, text) in `out`."""
    me = threading.get_ident()
    while not stop.wait(0.005):
        if (time.perf_counter() - last[0]) * 1000 <= 30:
            continue
        frames = sys._current_frames()
        parts = [_stack_text(frames.get(gui_ident), 10)]
        parts += ["    [other thread]\n" + _stack_text(f, 4) for i, f in frames.items() if i not in (gui_ident, me)]
        out.append((time.perf_counter(), "".join(parts)))


def _stack_text(frame, depth: int) -> str:
    if frame is None:
        return ""
    lines = traceback.format_stack(frame)[-depth:]
    return "".join("    " + line.splitlines()[0].strip().replace(str(ROOT) + "/", "") + "\n" for line in lines)


def explain_gaps(beats: list) -> list[tuple[float, float, float, float, float]]:
    """(gap ms, ms on a CPU, ms queued, start, end, sweep start) for each gap with schedstat readings."""
    out = []
    for (t0, s0), (t1, s1) in zip(beats, beats[1:], strict=False):
        if s0 is not None and s1 is not None:
            out.append(((t1 - t0) * 1000, (s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6, t0, t1, beats[0][0]))
    return out


if __name__ == "__main__":
    sys.exit(main())
