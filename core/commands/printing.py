"""What `batchlab report`, `sweep` and `profile` print after the progress bar: the runs table, the explanation,
the analysis, the lr-find table and a profile's prediction, each worded from core/ (one number, one place).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.text_width import terminal_columns, text_width


def print_table(path: Path) -> None:
    from batchlab.core.model import SweepData
    from batchlab.core.table import format_table, summary_rows, target_line

    sweep = SweepData.from_file(path)
    line = target_line(sweep.spec)
    if line:
        print(textwrap.fill(line, text_width(), subsequent_indent="  "))
    print_runs_at_once(sweep)
    rows = summary_rows(sweep)
    print(format_table(rows, width=terminal_columns()))
    print_batch_changes(sweep)
    print_seed_table(rows)
    print_explanation(sweep)
    print_analysis(sweep)
    print_metrics_table(rows)
    print_noise_scale(sweep)


def print_runs_at_once(sweep) -> None:
    from batchlab.core.analysis.concurrency import runs_at_once_line

    line = runs_at_once_line(sweep)
    if line:
        print(textwrap.fill(line, text_width(), subsequent_indent="  "))


def print_noise_scale(sweep) -> None:
    """The gradient noise scale of the runs that measured it (--noise-scale-every), if any."""
    from batchlab.core.analysis.noise_scale import noise_scale_report

    lines = noise_scale_report(sweep)
    if lines:
        print("\nGradient noise scale (McCandlish et al. 2018: with a rate tuned per batch size, Bcrit ~ B_simple):")
        print("\n".join(lines))


def print_batch_changes(sweep) -> None:
    """With a batch schedule: where each run's batch (and, for grow, its rate) changed (core.table)."""
    from batchlab.core.table import batch_schedule_lines

    for line in batch_schedule_lines(sweep):
        print(line)


def print_metrics_table(rows: list[dict]) -> None:
    """The model's compiled metrics at the end of each run (core.table.format_metrics_table), if any."""
    from batchlab.core.table import format_metrics_table

    text = format_metrics_table(rows)
    if text:
        print("\nThe model's metrics at the end of each run:")
        print(text)


def print_seed_table(rows: list[dict[str, Any]]) -> None:
    """With several seeds per batch size: every figure per batch size as mean [min-max] (core/aggregate.py)."""
    from batchlab.core.table import format_seed_table, seeds_line

    line = seeds_line(rows)
    if line:
        print()
        print(line)
        print(format_seed_table(rows))


def print_explanation(sweep, others=()) -> None:
    """Why the times and memory came out as they did (core/analysis/explain.py), one paragraph per point;
    `others`: sweeps at other replicas for the scaling lines."""
    import textwrap

    from batchlab.core.analysis.explain import explain_sweep
    from batchlab.core.sweep.peak import cached_peak

    peak = cached_peak(sweep.environment.get("device_description", ""))
    print()
    print("Why the times and memory came out this way:")
    for paragraph in explain_sweep(sweep, peak_flops=peak, others=others, concurrency=False):
        print(textwrap.fill(paragraph, text_width(), initial_indent="- ", subsequent_indent="  "))


def print_analysis(sweep, profile=None) -> None:
    """Steps and time to target, the critical batch, regimes and the recommendation (core/analysis/analyse.py);
    `profile`: a profile's prediction (predict.ProfilePrediction) the recommendation checks."""
    import textwrap

    from batchlab.core.analysis.advice import analysis_table
    from batchlab.core.analysis.analyse import analyse
    from batchlab.core.analysis.loss_level import format_loss_level

    analysis = analyse(sweep, profile)
    print()
    print("Which batch size, and why (docs/analysis.md):")
    if analysis.target and analysis.batches:
        print(analysis_table(analysis))
    level = format_loss_level(analysis.loss_level)
    if level:
        print(level)
    for paragraph in analysis.recommendation:
        print(textwrap.fill(paragraph, text_width(), initial_indent="- ", subsequent_indent="  "))


def print_range_table(path) -> None:
    from batchlab.core.lr_find import SKIP_FRACTION, STOP_FACTOR, format_range_table, range_rows
    from batchlab.core.runfile.reader import read_run_file

    print(format_range_table(range_rows(read_run_file(path))))
    print(
        f"suggested lr: steepest fall of the smoothed loss per unit of log(lr), first {SKIP_FRACTION:.0%} of the "
        f"points skipped; min/10: the rate of the lowest smoothed loss / 10; the test stops when the smoothed loss "
        f"exceeds {STOP_FACTOR:g}x its best. Use it in a sweep with --lr-from {path}"
    )


def print_profile(path) -> None:
    """A profile file's own prediction (nothing for other run files)."""
    from batchlab.core.analysis.predict import PROFILE_MODE, describe_prediction, predict_from_profile
    from batchlab.core.model import SweepData
    from batchlab.core.runfile.reader import read_root_attrs

    if read_root_attrs(path).get("mode") == PROFILE_MODE:
        prediction = predict_from_profile(SweepData.from_file(path))
        print("\nPrediction from this profile (McCandlish et al. 2018, Bcrit ~ B_simple):")
        if prediction is None:
            print("none: it needs a finite B_simple and a steady step time at two batch sizes at least")
        else:
            print("\n".join(describe_prediction(prediction)))


def profile_json(path, sweep) -> dict[str, Any]:
    """report --json of a profile file: its prediction as "profile_prediction" (null when it has none)."""
    from batchlab.core.analysis.predict import PROFILE_MODE, predict_from_profile
    from batchlab.core.runfile.reader import read_root_attrs

    if read_root_attrs(path).get("mode") != PROFILE_MODE:
        return {}
    prediction = predict_from_profile(sweep)
    return {"profile_prediction": prediction.as_dict() if prediction is not None else None}


def read_profile(path):
    """The prediction of `report --profile FILE` (predict.ProfilePrediction); SpecError when it holds none."""
    from batchlab.core.analysis.predict import predict_from_profile
    from batchlab.core.model import SweepData

    prediction = predict_from_profile(SweepData.from_file(path))
    if prediction is None:
        raise SpecError("profile", f"{path} holds no prediction (no finite B_simple or step-time fit)")
    return prediction
