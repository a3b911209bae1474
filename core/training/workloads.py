"""Keras models for each workload, compiled with their optimizer. Imported only in the training child."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import keras
import numpy as np
from batchlab.core.loss_targets import AUTOENCODER, CLASSIFICATION, OTHER, REGRESSION, fit_targets
from batchlab.core.spec import (
    MOMENTUM_OPTIMIZERS,
    NESTEROV_OPTIMIZERS,
    OPTIMIZER_CLASSES,
    WEIGHT_DECAY_OPTIMIZERS,
    RunSpec,
    SpecError,
)
from batchlab.core.targets import ACCURACY_METRICS
from batchlab.core.training.execution import output_dtype, set_precision
from batchlab.core.training.optimizers import LARS
from keras import layers, ops

AUTOENCODER_HIDDEN = 128
AUTOENCODER_CODE = 32
MLP_HIDDEN = 256
# Words in a loss's registered names that mark a regression loss (float targets of the output's shape).
REGRESSION_LOSS_WORDS = ("squared", "absolute", "huber", "log_cosh", "logcosh", "cosine", "poisson", "mse", "mae")


def summed_binary_crossentropy(y_true, y_pred):
    """Binary cross-entropy summed over the features of a sample (not averaged), as in the
    classic MNIST-autoencoder experiments, so loss magnitudes (~40-100) are comparable."""
    per_feature_mean = keras.losses.binary_crossentropy(y_true, y_pred)
    features = ops.cast(ops.shape(y_true)[-1], per_feature_mean.dtype)
    return per_feature_mean * features


def make_optimizer(
    name: str,
    lr: Any,
    momentum: float,
    accumulate: int = 1,
    *,
    nesterov: bool = False,
    weight_decay: float | None = None,
) -> keras.optimizers.Optimizer:
    """The named optimizer (Keras's, or BatchLab's LARS); `lr` is a float, a Keras schedule
    (core/training/schedules.py) or None (the optimizer's own default). With accumulate = k > 1 it sums
    k micro-batches' gradients and applies their mean once every k steps (Keras's
    gradient_accumulation_steps): the update of one batch k times as large."""
    class_name = OPTIMIZER_CLASSES[name]  # the one optimizer table is core.spec's
    cls = LARS if name == "lars" else getattr(keras.optimizers, class_name)
    kwargs: dict[str, Any] = {}
    if accumulate > 1:
        kwargs["gradient_accumulation_steps"] = accumulate
    if lr is not None:  # None: Keras's own default rate
        kwargs["learning_rate"] = lr
    if name in MOMENTUM_OPTIMIZERS:
        kwargs["momentum"] = momentum
    if name in NESTEROV_OPTIMIZERS:
        kwargs["nesterov"] = nesterov
    if name in WEIGHT_DECAY_OPTIMIZERS and weight_decay is not None:
        kwargs["weight_decay"] = weight_decay
    return cls(**kwargs)


def spec_optimizer(spec, learning_rate: Any = None) -> keras.optimizers.Optimizer:
    """The spec's optimizer with all its settings; `learning_rate` (a float or a Keras schedule) replaces
    spec.lr when given."""
    rate = learning_rate if learning_rate is not None else spec.lr
    return make_optimizer(
        spec.optimizer,
        rate,
        spec.momentum,
        spec.accumulate,
        nesterov=spec.nesterov,
        weight_decay=spec.weight_decay,
    )


def _autoencoder(features: int) -> keras.Model:
    inputs = keras.Input(shape=(features,), name="pixels")
    h = layers.Dense(AUTOENCODER_HIDDEN, activation="relu", name="encoder_hidden")(inputs)
    code = layers.Dense(AUTOENCODER_CODE, activation="relu", name="code")(h)
    h = layers.Dense(AUTOENCODER_HIDDEN, activation="relu", name="decoder_hidden")(code)
    outputs = layers.Dense(features, activation="sigmoid", name="reconstruction", dtype=output_dtype())(h)
    return keras.Model(inputs, outputs, name="mnist_autoencoder")


def _cnn(image_shape: tuple[int, ...], classes: int) -> keras.Model:
    if image_shape[0] < 22 or image_shape[1] < 22:
        raise SpecError(
            "data", f"images of {image_shape[0]}x{image_shape[1]} are too small for the CNN; it needs 22x22 or larger"
        )
    inputs = keras.Input(shape=image_shape, name="image")
    x = layers.Conv2D(10, 5, activation="relu", name="conv1")(inputs)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Conv2D(20, 5, activation="relu", name="conv2")(x)
    x = layers.MaxPooling2D(2, name="pool2")(x)
    x = layers.Conv2D(40, 3, activation="relu", name="conv3")(x)
    x = layers.MaxPooling2D(2, name="pool3")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(classes, name="dense")(x)
    outputs = layers.Activation("log_softmax", name="log_softmax", dtype=output_dtype())(x)
    return keras.Model(inputs, outputs, name="mnist_cnn")


def _mlp(features: int, classes: int) -> keras.Model:
    inputs = keras.Input(shape=(features,), name="pixels")
    h = layers.Dense(MLP_HIDDEN, activation="relu", name="hidden")(inputs)
    outputs = layers.Dense(classes, name="logits", dtype=output_dtype())(h)
    return keras.Model(inputs, outputs, name="mnist_mlp")


class BuiltModel(NamedTuple):
    """A compiled model, the arrays it trains on, log notes on how they were fitted to it, and the task."""

    model: keras.Model
    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    notes: list[str]
    task: str  # one of core.loss_targets.TASKS
    targets: str  # how the targets are laid out, e.g. "class indices", "one-hot", "float", "inputs"


def build_model(run: RunSpec, data, learning_rate: Any = None) -> BuiltModel:
    """Build and compile the run's model with its arrays.

    `learning_rate` (a float or a Keras schedule, core/training/schedules.py) replaces spec.lr when given.

    `data` is core.datasets.PreparedData. Arrays may be reshaped or one-hot encoded to fit a
    user's model; every such change is described in `notes` so the user sees it in the log.
    """
    spec = run.sweep
    set_precision(spec)  # before any layer is made: mixed_float16 layers, or float32
    if spec.workload == "keras-file":
        built = _user_model(run, data, learning_rate)
        return built._replace(notes=engine_notes(spec) + built.notes)
    classes = data.num_classes or 0
    task, targets = CLASSIFICATION, "class indices"
    if spec.workload == "autoencoder":
        model = _autoencoder(int(np.prod(data.input_shape)))
        loss, metrics = summed_binary_crossentropy, []
        task, targets = AUTOENCODER, "inputs"
    elif spec.workload == "cnn":
        model = _cnn(tuple(data.input_shape), classes)
        # log-softmax outputs are valid logits: softmax(log_softmax(z)) == softmax(z), so this is the NLL loss.
        loss, metrics = keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"]
    else:
        model = _mlp(int(np.prod(data.input_shape)), classes)
        loss, metrics = keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"]
    model.compile(optimizer=spec_optimizer(spec, learning_rate), loss=loss, metrics=metrics)
    notes = [built_model_note(spec.workload, tuple(data.input_shape), classes), *engine_notes(spec)]
    return BuiltModel(model, data.x_train, data.y_train, data.x_val, data.y_val, notes, task, targets)


def built_model_note(workload: str, input_shape: tuple[int, ...], classes: int) -> str:
    """The log line that says which model a built-in workload built from the data (its sizes come from it)."""
    features = int(np.prod(input_shape))
    if workload == "autoencoder":
        hidden = f"{AUTOENCODER_HIDDEN}-{AUTOENCODER_CODE}-{AUTOENCODER_HIDDEN}"
        return f"model: dense autoencoder {features}-{hidden}-{features} ({features} values per sample)"
    if workload == "cnn":
        image = "x".join(str(n) for n in input_shape)
        return f"model: CNN for {classes} classes (labels 0 to {classes - 1}) of {image} images"
    return f"model: MLP classifier {features}-{MLP_HIDDEN}-{classes} ({classes} classes, labels 0 to {classes - 1})"


def accumulation_fields(run: RunSpec) -> dict[str, int]:
    """run_started fields: micro-batches per optimizer update and the batch one update sees (samples)."""
    k = int(run.sweep.accumulate)
    return {"accumulation_steps": k, "effective_batch_size": run.batch_size * k}


def engine_notes(spec) -> list[str]:
    """Log lines on settings the chosen engine does not use, so a run's log says what produced its numbers."""
    if spec.loop == "fit" and spec.sync != "every_step":
        return [
            f"sync={spec.sync} applies to the instrumented loop only: model.fit (TensorFlow backend) reads every "
            "step's logs, which waits for the device after every step"
        ]
    return []


