"""Checks every file of the house takes, from its whole program traced and lowered, never
compiled: a new algorithm file joins them by its entry in `canter.algorithms.HOUSE`.

Each file's default `Config`, two seeds vmapped as the runner vmaps them: every leaf of the
state is an array where `init` and `step` make it (during the trace, where a stored Python
number or function is still itself: a compiled program's outputs are arrays whatever the state
held), each metric is a float per seed and interval, `step` and `act` are traced once each, and
the program calls no LAPACK routine (common/blocks/initializers.py: XLA:CPU's LAPACK calls
deadlock under vmap). A trace and a lowering cost about 1-4 s a file on 2 busy cores, where
compiling the same program took 10-20 s (tests/README.md, "A new algorithm file")."""

import dataclasses
import functools
import importlib
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from canter.algorithms import HOUSE, ppo, trainer

from tests.checks import needs

# ppo_atari's default game needs ale-py (the atari extra): skipped with its install line;
# alphazero's default game needs pgx (the pgx extra), ippo's and mappo's default team JaxMARL.
EXTRAS = {"ppo_atari": ("ale_py", "atari"), "alphazero": ("pgx", "pgx")}
EXTRAS |= {name: ("jaxmarl", "jaxmarl") for name in ("ippo", "mappo")}
FILES = [
    pytest.param(name, marks=needs(*EXTRAS[name])) if name in EXTRAS else name for name in HOUSE
]


def assert_arrays_only(tree: Any, what: str) -> None:
    """Every leaf of `tree` is an array (a tracer, during a trace), never a Python number,
    string or function: `jax.grad`, optax and `jax.vmap` then take whole Modules unfiltered."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    others = [
        f"{jax.tree_util.keystr(p)}: {type(x).__name__}" for p, x in leaves if not eqx.is_array(x)
    ]
    assert not others, f"{what} holds leaves that are not arrays: {others[:5]}"


def checked(train: trainer.Train) -> tuple[trainer.Train, dict[str, int]]:
    """The same run, checking the leaves of what `init` and `step` return as they are traced,
    and counting how often `step` and `act` are traced."""
    counts = {"step": 0, "act": 0}

    def init(key):
        state = train.init(key)
        assert_arrays_only(state, "init's state")
        return state

    def step(state, iteration):
        counts["step"] += 1
        state, metrics = train.step(state, iteration)
        assert_arrays_only(state, "step's state")
        assert_arrays_only(metrics, "step's metrics")
        return state, metrics

    def act(*args, **kwargs):
        counts["act"] += 1
        return train.act(*args, **kwargs)

    return dataclasses.replace(train, init=init, step=step, act=act), counts


SEEDS = 2


@functools.cache
def traced(name: str) -> tuple[trainer.Train, Any, dict[str, int]]:
    """File `name`'s default run, SEEDS seeds vmapped, traced (the checks above run then): the
    Train, the traced program (`out_info`, `lower()`) and the counts of traces."""
    module = importlib.import_module(f"canter.algorithms.{name}")
    train, counts = checked(module.make_train(module.Config()))
    program = jax.jit(jax.vmap(train)).trace(trainer.seed_keys(0, SEEDS))
    return train, program, counts


@pytest.mark.parametrize("name", FILES)
def test_state_leaves_are_arrays_metrics_float_per_seed_and_interval_traced_once(name):
    train, program, counts = traced(name)  # the leaves are checked while it traces
    _, metrics = program.out_info
    assert set(metrics) == {"train", "eval"}
    assert set(metrics["eval"]) == {"episodic_return", "episodic_length"}
    assert {"episodic_return", "episodic_length"} <= set(metrics["train"])
    for group in ("train", "eval"):
        for metric, value in metrics[group].items():
            assert value.shape == (SEEDS, train.num_intervals), (group, metric, value.shape)
            # floats: skipped work (`trainer.when`) reads NaN
            assert jnp.issubdtype(value.dtype, jnp.floating), (group, metric, value.dtype)
    # One program for every interval: `step` traced once, and once more for its shapes where a
    # ragged last interval skips iterations (`trainer.when`); evaluation's `act` once.
    ragged = train.num_iterations % train.interval_iterations != 0
    assert counts == {"step": 2 if ragged else 1, "act": 1}, counts


@pytest.mark.parametrize("name", FILES)
def test_vmapped_train_has_no_lapack_call(name):
    text = traced(name)[1].lower().as_text()
    assert "lapack" not in text.lower(), f"{name} calls LAPACK inside train"


def test_the_leaf_check_catches_a_stored_number_and_a_stored_function():
    """The partner of the checks above: a state that keeps a learning rate as a Python float,
    or an activation as a function, fails while it traces, naming the leaf."""
    train = ppo.make_train(ppo.Config())
    keys = trainer.seed_keys(0, SEEDS)
    for extra, kind in ((0.5, "float"), (lambda x: jnp.maximum(x, 0.0), "function")):
        broken = dataclasses.replace(train, init=lambda key, extra=extra: (train.init(key), extra))
        with pytest.raises(AssertionError, match=rf"\[1\]: {kind}"):
            jax.eval_shape(jax.vmap(checked(broken)[0].init), keys)
    # The unbroken state passes the same check.
    jax.eval_shape(jax.vmap(checked(train)[0].init), keys)
