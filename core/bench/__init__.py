"""The benchmark suite (`batchlab bench`) and the comparison of two benchmarks (`batchlab compare`)."""