def _load_user_model(path: str) -> keras.Model:
    try:
        return keras.saving.load_model(path, safe_mode=True, compile=True)
    except Exception as e:  # Keras raises many types for a bad file; the user needs one line.
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "safe_mode" in str(e) or "lambda" in str(e).lower():
            reason = "it contains a Lambda layer or other code, which safe mode refuses to load"
        raise SpecError("model_file", f"could not load {path!r} as a Keras model: {reason}") from None


def _fit_inputs(x, expected: tuple, dtype: str, notes: list[str], which: str):
    """Samples in the model's input shape and dtype: a reshape when only the layout differs (a note says
    so), integer token ids kept as integers for an integer input (Embedding), otherwise float32. Values
    are never rescaled here (--scale does that, in core.datasets)."""
    if x is None:
        return x
    rows = tuple(x.shape[1:])
    fits = len(rows) == len(expected) and all(e is None or e == r for r, e in zip(rows, expected, strict=True))
    if not fits:
        if None not in expected and math.prod(rows) == math.prod(expected):
            notes.append(f"{which} samples reshaped from {rows} to {expected} to fit the model's input")
            x = x.reshape((x.shape[0], *expected))
        else:
            raise SpecError(
                "data",
                f"x samples have shape {rows} but the model's input has shape {expected}; "
                "use data whose samples match the model's input (one sample: x_train[0].shape)",
            )
    if np.dtype(dtype).kind in "iu":
        if x.dtype.kind == "f" and not np.array_equal(x, np.round(x)):
            raise SpecError(
                "data",
                f"the model's input takes integers ({dtype}, e.g. token ids for an Embedding) but x holds "
                "values that are not whole numbers; store the token ids as integers",
            )
        return x.astype(dtype)
    return x.astype(np.float32) if x.dtype != np.float32 else x


