"""A settings group is one module (issue 26): a toy group defined in this test alone (a dataclass, a parser, a
command-line option, a form field, a check and a training hook) reaches `batchlab sweep`, its --help, the
window's form description, the run file's spec and the training child's hook list, with no other module
changed. And the built-in groups: every setting has one home, its option and its default."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from batchlab.core import cli, settings
from batchlab.core.errors import SpecError
from batchlab.core.events import log_event
from batchlab.core.presets import PRESETS
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.runfile.writer import RunFileWriter
from batchlab.core.settings.base import HookFactory, Setting, SettingsGroup, blank, fail, whole
from batchlab.core.spec import SweepSpec, build_spec, preset_values, spec_errors

from tests.core.test_runfile import sweep_started

TINY = {"preset": "mnist-mlp", "samples": 64, "val_samples": 0, "epochs": 1, "batch_sizes": "32", "device": "cpu"}


@dataclass(frozen=True)
class ToySettings:
    toy_level: int = 3


def parse_toy_level(value: Any) -> int:
    return whole("toy_level", 3 if blank(value) else value, 0, "the toy level must be a whole number from 0 to 9", 9)


def check_toy(p: dict[str, Any], errors: dict) -> None:
    if p.get("toy_level", 0) > 5 and p.get("loop") == "fit":
        fail(errors, "toy_level", f"{p['toy_level']} needs BatchLab's loop; use --loop loop or a level up to 5")


class ToyHook:
    """Counts the steps it sees and says so at the run's end (a Keras-callback-shaped hook)."""

    def __init__(self, level: int, emit):
        self.level, self.steps, self.emit = level, 0, emit

    def on_run_begin(self, logs):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_train_batch_end(self, step, logs):
        self.steps += 1

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_epoch_end(self, epoch, logs):
        pass

    def on_run_end(self, logs):
        self.emit(log_event("info", f"toy level {self.level} saw {self.steps} steps"))


def toy_hook(setup, emit, built: dict) -> ToyHook | None:
    level = setup.run.sweep.toy_level
    return ToyHook(level, emit) if level else None


TOY = SettingsGroup(
    name="toy",
    title="Toy settings",
    values=ToySettings,
    settings=(Setting("toy_level", "int", parse_toy_level, "how toy each run is, 0 to 9", "Toy level", "--toy-level"),),
    checks=(check_toy,),
    hooks=(HookFactory("toy", toy_hook, 95),),  # after NanCheck (90), before the noise scale (100)
)


def test_a_toy_group_reaches_the_command_line_the_form_and_the_run_file(tmp_path, capsys):
    with settings.registered(TOY):
        spec = build_spec(cli.sweep_values(cli._build_parser().parse_args(["sweep", "--toy-level", "7"])))
        assert spec.toy_level == 7 and spec.group("toy") == ToySettings(7)
        assert build_spec({}).toy_level == 3  # not given: the group's default
        with pytest.raises(SystemExit):
            cli.main(["sweep", "--help"])
        help_text = capsys.readouterr().out
        assert "Toy settings:" in help_text and "--toy-level" in help_text
        assert cli.main(["sweep", "--toy-level", "12"]) == 2
        assert capsys.readouterr().err.strip().startswith("batchlab: toy_level: 12 is too large")
        assert spec_errors({"toy_level": 7, "loop": "fit"})["toy_level"].message.startswith("7 needs BatchLab's loop")

        form = {name: fields for name, _title, fields in settings.form_description()}
        (field,) = form["toy"]
        assert (field.name, field.label, field.kind, field.tooltip) == (
            "toy_level",
            "Toy level",
            "int",
            TOY.settings[0].help,
        )

        out = tmp_path / "toy.h5"
        writer = RunFileWriter(out)
        writer.handle(sweep_started(spec))
        writer.close()
        stored = read_run_file(out).spec
        assert stored["toy_level"] == 7
        assert SweepSpec.from_dict(stored) == spec
    with pytest.raises(SpecError, match="unknown setting"):  # gone with its group
        build_spec({"toy_level": 7})


