"""The setup panel: every spec field, validated as you type by core.spec (the CLI's rules and messages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchlab.core.paths import default_run_file, is_default_run_file, run_file_problem, user_path
from batchlab.core.presets import PRESETS
from batchlab.core.settings.execution import ENGINES, SYNC_CHOICES
from batchlab.core.spec import (
    FIELD_PARSERS,
    MODEL_OPTIMIZER,
    MOMENTUM_OPTIMIZERS,
    OPTIMIZERS,
    SpecError,
    SweepSpec,
    build_spec,
    preset_values,
    spec_errors,
)
from batchlab.core.spec_diff import show_value
from batchlab.gui.convergence_fields import SHOWN_UNDER, ConvergenceFields
from batchlab.gui.data_fields import DataFields
from batchlab.gui.execution_fields import ExecutionFields
from batchlab.gui.field_rows import add_field_row, error_line
from batchlab.gui.settings_fields import GroupFields
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

NOT_PRESET_SETTINGS = ("preset", "device", "loop", "sync", "model_file")  # not what a preset describes
POW2_CHOICES = [str(1 << k) for k in range(0, 15)]
# The light theme's rules; the window replaces them with its theme's (gui/theme.py stylesheet()).
INVALID_STYLE = (
    'QLineEdit[invalid="true"], QComboBox[invalid="true"] { border: 1px solid #B00020; }\n'
    'QLabel[role="error"] { color: #B00020; }\nQLabel[role="muted"] { color: #5A5A5A; }'
)


def output_error(path: str) -> str | None:
    """What is wrong with the run file path (core.paths' rules; Run asks before replacing a file)."""
    problem = run_file_problem(path, overwrite=True, create_folder=True)
    return problem.message if problem else None


class SetupPanel(DataFields, ConvergenceFields, ExecutionFields, GroupFields, QScrollArea):
    """All setup fields; `validity_changed(bool)` after every edit, `errors` holds the current messages."""

    validity_changed = Signal(bool)
    values_changed = Signal()

    def __init__(self, output_dir: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.output_dir = output_dir
        self.errors: dict[str, str] = {}
        self._error_labels: dict[str, QLabel] = {}
        self._editors: dict[str, QWidget] = {}
        self._labels: dict[str, str] = {}  # field -> its label in the form
        self._rows: dict[str, tuple[QFormLayout, QWidget]] = {}  # field -> its form and row (to hide it)
        self._filling = False
        self._generic: list[str] = []  # fields drawn from their description alone (core.settings.FormField)
        self._field_help: dict[str, str] = {}  # their tooltips while they apply
        self._previous_data_index = 0
        body = QWidget()
        body.setStyleSheet(INVALID_STYLE)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(6, 6, 6, 6)
        self._build_experiment(layout)
        self._build_batches(layout)
        self._build_optimizer(layout)
        self._build_convergence(layout)
        self._build_execution(layout)
        self._build_output(layout)
        self._build_other_settings(layout)  # after every section: only fields none of them built
        # What the fields change from the preset, under the last field: lines that come and go while typing
        # pushed every field below the description (and the pointer's target) up and down when shown at the top.
        self.preset_changes = QLabel()
        self.preset_changes.setObjectName("preset_changes")
        self.preset_changes.setWordWrap(True)
        self.preset_changes.setProperty("role", "muted")
        layout.addWidget(self.preset_changes)
        layout.addStretch(1)
        self.setWidget(body)
        self.setWidgetResizable(True)
        for combo in body.findChildren(QComboBox):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(combo.minimumContentsLength() or 4)  # unless set when built
        # No minimum width of its own: a narrow window scrolls the panel sideways instead of clipping it.
        self.apply_preset(next(iter(PRESETS)))

    # ------------------------------------------------------------ building

    def _group(self, layout: QVBoxLayout, title: str) -> QFormLayout:
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(box)
        return form

    def _row(
        self, form: QFormLayout, field: str, label: str, editor: QWidget, *extra: QWidget, before: tuple = ()
    ) -> None:
        """A labelled editor (with `before` and `extra` widgets beside it) and the field's error message
        underneath (hidden while valid)."""
        line = QHBoxLayout()
        line.setSpacing(3)
        for w in before:
            line.addWidget(w)
        line.addWidget(editor, 1)
        for w in extra:
            line.addWidget(w)
        error = error_line(field)
        holder = add_field_row(form, label, line, error)
        self._rows[field] = (form, holder)
        self._labels[field] = label
        self._error_labels[field] = error
        self._register(field, editor)

    def _register(self, field: str, editor: QWidget) -> None:
        """An editor of a spec field: named for it, filled by set_values, validated when it changes."""
        editor.setObjectName(field)
        self._editors[field] = editor
        if isinstance(editor, QLineEdit):
            editor.textChanged.connect(self._changed)
        elif isinstance(editor, QComboBox):
            editor.currentIndexChanged.connect(self._changed)
        elif isinstance(editor, QCheckBox) and editor.isTristate():  # partly -> checked does not toggle
            editor.stateChanged.connect(self._changed)
        elif isinstance(editor, QCheckBox):
            editor.toggled.connect(self._changed)

    def _build_batches(self, layout: QVBoxLayout) -> None:
        form = self._group(layout, "Budget and batch sizes")
        self.epochs = QLineEdit()
        self._row(form, "epochs", "Epochs", self.epochs, self._build_budget_unit())
        self._register("budget_unit", self.budget_unit)
        self.batch_sizes = QLineEdit()
        self.batch_sizes.setPlaceholderText("e.g. 8, 16, 32, 64")
        self.batch_sizes.setToolTip("Batch sizes to compare, separated by commas or spaces")
        self._row(form, "batch_sizes", "Batch sizes", self.batch_sizes)
        helper = QWidget()
        row = QHBoxLayout(helper)
        row.setContentsMargins(0, 0, 0, 0)
        self.pow2_from, self.pow2_to = QComboBox(), QComboBox()
        for combo, default in ((self.pow2_from, "8"), (self.pow2_to, "512")):
            combo.addItems(POW2_CHOICES)
            combo.setCurrentText(default)
        fill = QPushButton("Fill")
        fill.setObjectName("fill_powers_of_two")
        fill.setToolTip("Replace the batch sizes with every power of two in this range")
        fill.clicked.connect(self.fill_powers_of_two)
        for w in (QLabel("powers of 2 from"), self.pow2_from, QLabel("to"), self.pow2_to, fill):
            row.addWidget(w)
        row.addStretch(1)
        form.addRow(helper)

    def _build_optimizer(self, layout: QVBoxLayout) -> None:
        form = self._group(layout, "Optimizer and seeds")
        self.optimizer = QComboBox()
        self.optimizer.addItems(list(OPTIMIZERS))
        self._row(form, "optimizer", "Optimizer", self.optimizer)
        self._described_row(form, "lr")
        self.nesterov = QCheckBox("Nesterov")
        self._described_row(form, "momentum", self.nesterov)
        self._build_optimizer_extras(form)
        self._described_row(form, "seeds")
        self.shuffle = QCheckBox("shuffle batches each epoch")
        self._row(form, "shuffle", "", self.shuffle)

    def _choice_row(self, form, field: str, label: str, choices, tooltip: str) -> QComboBox:
        """A combo box of (value, text) choices as the form row of a spec field."""
        combo = QComboBox()
        for value, text in choices:
            combo.addItem(text, value)
        combo.setToolTip(tooltip)
        self._row(form, field, label, combo)
        return combo

    def _build_output(self, layout: QVBoxLayout) -> None:
        form = self._group(layout, "Run")
        self.device = QComboBox()
        self.device.addItem("auto (GPU if there is one)", "auto")
        self.device.addItem("cpu", "cpu")
        self.device.setToolTip("Devices are listed once the training process has reported them")
        self._row(form, "device", "Device", self.device)
        self.loop = self._choice_row(
            form,
            "loop",
            "Training loop",
            ENGINES,
            "BatchLab's loop times every step (compute, input fetch, tracing); model.fit times epochs as "
            "your own fit sees them (step and fetch times are not available)",
        )
        self.sync = self._choice_row(
            form,
            "sync",
            "Device sync",
            SYNC_CHOICES,
            "How often BatchLab's loop waits for the device to time a step: every step, or only sampled "
            "steps so that a GPU keeps overlapping steps as fit does (the other steps' times are not measured)",
        )
        # where the runs execute (core/settings/placement.py, docs/scaling.md)
        self._described_row(form, "parallel")
        self._described_row(form, "ray")
        self._described_row(form, "ray_cpus")
        self.out = QLineEdit()
        browse = QPushButton("…")
        browse.setToolTip("Choose where to save the run file")
        browse.clicked.connect(self._choose_output)
        self._row(form, "out", "Run file", self.out, browse)

    # ------------------------------------------------------------ values

    def preferred_width(self) -> int:
        """The width (pixels) at which every field shows without scrolling sideways."""
        scrollbar = self.verticalScrollBar().sizeHint().width()
        return self.widget().minimumSizeHint().width() + scrollbar + 2 * self.frameWidth()

    def first_error(self) -> str | None:
        """The first field from the top that has an error, or None."""
        return next((field for field in self._editors if field in self.errors), None)

    def field_label(self, field: str) -> str:
        return self._labels.get(field) or field

    def focus_field(self, field: str) -> None:
        """Scroll to a field and put the keyboard focus in it."""
        editor = self._editors.get(field)
        if editor is not None:
            for section in (self.convergence, self.execution):
                if section.isAncestorOf(editor):
                    section.set_expanded(True)
            self.ensureWidgetVisible(editor)
            editor.setFocus(Qt.FocusReason.OtherFocusReason)

    def has_field(self, name: str) -> bool:
        """True if `name` is a spec field this panel shows (so its error can be shown beside it)."""
        return name in self._error_labels or name in SHOWN_UNDER

    def values(self) -> dict[str, Any]:
        """The spec fields as typed (strings), ready for core.spec.build_spec / spec_errors."""
        return {
            "preset": self.preset.currentData(),
            "workload": self.workload.currentText(),
            "model_file": self.model_file.text(),
            "data": self._data_value(),
            "samples": self.samples.text(),
            "val_samples": self.val_samples.text(),
            "epochs": self.epochs.text(),
            "batch_sizes": self.batch_sizes.text(),
            "optimizer": self.optimizer.currentText(),
            # a field the optimizer ignores is not part of the sweep (blank: the preset's value)
            "lr": self.lr.text() if self._applies("lr") else None,
            "momentum": self.momentum.text() if self._applies("momentum") else None,
            "seeds": self.seeds.text(),
            "shuffle": self.shuffle.isChecked(),
            "device": self.device.currentData(),
            "loop": self.loop.currentData(),
            "sync": self.sync.currentData(),
            "parallel": self.parallel.text(),
            "ray": self.ray.text(),
            "ray_cpus": self.ray_cpus.text() if self.ray.text().strip() else None,
            # CSV fields only with a .csv data file (blank: the default)
            "target_column": self.target_column.text() if self._is_csv() else None,
            "val_fraction": (self.val_fraction.text().strip() or None) if self._is_csv() else None,
            "scale": self.scale.text(),
            **self._convergence_values(),
            **self._execution_values(),
            **self._generic_values(),
        }

    def _applies(self, field: str) -> bool:
        """False for a field the chosen optimizer ignores (it is disabled and not validated)."""
        optimizer = self.optimizer.currentText()
        if field == "momentum":
            return optimizer in MOMENTUM_OPTIMIZERS
        if field == "lr":  # an lr-find file gives each batch size its own rate instead
            return optimizer != MODEL_OPTIMIZER and not self.lr_from.text().strip()
        own = self._convergence_applies(field)
        if own is None:
            own = self._execution_applies(field)
        return True if own is None else own

    def set_values(self, values: dict[str, Any]) -> None:
        """Fill fields from spec-like values (saved settings, a run file's spec, a test).

        Values that name a preset start from that preset's values (core.spec.preset_values), so
        {"preset": "mnist-cnn", "epochs": 2} means the CNN preset with two epochs.
        """
        if values.get("preset") in PRESETS:
            values = preset_values(values)
        self._filling = True
        try:
            for field, value in values.items():
                self._set(field, value)
        finally:
            self._filling = False
        self.validate()

    def _set(self, field: str, value: Any) -> None:
        if self._set_convergence(field, value):
            return
        editor = self._editors.get(field)
        if editor is None:
            return
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        text = "" if value is None else str(value)
        if isinstance(value, float) and value.is_integer():
            text = str(int(value))  # a run file's warmup 2.0 reads as 2
        if isinstance(editor, QLineEdit):
            editor.setText(text)
        elif isinstance(editor, QCheckBox) and editor.isTristate() and text.lower() == "auto":
            editor.setCheckState(Qt.CheckState.PartiallyChecked)  # xla: auto
        elif isinstance(editor, QCheckBox):
            editor.setChecked(value is True or text.lower() in ("1", "true", "yes", "on"))
        elif field == "data":
            self._select_data(text or "bundled")
        elif isinstance(editor, QComboBox):
            if field in FIELD_PARSERS and editor.findData(text) < 0:
                try:  # a name the parser knows another way: "srsr" is sqrt, "GPU" is gpu:0
                    text = str(FIELD_PARSERS[field](text))
                except SpecError:
                    pass
            index = editor.findData(text)
            index = index if index >= 0 else editor.findText(text)
            if index < 0 and field == "device":
                editor.addItem(text, text)
                index = editor.count() - 1
            if index >= 0:
                editor.setCurrentIndex(index)

    def spec(self) -> SweepSpec:
        """The validated spec (raises core.spec.SpecError like the CLI would)."""
        return build_spec(self.values())

    def output_path(self) -> str:
        """The run file as typed, with ~ expanded ("" when empty)."""
        text = self.out.text().strip()
        return str(user_path(text)) if text else ""

    def apply_preset(self, name: str) -> None:
        """Select a preset and fill every field with its defaults."""
        self.set_values({"preset": name})
        self._show_description()
        self.new_output_name()

    def _show_description(self, *_args) -> None:
        """The preset's description, and under the last field what the fields now change from it (so the
        panel never says 10 epochs for 3 without saying it changed)."""
        name = self.preset.currentData()
        preset = PRESETS.get(name)
        self.preset_description.setText(preset.description if preset else "")
        changes = self.changes_from_preset()
        self.preset_changes.setText("Changed from the preset: " + "; ".join(changes) + "." if changes else "")
        self.preset_changes.setVisible(bool(changes))

    def changes_from_preset(self) -> list[str]:
        """ "epochs 3 (preset: 10)" for every setting typed differently from the chosen preset's.

        Field by field with the spec's parsers, so a field with an error elsewhere does not hide
        the others' changes; a field that does not parse is left out (its error says enough).
        """
        name = self.preset.currentData()
        if name not in PRESETS:
            return []
        defaults = preset_values({"preset": name})
        out = []
        values = self.values()
        units = (values["budget_unit"], defaults.get("budget_unit") or "epochs")
        for field, value in values.items():
            if field in NOT_PRESET_SETTINGS or field not in FIELD_PARSERS or value is None or field == "budget_unit":
                continue
            try:
                now, preset = FIELD_PARSERS[field](value), FIELD_PARSERS[field](defaults.get(field))
            except SpecError:
                continue
            now_text, preset_text = (
                show_value(v) if v is not None or field not in ("target", "noise_scale_every") else "none"
                for v in (now, preset)
            )
            if field == "epochs" and units[0] != units[1]:  # the budget's kind changed: say both kinds
                out.append(f"budget {now_text} {units[0]} (preset: {preset_text} {units[1]})")
            elif now_text != preset_text:
                name = units[0] if field == "epochs" else field.replace("_", " ")
                out.append(f"{name} {now_text} (preset: {preset_text})")
        return out

    def new_output_name(self, force: bool = True) -> None:
        """A fresh time-stamped run file name in the output folder (kept if the user chose a name)."""
        current = self.output_path()
        if not force and current and not is_default_run_file(current):
            return
        folder = Path(current).parent if current else Path(self.output_dir)
        self.out.setText(str(default_run_file(self.preset.currentData(), folder)))

    def fill_powers_of_two(self) -> None:
        lo, hi = sorted((int(self.pow2_from.currentText()), int(self.pow2_to.currentText())))
        sizes = [1 << k for k in range(lo.bit_length() - 1, hi.bit_length())]
        self.batch_sizes.setText(", ".join(str(s) for s in sizes))

    def set_devices(self, devices: list[dict[str, Any]]) -> None:
        """List the devices the training child reported (keeps the current choice if still there)."""
        current = self.device.currentData()
        self._filling = True
        try:
            self.device.clear()
            self.device.addItem("auto (GPU if there is one)", "auto")
            for d in devices:
                name = str(d.get("name", ""))
                gib = float(d.get("memory_bytes", -1) or -1) / (1 << 30)
                memory = f", {gib:.0f} GiB" if gib > 0 else ""
                self.device.addItem(f"{name} — {d.get('description', '')}{memory}", name)
            index = self.device.findData(current)
            self.device.setCurrentIndex(max(0, index))
        finally:
            self._filling = False
        self.validate()

    # ------------------------------------------------------------ validation

    def _changed(self, *_args) -> None:
        if not self._filling:
            self.validate()

    def validate(self) -> bool:
        """Check every field with core.spec.spec_errors; show each message beside its field."""
        values = self.values()
        errors = {k: e.message for k, e in spec_errors(values).items()}
        out_problem = output_error(self.output_path())
        if out_problem:
            errors["out"] = out_problem
        self._describe_files(values, errors)
        self.show_errors(errors)
        self.model_file.setEnabled(values["workload"] == "keras-file" or bool(values["model_file"]))
        for field in ("target_column", "val_fraction"):
            form, row = self._rows[field]
            form.setRowVisible(row, self._is_csv())
        self.sync.setEnabled(values["loop"] != "fit")  # fit waits for the device after every step
        self.ray_cpus.setEnabled(bool(values["ray"].strip()))  # a CPU share only means something to Ray
        self.momentum.setEnabled(self._applies("momentum"))
        self.momentum.setToolTip(
            "" if self._applies("momentum") else f"only {', '.join(MOMENTUM_OPTIMIZERS)} use a momentum"
        )
        self.lr.setEnabled(self._applies("lr"))
        lr_why = "the model file's optimizer keeps its own learning rate"
        if values["optimizer"] != MODEL_OPTIMIZER:
            lr_why = "each batch size's rate comes from the lr-find file under Rates from"
        self.lr.setToolTip("" if self._applies("lr") else lr_why)
        self._update_convergence(values, errors)
        self._update_execution(values, errors)
        self._show_description()
        self.values_changed.emit()
        return not errors

    def show_errors(self, errors: dict[str, str]) -> None:
        """Show these messages beside their fields (also used for errors the sweep reports at start)."""
        errors = dict(errors)
        for field, shown_under in SHOWN_UNDER.items():  # a field beside another's editor: under that one
            if field in errors:
                errors.setdefault(shown_under, errors.pop(field))
        self.errors = errors
        for field, label in self._error_labels.items():
            message = errors.get(field, "")
            label.setText(message)
            label.setVisible(bool(message))
            editor = self._editors[field]
            if editor.property("invalid") != bool(message):
                editor.setProperty("invalid", bool(message))
                editor.style().unpolish(editor)
                editor.style().polish(editor)
        self.validity_changed.emit(not self.errors)

    @property
    def valid(self) -> bool:
        return not self.errors

    # ------------------------------------------------------------ files

    def _choose_output(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the run file as", self.output_path(), "Run file (*.h5)")
        if path:
            self.out.setText(path if Path(path).suffix else path + ".h5")
