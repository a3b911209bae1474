"""The setup panel's convergence fields: budget kind, train to target, learning-rate rule, warmup, schedule,
Nesterov, weight decay and lr-find rates (issue 9). Mixed into SetupPanel, which provides `_row`, `_register`,
the optimizer combo and validation; every value is checked by core.spec, the CLI's own parsers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from batchlab.core.cli import LR_FIND_FIELDS
from batchlab.core.lr_rules import LR_SCHEDULES, WARMUP_UNITS
from batchlab.core.paths import check_run_file, default_run_file
from batchlab.core.settings.batch_schedule import BATCH_SCHEDULE_CHOICES
from batchlab.core.settings.learning_rate import LR_PICK_CHOICES, RULE_CHOICES, SCHEDULE_CHOICES
from batchlab.core.spec import (
    BUDGET_UNITS,
    MODEL_OPTIMIZER,
    NESTEROV_OPTIMIZERS,
    WEIGHT_DECAY_OPTIMIZERS,
    SpecError,
    SweepSpec,
    build_spec,
)
from batchlab.core.targets import TARGET_METRICS
from batchlab.core.targets import parse_target as parse_target_text
from batchlab.gui.collapsible import Collapsible
from batchlab.gui.lr_find_view import RangeTestDialog
from batchlab.gui.lr_preview import LrPreview
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QFileDialog, QLineEdit, QPushButton, QVBoxLayout

NO_TARGET = ""  # the target metric combo's "none": train the whole budget
BATCH_FIELDS = ("batch_schedule", "batch_growth_factor", "batch_growth_every", "max_batch", "batch_switch_to")
BATCH_FIELDS += ("batch_patience",)
# Fields shown beside another field's editor: their (rare) errors are shown under that field.
SHOWN_UNDER = {"budget_unit": "epochs", "warmup_unit": "warmup", "nesterov": "momentum"}
_TARGET_SPLIT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:<=|>=|=|<|>)\s*(.*)$")
RUN_FILE_FILTER = "Run file (*.h5 *.hdf5)"


class ConvergenceFields:
    """Builds and reads the convergence fields; see the module docstring."""

    # ------------------------------------------------------------ building

    def _build_budget_unit(self) -> QComboBox:
        """The budget kind, shown beside the amount (the spec's `epochs` field holds any kind's amount)."""
        self.budget_unit = QComboBox()
        for unit in BUDGET_UNITS:
            self.budget_unit.addItem(unit, unit)
        self.budget_unit.setToolTip(
            "What the budget counts: epochs, optimizer steps, or training examples (a steps or examples "
            "budget may end inside an epoch). With a target it is the most a run may train."
        )
        return self.budget_unit

    def _build_optimizer_extras(self, form) -> None:
        """Nesterov beside the momentum, and the weight decay row (after the momentum row)."""
        self._register("nesterov", self.nesterov)
        self._described_row(form, "weight_decay")

    def _build_convergence(self, layout: QVBoxLayout) -> None:
        self.convergence = Collapsible("Convergence: target, learning-rate rule, schedule")
        self.convergence.setObjectName("convergence")
        layout.addWidget(self.convergence)
        form = self.convergence.form
        self.target_metric = QComboBox()
        self.target_metric.setObjectName("target_metric")
        self._fill_target_metrics(())
        self.target_metric.setToolTip(
            "Train each run until this metric is strictly better than the value (Shallue et al.'s rule); "
            "losses and the error are met below the value, accuracy above it"
        )
        self.target_metric.currentIndexChanged.connect(self._changed)
        self.target = QLineEdit()
        self.target.setPlaceholderText("value, e.g. 0.98")
        self._row(form, "target", "Target", self.target, before=(self.target_metric,))
        self._described_row(form, "eval_every")
        self.keep_training = QCheckBox("train on to the budget after the target")
        self._row(form, "keep_training", "", self.keep_training)
        self._generic_rows(form, "budget")  # the budget group's other fields (e.g. abort_losers)
        self.lr_rule = self._choice_row(
            form, "lr_rule", "Learning-rate rule", RULE_CHOICES, "How each batch size B gets its rate from lr at B0"
        )
        self._described_row(form, "lr_base_batch")
        self.warmup = QLineEdit()
        self.warmup.setToolTip("Linear warmup from lr to the rule's rate for the batch size (Goyal et al.)")
        self.warmup_unit = QComboBox()
        for unit in WARMUP_UNITS:
            self.warmup_unit.addItem(unit, unit)
        self._row(form, "warmup", "Warmup", self.warmup, self.warmup_unit)
        self._register("warmup_unit", self.warmup_unit)
        self.lr_schedule = self._choice_row(
            form,
            "lr_schedule",
            "Schedule",
            [c for c in SCHEDULE_CHOICES if c[0] in LR_SCHEDULES],
            "What the rate does after warmup",
        )
        for name in ("lr_decay_factor", "lr_decay_every", "lr_patience"):
            self._described_row(form, name)
        self._build_batch_schedule(form)
        self.lr_from = QLineEdit()
        self.lr_from.setPlaceholderText("an lr-find run file: each batch size's own rate")
        self.lr_from.setToolTip(
            "Train each batch size at the rate an LR range test suggested for it (batchlab lr-find, or "
            "Range test… here); replaces the learning rate"
        )
        browse = QPushButton("…")
        browse.setMaximumWidth(browse.fontMetrics().horizontalAdvance("…") + 24)
        browse.setObjectName("choose_lr_from")
        browse.setToolTip("Choose an lr-find run file")
        browse.clicked.connect(self._choose_lr_from)
        self.range_test_button = QPushButton("Range test…")
        self.range_test_button.setObjectName("range_test")
        self.range_test_button.setToolTip(
            "Run an LR range test (batchlab lr-find) for these batch sizes, see its curves and use its rates"
        )
        self.range_test_button.clicked.connect(self.open_range_test)
        self._row(form, "lr_from", "Rates from", self.lr_from, browse)
        self.lr_pick = self._choice_row(
            form,
            "lr_pick",
            "Rate picked",
            LR_PICK_CHOICES,
            "Which suggestion of the range test each batch size trains at (docs/learning-rates.md)",
        )
        form.addRow("", self.range_test_button)
        self.range_dialog = None
        self.preview = LrPreview(self.spec)
        form.addRow(self.preview)
        self.values_changed.connect(self.preview.schedule_update)
        self.convergence.set_expanded(False)
        for combo in (self.target_metric, self.lr_rule, self.lr_schedule):
            combo.setMinimumContentsLength(10)  # the panel sets 4 on every combo; "val_accuracy" needs more

    def _build_batch_schedule(self, form) -> None:
        """Batch-size schedules (issue 9 item 3): grow instead of decaying the rate, or two phases."""
        self.batch_schedule = self._choice_row(
            form, "batch_schedule", "Batch schedule", BATCH_SCHEDULE_CHOICES, "How each run's batch size changes"
        )
        for field in BATCH_FIELDS[1:]:
            self._described_row(form, field)
        self.batch_patience.setToolTip("Validations without a better validation loss before the switch")

    def _fill_target_metrics(self, extra: tuple[str, ...]) -> None:
        """The target metrics: none, the built-in ones, then `extra` (a user model's val_NAME metrics)."""
        current = self.target_metric.currentData()
        names = list(TARGET_METRICS) + [m for m in extra if m not in TARGET_METRICS]
        if [self.target_metric.itemData(i) for i in range(1, self.target_metric.count())] == names:
            return
        self.target_metric.blockSignals(True)
        self.target_metric.clear()
        # "none" alone: "none: train the whole budget" was cut to "none: train the w" in the combo
        self.target_metric.addItem("none", NO_TARGET)
        self.target_metric.setItemData(0, "no target: every run trains its whole budget", Qt.ItemDataRole.ToolTipRole)
        for name in names:
            self.target_metric.addItem(name, name)
        index = self.target_metric.findData(current)
        if index < 0 and current:  # a metric the model no longer has: keep it, the spec says why
            self.target_metric.addItem(current, current)
            index = self.target_metric.count() - 1
        self.target_metric.setCurrentIndex(max(0, index))
        self.target_metric.blockSignals(False)

    # ------------------------------------------------------------ values

    def _convergence_values(self) -> dict[str, Any]:
        """The convergence fields as spec values. A field that does not apply sends its neutral value
        ("" = blank, kept blank) or None (the preset's, which that setting then does not use)."""
        a = self._applies
        metric = self.target_metric.currentData()
        return {
            "budget_unit": self.budget_unit.currentData(),
            "target": f"{metric}={self.target.text().strip()}" if metric else "",
            "eval_every": self.eval_every.text(),
            "keep_training": self.keep_training.isChecked() and a("keep_training"),
            "lr_from": self.lr_from.text() if a("lr_from") else "",
            "lr_pick": self.lr_pick.currentData() if a("lr_pick") else None,
            "lr_rule": self.lr_rule.currentData() if a("lr_rule") else "constant",
            "lr_base_batch": self.lr_base_batch.text() if a("lr_base_batch") else None,
            "warmup": self.warmup.text() if a("warmup") else "0",
            "warmup_unit": self.warmup_unit.currentData(),
            "lr_schedule": self.lr_schedule.currentData() if a("lr_schedule") else "constant",
            "lr_decay_factor": self.lr_decay_factor.text() if a("lr_decay_factor") else None,
            "lr_decay_every": self.lr_decay_every.text() if a("lr_decay_every") else None,
            "lr_patience": self.lr_patience.text() if a("lr_patience") else None,
            "nesterov": self.nesterov.isChecked() and a("nesterov"),
            "weight_decay": self.weight_decay.text() if a("weight_decay") else "",
            "batch_schedule": self.batch_schedule.currentData(),
            **{f: self._editors[f].text() if a(f) else None for f in BATCH_FIELDS[1:]},
        }

    def _convergence_applies(self, field: str) -> bool | None:
        """Whether a convergence field applies to the other fields' values; None for a field not handled here."""
        optimizer = self.optimizer.currentText()
        builds = optimizer != MODEL_OPTIMIZER  # BatchLab builds the optimizer, so it sets the rate
        rule, schedule = self.lr_rule.currentData(), self.lr_schedule.currentData()
        applies = {
            "nesterov": optimizer in NESTEROV_OPTIMIZERS,
            "weight_decay": optimizer in WEIGHT_DECAY_OPTIMIZERS,
            "keep_training": bool(self.target_metric.currentData()),
            "abort_losers": bool(self.target_metric.currentData()),
            "lr_from": builds,
            "lr_pick": builds and bool(self.lr_from.text().strip()),
            "lr_rule": builds,
            "lr_schedule": builds,
            "lr_base_batch": builds and rule != "constant",
            "warmup": builds and rule != "constant",
            "warmup_unit": builds and rule != "constant",
            "lr_decay_factor": builds and schedule in ("step", "plateau"),
            "lr_decay_every": builds and schedule == "step",
            "lr_patience": builds and schedule == "plateau",
        }
        batch_schedule = self.batch_schedule.currentData()
        for name in ("batch_growth_factor", "batch_growth_every", "max_batch"):
            applies[name] = batch_schedule == "grow"
        for name in ("batch_switch_to", "batch_patience"):
            applies[name] = batch_schedule == "two_phase"
        return applies.get(field)

    def _set_convergence(self, field: str, value: Any) -> bool:
        """Fill a field that needs more than its text (the target, a nested budget); True if handled."""
        if field == "budget" and isinstance(value, dict):  # a run file's spec: every kind to its own field
            self._set("budget_unit", value.get("unit") or "epochs")
            self._set("epochs", value.get("amount"))
            return True
        if field == "target":
            text = "" if value is None else str(value)
            match = _TARGET_SPLIT.match(text)
            metric, number = (match.group(1), match.group(2)) if match else (NO_TARGET, text)
            index = self.target_metric.findData(metric)
            if index < 0:
                self.target_metric.addItem(metric, metric)
                index = self.target_metric.count() - 1
            self.target_metric.setCurrentIndex(index)
            self.target.setText(number.strip())
            return True
        return False

    # ------------------------------------------------------------ after each validation

    def _update_convergence(self, values: dict[str, Any], errors: dict[str, str]) -> None:
        """Enable what applies, label the budget by its kind, summarise the section, open it on an error in it."""
        disabled_because = {
            "nesterov": f"Nesterov momentum is for {', '.join(NESTEROV_OPTIMIZERS)} only",
            "weight_decay": f"only {', '.join(WEIGHT_DECAY_OPTIMIZERS)} use a weight decay",
            "keep_training": "only with a target",
            "abort_losers": "only with a target",
            "lr_base_batch": "only for the linear and sqrt rules",
            "warmup": "warmup ramps from lr to the rule's rate: only for the linear and sqrt rules",
            "warmup_unit": "only for the linear and sqrt rules",
            "lr_decay_factor": "for the step and plateau schedules",
            "lr_decay_every": "for the step schedule",
            "lr_patience": "for the plateau schedule",
            "lr_pick": "with a Rates from file only",
        }
        for field in ("lr_from", "lr_rule", "lr_schedule"):
            disabled_because[field] = "the model file's optimizer keeps its own learning rate"
        for field in BATCH_FIELDS[1:]:
            disabled_because[field] = f"for the {'grow' if field in BATCH_FIELDS[1:4] else 'two phase'} batch schedule"
        for field, why in disabled_because.items():
            if field not in self._editors:
                continue
            on = bool(self._applies(field))
            self._editors[field].setEnabled(on)
            self._editors[field].setToolTip(self._field_help.get(field, "") if on else why)
        info = getattr(self, "_model_info", None) if values["workload"] == "keras-file" else None
        self._fill_target_metrics(tuple(f"val_{m}" for m in info.metrics) if info is not None else ())
        self.target.setEnabled(bool(self.target_metric.currentData()))
        self.range_test_button.setEnabled(self._applies("lr_from") and not self.running_range_test())
        unit = values["budget_unit"] or "epochs"
        label = ("Max " if values["target"] else "") + unit
        self._labels["epochs"] = label[0].upper() + label[1:]
        form, holder = self._rows["epochs"]
        form.labelForField(holder).setText(self._labels["epochs"])
        self.convergence.summary.setText(self.convergence_summary(values))
        section = (
            "target",
            "eval_every",
            "keep_training",
            "abort_losers",
            "lr_rule",
            "lr_base_batch",
            "warmup",
            "lr_schedule",
        )
        section += ("lr_decay_factor", "lr_decay_every", "lr_patience", "lr_from", "lr_pick", *BATCH_FIELDS)
        if any(f in errors for f in section) and not self.convergence.expanded:
            self.convergence.set_expanded(True)

    def running_range_test(self) -> bool:
        return self.range_dialog is not None and self.range_dialog.running

    def range_test_spec(self) -> SweepSpec:
        """The spec `batchlab lr-find` builds from these fields (it takes only LR_FIND_FIELDS and shuffle)."""
        values = {k: v for k, v in self.values().items() if k in LR_FIND_FIELDS or k == "shuffle"}
        return build_spec(values)

    def open_range_test(self) -> RangeTestDialog | None:
        """The range-test dialog for the setup's batch sizes (None, with the error under its field, if invalid)."""
        try:
            spec = self.range_test_spec()
            out = check_run_file(default_run_file(f"lr-find-{spec.preset}", self._output_folder()), create_folder=True)
        except SpecError as e:
            self.show_errors({**self.errors, e.field: e.message})
            self.focus_field(e.field)
            return None
        self.range_dialog = RangeTestDialog(self, spec=spec, out_path=str(out))
        self.range_dialog.rates_chosen.connect(self.use_lr_find_file)
        self.range_dialog.setModal(True)
        self.range_dialog.show()
        return self.range_dialog

    def use_lr_find_file(self, path: str) -> None:
        """Train each batch size at the rate this lr-find file suggests for it (the Rates from field)."""
        self.convergence.set_expanded(True)
        self.lr_from.setText(path)
        self.focus_field("lr_from")

    def _output_folder(self) -> Path:
        current = self.output_path()
        return Path(current).parent if current else Path(self.output_dir)

    def convergence_summary(self, values: dict[str, Any]) -> str:
        """One line saying what the collapsed section holds, e.g. "to val_accuracy > 0.98 every 50 steps · ..."."""
        parts = []
        text = values["target"]
        if text:
            try:
                parts.append(f"to {parse_target_text(text).describe()}")
            except ValueError:
                parts.append(f"target {text}")
        else:
            parts.append("whole budget")
        if values["eval_every"].strip():
            parts.append(f"evaluated every {values['eval_every'].strip()} steps")
        if values.get("abort_losers"):
            parts.append("runs that cannot win stopped")
        if values["lr_from"]:
            pick = " (min/10)" if values.get("lr_pick") == "min10" else ""
            parts.append(f"rates from {Path(values['lr_from'].strip()).name}{pick}")
        rule = values["lr_rule"]
        if rule != "constant":
            b0 = values["lr_base_batch"].strip() or "smallest batch"
            parts.append(f"{dict(RULE_CHOICES)[rule].split(':')[0]}, B0 {b0}")
            if str(values["warmup"]).strip() not in ("", "0", "0.0"):
                parts.append(f"warmup {values['warmup']} {values['warmup_unit']}")
        else:
            parts.append("same rate at every batch size")
        if values["lr_schedule"] != "constant":
            parts.append(f"{values['lr_schedule']} schedule")
        if values["batch_schedule"] == "grow":
            parts.append(f"batch x{values['batch_growth_factor']} every {values['batch_growth_every']} epochs")
        elif values["batch_schedule"] == "two_phase":
            parts.append(f"batch to {values['batch_switch_to'] or '?'} once val loss stalls")
        return " · ".join(parts)

    # ------------------------------------------------------------ files

    def _choose_lr_from(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose an lr-find run file", "", RUN_FILE_FILTER)
        if path:
            self.lr_from.setText(path)
