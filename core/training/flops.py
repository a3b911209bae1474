"""Floating-point operations per training sample, counted per layer from a Keras model.

Convention (the one most papers use): a multiply-add is 2 FLOPs; only the matrix products are
counted: Dense 2 * in * out (per position, for inputs with extra axes), convolutions
2 * kh * kw * (cin / groups) * cout * H_out * W_out (any rank; transposed ones per input
position), depthwise convolutions 2 * kh * kw * channels * multiplier * H_out * W_out. Biases,
activations, pooling, normalisation, reshapes and the loss are elementwise and left out (a few
percent for these models). Training costs 3x the forward pass: the backward pass computes two
products of the forward's size per layer (the gradient for the layer's input and for its
weights). The optimizer's update is per step, not per sample, and is part of the step's fixed
cost. Layers with weights the rules do not know (recurrent, attention, ...) are not counted;
they are named in ``flops_uncounted`` and the count is then a lower bound.

Imports Keras only inside `model_flops`, so the counting rules load without TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TRAINING_FACTOR = 3  # forward + backward (input gradient + weight gradient)

_DENSE = frozenset(("Dense",))
_CONV = frozenset(("Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D", "Convolution3D"))
_CONV_TRANSPOSE = frozenset(("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"))
_DEPTHWISE = frozenset(("DepthwiseConv1D", "DepthwiseConv2D"))
# Layers with weights whose work is elementwise or a lookup: counted as 0 on purpose.
_ELEMENTWISE = frozenset(
    ("BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization", "Embedding", "PReLU")
)


@dataclass(frozen=True)
class FlopCount:
    """FLOPs per sample: the forward pass, training (TRAINING_FACTOR x forward), and what was not counted."""

    forward: int
    uncounted: tuple[str, ...]  # "name (Class)" of layers with weights the rules do not know

    @property
    def training(self) -> int:
        return TRAINING_FACTOR * self.forward

    def run_fields(self) -> dict[str, Any]:
        """The run_started fields (run attributes) that record this count."""
        return {
            "flops_per_sample": float(self.training),
            "forward_flops_per_sample": float(self.forward),
            "flops_uncounted": ", ".join(self.uncounted),
        }


def dense_flops(in_features: int, out_features: int, positions: int = 1) -> int:
    """Forward FLOPs of a Dense layer for one sample: 2 * in * out at each of `positions`."""
    return 2 * in_features * out_features * positions


def conv_flops(kernel_shape: Sequence[int], out_spatial: Sequence[int]) -> int:
    """Forward FLOPs of a convolution for one sample: 2 * prod(kernel) * prod(output positions).

    kernel_shape is Keras's (*window, cin / groups, cout), so prod(kernel) = kh * kw * cin/g * cout.
    """
    return 2 * math.prod(kernel_shape) * math.prod(out_spatial)


def _shape(tensor) -> tuple | None:
    try:
        return tuple(tensor.shape)
    except (AttributeError, ValueError):
        return None


def _spatial(shape: tuple, data_format: str) -> tuple:
    return shape[2:] if data_format == "channels_first" else shape[1:-1]


def layer_flops(layer) -> int | None:
    """Forward FLOPs per sample of one Keras layer; None when the rules do not know it."""
    kind = type(layer).__name__
    data_format = getattr(layer, "data_format", "channels_last")
    if kind in _DENSE:
        out = _shape(layer.output)
        kernel = tuple(layer.kernel.shape)
        if out is None:
            return None
        return dense_flops(kernel[0], kernel[1], math.prod(out[1:-1]))
    if kind in _CONV or kind in _DEPTHWISE:
        out = _shape(layer.output)
        kernel = tuple((layer.depthwise_kernel if kind in _DEPTHWISE else layer.kernel).shape)
        spatial = _spatial(out, data_format) if out is not None else (None,)
        return None if None in spatial else conv_flops(kernel, spatial)
    if kind in _CONV_TRANSPOSE:  # every input position scatters the whole kernel
        inp = _shape(layer.input)
        spatial = _spatial(inp, data_format) if inp is not None else (None,)
        return None if None in spatial else conv_flops(tuple(layer.kernel.shape), spatial)
    if kind in _ELEMENTWISE or not layer.weights:
        return 0
    return None


def _leaves(layer):
    inner = getattr(layer, "layers", None)
    if inner:
        for child in inner:
            yield from _leaves(child)
    else:
        yield layer


def model_flops(model) -> FlopCount:
    """Count a built Keras model's FLOPs per sample (see the module docstring for the rules)."""
    forward, uncounted = 0, []
    for layer in _leaves(model):
        try:
            flops = layer_flops(layer)
        except (AttributeError, ValueError):  # a layer never called symbolically has no shapes
            flops = None
        if flops is None:
            uncounted.append(f"{layer.name} ({type(layer).__name__})")
        else:
            forward += flops
    return FlopCount(forward=int(forward), uncounted=tuple(uncounted))


def flops_fields(model) -> dict[str, Any]:
    """run_started fields for `model`; a model the counter cannot read gives NaN, never a failed run."""
    try:
        return model_flops(model).run_fields()
    except Exception as e:  # counting is a figure, not a reason to lose the run
        return {"flops_per_sample": math.nan, "forward_flops_per_sample": math.nan, "flops_uncounted": str(e)[:200]}
