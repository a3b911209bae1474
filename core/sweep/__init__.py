"""The parent side of a sweep: the runner that drives one training child per run, and progress/ETA."""
