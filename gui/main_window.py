"""The main window: setup panel, live plots, summary, runs table and log around one sweep.

Data flows one way: the worker's event batches (or a run file) fill a SweepData; the window's
Refresher (gui/refresh.py, the one owner of the refresh policy) redraws what changed on its
timer. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from batchlab.core import events as ev
from batchlab.core.errors import SpecError
from batchlab.core.model import FAILED_STATUSES, SweepData
from batchlab.core.spec import SweepSpec
from batchlab.core.spec_diff import differences_text, spec_differences
from batchlab.core.sweep.progress import SweepProgress, format_duration
from batchlab.gui import refresh as refresh_policy
from batchlab.gui import theme as themes
from batchlab.gui.actions import build_actions
from batchlab.gui.figure_worker import FigureWorker
from batchlab.gui.files import RecentFiles, RunFileFollower
from batchlab.gui.heap import freeze_long_lived, refreeze, thaw
from batchlab.gui.max_batch import MaxBatchDialog, with_largest_batch
from batchlab.gui.plot_style import BatchColours, configure_pyqtgraph, set_plot_colours
from batchlab.gui.refresh import Refresher, RefreshPolicy, SummaryViews
from batchlab.gui.window_chrome import WindowChrome
from batchlab.gui.window_files import FileActionsMixin
from batchlab.gui.window_layout import WindowLayout
from batchlab.gui.worker import DeviceProbe, SweepWorker
from PySide6.QtCore import QSettings
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QMainWindow,
    QMessageBox,
    QWidget,
)

STOP_WAIT_MS = 60_000  # closing mid-sweep waits this long for the run to end cleanly
STOPPING_TEXT = "Stopping: the current run ends at its next step, the runs after it are skipped…"
CANNOT_RUN = "Cannot run yet:"  # the status bar's start when Ctrl+R explains invalid fields
SETUP_MAX_PX = 440  # the setup panel's first width at most (it scrolls when the splitter makes it narrower)


class MainWindow(WindowLayout, WindowChrome, FileActionsMixin, QMainWindow):
    """BatchLab's window. `settings` is injected so tests never touch the user's real settings.

    `policy` says how often each part redraws during a sweep (default: refresh.DEFAULT_POLICY);
    the window's Refresher applies it to the plots, summary, table, status bar and sweep worker.
    """

    def __init__(self, settings: QSettings, parent: QWidget | None = None, policy: RefreshPolicy | None = None):
        super().__init__(parent)
        self.settings = settings
        self.theme_choice = str(settings.value(themes.THEME_KEY, "system"))
        self.theme = themes.apply_theme(QApplication.instance(), self.theme_choice)
        t = self.theme
        set_plot_colours(t.plot_background, t.plot_foreground, t.plot_neutral)
        configure_pyqtgraph()
        self.policy = policy if policy is not None else refresh_policy.DEFAULT_POLICY
        self.refresher = Refresher(self.policy, parent=self)
        self.recent = RecentFiles(settings)
        self.colours = BatchColours()
        self.data: SweepData | None = None
        self.compare: SweepData | None = None
        self.worker: SweepWorker | None = None
        self.progress: SweepProgress | None = None
        self.error_dialog: QMessageBox | None = None
        self._sweep_t0 = 0.0
        self._following = False  # the main view shows a file being written (its end changes the status)
        self._problems = 0  # warnings and errors in the log panel
        self._worker_done = True
        self.devices: list[dict] = []  # as the training process reported them (About, device list)
        self.environment: dict = {}  # versions and devices as the training process reported them (About)
        self.dialog = None  # the Help dialog last opened
        self.max_batch_dialog: MaxBatchDialog | None = None  # Tools > Find largest batch
        self._event_handlers = {  # events the window reacts to beyond the model, by type
            ev.SWEEP_STARTED: self._on_sweep_started,
            ev.LOG: self._on_log_event,
            ev.RUN_ENDED: self._on_run_ended,
            ev.SWEEP_ENDED: self._on_sweep_ended,
        }
        self.setWindowTitle("BatchLab")
        self._build_widgets()
        self.actions = build_actions(self)
        # Run is disabled while fields are invalid; Ctrl+R then says why instead of doing nothing.
        self.explain_shortcut = QShortcut(QKeySequence("Ctrl+R"), self, self.explain_invalid)
        self.apply_theme(self.theme_choice)
        self.splitter.setSizes([min(SETUP_MAX_PX, self.setup.preferred_width()), 1060])
        self.follower = RunFileFollower(self)
        self.follower.loaded.connect(lambda d: self._show_sweep(d, "main"))
        self.follower.writer_stopped.connect(self._show_writer_stopped)
        self.compare_follower = RunFileFollower(self)
        self.compare_follower.loaded.connect(lambda d: self._show_sweep(d, "compare"))
        self._make_readers()
        # The Summary's, explanation's and Analysis tab's figures are computed off the GUI thread
        # (gui/figure_worker.py): a live sweep's too where the worker computes on a snapshot (a forked child),
        # else only a file's (the sweep would change its data meanwhile).
        self.figure_worker = FigureWorker(self)
        for view in (self.summary, self.explanation, self.analysis):
            view.worker = self.figure_worker
            view.offload = lambda: self.read_in_thread and (not self.running or self.figure_worker.snapshots)
            view.live = lambda: self.running
        self.live.on_shown = self._draw_live_in_slices
        self.live.draw_in_slices = lambda: self.read_in_thread and self._draw_live_in_slices()
        self._ran: SweepData | None = None  # the sweep this window ran last (its data, live then kept)
        self.live.ran_here = lambda data: data is self._ran
        self.probe = DeviceProbe(self)
        self.probe.probed.connect(self._on_environment)
        self.probe.probe_failed.connect(lambda m: self.log("warning", f"could not list devices: {m}"))
        # The timer calls self.refresh (looked up then), so a tick is one call of the window's refresh.
        show_status, tick = (lambda: self._update_progress()), (lambda: self.refresh())
        summaries = SummaryViews(self.summary, self.explanation, self.analysis)
        self.refresher.attach(
            self.live, summaries, self.table, show_status=show_status, on_tick=tick, take_events=self._take_events
        )
        self.setup.validity_changed.connect(self._on_validity)
        self.table.selection_changed.connect(self._on_selection)
        self._restore_settings()
        self._update_actions()
        freeze_long_lived()  # the window's ~92,000 objects out of the collector's full passes (gui/heap.py)

    # ------------------------------------------------------------ layout

    @property
    def running(self) -> bool:
        """True from Run until the window has handled the worker's end (not just the thread's)."""
        return self.worker is not None and (self.worker.isRunning() or not self._worker_done)

    def _update_actions(self) -> None:
        a = self.actions
        a["run"].setEnabled(not self.running and self.setup.valid)
        self.explain_shortcut.setEnabled(not self.running and not self.setup.valid)
        a["stop"].setEnabled(self.running and not self.worker.stop_requested)
        a["open"].setEnabled(not self.running)
        a["close_compare"].setEnabled(self.compare is not None)
        a["use_settings"].setEnabled(self.data is not None and bool(self.data.spec) and not self.running)
        self.setup.setEnabled(not self.running)
        searching = self.max_batch_dialog is not None and self.max_batch_dialog.running
        a["max_batch"].setEnabled(not self.running and not searching)
        if searching:  # a sweep beside the search would measure both wrong
            a["run"].setEnabled(False)
        self.oom_offer.set_running(self.running or searching)

    # ------------------------------------------------------------ running a sweep

    def _on_validity(self, valid: bool) -> None:
        self._update_actions()
        if valid and self.status_label.text().startswith(CANNOT_RUN):  # what Ctrl+R said is fixed now
            self.status_label.setText("Ready")

    def explain_invalid(self) -> str | None:
        """Say in the status bar why Run cannot start and put the cursor in the first field to fix; the message."""
        field = self.setup.first_error()
        if field is None:
            return None
        message = f"{CANNOT_RUN} {self.setup.field_label(field)}: {self.setup.errors[field]}"
        self.status_label.setText(message)
        self.setup.focus_field(field)
        return message

    def start_sweep(self, spec: SweepSpec | None = None) -> bool:
        """Run the setup panel's sweep (or `spec`, e.g. the out-of-memory offer's) in a worker thread.

        False if the setup is invalid or the user declined.
        """
        if self.running or (self.max_batch_dialog is not None and self.max_batch_dialog.running):
            return False
        if spec is None and not self.setup.validate():
            self.explain_invalid()
            return False
        try:
            spec = self.setup.spec() if spec is None else spec
        except SpecError as e:  # cannot happen after validate(), but never start a bad spec
            self.setup.show_errors({e.field: e.message})
            return False
        out = self.setup.output_path()
        overwrite = False
        if Path(out).exists():
            answer = QMessageBox.question(self, "Overwrite run file?", f"{out} exists. Replace it with the new sweep?")
            if answer != QMessageBox.StandardButton.Yes:
                return False
            overwrite = True
        Path(out).parent.mkdir(exist_ok=True)
        self.readers["main"].cancel()  # a file still being read must not replace the sweep when read
        self.follower.stop()
        self.data = self._ran = SweepData(label=Path(out).name, path=out)
        self.progress = SweepProgress(spec)
        self._sweep_t0 = time.monotonic()
        self._show_sweep(self.data, "main")
        # pulled: step records and log lines wait for the refresher's next frame (no wake-up of their own)
        self.worker = SweepWorker(spec, out, overwrite=overwrite, parent=self, policy=self.policy, pulled=True)
        self.worker.events.connect(self._on_events)
        self.worker.sweep_failed.connect(self._on_sweep_failed)
        self.worker.crashed.connect(lambda tb: self.show_error("The sweep stopped with an unexpected error", tb))
        self.worker.finished.connect(self._on_worker_finished)
        self._worker_done = False
        self.log("info", f"starting {len(spec.runs())} runs -> {out} (checking data and starting TensorFlow)")
        self.status_label.setText("Checking data and model (starting TensorFlow in a child process)…")
        self.progress_bar.setValue(0)
        self.progress_bar.setVisible(True)
        # Everything alive now (Qt wrappers, pyqtgraph items, modules) lives through the sweep: frozen, a full
        # collection mid-sweep walks only what the sweep allocates (gui/heap.py)
        refreeze()
        self.worker.start()
        self.refresher.start()
        self._update_actions()
        return True

    def stop_sweep(self) -> None:
        """End the current run cleanly (it is kept, marked interrupted) and skip the rest."""
        if self.running:
            self.worker.stop()
            # The child stops at its next step; the plots lag it by up to a frame (0.8 s), so steps it trained
            # before the request may still appear: the status says so, and the plots catch up at once.
            self.status_label.setText(STOPPING_TEXT)
            self.log("info", "stop requested")
            self._update_actions()
            self.refresh(full=True)

    def _take_events(self) -> None:
        """The refresher's frame starts: the sweep worker's waiting events are handled now (in order)."""
        if self.worker is not None and hasattr(self.worker, "deliver"):
            self.worker.deliver()

    def _on_events(self, batch: list) -> None:
        for event in batch:
            if self.data is not None:
                self.data.handle(event)
            if self.progress is not None:
                self.progress.handle(event)
            handler = self._event_handlers.get(event.get("type"))
            if handler is not None:
                handler(event)

    def _on_sweep_started(self, event: dict) -> None:
        self._on_environment(event.get("environment") or {})
        self._recolour()

    def _on_log_event(self, event: dict) -> None:
        self.log(event.get("level", "info"), event.get("message", ""), event.get("run"))

    def _on_run_ended(self, event: dict) -> None:
        status = event.get("status")
        level = "warning" if status in FAILED_STATUSES else "info"
        message = f"run ended: {status}" + (f" ({event['message']})" if event.get("message") else "")
        self.log(level, message, event.get("run"))
        if status == "oom":
            self.oom_offer.show_for(self.data, running=self.running)

    def _on_sweep_ended(self, event: dict) -> None:
        self.log("info", f"sweep {event.get('status')}: {event.get('message', '')}")
        if event.get("status") == "failed":
            self.show_error("The sweep failed", str(event.get("message", "")))

    def _on_sweep_failed(self, field: str, message: str) -> None:
        self.log("error", f"{field}: {message}")
        if self.setup.has_field(field):
            self.setup.show_errors({**self.setup.errors, field: message})
            self.status_label.setText(f"Not started: {field}: {message}")
        else:
            self.show_error("The sweep could not start", f"{field}: {message}")

    def _on_worker_finished(self) -> None:
        if self._worker_done:  # already handled (closeEvent waits for the worker itself)
            return
        worker = self.worker
        self._worker_done = True
        self._take_events()  # nothing is lost at the end: every event is handled before the last frame
        refreeze()  # what died during the sweep collected once, the rest frozen again (gui/heap.py)
        self.refresher.drain()  # the timer stops once every plot has caught up, one plot per tick
        status = worker.status if worker is not None else None
        self.progress_bar.setVisible(False)
        self.eta_label.clear()
        if status is not None:
            elapsed = format_duration(time.monotonic() - self._sweep_t0)
            self.status_label.setText(f"Sweep {status} in {elapsed}: {worker.out_path}")
            self.recent.add(worker.out_path)
            self.actions.refresh_recent()
            self.setup.new_output_name(force=False)
        self._update_actions()
        if self.setup.errors.get("out") is None:
            self.setup.validate()

    def show_error(self, title: str, text: str) -> None:
        """A dialog, only for errors that stop a sweep or an action (warnings go to the log)."""
        self.log("error", f"{title}: {text.strip().splitlines()[-1] if text.strip() else ''}")
        self.error_dialog = QMessageBox(QMessageBox.Icon.Critical, title, text.strip(), parent=self)
        self.error_dialog.open()

    # ------------------------------------------------------------ showing data

    def refresh(self, full: bool = False) -> None:
        """Redraw what changed: one tick while data arrives, else (or with full=True) everything now.

        The Refresher decides what a tick redraws (gui/refresh.py: RefreshPolicy).
        """
        self.refresher.refresh(full=full)

    def _update_progress(self) -> None:
        if self.running and self.progress is not None:
            p = self.progress
            fraction = p.fraction
            self.progress_bar.setValue(int(fraction * 1000))
            self.progress_bar.setFormat(f"{fraction * 100:.0f}%")
            eta = p.eta_seconds()
            self.eta_label.setText(f"ETA {format_duration(eta)}" if math.isfinite(eta) else "ETA --")
            text = self.live.status_text()  # what the plots show now, or "starting TensorFlow… 3 s"
            if text:
                if self.worker.stop_requested:
                    text = STOPPING_TEXT
                self.status_label.setText(text)
        elif self.follower.following and self.data is not None:
            self.progress_bar.setVisible(True)
            self.progress_bar.setValue(int(self.data.progress() * 1000))
            self.status_label.setText(f"Following {self.data.label} (being written)")

    def _show_followed_end(self, data: SweepData) -> None:
        """A followed file says its sweep ended: the status bar shows how, not "being written"."""
        self.progress_bar.setVisible(False)
        self.status_label.setText(f"{data.label}: sweep {data.status}" + (f" ({data.message})" if data.message else ""))

    def _show_writer_stopped(self, why: str) -> None:
        """A followed file went still: if its writer died, its running run reads interrupted (the rule every reader
        of the file uses); the status bar says why following stopped."""
        data = self.data
        if data is None:
            return
        data.end_if_writer_gone()  # the rule batchlab report and a reopened file use (core.runfile.liveness)
        self._following = False
        self._show_sweep(data, "main")
        self.progress_bar.setVisible(False)
        self.status_label.setText(f"{data.label}: {why}")

    def _show_sweep(self, data: SweepData | None, source: str, gradual: bool = False) -> None:
        """Show `data` as the main sweep or the comparison. gradual: the plots are drawn by the refresher's
        ticks, a slice of runs each, and hidden tabs when shown (a file read in the thread: hundreds of runs)."""
        if source == "main":
            self.data = data
        else:
            self.compare = data
        self._recolour(refresh=False)
        for view in (self.summary, self.explanation, self.analysis, self.table.runs_model):
            view.set_source(source, data)
        self.live.set_source(source, data, draw=not gradual)
        if gradual and not self.refresher.live:  # (a last frame in progress starts again: every plot is due)
            self.refresher.start()
            self.refresher.drain()
        else:
            self.refresh()
        self._show_differences()
        names = [d.label for d in (self.data, self.compare) if d is not None and d.label]
        self.setWindowTitle("BatchLab" + (f" — {' vs '.join(names)}" if names else ""))
        if source == "main" and self.follower.following:
            self._following = True
            self.refresher.start()
        elif source == "main" and not self.running:
            self.refresher.drain()  # a followed file was finished: catch up, then stop ticking
            if self._following and data is not None:
                self._show_followed_end(data)
        if source == "main" and not self.follower.following:
            self._following = False
        if source == "main":
            self.oom_offer.show_for(data, running=self.running)
        self._update_actions()

    def _draw_live_in_slices(self) -> bool:
        """The Live tab is shown again (or restyled: a selection): what it missed (the rest of a 500-run file's
        runs, a selection) is drawn by the refresher's ticks, a plot (and a slice of runs) per tick: by a last
        frame while no data arrives, else by the frame in progress; True if so."""
        if not self.live.has_pending():
            return False
        if self.refresher.active:  # a frame is being drawn: every plot is due in it again, one per tick
            self.refresher.draw_again()
            return True
        self.refresher.start()
        self.refresher.drain()
        return True

    def _show_differences(self) -> None:
        """The banner above the plots: the settings in which the shown sweeps differ, per sweep."""
        shown = self.sweep_names()
        differences = spec_differences({name: data.spec for name, data in shown.items()})
        lines = differences_text(differences, order=list(shown))
        if lines:
            text = "These sweeps were measured with different settings:\n" + "\n".join(lines)
            self.banner.setText(text)
        self.banner.setVisible(bool(lines))

    def sweep_names(self) -> dict[str, SweepData]:
        """The sweeps shown, by the name the banner and table give them (the comparison marked as dashed)."""
        out: dict[str, SweepData] = {}
        if self.data is not None:
            out[f"{self.data.label or 'this sweep'} (solid)"] = self.data
        if self.compare is not None:
            out[f"{self.compare.label or 'comparison'} (dashed)"] = self.compare
        return out

    def _on_selection(self, keys: set) -> None:
        self.live.set_selection(keys)
        self.summary.set_selection(keys)

    def _on_environment(self, environment: dict) -> None:
        devices = environment.get("devices") or []
        if environment.get("tensorflow_version"):
            self.environment = dict(environment)
        if devices:
            self.devices = list(devices)
        if devices and not self.running:
            self.setup.set_devices(devices)

    def find_largest_batch(self) -> MaxBatchDialog | None:
        """Tools > Find largest batch: `batchlab max-batch` for the setup's sweep, in a non-modal dialog that
        starts the search when its Start is clicked (after the margin and memory cap are set)."""
        if self.running or (self.max_batch_dialog is not None and self.max_batch_dialog.running):
            return None
        if not self.setup.validate():
            self.explain_invalid()
            return None
        if self.max_batch_dialog is not None:
            self.max_batch_dialog.close()  # one dialog at a time; one never started has nothing to stop
        dialog = MaxBatchDialog(self.setup.spec(), self)
        dialog.use_batch.connect(self.use_largest_batch)
        dialog.blocked = lambda: "A sweep is running; start the search when it has ended." if self.running else None
        dialog.search_started.connect(self._update_actions)
        dialog.worker.finished.connect(self._update_actions)
        self.max_batch_dialog = dialog
        dialog.show()
        self._update_actions()
        return dialog

    def use_largest_batch(self, batch_size: int) -> None:
        """Make `batch_size` the setup's largest batch size (larger ones are dropped)."""
        self.setup.set_values({"batch_sizes": with_largest_batch(self.setup.batch_sizes.text(), batch_size)})
        self.status_label.setText(f"Largest batch size set to {batch_size:,} (from the search)")

    def start_device_probe(self) -> None:
        """List the devices TensorFlow sees, from a child process, without blocking the window."""
        self.probe.start()

    def log(self, level: str, message: str, run: int | None = None) -> None:
        stamp = time.strftime("%H:%M:%S")
        where = f" run {run}:" if run is not None else ""
        self.log_view.appendPlainText(f"{stamp} {level}{where} {message}")
        if level in ("warning", "error"):
            self._problems += 1
            self.bottom.setTabText(1, f"Log ({self._problems})")

    # ------------------------------------------------------------ settings and closing

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        if self.running:
            answer = QMessageBox.question(
                self, "Stop the sweep?", "A sweep is running. Stop it (the current run is kept) and close?"
            )
            if answer != QMessageBox.StandardButton.Yes:
                event.ignore()
                return
            self.worker.stop()
            self.status_label.setText("Stopping the sweep and closing the run file…")
            self.worker.wait(STOP_WAIT_MS)
            self._on_worker_finished()
            self.refresh(full=True)
        if self.max_batch_dialog is not None:
            self.max_batch_dialog.close()  # stops the search and waits for its child
        self.refresher.stop()
        for reader in self.readers.values():
            reader.shutdown()
        self.figure_worker.shutdown()
        self.follower.stop()
        self.compare_follower.stop()
        self.save_settings()
        thaw()
        event.accept()
