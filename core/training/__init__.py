"""The training child: the only place TensorFlow is imported (loop, hooks, workloads, memory, entry points)."""