def _one_in_one_out(model: keras.Model) -> None:
    """Refuse models with several inputs or outputs, saying what is supported."""
    ins, outs = len(model.inputs), len(model.outputs)
    if ins != 1 or outs != 1:
        raise SpecError(
            "model_file",
            f"the model has {ins} inputs and {outs} outputs; BatchLab trains models with one input (x_train) "
            "and one output (y_train, or none for an autoencoder)",
        )


def _user_model(run: RunSpec, data, learning_rate: Any = None) -> BuiltModel:
    spec = run.sweep
    model = _load_user_model(spec.model_file)
    notes: list[str] = []
    _one_in_one_out(model)
    in_shape = tuple(model.input_shape[1:])
    out_shape = tuple(model.output_shape[1:])
    in_dtype = str(model.inputs[0].dtype)
    x_train = _fit_inputs(data.x_train, in_shape, in_dtype, notes, "training")
    x_val = _fit_inputs(data.x_val, in_shape, in_dtype, notes, "validation")
    notes += _scale_notes(data, in_dtype)
    loss = getattr(model, "loss", None)
    if loss is None:
        raise SpecError(
            "model_file", "the model file has no compiled loss; call model.compile(loss=...) before model.save()"
        )
    if isinstance(loss, (list, tuple, dict)):
        raise SpecError("model_file", "the model was compiled with several losses; compile it with one loss")
    name, kind = loss_kind(loss)
    summary = data.targets
    if out_shape == in_shape and (summary is None or summary.shape != out_shape):
        if summary is not None:
            notes.append(
                f"y_train is not used: the model's output has its input's shape {in_shape}, so it is trained to "
                "reproduce its input (an autoencoder)"
            )
        _no_accuracy_target(spec, "the model's output has its input's shape, so it is trained to reconstruct its input")
        y_train, y_val, task, targets = x_train, x_val, AUTOENCODER, "inputs"
        if y_train.dtype.kind in "iu":
            y_train = y_train.astype(np.float32)
            y_val = None if y_val is None else y_val.astype(np.float32)
    elif summary is None:
        raise SpecError(
            "data",
            f"the model's output shape {out_shape} differs from its input, so it needs targets; the data has no "
            "y_train (only an autoencoder, whose output has the input's shape, trains without)",
        )
    else:
        fitted = fit_targets(kind, name, out_shape, data.y_train, data.y_val, summary)
        y_train, y_val, task, targets = fitted.y_train, fitted.y_val, fitted.task, fitted.layout
        notes += fitted.notes
    metrics = _model_metrics(model)
    if not metrics and task == CLASSIFICATION:
        metrics = ["accuracy"]
        notes.append("the model file has no metrics; BatchLab computes accuracy for this classifier")
    target = spec.target_spec
    if target is not None and target.metric in ACCURACY_METRICS:
        if task in (REGRESSION, OTHER):
            _no_accuracy_target(spec, f"the model is trained for {task}")
        if "accuracy" not in [m if isinstance(m, str) else getattr(m, "name", "") for m in metrics]:
            metrics = [*metrics, "accuracy"]
            notes.append(f"accuracy is computed too: the target {target.text} needs it")
    if spec.optimizer == "model":
        if model.optimizer is None:
            raise SpecError("optimizer", "the model file has no optimizer; name one (e.g. adam) instead of 'model'")
        config = model.optimizer.get_config()
        if spec.lr is not None:  # the spec allows no rule or schedule with the model's optimizer: a plain rate
            config["learning_rate"] = spec.lr
        optimizer = model.optimizer.__class__.from_config(config)
    else:
        optimizer = spec_optimizer(spec, learning_rate)
    settings, setting_notes = compile_settings(model, spec.loop)
    notes += setting_notes
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, **settings)
    notes.append(f"task: {task} ({targets} targets, {name} loss)")
    return BuiltModel(model, x_train, y_train, x_val, y_val, notes, task, targets)


