"""Sweep analysis: fits, limits and the words that explain them. numpy only (no Qt, no TensorFlow),
so the window, the CLI and tests share it, and it is checked on synthetic data with known answers."""
