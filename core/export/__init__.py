"""Sharing results: chosen runs into a new run file (hdf5.py) or TensorBoard event files (tensorboard.py)."""