def _no_accuracy_target(spec, why: str) -> None:
    """Refuse an accuracy target for a model that has no accuracy (it could never be met)."""
    target = spec.target_spec
    if target is not None and target.metric in ACCURACY_METRICS:
        raise SpecError(
            "target",
            f"{target.text}: {why} and has no accuracy; this target can never be met; use a val_loss or "
            "train_loss target",
        )


def _scale_notes(data, in_dtype: str) -> list[str]:
    """Say how the inputs were scaled, or that integer pixels were not (no silent rescaling)."""
    if data.scale is not None:
        return [f"inputs divided by {data.scale:g} (--scale)"]
    x = data.x_train
    if x.dtype.kind in "iu" and np.dtype(in_dtype).kind == "f" and x.size and x.max() > 1:
        top = int(x.max())
        hint = 255 if top <= 255 else top
        return [
            f"inputs are {x.dtype} values up to {top} and are not rescaled; add --scale {hint} to divide them "
            "(e.g. pixels 0-255 into [0, 1])"
        ]
    return []


# ---------------------------------------------------------------- the user's compile settings


def compile_settings(model: keras.Model, engine: str) -> tuple[dict[str, Any], list[str]]:
    """The compile arguments a loaded model was saved with that change how it trains (not what it
    learns), as `engine` ("loop" or "fit") can honour them, and one log line per setting that differs
    from Keras's default: kept, or overridden and why."""
    saved = {
        "jit_compile": bool(model.jit_compile),
        "steps_per_execution": int(getattr(model, "steps_per_execution", 1) or 1),
        "run_eagerly": bool(model.run_eagerly),
    }
    settings = dict(saved)
    notes = []
    if saved["jit_compile"]:
        notes.append("jit_compile=True kept from the model file: the train step is compiled with XLA")
    spe = saved["steps_per_execution"]
    if spe > 1 and engine == "fit":
        notes.append(
            f"steps_per_execution={spe} kept from the model file: fit runs {spe} steps per call and reports the "
            f"loss once per call, so the {spe} step rows of a call hold that call's mean loss"
        )
    elif spe > 1:
        settings["steps_per_execution"] = 1
        notes.append(
            f"steps_per_execution={spe} from the model file is overridden: the instrumented loop runs one step per "
            f"execution so that every step is timed on its own; use --loop fit to train with {spe} steps per execution"
        )
    if saved["run_eagerly"] and engine == "fit":
        notes.append("run_eagerly=True kept from the model file: fit runs the train step eagerly (slow)")
    elif saved["run_eagerly"]:
        settings["run_eagerly"] = False
        notes.append(
            "run_eagerly=True from the model file is overridden: the instrumented loop compiles the train step with "
            "tf.function; use --loop fit to train eagerly"
        )
    return settings, notes


