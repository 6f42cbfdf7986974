"""Configs refuse bad values when built (ranges, NaN), before anything compiles; config.json
round-trips every Config exactly (tuples, infinities)."""

import dataclasses
import json
import math
import subprocess
import sys
import typing

import pytest
from canter.algorithms import (
    dqn,
    fast_td3,
    ppo,
    ppo_continuous,
    ppo_rnd,
    ppo_rnn,
    ppo_trxl,
    pqn,
    pqn_rnn,
    sac,
    td3,
)
from canter.common.config import ConfigError, Range
from canter.common.run.batch import float_fields, make_batch
from canter.common.run.rundir import RunDir, config_record

ALGORITHMS = [dqn, fast_td3, ppo, ppo_continuous, ppo_rnd, ppo_rnn, ppo_trxl, pqn, pqn_rnn, sac]
ALGORITHMS += [td3]


@pytest.mark.parametrize("module", ALGORITHMS, ids=lambda m: m.__name__.split(".")[-1])
def test_every_float_field_has_a_range_and_refuses_nan(module):
    hints = typing.get_type_hints(module.Config, include_extras=True)
    for name in float_fields(module.Config):
        assert any(isinstance(m, Range) for m in getattr(hints[name], "__metadata__", ())), name
        with pytest.raises(ConfigError, match=rf"{name} = nan"):
            dataclasses.replace(module.Config(), **{name: math.nan})


@pytest.mark.parametrize(
    "module, field, value",
    [
        (dqn, "exploration_steps", 0),  # divided by zero: NaN epsilon
        (dqn, "gamma", 1.5),
        (dqn, "tau", 0.0),
        (dqn, "learning_rate", -1e-3),
        (pqn, "exploration_fraction", 0.0),
        (ppo, "gae_lambda", 1.01),
        (ppo, "ent_coef", -0.01),
        (sac, "tau", 1.5),
        (td3, "noise_clip", -0.5),
        (ppo_continuous, "learning_rate", math.inf),
        (sac, "alpha", 0.0),
    ],
)
def test_out_of_range_values_are_refused_naming_the_field(module, field, value):
    with pytest.raises(ConfigError, match=rf"Out of range: {field} = {value}.*allowed"):
        dataclasses.replace(module.Config(), **{field: value})


@pytest.mark.parametrize("module", ALGORITHMS, ids=lambda m: m.__name__.split(".")[-1])
def test_every_field_of_a_few_choices_refuses_another(module):
    hints = typing.get_type_hints(module.Config)
    literal = [n for n, h in hints.items() if typing.get_origin(h) is typing.Literal]
    for name in literal:
        for choice in typing.get_args(hints[name]):  # every choice is allowed
            dataclasses.replace(module.Config(), **{name: choice})
        with pytest.raises(ConfigError, match=rf"Not one of the choices: {name} = 'other'"):
            dataclasses.replace(module.Config(), **{name: "other"})
    if module in (
        ppo,
        ppo_rnd,
        ppo_rnn,
        ppo_trxl,
        pqn,
        pqn_rnn,
    ):  # the files known to have such fields
        assert literal, module.__name__


def test_no_clipping_and_certain_values_at_the_edges_are_allowed():
    ppo.Config(max_grad_norm=math.inf, gamma=1.0, ent_coef=0.0, learning_rate=0.0)  # frozen
    dqn.Config(tau=1.0, exploration_delay=0, end_e=0.0)
    pqn.Config(exploration_fraction=1.0)


def test_a_sweep_point_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="learning_rate = -0.1"):
        make_batch(ppo.Config(), {"learning_rate": [1e-3, -0.1]})


def test_cli_refuses_out_of_range_before_compiling(repo_root, tmp_path):
    command = [
        sys.executable,
        str(repo_root / "algorithms" / "dqn.py"),
        "--exploration-steps",
        "0",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "exploration_steps = 0" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "config",
    [dqn.Config(hidden_sizes=(32, 16)), ppo.Config(max_grad_norm=math.inf, learning_rate=1e-3)],
    ids=["dqn-tuple", "ppo-inf"],
)
def test_config_json_round_trips_exactly(tmp_path, config):
    algo = type(config).__module__.split(".")[-1]
    out = RunDir(tmp_path)
    sweep = {"gamma": [0.9, 0.99]}
    out.write_config(config_record(algo, config, sweep))

    def refuse(constant):
        raise ValueError(f"non-standard JSON: {constant}")

    json.loads(out.config_file.read_text(), parse_constant=refuse)  # strict JSON on disk
    assert out.load_config(type(config), algo) == (algo, config, sweep)
    assert out.load_config(type(config)) == (algo, config, sweep)
    assert out.read_config() == config_record(algo, config, sweep)
    with pytest.raises(ConfigError, match="is a"):
        out.load_config(sac.Config, "sac")