HOOKS_SCRIPT = """
import json, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from batchlab.core import settings
from batchlab.core.spec import build_spec
from batchlab.core.training import run as run_module
from tests.core.test_settings_groups import TINY, TOY

with settings.registered(TOY):
    run = build_spec({**TINY, "toy_level": 7, "target": "train_loss=0.0001"}).runs()[0]
    events = []
    hooks = run_module.standard_hooks(0, events.append, None, None)
    built = run_module.build_run(run, events.append, lambda: False, hooks)
    names = hooks.names()
    status = run_module.train_run(run, events.append, lambda: False, None, None, "cpu", built=built)
    toy = [e["message"] for e in events if e["type"] == "log" and e["message"].startswith("toy")]
    steps = sum(len(e["loss"]) for e in events if e["type"] == "steps")
print(json.dumps({"names": names, "status": status, "toy": toy, "steps": steps}))
"""


def test_a_toy_groups_hook_joins_the_childs_hook_list_at_its_priority():
    result = subprocess.run([sys.executable, "-c", HOOKS_SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    names = got["names"]
    assert names.index("nan_check") < names.index("toy") < names.index("evaluations") < names.index("run_events")
    assert names[:3] == ["learning_rate", "step_log", "gc_watch"]
    assert got["status"] == "ok" and got["toy"] == ["toy level 7 saw 2 steps"] and got["steps"] == 2


def test_every_setting_has_one_group_an_option_or_a_reason_and_its_presets_value():
    names = [s.name for s in settings.settings()]
    assert len(names) == len(set(names))
    assert set(preset_values({})) == set(names)
    for preset in PRESETS:  # a preset sets group values, and only settings' values
        assert set(preset_values({"preset": preset})) == set(names)
    options = [s.option for s in settings.settings() if s.option]
    assert len(options) == len(set(options))
    default = SweepSpec()
    for g in settings.groups():  # the dataclass defaults are the default preset's values
        assert g.flat(default.group(g.name)) == {k: preset_values({})[k] for k in g.flat(g.values())}


def test_abort_losers_is_a_budget_and_target_setting_that_needs_a_target(capsys):
    args = cli._build_parser().parse_args(["sweep", "--target", "val_loss=0.1", "--abort-losers"])
    spec = build_spec(cli.sweep_values(args))
    assert spec.abort_losers is True and spec.group("budget").abort_losers is True
    assert build_spec({}).abort_losers is False
    assert spec_errors({"abort_losers": True})["abort_losers"].message.startswith("only applies with a target")
    assert cli.main(["sweep", "--abort-losers"]) == 2
    assert "abort_losers: only applies with a target" in capsys.readouterr().err
    (field,) = [
        f for f in dict((n, fs) for n, _t, fs in settings.form_description())["budget"] if f.name == "abort_losers"
    ]
    assert (field.label, field.kind) == ("Abort runs that cannot win", "bool")
    assert SweepSpec.from_dict({**spec.to_dict()}).abort_losers is True
    old = {k: v for k, v in spec.to_dict().items() if k != "abort_losers"}  # a file from before the setting
    assert SweepSpec.from_dict(old).abort_losers is False


def test_the_child_takes_the_parents_rate_and_spec_without_reading_a_file(tmp_path):
    """RunSpec carries its learning rate as a plain value; restoring it reads no file (the data is gone)."""
    data = tmp_path / "d.npz"
    import numpy as np

    np.savez(data, x_train=np.zeros((64, 784)), y_train=np.zeros(64, dtype=int))
    spec = build_spec({"preset": "mnist-mlp", "data": str(data), "batch_sizes": "32", "val_samples": 0, "lr": 0.05})
    sent = spec.runs()[0].to_dict()
    assert sent["lr"] == 0.05
    data.unlink()
    from batchlab.core.spec import RunSpec

    run = RunSpec.from_dict(json.loads(json.dumps(sent)))
    assert run.lr == 0.05 and run.sweep == spec
