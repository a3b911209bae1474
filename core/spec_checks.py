"""The checks that look at files, in one place above the groups' pure parsing: that a named data file,
model file and lr-find file exist, what the data file holds (counts, shapes for the preset), the compiled
metrics of the user's model, and each batch size's rate in an lr-find file.

core/spec.py runs these between the groups' parsers and their checks; nothing else in core/settings/
reads a file. The readers are imported where they are used: they import the groups' constants.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.settings.data import BUNDLED_SOURCES, CSV_SUFFIXES, KERAS_PREFIX, is_data_file
from batchlab.core.settings.optimizer import MODEL_OPTIMIZER
from batchlab.core.targets import TARGET_METRICS, VALIDATION_METRICS
from batchlab.core.targets import parse_target as parse_target_text


def lr_find_rates(path: str, pick: str = "steepest") -> dict[int, float]:
    """Suggested rate per batch size of an lr-find file (core/sweep/lr_find.py), by the rule `pick` (LR_PICKS);
    SpecError (lr_from) if unusable."""
    from batchlab.core.lr_range import suggested_rates  # reads the run file (core.runfile.reader)

    return suggested_rates(path, pick)


def check_files(parsed: dict[str, Any], errors: dict[str, SpecError], given: set[str]) -> None:
    """Every check that reads the file system, in the order their messages take precedence."""
    _check_exists(parsed, errors)
    _fit_to_data(parsed, errors, given)
    _check_preset_fit(parsed, errors)
    _check_model_metric(parsed, errors)
    _check_lr_from_file(parsed, errors)


def _check_exists(parsed: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A named file that is not there: its field's error (and the value is not used by later checks)."""
    data = parsed.get("data")
    if is_data_file(data) and not os.path.isfile(data):
        errors["data"] = SpecError("data", f"file {data!r} does not exist; use bundled or an existing .npz/.h5 file")
        parsed.pop("data")
    model = parsed.get("model_file")
    if model is not None and not os.path.isfile(model):
        errors["model_file"] = SpecError("model_file", f"file {model!r} does not exist")
        parsed.pop("model_file")
    lr_from = parsed.get("lr_from")
    if lr_from is not None and not os.path.isfile(lr_from):
        errors["lr_from"] = SpecError(
            "lr_from", f"file {lr_from!r} does not exist; give a run file written by batchlab lr-find"
        )
        parsed.pop("lr_from")


