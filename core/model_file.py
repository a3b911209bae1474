"""What a .keras file holds, read without TensorFlow: input and output shapes, loss, metrics, parameter count.

A .keras file is a zip of config.json (the architecture and the compile settings as JSON) and
model.weights.h5 (the variables); this module reads the first as JSON and the shapes of the
second with h5py, so the window can describe a model file at once, in its own process, which
never imports TensorFlow. It also compares a model with a data file's array shapes, so a
mismatch shows under the field before Run. The training child still checks everything with
Keras itself (core.training.workloads); this is the early, cheap look.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
from batchlab.core.errors import SpecError

# Layers whose output has their input's shape (so a model ending in one has its input's last shape).
SHAPE_KEEPING = (
    "Activation",
    "Dropout",
    "Softmax",
    "ReLU",
    "LeakyReLU",
    "BatchNormalization",
    "LayerNormalization",
    "GaussianNoise",
    "ActivityRegularization",
)
UNKNOWN = None  # a dimension or shape this module cannot tell without Keras


@dataclass
class ModelInfo:
    """A model file's outline; a shape is a tuple without the batch axis (None: any size), or None if unknown."""

    name: str
    input_shapes: list[tuple | None]
    input_dtypes: list[str]
    output_shapes: list[tuple | None]
    loss: str | None
    metrics: list[str] = field(default_factory=list)
    params: int | None = None

    def summary(self) -> str:
        """One line for the window, e.g. "input (8,) float32 → output (1,); loss mse; metrics mae; 321 parameters"."""

        def shape(s: tuple | None) -> str:
            if s is None:
                return "?"
            return "(" + ", ".join("None" if d is None else str(d) for d in s) + ("," if len(s) == 1 else "") + ")"

        ins = ", ".join(f"{shape(s)} {d}" for s, d in zip(self.input_shapes, self.input_dtypes, strict=False))
        outs = ", ".join(shape(s) for s in self.output_shapes)
        parts = [f"input {ins} → output {outs}", f"loss {self.loss or 'none (not compiled)'}"]
        if self.metrics:
            parts.append(f"metrics {', '.join(self.metrics)}")
        if self.params is not None:
            parts.append(f"{self.params:,} parameters")
        return "; ".join(parts)


def _name(obj: Any) -> str | None:
    """A loss's or metric's name as config.json stores it: a string or a serialized object."""
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        config = obj.get("config")
        if isinstance(config, dict) and config.get("name"):
            return str(config["name"])
        if isinstance(config, str):
            return config
        return str(obj.get("class_name") or "?")
    return str(obj)


def _shape(value: Any) -> tuple | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    return tuple(None if d is None else int(d) for d in value[1:])


def _input_shape_of(layer: dict) -> tuple | None:
    """The shape a layer was called on (without the batch axis), from its inbound node or build config."""
    for node in layer.get("inbound_nodes") or []:
        args = node.get("args") if isinstance(node, dict) else None
        if args and isinstance(args[0], dict):
            return _shape(args[0].get("config", {}).get("shape"))
    return _shape((layer.get("build_config") or {}).get("input_shape"))


def _output_shape_of(layer: dict) -> tuple | None:
    """A layer's output shape where its config tells it (Dense, shape-keeping layers, Reshape, Flatten)."""
    kind, config = layer.get("class_name"), layer.get("config") or {}
    given = _input_shape_of(layer)
    if kind == "InputLayer":
        return _shape(config.get("batch_shape"))
    if kind == "Reshape":
        return tuple(config.get("target_shape") or ()) or None
    if given is None:
        return None
    if kind == "Dense":
        return (*given[:-1], int(config["units"]))
    if kind == "Flatten":
        return (None,) if None in given else (math.prod(given),)
    if kind in SHAPE_KEEPING:
        return given
    return None


def _layer_refs(refs: Any) -> list[str]:
    """Layer names from input_layers/output_layers: ["name", 0, 0] or a list of those."""
    if isinstance(refs, list) and refs and isinstance(refs[0], str):
        return [refs[0]]
    return [r[0] for r in refs or [] if isinstance(r, list) and r]


