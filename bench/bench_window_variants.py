"""Training throughput of window variants against headless, in interleaved rounds (one batch size by default).

    .venv/bin/python bench/bench_window_variants.py H,W8,WS8 --rounds 6          # ~9 min
    .venv/bin/python bench/bench_window_variants.py H,Hn5,W8,W8n0 --rounds 6

A variant is a code: `H` headless (as the CLI: children at nice 0; the reference every ratio is taken
against), `Hn<k>` headless with the children at nice k, `W<f>` the window with a frame every f/10 s and
its Live tab showing, `WS<f>` the same with the Summary tab showing (the live plots are not drawn), and
`n<k>` after a window code its children at nice k (default: the window's own, gui.worker.TRAINING_NICENESS).
Each round runs every variant once, the order rotating by one each round, after one untimed headless
warm-up sweep; the window sweeps are bench_gui_responsiveness.py's (no heartbeat). Printed per variant
and batch size: the median of its per-round ratios to `H` (quartiles), by the run files' steady-state
samples/s and by their median step time (which a few long steps do not move), and the GUI thread's share
of a core. A single pair spreads by +-10% on the shared 2-core VM: use six rounds or more.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_SPEC = "preset=mnist-cnn,samples=4096,val_samples=512,epochs=4,batch_sizes=32,device=cpu"
CODE = re.compile(r"H|Hn(\d+)|W(S?)(\d+)(?:n(\d+))?")


def _responsiveness_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_gui_responsiveness", ROOT / "bench" / "bench_gui_responsiveness.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", help="comma-separated codes, H first (e.g. H,W8,WS8)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of every variant (default 6)")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"comma-separated field=value (default {DEFAULT_SPEC})")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    bad = [v for v in variants if not CODE.fullmatch(v)]
    if bad or variants[0] != "H" or args.rounds < 1:
        parser.error(f"variants must start with H and be H, Hn<k>, W<f>, WS<f>, W<f>n<k>; got {args.variants}")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    bench = _responsiveness_bench()
    import batchlab.gui.refresh as refresh
    import batchlab.gui.worker as worker
    from batchlab.core.runfile.reader import read_run_file
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import SweepRunner, run_sweep
    from batchlab.gui.main_window import MainWindow

    values = bench.parse_spec(args.spec)
    policy, niceness, start_sweep = refresh.DEFAULT_POLICY, worker.TRAINING_NICENESS, MainWindow.start_sweep
    rate: dict[str, list[dict[int, float]]] = {v: [] for v in variants}  # steady samples/s per round
    by_median: dict[str, list[dict[int, float]]] = {v: [] for v in variants}  # batch / median step time
    gui: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="batchlab-variants-") as tmp:
        tmp = Path(tmp)
        bench.headless(values, tmp / "warmup.h5")
        for i in range(args.rounds):
            order = variants[i % len(variants) :] + variants[: i % len(variants)]
            line = []
            for code in order:
                out = tmp / f"{code}-{i}.h5"
                match = CODE.fullmatch(code)
                if code == "H":
                    bench.headless(values, out)
                elif match.group(1) is not None:
                    spec = build_spec(values)
                    run_sweep(spec, out, runner=SweepRunner(spec, niceness=int(match.group(1))))
                else:
                    hidden = match.group(2) == "S"
                    refresh.DEFAULT_POLICY = replace(policy, frame_s=int(match.group(3)) / 10)
                    worker.TRAINING_NICENESS = int(match.group(4)) if match.group(4) else niceness

                    def start(window, *a, _hidden=hidden, **k):
                        if _hidden:
                            window.views.setCurrentIndex(window.views.indexOf(window.summary_splitter))
                        return start_sweep(window, *a, **k)

                    MainWindow.start_sweep = start
                    stats: dict = {}
                    try:
                        seconds, _gaps = bench.with_window(values, out, tmp, None, [], probe=False, stats=stats)
                    finally:
                        MainWindow.start_sweep = start_sweep
                        refresh.DEFAULT_POLICY, worker.TRAINING_NICENESS = policy, niceness
                    gui[code].append(stats["gui_cpu"] / seconds)
                runs = [r for r in read_run_file(out).runs if r.status == "ok"]
                rate[code].append({r.batch_size: r.samples_per_s for r in runs})
                by_median[code].append({r.batch_size: r.batch_size / r.figures.step_time for r in runs})
                line.append(f"{code} " + " / ".join(f"{v:,.0f}" for _b, v in sorted(rate[code][-1].items())))
            print(f"round {i + 1}: " + "; ".join(line) + " samples/s", flush=True)
    print(f"spec: {args.spec}; {args.rounds} rounds; ratios to H, median of the rounds (quartiles)")
    for code in variants[1:]:
        share = f", GUI thread {100 * statistics.median(gui[code]):.1f}% of a core" if gui[code] else ""
        for batch in sorted(rate["H"][0]):
            ratios = [r[batch] / h[batch] for r, h in zip(rate[code], rate["H"], strict=True)]
            medians = [r[batch] / h[batch] for r, h in zip(by_median[code], by_median["H"], strict=True)]
            (a, b), (c, d) = _quartiles(ratios), _quartiles(medians)
            print(
                f"{code:>6} batch {batch:>5}: samples/s {statistics.median(ratios):.3f} ({a:.3f}-{b:.3f}); "
                f"median step time {statistics.median(medians):.3f} ({c:.3f}-{d:.3f}){share}"
            )
    return 0


if __name__ == "__main__":  # the training children are spawned: they must not run this again
    sys.exit(main())
