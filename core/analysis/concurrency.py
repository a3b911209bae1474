"""Runs that trained at the same time as others (--parallel; core/sweep/parallel_launcher.py): the warning
each such run carries and the one line that says so, in `report`, `sweep`'s closing table and the window's
explanation (one sentence, one place)."""

from __future__ import annotations


def shared_cores_note(runs_at_once: int) -> str:
    """The warning every run carries that trained beside others on shared CPU cores (`report` quotes it)."""
    others = runs_at_once - 1
    return (
        f"trained at the same time as up to {others} other run{'s' if others != 1 else ''} on shared CPU cores: "
        "its times (step time, throughput, time to target) mean little"
    )


def runs_at_once_line(sweep) -> str:
    """Runs that trained at the same time as others (--parallel, core/sweep/parallel_launcher.py), in one line
    that quotes the warning each run on shared CPU cores carries, so nobody reads their times as a run's alone;
    "" when every run trained alone."""
    runs = sweep.ordered_runs()
    placed = [r for r in runs if r.attrs.get("runs_at_once") is not None and int(r.attrs["runs_at_once"]) > 1]
    if not placed:
        return ""
    most = max(int(r.attrs["runs_at_once"]) for r in placed)
    shared = _shared(sweep)
    if shared:
        return (
            f"Runs at once: {len(shared)} of {len(runs)} runs trained up to {most} at a time on shared CPU cores "
            f"(--parallel), and each carries the warning that it {shared_cores_note(most)}; compare their "
            "times only with runs trained the same way"
        )
    by_gpu: dict[str, list[int]] = {}
    for r in placed:
        by_gpu.setdefault(str(r.attrs.get("visible_gpu", "?")), []).append(r.index)
    where = "; ".join(f"GPU {gpu}: runs {', '.join(map(str, indices))}" for gpu, indices in by_gpu.items())
    return (
        f"Runs at once: {len(placed)} of {len(runs)} runs trained up to {most} at a time, one per GPU ({where}); "
        "no two shared a GPU, but they shared the host's CPU cores, memory and disk, so a step time that waits "
        "for its input may be longer than the run's alone"
    )


def _shared(sweep) -> list:
    """The runs that trained beside others on shared CPU cores (--parallel N on a CPU)."""
    return [
        r
        for r in sweep.ordered_runs()
        if int(r.attrs.get("runs_at_once", 1) or 1) > 1 and int(r.attrs.get("shared_cores", 0) or 0)
    ]


def shared_cores_caveat(sweep, surface: str = "cli") -> str:
    """Said first in the recommendation when its times come from runs trained beside others on shared CPU cores
    (each carries the warning that its times mean little): "" otherwise. `surface`: "cli" or "window"."""
    shared = _shared(sweep)
    if not shared:
        return ""
    most = max(int(r.attrs["runs_at_once"]) for r in shared)
    if surface == "window":
        how = f"Runs at once {most}"
        again = "set Runs at once to 1 in the setup panel's Run section and run the candidates again"
    else:
        how, again = f"--parallel {most}", "run the candidates again with --parallel 1"
    return (
        f"The times below come from {len(shared)} runs that trained up to {most} at a time on shared CPU cores "
        f"({how}), so a choice by time may not hold for a run alone: {again} before relying on it; the losses "
        "and steps to target do not depend on it."
    )


def explain_concurrency(sweep) -> list[str]:
    """The runs-at-once line as an explanation paragraph (none when every run trained alone)."""
    line = runs_at_once_line(sweep)
    return [line] if line else []