def read_model_file(path: str | Path) -> ModelInfo:
    """The outline of a .keras file; SpecError on field "model_file" if it is not one."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
            weights = archive.read("model.weights.h5") if "model.weights.h5" in archive.namelist() else None
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise SpecError("model_file", f"'{path}' is not a .keras model file model.save() writes ({e})") from None
    model = config.get("config") or {}
    layers = [layer for layer in model.get("layers") or [] if isinstance(layer, dict)]
    by_name = {layer.get("name") or (layer.get("config") or {}).get("name"): layer for layer in layers}
    if "input_layers" in model:  # a functional model
        inputs = [by_name.get(n, {}) for n in _layer_refs(model["input_layers"])]
        outputs = [by_name.get(n, {}) for n in _layer_refs(model["output_layers"])]
    else:  # Sequential: the first layer (an InputLayer) to the last
        inputs, outputs = layers[:1], layers[-1:]
    input_shapes = [_output_shape_of(layer) for layer in inputs]
    if input_shapes and input_shapes[0] is None:
        input_shapes = [_shape((config.get("build_config") or {}).get("input_shape"))]
    compiled = config.get("compile_config") or {}
    metrics = compiled.get("metrics") or []
    return ModelInfo(
        name=str(model.get("name") or path.stem),
        input_shapes=input_shapes,
        input_dtypes=[str((layer.get("config") or {}).get("dtype") or "float32") for layer in inputs],
        output_shapes=[_output_shape_of(layer) for layer in outputs],
        loss=_name(compiled.get("loss")),
        metrics=[n for n in (_name(m) for m in (metrics if isinstance(metrics, list) else [metrics])) if n],
        params=_param_count(weights),
    )


_CACHE: dict[tuple[str, int, int], ModelInfo] = {}


def cached_model_info(path: str | Path) -> ModelInfo:
    """read_model_file, read again only when the file changed (the window asks on every edit)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as e:
        raise SpecError("model_file", f"cannot read '{path}': {e.strerror or e}") from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        _CACHE[key] = read_model_file(path)
    return _CACHE[key]


def _param_count(weights: bytes | None) -> int | None:
    """Elements of every layer variable in model.weights.h5 (the optimizer's are left out)."""
    if weights is None:
        return None
    total = 0

    def add(name: str, node: Any) -> None:
        nonlocal total
        if isinstance(node, h5py.Dataset) and not name.startswith("optimizer"):
            total += math.prod(node.shape)

    try:
        with h5py.File(io.BytesIO(weights), "r") as f:
            f.visititems(add)
    except OSError:
        return None
    return total


def mismatch(info: ModelInfo, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """Why a data file's arrays (core.datasets.array_shapes) cannot feed this model, or None if they may.

    Shapes only: the values (whole numbers, ranges) are checked by the training child before the first run.
    """
    if len(info.input_shapes) != 1 or len(info.output_shapes) != 1:
        return (
            f"the model has {len(info.input_shapes)} inputs and {len(info.output_shapes)} outputs; BatchLab trains "
            "models with one input (x_train) and one output (y_train)"
        )
    expected, out = info.input_shapes[0], info.output_shapes[0]
    x = shapes.get("x_train")
    if x is not None and expected is not None:
        rows = tuple(x[1:])
        fits = len(rows) == len(expected) and all(e is None or e == r for r, e in zip(rows, expected, strict=True))
        if not fits and (None in expected or math.prod(rows) != math.prod(expected)):
            return f"x samples have shape {rows} but the model's input has shape {expected}"
    y = shapes.get("y_train")
    loss = (info.loss or "").lower()
    if y is not None and out is not None and out[-1] is not None:
        rows = tuple(y[1:])
        if "sparse" in loss and len(rows) == len(out) and rows[-1] == out[-1] and out[-1] > 1:
            return (
                f"y_train rows have shape {rows}, like one-hot labels, but the model's {info.loss} loss needs "
                "class indices (shape (N,))"
            )
        if "categorical" in loss and "sparse" not in loss and len(rows) == len(out) and rows[-1] != out[-1]:
            return f"y_train rows have shape {rows} but the model's output has shape {out}"
    return None
