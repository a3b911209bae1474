"""BatchLab's training core: specs, sweeps, run files and analysis. Free of Qt; TensorFlow only in the child."""

__version__ = "0.1.0"
