"""What flushing step rows every 2 s costs the run file and the writer (issue 29 item 14).

The writer used to flush only at epoch ends and status changes; it now also flushes while step rows arrive, at
most every STEP_ROWS_FLUSH_SECONDS, so a reader following the file sees them and a kill of the sweep's process
loses at most that much. HDF5 keeps no journal, so the writer never reuses freed space (runfile/writer.py): every
flush leaves the rewritten last chunks behind as dead space. This bench measures that and the writer's CPU time.

It replays a long epoch's step events through RunFileWriter with a simulated clock (one event every 0.25 s of
simulated time, as a training child streams them), once flushing only at the epoch's end and once every 2 s,
interleaved over --rounds, and prints the file sizes and the writer's CPU seconds side by side with their ratios.

Usage (from the repository root):
    .venv/bin/python bench/bench_step_flush.py --hours 1 --steps-per-event 40 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.gui.synthetic: the run's first events

from batchlab.core.events import STEP_FLUSH_SECONDS, make_event  # noqa: E402
from batchlab.core.runfile.writer import STEP_ROWS_FLUSH_SECONDS, RunFileWriter  # noqa: E402

from tests.gui.synthetic import sweep_events  # noqa: E402


def _replay(path: Path, flush_s: float, events: int, per_event: int) -> tuple[int, float]:
    """(file bytes, writer CPU seconds) for one long epoch of `events` step events of `per_event` rows."""
    now = [0.0]
    writer = RunFileWriter(path, overwrite=True, step_flush_s=flush_s, clock=lambda: now[0])
    head = list(sweep_events(batch_sizes=(4,), epochs=1))
    for event in head:
        if event["type"] == "steps":
            break
        writer.handle(event)
    rows = {
        "step": list(range(per_event)),
        "epoch": [0] * per_event,
        "loss": [0.5] * per_event,
        "batch_size": [4] * per_event,
        "step_time": [0.006] * per_event,
        "fetch_time": [0.0002] * per_event,
        "input_wait": [0.0] * per_event,
        "traced": [0] * per_event,
        "wall_time": [0.0] * per_event,
    }
    cpu0 = time.process_time()
    for i in range(events):
        now[0] += STEP_FLUSH_SECONDS
        rows["step"] = list(range(i * per_event, (i + 1) * per_event))
        rows["wall_time"] = [now[0]] * per_event
        writer.handle(make_event("steps", run=0, **rows))
    writer.flush()  # the epoch's end
    cpu = time.process_time() - cpu0
    writer.close()
    return path.stat().st_size, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0, help="simulated length of the epoch")
    parser.add_argument("--steps-per-event", type=int, default=40, help="step rows per event (0.25 s of steps)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    events = int(args.hours * 3600 / STEP_FLUSH_SECONDS)
    print(f"one epoch of {events:,} step events x {args.steps_per_event} rows ({args.hours:g} h simulated)")
    sizes, cpus = {"epoch": [], "2 s": []}, {"epoch": [], "2 s": []}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            order = [("epoch", float("inf")), ("2 s", STEP_ROWS_FLUSH_SECONDS)]
            for name, flush_s in order if r % 2 == 0 else order[::-1]:
                size, cpu = _replay(Path(folder) / f"{r}-{name[0]}.h5", flush_s, events, args.steps_per_event)
                sizes[name].append(size)
                cpus[name].append(cpu)
                print(f"round {r + 1}  flush every {name:5}  {size / 2**20:8.2f} MiB  writer CPU {cpu:6.2f} s")
    size_e, size_2 = statistics.median(sizes["epoch"]), statistics.median(sizes["2 s"])
    cpu_e, cpu_2 = statistics.median(cpus["epoch"]), statistics.median(cpus["2 s"])
    print(
        f"median file size: epoch-end only {size_e / 2**20:.2f} MiB, every 2 s {size_2 / 2**20:.2f} MiB "
        f"(ratio {size_2 / size_e:.2f})"
    )
    print(
        f"median writer CPU: epoch-end only {cpu_e:.2f} s, every 2 s {cpu_2:.2f} s (ratio {cpu_2 / cpu_e:.2f}; "
        f"{(cpu_2 - cpu_e) / (args.hours * 3600) * 100:.3f}% of a core over the simulated time)"
    )


if __name__ == "__main__":
    main()
