"""The sweep's HDF5 run file: its format (format.py), the one writer (writer.py) and the reader (reader.py)."""

from batchlab.core.runfile.format import FILE_SUFFIXES, FORMAT, FORMAT_VERSION, RunFileError, run_group_name
from batchlab.core.runfile.reader import RunRecord, SweepRecord, read_run_file, status_if_writer_gone
from batchlab.core.runfile.writer import RunFileWriter

__all__ = [
    "FILE_SUFFIXES",
    "FORMAT",
    "FORMAT_VERSION",
    "RunFileError",
    "RunFileWriter",
    "RunRecord",
    "SweepRecord",
    "read_run_file",
    "run_group_name",
    "status_if_writer_gone",
]
