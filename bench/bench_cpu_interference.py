"""What competing CPU work costs training throughput: the calibration behind the window's CPU budget.

    .venv/bin/python bench/bench_cpu_interference.py                 # shares 0.15 and 0.30 of a core
    .venv/bin/python bench/bench_cpu_interference.py --repeat 4 --shares 0.1 0.2 0.4

On a small shared machine the window's effect on training (a few % of one core) is smaller than
the run-to-run noise of throughput (often +-10% per run), so bench_gui_responsiveness.py cannot
always resolve it directly. This script measures the effect of the same *kind* of work at sizes
the noise cannot hide: each round runs the spec headless as the CLI does, and then headless with
the training children at nice +5 (as the window starts them) while a burner process at this
process's priority (like the window's GUI thread) works in bursts of --burst-ms that add up to a
given share of one core: by default it repaints the window's own live plots, offscreen. Each
burner sweep is paired with the plain sweep of its round.

It prints, per share, the paired throughput ratios and k = (1 - ratio) / share: the fraction of
throughput lost per core-fraction taken. With k, the window's cost follows from the GUI thread's
CPU share, which bench_gui_responsiveness.py measures precisely: predicted ratio = 1 - k x share.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # core, gui and tests.gui.synthetic (the burner's sweep)
from bench_gui_responsiveness import DEFAULT_SPEC, THROUGHPUT_TARGET, parse_spec, throughputs  # noqa: E402

WINDOW_NICENESS = 5  # gui/worker.py TRAINING_NICENESS, without importing Qt here


def burn(share: float, burst_s: float, work: str, stop, used) -> None:
    """Work for burst_s of CPU, sleep so that the work is `share` of the time; report (cpu, wall).

    work="spin" is a bare loop; work="paint" repaints the window's own live plots (offscreen, a
    synthetic three-run sweep, the x range changing each time as it does while data arrives), so
    the burner touches memory and caches the way the window does.
    """
    step = _painter() if work == "paint" else (lambda: None)
    cpu0, wall0 = time.process_time(), time.monotonic()
    while not stop.is_set():
        t = time.thread_time()
        while time.thread_time() - t < burst_s:
            step()
        stop.wait((time.thread_time() - t) * (1.0 / share - 1.0))  # a repaint may overrun the burst
    used[0] = time.process_time() - cpu0
    used[1] = time.monotonic() - wall0


def _painter():
    """A function that repaints the next of the window's live plots after moving its x range."""
    import itertools
    import os

    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from bench_plot_repaint import make_window
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["batchlab-burner"])
    window = make_window(pyqtgraph_defaults=False)  # the window's own plots, a synthetic three-run sweep
    app.processEvents()
    plots = itertools.cycle(list(window.live.plots.values()))
    flip = itertools.cycle((0.0, 0.5))

    def step() -> None:
        widget = next(plots)
        view = widget.getPlotItem().getViewBox()
        (x0, x1), _ = view.viewRange()
        view.setXRange(x0, x1 + next(flip), padding=0)
        widget.viewport().repaint()
        app.processEvents()

    return step


def sweep(
    values: dict[str, str], out: Path, niceness: int = 0, share: float = 0.0, burst_s: float = 0.008, work="paint"
) -> float:
    """Run the sweep headless; with share > 0, beside a burner. Returns the burner's measured share of a core."""
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import SweepRunner, run_sweep

    spec = build_spec(values)
    ctx = multiprocessing.get_context("spawn")
    stop, used = ctx.Event(), ctx.Array("d", 2)
    burner = ctx.Process(target=burn, args=(share, burst_s, work, stop, used), daemon=True) if share > 0 else None
    if burner is not None:
        burner.start()
    try:
        status = run_sweep(spec, out, runner=SweepRunner(spec, niceness=niceness))
    finally:
        if burner is not None:
            stop.set()
            burner.join(10)
    if status != "complete":
        raise SystemExit(f"sweep ended {status}")
    return used[0] / used[1] if burner is not None and used[1] > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"comma-separated field=value (default {DEFAULT_SPEC})")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.15, 0.30], help="burner shares of one core")
    parser.add_argument("--burst-ms", type=float, default=8.0, help="length of each burst (default 8 ms: one repaint)")
    parser.add_argument(
        "--work", choices=("paint", "spin"), default="paint", help="what the burner does (default: the window's paints)"
    )
    parser.add_argument(
        "--gui-share",
        type=float,
        nargs="*",
        default=[0.03],
        help="GUI-thread shares to predict the window's ratio for (default 0.03, the window's budget)",
    )
    args = parser.parse_args(argv)
    if not all(0 < s < 1 for s in args.shares):
        parser.error("--shares must be between 0 and 1")
    values = parse_spec(args.spec)
    paired: dict[float, list[float]] = {s: [] for s in args.shares}
    measured: dict[float, list[float]] = {s: [] for s in args.shares}
    with tempfile.TemporaryDirectory(prefix="batchlab-interference-") as tmp:
        tmp = Path(tmp)
        for i in range(args.repeat):
            # the plain sweep first in even rounds, last in odd ones: drift favours neither side
            order = [0.0, *args.shares] if i % 2 == 0 else [*args.shares, 0.0]
            this: dict[float, dict[int, float]] = {}
            for share in order:
                out = tmp / f"{share}-{i}.h5"
                niceness = WINDOW_NICENESS if share > 0 else 0
                got = sweep(values, out, niceness, share, args.burst_ms / 1000, args.work)
                this[share] = throughputs(out)
                if share > 0:
                    measured[share].append(got)
                print(f"round {i + 1}: share {share:.2f} (measured {got:.3f}): {this[share]}", flush=True)
            for share in args.shares:
                for batch, base in this[0.0].items():
                    if batch in this[share]:
                        paired[share].append(this[share][batch] / base)
    print(
        f"spec: {args.spec}   {args.repeat} rounds; burner: {args.work}, bursts of {args.burst_ms:g} ms; "
        "training children at nice +5"
    )
    ks = []
    for share in args.shares:
        ratios = sorted(paired[share])
        real = statistics.fmean(measured[share])
        q1, q3 = statistics.quantiles(ratios, n=4)[0::2] if len(ratios) > 1 else (ratios[0], ratios[0])
        ratio = statistics.median(ratios)
        k = (1 - ratio) / real
        ks.append(k)
        print(
            f"burner at {real:.3f} of a core: throughput ratio {ratio:.3f} (median of {len(ratios)} pairs, "
            f"quartiles {q1:.3f}-{q3:.3f}); k = {k:.2f} of throughput lost per core-fraction taken"
        )
    k = max(ks)
    for share in args.gui_share:
        predicted = 1 - k * share
        print(
            f"a GUI thread using {share:.3f} of a core: predicted window/headless {predicted:.3f} with the larger k "
            f"(target >= {THROUGHPUT_TARGET}: {'OK' if predicted >= THROUGHPUT_TARGET else 'MISSED'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
