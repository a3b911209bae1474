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
    shared = [r for r in placed if int(r.attrs.get("shared_cores", 0) or 0)]
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


def explain_concurrency(sweep) -> list[str]:
    """The runs-at-once line as an explanation paragraph (none when every run trained alone)."""
    line = runs_at_once_line(sweep)
    return [line] if line else []
