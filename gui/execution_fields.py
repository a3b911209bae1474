"""The setup panel's Execution & measurement section: gradient accumulation, fused steps, XLA, mixed precision
(issue 12 item 6), data-parallel replicas and worker processes (issue 27 item 3) and the gradient noise scale
(issue 10 item 3), the `batchlab sweep` options --accumulate, --fused, --replicas, --workers, --xla,
--mixed-precision, --noise-scale-every and --noise-scale-parts. Mixed into SetupPanel like
ConvergenceFields: every value is checked by core.spec (the CLI's parsers and cross-field rules, shown under the
field), tooltips are the CLI's help (core/settings/)."""

from __future__ import annotations

from typing import Any

from batchlab.core import settings
from batchlab.core.settings.execution import XLA_AUTO
from batchlab.gui.collapsible import Collapsible
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QVBoxLayout

EXECUTION_FIELDS = (
    "accumulate",
    "fused",
    "replicas",
    "workers",
    "xla",
    "mixed_precision",
    "noise_scale_every",
    "noise_scale_parts",
)
_CLI_HELP = {s.name: s.help for s in settings.settings()}  # each setting's help, as `batchlab sweep --help` gives it


class ExecutionFields:
    """Builds and reads the execution and measurement fields; see the module docstring."""

    def _build_execution(self, layout: QVBoxLayout) -> None:
        self.execution = Collapsible("Execution && measurement: fused steps, noise scale")
        self.execution.setObjectName("execution")
        self.execution.header.setObjectName("execution_header")
        self.execution.summary.setObjectName("execution_summary")
        layout.addWidget(self.execution)
        form = self.execution.form
        self._described_row(form, "accumulate")
        self._described_row(form, "fused")
        self._described_row(form, "replicas")  # data-parallel replicas (docs/scaling.md)
        self._described_row(form, "workers")  # data-parallel worker processes (docs/scaling.md)
        self.xla = QCheckBox("compile with XLA (partly: auto)")
        self.xla.setTristate(True)  # unchecked: off, partly: auto (xla_choice.py), checked: on
        self._row(form, "xla", "", self.xla)
        self.mixed_precision = QCheckBox("mixed float16 (GPU only)")
        self._row(form, "mixed_precision", "", self.mixed_precision)
        self._described_row(form, "noise_scale_every")
        self._described_row(form, "noise_scale_parts")
        self.execution.set_expanded(False)

    def _execution_values(self) -> dict[str, Any]:
        """The section's spec values; a field that does not apply sends its neutral value or None (the preset's)."""
        a = self._applies
        return {
            "accumulate": self.accumulate.text(),
            "fused": self.fused.text(),
            "replicas": self.replicas.text(),
            "workers": self.workers.text(),
            "xla": XLA_AUTO if self.xla.checkState() == Qt.CheckState.PartiallyChecked else self.xla.isChecked(),
            "mixed_precision": self.mixed_precision.isChecked() and a("mixed_precision"),
            "noise_scale_every": self.noise_scale_every.text(),
            "noise_scale_parts": self.noise_scale_parts.text() if a("noise_scale_parts") else None,
        }

    def _execution_applies(self, field: str) -> bool | None:
        """Whether a field of this section applies to the other fields' values; None for a field not handled here."""
        applies = {
            # a .keras file trains with the dtypes it was saved with (core.spec refuses the option there)
            "mixed_precision": self.workload.currentText() != "keras-file",
            "noise_scale_parts": bool(self.noise_scale_every.text().strip()),
        }
        return applies.get(field)

    def _update_execution(self, values: dict[str, Any], errors: dict[str, str]) -> None:
        """Enable what applies (tooltip: the CLI's help, or why not), summarise the section, open it on an error."""
        disabled_because = {
            "mixed_precision": "a .keras model trains with the dtypes it was saved with "
            "(save it under the mixed_float16 policy instead)",
            "noise_scale_parts": "only while the noise scale is measured (Noise scale every)",
        }
        for field in EXECUTION_FIELDS:
            on = bool(self._applies(field))
            self._editors[field].setEnabled(on)
            self._editors[field].setToolTip(_CLI_HELP.get(field, "") if on else disabled_because[field])
        self.execution.summary.setText(self.execution_summary(values))
        if any(f in errors for f in EXECUTION_FIELDS) and not self.execution.expanded:
            self.execution.set_expanded(True)

    def execution_summary(self, values: dict[str, Any]) -> str:
        """One line saying what the collapsed section holds, e.g. "8 steps per call · XLA · noise scale off"."""
        fused = str(values["fused"]).strip() or "1"
        parts = ["one step per call" if fused == "1" else f"{fused} steps per call"]
        replicas = str(values.get("replicas") or "").strip()
        if replicas not in ("", "1"):
            parts.append(f"{replicas} replicas")
        workers = str(values.get("workers") or "").strip()
        if workers not in ("", "1"):
            parts.append(f"{workers} worker processes")
        accumulate = str(values.get("accumulate") or "").strip()
        if accumulate not in ("", "1"):
            parts.insert(0, f"{accumulate} micro-batches per update")
        if values["xla"] == XLA_AUTO:
            parts.append("XLA where it pays")
        elif values["xla"]:
            parts.append("XLA")
        parts.append("mixed precision" if values["mixed_precision"] else "float32")
        every = str(values["noise_scale_every"]).strip()
        if every:
            k = str(values["noise_scale_parts"] or "").strip() or "4"
            parts.append(f"noise scale every {every} steps in {k} parts")
        else:
            parts.append("noise scale off")
        return " · ".join(parts)