def _check_preset_fit(parsed: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Data that contradicts the model its preset names (width, image shape, label range) is an error under
    "data" (core/preset_fit.py); another workload than the preset's is sized from the data."""
    data, preset, workload = parsed.get("data"), parsed.get("preset"), parsed.get("workload")
    if data is None or data in BUNDLED_SOURCES or preset is None or workload is None or "data" in errors:
        return
    from batchlab.core.datasets import array_shapes
    from batchlab.core.preset_fit import preset_problem, promises_shape

    if not promises_shape(preset, workload):
        return  # sized from the data, or the user's model: no header to read on every edit
    try:
        shapes = None
        if not data.startswith(KERAS_PREFIX):
            shapes = array_shapes(data, parsed.get("target_column"), parsed.get("val_fraction", 0.0))
        problem = preset_problem(preset, workload, data, shapes)
        if problem:
            errors["data"] = SpecError("data", problem)
    except SpecError as e:
        if e.field == "data":  # (a CSV column the file lacks is already said under target_column)
            errors["data"] = e


def _fit_to_data(parsed: dict[str, Any], errors: dict[str, SpecError], given: set[str]) -> None:
    """For a data file: samples and val_samples not given take everything the file holds (and batch sizes
    not given, the preset's that fit it); given ones larger than what it holds are errors naming the
    available count (core.datasets.data_counts)."""
    data = parsed.get("data")
    if not is_data_file(data):
        if parsed.get("target_column") and "target_column" not in errors:
            errors["target_column"] = SpecError(
                "target_column", "names the target column of CSV data; an .npz/.h5 file or a dataset has y_train"
            )
        return
    from batchlab.core.datasets import data_counts

    for field_name in ("samples", "val_samples"):  # not given: they follow the file once it can be read
        if field_name not in given:
            errors.pop(field_name, None)
    is_csv = data.lower().endswith(CSV_SUFFIXES)
    if is_csv and not parsed.get("target_column"):
        errors.setdefault(
            "target_column",
            SpecError("target_column", "CSV data needs the target column named, e.g. --target-column price"),
        )
        return
    if not is_csv and parsed.get("target_column"):
        errors.setdefault(
            "target_column",
            SpecError("target_column", "names the target column of CSV data; an .npz/.h5 file has y_train"),
        )
        return
    try:
        counts = data_counts(data, parsed.get("target_column"), parsed.get("val_fraction", 0.0))
    except SpecError as e:
        errors.setdefault(e.field if e.field == "target_column" else "data", e)  # a column the CSV lacks
        return
    _no_validation_target(parsed, errors, counts, data)
    _counts_from_data(parsed, errors, given, counts, data)


def _no_validation_target(parsed: dict[str, Any], errors: dict[str, SpecError], counts, data: str) -> None:
    """Said before val_samples defaults to the 0 rows there are."""
    target = parsed.get("target")
    if counts.validation == 0 and target and "target" not in errors:
        metric = parse_target_text(target).metric
        if metric in VALIDATION_METRICS or metric.startswith("val_"):
            name = os.path.splitext(os.path.basename(data))[0]
            errors["target"] = SpecError(
                "target",
                f"{target} needs validation, but data '{name}' has no test split (x_test); "
                "add x_test and y_test to the file or use a train_loss target",
            )


def _counts_from_data(parsed: dict[str, Any], errors: dict[str, SpecError], given: set[str], counts, data: str) -> None:
    name = os.path.splitext(os.path.basename(data))[0]
    for field_name, available, lowest, split in (
        ("samples", counts.train, 1, "training"),
        ("val_samples", counts.validation, 0, "validation"),
    ):
        if field_name not in given:  # absent, or left empty in the window: everything the file holds
            errors.pop(field_name, None)
            parsed[field_name] = max(available, lowest)
            if field_name == "samples" and "batch_sizes" not in given and "batch_sizes" in parsed:
                # the preset's batch sizes that fit the data (all of it as one batch if none does)
                fitting = tuple(b for b in parsed["batch_sizes"] if b <= parsed["samples"])
                parsed["batch_sizes"] = fitting or (parsed["samples"],)
        elif field_name in errors:
            continue
        elif parsed[field_name] > available and not (field_name == "val_samples" and available == 0):
            errors[field_name] = SpecError(
                field_name,
                f"{parsed[field_name]} {split} samples asked for but '{name}' has {available}; "
                f"use {lowest} to {available} (or leave it empty for all {available})",
            )


def _check_model_metric(parsed: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A val_NAME target of a compiled metric the user's model has (its file's outline, read without TensorFlow)."""
    if not parsed.get("target") or "target" in errors or parsed.get("workload") != "keras-file":
        return
    target = parse_target_text(parsed["target"])
    if target.metric in TARGET_METRICS or not parsed.get("model_file"):
        return
    from batchlab.core.model_file import cached_model_info

    try:
        info = cached_model_info(parsed["model_file"])
    except SpecError:
        return  # the model file itself is the problem, said under its own field
    names = [f"val_{m}" for m in info.metrics]
    if target.metric not in names:
        builtin = ", ".join(TARGET_METRICS)
        have = f"its compiled metrics are {', '.join(names)}" if names else "it has no compiled metrics"
        errors["target"] = SpecError(
            "target",
            f"{target.text}: {target.metric} is not a metric of model '{info.name}': {have} (besides {builtin})",
        )


def _check_lr_from_file(p: Mapping[str, Any], errors: dict[str, SpecError]) -> None:
    """An lr-find file with a suggested rate for every batch size of the sweep (the optimizer and rule are the
    learning-rate group's checks)."""
    if not p.get("lr_from") or "lr_from" in errors or p.get("optimizer") == MODEL_OPTIMIZER:
        return
    if p.get("lr_rule", "constant") != "constant" and "lr_rule" not in errors:
        return
    try:
        rates = lr_find_rates(p["lr_from"], p.get("lr_pick", "steepest"))
    except SpecError as e:
        errors["lr_from"] = e
        return
    missing = [b for b in p.get("batch_sizes", ()) if b not in rates]
    if missing:
        held = ", ".join(map(str, rates)) or "none"
        errors["lr_from"] = SpecError(
            "lr_from",
            f"batch size {missing[0]} has no {p.get('lr_pick', 'steepest')} rate in {p['lr_from']} "
            f"(it has batch sizes {held}); "
            "run batchlab lr-find with these batch sizes or drop that batch size",
        )
