"""Named presets: a workload with the data, budget and optimizer defaults it was published with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WORKLOADS = ("autoencoder", "cnn", "mlp", "keras-file")
DEFAULT_PRESET = "mnist-autoencoder"

POWERS_OF_TWO_8_TO_512 = (8, 16, 32, 64, 128, 256, 512)
POWERS_OF_TWO_16_TO_1024 = (16, 32, 64, 128, 256, 512, 1024)
POWERS_OF_FOUR_16_TO_4096 = (16, 64, 256, 1024, 4096)
POWERS_OF_FOUR_16_TO_1024 = (16, 64, 256, 1024)

# Settings every preset starts from; a preset lists only what it changes.
COMMON_DEFAULTS: dict[str, Any] = {
    "model_file": None,
    "data": "bundled",
    "budget_unit": "epochs",
    "momentum": 0.0,
    "seeds": (0,),
    "device": "auto",
    "loop": "loop",
    "sync": "every_step",
    "target": None,  # train the whole budget
    "eval_every": None,  # evaluations at epoch ends only (with a target)
    "keep_training": False,
    "accumulate": 1,  # no gradient accumulation
    "fused": 1,  # training steps per call of the step function (1: one step per call, every step timed)
    "xla": False,  # compile the train step with XLA (jit_compile)
    "mixed_precision": False,  # mixed_float16 with loss scaling (GPU only)
    "tf_threads": 0,  # the training child's TensorFlow threads; 0: TensorFlow's default
    "replicas": 1,  # data-parallel replicas (MirroredStrategy) each run trains on; 1: one device
    "workers": 1,  # worker processes (MultiWorkerMirroredStrategy) each run trains in; 1: one process
    "prepare_ahead": False,  # fused runs: the next run's child prepares (builds, compiles) while this one trains
    "parallel": "",  # runs in flight at once: "" one at a time, "gpus" one per local GPU, "N" N at once
    "ray": "",  # a Ray cluster to submit runs to: "" none, auto, local or ray://host:port
    "ray_cpus": 1.0,  # with ray: the CPUs a run asks for when it trains on a CPU
    "abort_losers": False,  # with a target: stop runs that can no longer reach it sooner than the best so far
    "lr_from": None,  # an lr-find run file whose suggested rate per batch size replaces lr
    # learning-rate rule and schedule (docs/learning-rates.md): by default the rate is lr at every batch size
    "lr_rule": "constant",
    "lr_base_batch": None,  # B0: the smallest batch size of the sweep
    "warmup": 0.0,
    "warmup_unit": "epochs",
    "lr_schedule": "constant",
    "lr_decay_factor": 0.1,
    "lr_decay_every": 2,  # epochs, step decay
    "lr_patience": 2,  # epochs, reduce-on-plateau
    "nesterov": False,
    "weight_decay": None,  # the optimizer's own default
    "scale": None,  # inputs as stored; the MNIST workloads divide integer pixels by 255 themselves
    "target_column": None,  # CSV data only: the target column(s)
    "val_fraction": 0.2,  # CSV data only: the last 20% of rows validate
    "noise_scale_every": None,  # gradient noise scale: not measured
    "noise_scale_parts": 4,  # micro-batches a measured step's batch is split into
    # batch-size schedule (core/batch_rules.py, docs/learning-rates.md): by default each run keeps its batch
    "batch_schedule": "constant",
    "batch_growth_factor": 2.0,  # grow: the batch is multiplied by this ...
    "batch_growth_every": 2,  # ... every this many epochs
    "max_batch": None,  # grow: the largest batch (then the rate decays); None = the training samples
    "batch_switch_to": None,  # two_phase: the larger batch
    "batch_patience": 2,  # two_phase: evaluations without a better validation loss before the switch
    "lr_pick": "steepest",  # with lr_from: which suggestion of the lr-find file (steepest or min10)
}


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    defaults: dict[str, Any]


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="mnist-autoencoder",
            title="MNIST dense autoencoder",
            description=(
                "784-128-32-128-784 dense autoencoder, sigmoid output, binary cross-entropy summed "
                "over the 784 pixels; 5,000 fixed samples, 10 epochs, batches as consecutive slices."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "autoencoder",
                "samples": 5000,
                "val_samples": 1000,
                "epochs": 10,
                "batch_sizes": POWERS_OF_TWO_8_TO_512,
                "optimizer": "adam",
                "lr": 0.001,
                "shuffle": False,
            },
        ),
        Preset(
            name="mnist-cnn",
            title="MNIST small CNN",
            description=(
                "10 classes (labels 0-9) of 28x28 images: conv 10@5x5, max-pool 2, conv 20@5x5, max-pool 2, "
                "conv 40@3x3, max-pool 2, dense 10, log-softmax; SGD lr 0.02, momentum 0.5; shuffled batches."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "cnn",
                "samples": 10000,
                "val_samples": 2000,
                "epochs": 3,
                "batch_sizes": POWERS_OF_TWO_16_TO_1024,
                "optimizer": "sgd",
                "lr": 0.02,
                "momentum": 0.5,
                "shuffle": True,
            },
        ),
        Preset(
            name="mnist-mlp",
            title="MNIST MLP classifier",
            description="784-256-10 ReLU classifier, softmax cross-entropy, Adam lr 0.001; shuffled batches.",
            defaults={
                **COMMON_DEFAULTS,
                "workload": "mlp",
                "samples": 10000,
                "val_samples": 2000,
                "epochs": 5,
                "batch_sizes": POWERS_OF_TWO_16_TO_1024,
                "optimizer": "adam",
                "lr": 0.001,
                "shuffle": True,
            },
        ),
        # The published experiments (docs/experiments.md: commands, what this machine measured, the papers').
        Preset(
            name="mnist-cnn-98",
            title="MNIST CNN to 98% validation accuracy",
            description=(
                "The mnist-cnn model and optimizer (SGD 0.02, momentum 0.5) on 30,000 bundled training images "
                "(bundled-large), batch sizes 8 to 512 (1, 2 and 4 need --batch-sizes: at one to four examples "
                "a step they would add most of an hour), each trained until validation accuracy is above 0.98 "
                "(evaluated every 100 steps and at epoch ends), at most 8 epochs; steps, examples and time to "
                "target per batch size."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "cnn",
                "data": "bundled-large",
                "samples": 30000,
                "val_samples": 2000,
                "epochs": 8,  # the most a run may train (240,000 examples); docs/experiments.md: the time it takes
                "batch_sizes": POWERS_OF_TWO_8_TO_512,
                "optimizer": "sgd",
                "lr": 0.02,
                "momentum": 0.5,
                "shuffle": True,
                "target": "val_accuracy=0.98",
                "eval_every": 100,
            },
        ),
        Preset(
            name="golmant-lsr",
            title="Steps to a training loss under linear LR scaling",
            description=(
                "Golmant et al. 2018: optimizer steps until the training loss is below 0.1, MLP on 4,096 "
                "images, batch sizes 16 to 4,096, SGD with lr 0.01 x B/16 (LSR) after a 2-epoch warmup; "
                "--lr-rule constant --warmup 0 (BLR) or --lr-rule sqrt (SRSR) for the other two rules."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "mlp",
                "samples": 4096,
                "val_samples": 0,
                "epochs": 200,  # the most a run may train
                "batch_sizes": POWERS_OF_FOUR_16_TO_4096,
                "optimizer": "sgd",
                "lr": 0.01,
                "shuffle": True,
                "target": "train_loss=0.1",
                "eval_every": 10,
                "lr_rule": "linear",
                "lr_base_batch": 16,
                "warmup": 2.0,
            },
        ),
        Preset(
            name="shallue-mnist",
            title="Steps to validation error 0.03, rate per batch size from the range test",
            description=(
                "After Shallue et al. 2018: the mnist-cnn model with SGD momentum 0.9 on 30,000 images, batch "
                "sizes 16, 64, 256 and 1,024, each trained until validation error is below 0.03 (every 50 steps "
                "and at epoch ends), at most 40 epochs, at the min/10 rate of an LR range test per batch size: "
                "run batchlab lr-find --preset shallue-mnist first and pass its file with --lr-from. Their "
                "target, 0.01, is out of this small CNN's reach here, and 0.02 it crosses by chance "
                "(docs/experiments.md)."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "cnn",
                "data": "bundled-large",  # on the bundled 10,000 images this CNN levels off near 0.03 error
                "samples": 30000,
                "val_samples": 2000,
                "epochs": 40,  # the most a run may train: batch 1,024 has 30 steps an epoch
                "batch_sizes": POWERS_OF_FOUR_16_TO_1024,  # 32, 128, 512 a --batch-sizes away (2 cores)
                "optimizer": "sgd",
                "lr": 0.02,  # used only without --lr-from
                "lr_pick": "min10",  # the steepest suggestion stopped this CNN learning with momentum 0.9
                "momentum": 0.9,
                "shuffle": True,
                # 0.01 is out of reach; around 0.02 the error moves by ~0.005 between evaluations, so the first
                # crossing of 0.02 is a matter of luck; 0.03 every batch size met, in steps that fall, then flatten
                "target": "val_error=0.03",
                "eval_every": 50,
            },
        ),
        Preset(
            name="keras-file",
            title="Your own .keras model",
            description=(
                "A model saved with model.save('name.keras'), loaded in safe mode, trained with its "
                "compiled loss and optimizer unless you name another optimizer."
            ),
            defaults={
                **COMMON_DEFAULTS,
                "workload": "keras-file",
                "samples": 5000,
                "val_samples": 1000,
                "epochs": 5,
                "batch_sizes": (16, 32, 64, 128, 256),
                "optimizer": "model",
                "lr": None,
                "shuffle": True,
            },
        ),
    )
}

# The workloads sized from the data (core/preset_fit.py): what `--workload NAME` without --preset means, and the
# choice for data that does not fit an MNIST preset's model. Their settings are the MNIST preset's of that workload;
# the run's log says the model built.
SIZED_FROM_DATA = {"autoencoder": "mnist-autoencoder", "cnn": "mnist-cnn", "mlp": "mnist-mlp"}
PRESETS.update(
    {
        p.name: p
        for p in (
            Preset(
                name="autoencoder",
                title="Dense autoencoder sized from the data",
                description=(
                    "F-128-32-128-F dense autoencoder for samples of F values (784 on MNIST; any layout, "
                    "flattened), sigmoid output, binary cross-entropy summed over the F values, inputs in [0, 1]; "
                    "Adam lr 0.001, 10 epochs. Sized from the data: the run's log says the model it built."
                ),
                defaults=dict(PRESETS["mnist-autoencoder"].defaults),
            ),
            Preset(
                name="cnn",
                title="Small CNN sized from the data",
                description=(
                    "The mnist-cnn layers for H x W images (22x22 or larger) with any channels, one output per "
                    "class from 0 to the largest label; SGD lr 0.02, momentum 0.5. Sized from the data: the "
                    "run's log says the model it built."
                ),
                defaults=dict(PRESETS["mnist-cnn"].defaults),
            ),
            Preset(
                name="mlp",
                title="MLP classifier sized from the data",
                description=(
                    "F-256-C ReLU classifier for samples of F values (flattened) and C classes (0 to the largest "
                    "label); Adam lr 0.001. Sized from the data: the run's log says the model it built."
                ),
                defaults=dict(PRESETS["mnist-mlp"].defaults),
            ),
        )
    }
)


def preset_defaults(name: str) -> dict[str, Any]:
    """Every spec field's value as the preset sets it (a copy: callers may change it)."""
    return dict(PRESETS[name].defaults)


# The range `batchlab lr-find` tries for a preset whose model needs another than its defaults (1e-6 to 10 over
# 200 steps, core/lr_find.py); an option given on the command line (or a field filled in the window) wins.
# shallue-mnist: the CNN with momentum 0.9 stops learning above ~0.3 without the loss blowing up, and in 200
# steps from 1e-6 it had ~30 steps between 0.01 and 0.1, too few to learn: 400 steps from 1e-4 to 1 give it
# 200 there (docs/experiments.md).
LR_FIND_RANGES: dict[str, dict[str, float | int]] = {
    "shallue-mnist": {"lr_min": 1e-4, "lr_max": 1.0, "lr_steps": 400},
}
