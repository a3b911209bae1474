"""GUI-thread stalls during a live sweep, and training throughput with the window open vs headless.

    .venv/bin/python bench/bench_gui_responsiveness.py            # offscreen unless a display is set
    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python bench/bench_gui_responsiveness.py

Runs the same spec twice on the real runner: once headless (core.runner.run_sweep, as the CLI
does) and once from the window, Live tab showing, plotting as events arrive. During the window's
sweep a 10 ms QTimer heartbeat records every gap on the GUI thread; the longest gap minus the
interval is the worst stall (target < 50 ms). Throughput is each run's steady-state samples/s as
the run file records it (targets: window / headless >= 0.95 per batch size).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
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
    from core.report import read_run_file

    return {r.batch_size: r.samples_per_s for r in read_run_file(path).runs if r.status == "ok"}


def parent_cpu_seconds() -> float:
    """User + system CPU time of this (parent) process so far, all threads, children excluded."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def headless(values: dict[str, str], out: Path) -> float:
    from core.runner import run_sweep
    from core.spec import build_spec

    t0 = time.monotonic()
    status = run_sweep(build_spec(values), out)
    if status != "complete":
        raise SystemExit(f"headless sweep ended {status}")
    return time.monotonic() - t0


def with_window(values: dict[str, str], out: Path, settings_dir: Path) -> tuple[float, list[float]]:
    """Run the sweep from the window; returns (seconds, heartbeat gaps in ms)."""
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    window = MainWindow(QSettings(str(settings_dir / "settings.ini"), QSettings.Format.IniFormat))
    window.show()
    window.setup.set_values(values)
    window.setup.out.setText(str(out))
    gaps: list[float] = []
    last = [time.perf_counter()]

    def beat() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000)
        last[0] = now

    heartbeat = QTimer()
    heartbeat.setTimerType(heartbeat.timerType().PreciseTimer)
    heartbeat.setInterval(HEARTBEAT_MS)
    heartbeat.timeout.connect(beat)
    for _ in range(20):
        app.processEvents()
    t0 = time.monotonic()
    if not window.start_sweep():
        raise SystemExit(f"the window refused the spec: {window.setup.errors}")
    last[0] = time.perf_counter()
    heartbeat.start()
    done = QTimer()
    done.setInterval(50)
    done.timeout.connect(lambda: None if window.running else app.quit())
    done.start()
    app.exec()
    elapsed = time.monotonic() - t0
    heartbeat.stop()
    done.stop()
    if window.worker.status != "complete":
        raise SystemExit(f"window sweep ended {window.worker.status}")
    window.close()
    return elapsed, gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"comma-separated field=value (default {DEFAULT_SPEC})")
    parser.add_argument("--repeat", type=int, default=2, help="pairs of sweeps, order alternating (default 2)")
    parser.add_argument(
        "--control",
        action="store_true",
        help="noise floor: run headless against headless (the 'window' column is a second headless sweep)",
    )
    args = parser.parse_args(argv)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    values = parse_spec(args.spec)
    gaps: list[float] = []
    times = {"window": [], "headless": []}
    cpu = {"window": [], "headless": []}
    tps: dict[str, dict[int, list[float]]] = {"window": {}, "headless": {}}
    with tempfile.TemporaryDirectory(prefix="batchlab-bench-") as tmp:
        tmp = Path(tmp)
        for i in range(args.repeat):
            # alternate the order (W H, H W, ...) so warm-up and machine drift do not favour one side
            for mode in ("window", "headless") if i % 2 == 0 else ("headless", "window"):
                out = tmp / f"{mode}-{i}.h5"
                cpu0 = parent_cpu_seconds()
                if mode == "window" and not args.control:
                    seconds, run_gaps = with_window(values, out, tmp)
                    gaps += run_gaps
                else:
                    seconds = headless(values, out)
                times[mode].append(seconds)
                cpu[mode].append(parent_cpu_seconds() - cpu0)
                for batch, value in throughputs(out).items():
                    tps[mode].setdefault(batch, []).append(value)
    window_tp = {b: statistics.median(v) for b, v in tps["window"].items()}
    headless_tp = {b: statistics.median(v) for b, v in tps["headless"].items()}
    t_window, t_headless = statistics.median(times["window"]), statistics.median(times["headless"])
    stalls = sorted(max(0.0, g - HEARTBEAT_MS) for g in gaps)
    worst = stalls[-1] if stalls else float("nan")
    p99 = stalls[int(0.99 * (len(stalls) - 1))] if stalls else float("nan")
    platform = os.environ.get("QT_QPA_PLATFORM") or "xcb"
    print(f"spec: {args.spec}   platform: {platform}   {args.repeat} sweeps each way, medians")
    if gaps:
        print(f"GUI thread during the sweep: {len(gaps)} heartbeats of {HEARTBEAT_MS} ms; worst stall {worst:.1f} ms, "
              f"p99 {p99:.1f} ms, median gap {statistics.median(gaps):.1f} ms  (target < {STALL_TARGET_MS:.0f} ms: "
              f"{'OK' if worst < STALL_TARGET_MS else 'MISSED'})")  # fmt: skip
    else:
        print("control run: both columns are headless sweeps; their ratios show the noise floor")
    print(f"sweep wall time (median): window {t_window:.1f} s, headless {t_headless:.1f} s")
    c_window, c_headless = statistics.median(cpu["window"]), statistics.median(cpu["headless"])
    print(
        f"parent-process CPU per sweep (median): window {c_window:.1f} s ({100 * c_window / t_window:.0f}% of a core), "
        f"headless {c_headless:.1f} s ({100 * c_headless / t_headless:.0f}% of a core)"
    )
    print(f"{'batch':>6} {'headless samples/s':>19} {'window samples/s':>17} {'window/headless':>16}")
    ratios = []
    for batch in sorted(headless_tp):
        h, w = headless_tp[batch], window_tp.get(batch, float("nan"))
        ratios.append(w / h)
        print(f"{batch:>6} {h:>19,.0f} {w:>17,.0f} {w / h:>16.3f}")
    overall = statistics.fmean(ratios)
    verdict = "OK" if min(ratios) >= THROUGHPUT_TARGET else "MISSED"
    print(f"mean ratio {overall:.3f}, min {min(ratios):.3f} (target >= {THROUGHPUT_TARGET}: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
