"""The setup panel's Experiment section: preset, workload, model file, data and sample counts, with the data
file's and model file's descriptions under their fields (a mixin of gui/setup_panel.py's SetupPanel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchlab.core.datasets import array_shapes, data_counts
from batchlab.core.model_file import cached_model_info, mismatch
from batchlab.core.paths import user_path
from batchlab.core.presets import PRESETS, WORKLOADS
from batchlab.core.settings.data import DataSettings
from batchlab.core.spec import CSV_SUFFIXES, KERAS_DATASETS, SpecError
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

CHOOSE_FILE = "__choose__"
DATA_SOURCES = [("bundled", "bundled MNIST subset"), ("bundled-large", "bundled MNIST, 30,000 images")]
DATA_SOURCES += [(f"keras:{n}", f"Keras {n}") for n in KERAS_DATASETS]


class DataFields:
    """Builds and keeps the Experiment section's fields; the panel's values, validation and files are its own."""

    def _build_experiment(self, layout: QVBoxLayout) -> None:
        form = self._group(layout, "Experiment")
        self.preset = QComboBox()
        for name, preset in PRESETS.items():
            self.preset.addItem(preset.title, name)
        self._row(form, "preset", "Preset", self.preset)
        self.preset.activated.connect(lambda i: self.apply_preset(self.preset.itemData(i)))
        self.preset.currentIndexChanged.connect(self._show_description)
        self.preset_description = QLabel()
        self.preset_description.setWordWrap(True)
        self.preset_description.setObjectName("preset_description")
        self.preset_description.setProperty("role", "muted")
        form.addRow(self.preset_description)
        self.workload = QComboBox()
        self.workload.addItems(list(WORKLOADS))
        self._row(form, "workload", "Workload", self.workload)
        self.model_file = QLineEdit()
        self.model_file.setPlaceholderText("a .keras model (keras-file workload)")
        browse = QPushButton("…")
        browse.setToolTip("Choose a .keras model file")
        browse.clicked.connect(self._choose_model)
        self._row(form, "model_file", "Model file", self.model_file, browse)
        self.model_info = self._info_label(form, "model_info")
        self.data = QComboBox()
        for value, text in DATA_SOURCES:
            self.data.addItem(text, value)
        self.data.addItem("Choose a file…", CHOOSE_FILE)
        self._row(form, "data", "Dataset", self.data)
        self.data.activated.connect(self._data_activated)
        self.data_info = self._info_label(form, "data_info")
        self._described_row(form, "samples")
        self._described_row(form, "val_samples")
        # CSV data only (shown when a .csv file is chosen): the target column(s) and the validation rows
        self._described_row(form, "target_column")
        self.val_fraction = QLineEdit()
        self.val_fraction.setPlaceholderText(
            f"{DataSettings.val_fraction:g}: the last rows that validate (0 = none, up to 0.9)"
        )
        self._row(form, "val_fraction", "Validation fraction", self.val_fraction)
        for editor in (self.target_column, self.val_fraction):
            editor.textChanged.connect(self._csv_changed)
        self._described_row(form, "scale")

    def _info_label(self, form: QFormLayout, name: str) -> QLabel:
        """A grey line under a field describing what it names (a model's shapes, a data file's arrays)."""
        label = QLabel()
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setStyleSheet("color: #555; font-size: 9pt;")
        label.setVisible(False)
        form.addRow("", label)
        return label

    def _describe_files(self, values: dict[str, Any], errors: dict[str, str]) -> None:
        """Show what the model file and the data file hold (read without TensorFlow, core.model_file and
        core.datasets) and file a shape mismatch between them under the data field, before Run."""
        info, shapes = None, None
        self._model_info = None  # the model file's outline once read (its metrics are target choices)
        model_text = data_text = ""
        if values["model_file"].strip() and "model_file" not in errors:
            try:
                info = self._model_info = cached_model_info(user_path(values["model_file"].strip()))
                model_text = info.summary()
            except SpecError as e:
                errors["model_file"] = e.message
        data = values["data"]
        if data and data not in (v for v, _ in DATA_SOURCES) and "data" not in errors:
            csv = self._is_csv()
            column = (values.get("target_column") or "").strip() or None
            try:
                if csv and (column is None or "target_column" in errors or "val_fraction" in errors):
                    raise SpecError("target_column", "")  # said under the CSV fields by spec_errors
                fraction = float((values.get("val_fraction") or "").strip() or DataSettings.val_fraction)
                shapes = array_shapes(data, column, fraction)
                data_text = "; ".join(f"{k} {tuple(v)}" for k, v in shapes.items())
            except SpecError as e:
                if e.field != "target_column":
                    errors["data"] = e.message
        if info is not None and shapes is not None and values["workload"] == "keras-file":
            problem = mismatch(info, shapes)
            if problem:
                errors.setdefault("data", problem)
        for label, text in ((self.model_info, model_text), (self.data_info, data_text)):
            label.setText(text)
            label.setVisible(bool(text))

    def _is_csv(self) -> bool:
        return str(self._data_value() or "").lower().endswith(CSV_SUFFIXES)

    def _csv_changed(self, *_args) -> None:
        """The CSV target column or validation fraction changed: the counts follow (when they can be read)."""
        if not self._filling and self._is_csv():
            self._fill_counts(self._data_value())

    def _fill_counts(self, path: str) -> None:
        """A data file just chosen: its training and validation rows become the sample counts (blank,
        which means all its rows, while a CSV file's target column is not named yet)."""
        csv = path.lower().endswith(CSV_SUFFIXES)
        try:
            fraction = float(self.val_fraction.text().strip() or DataSettings.val_fraction) if csv else 0.0
            counts = data_counts(path, self.target_column.text().strip() or None if csv else None, fraction)
        except (SpecError, ValueError):
            if csv:
                self.samples.clear()
                self.val_samples.clear()
            return  # validate() shows why under the field
        self.samples.setText(str(counts.train))
        self.val_samples.setText(str(counts.validation))

    def _data_value(self) -> str:
        value = self.data.currentData()
        return self.data.itemData(self._previous_data_index) if value == CHOOSE_FILE else value

    def _select_data(self, value: str) -> None:
        index = self.data.findData(value)
        if index < 0:
            index = self.data.count() - 1
            self.data.insertItem(index, Path(value).name, value)
            self.data.setItemData(index, value, Qt.ItemDataRole.ToolTipRole)
        self.data.setCurrentIndex(index)
        self._previous_data_index = index

    def _data_activated(self, index: int) -> None:
        if self.data.itemData(index) != CHOOSE_FILE:
            self._previous_data_index = index
            return
        path, _ = QFileDialog.getOpenFileName(self, "Choose a data file", "", "Data (*.npz *.h5 *.hdf5 *.csv)")
        if path:
            self._select_data(path)
            self._fill_counts(path)
        else:
            self.data.setCurrentIndex(self._previous_data_index)

    def _choose_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Keras model", "", "Keras model (*.keras)")
        if path:
            self.model_file.setText(path)
            self.workload.setCurrentText("keras-file")
