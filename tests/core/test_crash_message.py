"""What a crashed run's message quotes from its training process's log."""

from __future__ import annotations

import signal

from batchlab.core.sweep.processes import _death_message, log_size

CUINIT = (
    "E0000 00:00:1796289395.652260    8232 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)"
)


def test_tensorflow_start_up_lines_are_not_quoted_as_the_last_output(tmp_path):
    log = tmp_path / "run_000.log"
    log.write_text("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n" + CUINIT)
    message = _death_message(-signal.SIGKILL, log)
    assert message == "the training process died from SIGKILL (often the host ran out of memory)"
    log.write_text(CUINIT + "\nFatal Python error: Segmentation fault\n")
    assert _death_message(-signal.SIGSEGV, log).endswith("; last output: Fatal Python error: Segmentation fault")


def test_only_what_this_runs_process_wrote_is_quoted(tmp_path):
    # a reused child appends its next run's output to a log that may already hold a let-go standby's
    log = tmp_path / "run_001.log"
    log.write_text("Traceback of the standby that was let go\n")
    start = log_size(log)
    assert _death_message(-signal.SIGKILL, log, since=start).endswith("(often the host ran out of memory)")
    with open(log, "a") as f:
        f.write("MemoryError\n")
    assert _death_message(-signal.SIGKILL, log, since=start).endswith("; last output: MemoryError")
    assert log_size(tmp_path / "absent.log") == 0
