"""Invariants: array leaves, vmapped = single runs, one trace, pure = host runner."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import dqn, ppo, sac, td3, trainer

from tests.checks import assert_episodes_read_and_cleared

TINY = ppo.Config(
    total_timesteps=4 * 8 * 6,
    num_envs=4,
    num_steps=8,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 8 * 2,
    num_eval_envs=2,
)


def counting(train: trainer.Train) -> tuple[trainer.Train, dict[str, int]]:
    """The same run, counting how often `step` and `act` (evaluation) are traced."""
    counts = {"step": 0, "act": 0}

    def step(state, iteration):
        counts["step"] += 1
        return train.step(state, iteration)

    def act(*args, **kwargs):  # `mask=` on an env with action masks
        counts["act"] += 1
        return train.act(*args, **kwargs)

    return dataclasses.replace(train, step=step, act=act), counts


@pytest.fixture(scope="module")
def vmapped():
    keys = trainer.seed_keys(0, 3)
    return jax.jit(jax.vmap(ppo.make_train(TINY)))(keys)


def assert_trees_close(a, b, rtol=1e-5, atol=1e-5):
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_every_state_leaf_is_an_array(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    for leaf in jax.tree.leaves((state, metrics)):
        assert isinstance(leaf, jax.Array), type(leaf)
    # init's state, and each step's, are checked as they are traced in tests/test_house.py,
    # for every house file: a compiled init's outputs are arrays whatever the state held.


def test_metric_shapes(vmapped):
    _, metrics = vmapped
    num_intervals = ppo.make_train(TINY).num_intervals
    assert num_intervals == 3
    for group in ("train", "eval"):
        for name, value in metrics[group].items():
            assert value.shape == (3, num_intervals), (group, name)
    expected = {"episodic_return", "episodic_length", "policy_loss", "value_loss", "entropy"}
    assert expected | {"approx_kl", "clipfrac", "explained_variance"} <= set(metrics["train"])


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    train = jax.jit(ppo.make_train(TINY))
    for i in (0, 2):
        single = train(jax.random.key(i))
        assert_trees_close(jax.tree.map(lambda x, i=i: x[i], vmapped), single)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.model.actor.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.allclose(state.obs[0], state.obs[1])


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_train_traces_once():
    train, counts = counting(ppo.make_train(TINY))
    compiled = jax.jit(jax.vmap(train))
    compiled(trainer.seed_keys(0, 2))
    assert counts == {"step": 1, "act": 1}
    compiled(trainer.seed_keys(5, 2))
    assert counts == {"step": 1, "act": 1}


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_host_runner_equals_pure_train(vmapped):
    make_train = ppo.make_train
    traced = {}

    def counted_make_train(config):
        train, traced["counts"] = counting(make_train(config))
        return train

    config = dataclasses.replace(TINY, num_seeds=3)
    result = trainer.run(config, counted_make_train, algo="ppo", verbose=False)
    state, metrics = vmapped
    assert_trees_close(result.state, state)
    for group in ("train", "eval"):
        for name, value in metrics[group].items():
            np.testing.assert_allclose(result.metrics[group][name], value, rtol=1e-5, atol=1e-5)
    # One interval program for all intervals: step traced once, not once per interval.
    assert traced["counts"] == {"step": 1, "act": 1}
    assert result.summary["env_steps"] == TINY.total_timesteps


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_ragged_last_interval_runs_exactly_num_iterations():
    config = dataclasses.replace(TINY, total_timesteps=4 * 8 * 5)  # 5 iterations, eval every 2
    train = ppo.make_train(config)
    assert train.num_intervals == 3
    state, metrics = jax.jit(train)(jax.random.key(0))
    adam_state = state.opt_state[1][0]
    assert int(adam_state.count) == 5 * config.update_epochs * config.num_minibatches
    assert np.all(np.isfinite(metrics["train"]["policy_loss"]))
    assert train.env_steps(train.num_intervals - 1) == 160


REPLAY = dict(total_timesteps=400, buffer_size=64, batch_size=8, learning_starts=40, eval_every=40)


@pytest.mark.parametrize(
    "config, branches",
    [
        (dqn.Config(**REPLAY, num_envs=4, train_frequency=2, hidden_sizes=(8,)), 1),  # warm-up
        (sac.Config(**REPLAY, hidden_size=8), 1),  # warm-up
        (td3.Config(**REPLAY, hidden_size=8), 2),  # warm-up, the delayed actor
    ],
    ids=["dqn", "sac", "td3"],
)
def test_vmapped_seeds_branch_on_the_shared_iteration(config, branches):
    # The branch predicates read the iteration, which every seed shares: under vmap each stays
    # a `cond` that runs one branch. A predicate read from the (batched) state would make vmap
    # run both branches and select, an update computed and thrown away every warm-up step.
    module = {dqn.Config: dqn, sac.Config: sac, td3.Config: td3}[type(config)]
    train = module.make_train(config)
    # The state's shapes only: nothing runs (started eagerly, SAC's took 12 s of op compiles).
    state, _ = jax.eval_shape(jax.vmap(train.start), trainer.seed_keys(0, 2))
    step = jax.vmap(train.step, in_axes=(0, None))
    program = str(jax.make_jaxpr(step)(state, jnp.int32(0)))
    assert program.count(" cond[") == branches