def _model_metrics(model: keras.Model) -> list[Any]:
    """The metrics the model file was compiled with, rebuilt so recompiling keeps them (strings as they are)."""
    saved = model.get_compile_config().get("metrics") if model.compiled and model.get_compile_config() else None
    if saved is None:
        return []
    if isinstance(saved, dict) and "class_name" not in saved:
        raise SpecError(
            "model_file", "metrics given per output (a dict) are for models with several outputs; use a list"
        )
    items = saved if isinstance(saved, (list, tuple)) else [saved]
    return [keras.saving.deserialize_keras_object(m) if isinstance(m, dict) else m for m in items]


# ---------------------------------------------------------------- the kind of the user's loss


def loss_kind(loss: Any) -> tuple[str, str]:
    """(name, kind) of a compiled loss: kind is "sparse" (integer labels), "binary", "categorical",
    "regression" (MSE, MAE, Huber, ...) or "other".

    Read from what the loss is, not its Python type: a loss function's type is just `function`, a
    string may be an alias, and a Loss object's `name` is whatever the user called it. So the kind
    comes from the resolved function's registered name and the Loss class, the name from the user's.
    """
    name = loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(loss, "__name__", None)
    resolved = loss
    if isinstance(loss, str):
        try:
            resolved = keras.losses.get(loss)
        except (ValueError, TypeError):
            resolved = None
    identity = [loss] if isinstance(loss, str) else []
    if isinstance(resolved, keras.losses.Loss):
        identity += [type(resolved).__name__, keras.saving.get_registered_name(type(resolved))]
        fn = getattr(resolved, "fn", None)  # a LossFunctionWrapper names the function it wraps
        identity.append(getattr(fn, "__name__", ""))
    elif callable(resolved):
        identity += [getattr(resolved, "__name__", ""), keras.saving.get_registered_name(resolved)]
    text = " ".join(str(i) for i in identity).lower()
    if "sparse" in text:
        kind = "sparse"
    elif "hinge" in text:
        kind = "other"  # hinge losses take -1/1 targets
    elif "binary" in text:
        kind = "binary"
    elif "categorical" in text:
        kind = "categorical"
    elif any(word in text for word in REGRESSION_LOSS_WORDS):
        kind = "regression"
    else:
        kind = "other"
    return str(name or type(loss).__name__), kind
