"""`--eval-policy`: greedy or sampled evaluation, meaning the same in every file with a
stochastic policy; a bad value is refused before anything compiles."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo, ppo_continuous, ppo_rnn, sac
from canter.common.config import ConfigError
from canter.common.run import evaluation

DRAWS = 4096


def play(module, config, obs_dim: int, prepare=lambda state: state):
    """The first actions of DRAWS copies of one observation, greedy and sampled, with the
    state of a fresh (untrained) run, changed by `prepare`."""
    actions = {}
    for kind in ("greedy", "sampled"):
        train = module.make_train(dataclasses.replace(config, eval_policy=kind))
        state = prepare(train.init(jax.random.key(0)))
        obs = jnp.full((DRAWS, obs_dim), 0.3)
        carry = evaluation.start_carry(train, DRAWS, jax.random.key(1))
        actions[kind], _ = jax.jit(evaluation.policy(train, state))(obs, carry)
    return train, state, actions


def sharpen(state):
    """The policy's output bias set to (2, 0.5, -1): an untrained policy's logits are near zero
    (gain 0.01), where sampling could not be told from uniform draws."""
    bias = jnp.array([2.0, 0.5, -1.0])
    return eqx.tree_at(lambda s: s.model.actor.layers[-1].bias, state, bias)


@pytest.mark.parametrize("module", [ppo, ppo_rnn], ids=["ppo", "ppo_rnn"])
def test_a_discrete_sampled_policy_draws_from_the_softmax_greedy_takes_its_mode(module):
    config = module.Config(env="Acrobot-v1", num_envs=4, num_steps=4, total_timesteps=64)
    train, state, actions = play(module, config, obs_dim=6, prepare=sharpen)
    carry = evaluation.start_carry(train, 1)
    if train.initial_carry is None:
        logits = state.model.logits(jnp.full(6, 0.3))
    else:
        logits = jax.vmap(state.model)(carry[0], jnp.full((1, 6), 0.3), jnp.zeros(1, bool))[1][0]
    probs = np.asarray(jax.nn.softmax(logits))
    assert probs.max() - probs.min() > 0.2, probs  # far from uniform: the test can tell
    assert np.all(np.asarray(actions["greedy"]) == np.argmax(probs))
    counts = np.bincount(np.asarray(actions["sampled"]), minlength=3) / DRAWS
    np.testing.assert_allclose(counts, probs, atol=4 * np.sqrt(0.25 / DRAWS))


@pytest.mark.parametrize("module", [ppo_continuous, sac], ids=["ppo_continuous", "sac"])
def test_a_continuous_sampled_policy_spreads_around_the_greedy_mean(module):
    config = module.Config(env="Pendulum-v1", total_timesteps=4096, eval_every=4096)
    _, _, actions = play(module, config, obs_dim=3)
    greedy, sampled = np.asarray(actions["greedy"]), np.asarray(actions["sampled"])
    assert np.all(greedy == greedy[0])  # one observation, one action
    assert sampled.std() > 0.1 and len(np.unique(sampled)) > DRAWS // 2
    assert np.all(np.abs(sampled) <= 2.0)  # Pendulum's bounds: clipped or squashed into them
    assert abs(np.median(sampled) - greedy[0, 0]) < 0.2  # a draw centred on the mean


def test_a_sampled_evaluation_plays_like_a_random_policy_before_training():
    """ppo_rnn (the carry holds the GRU state and the key) on CartPole, untrained: its
    near-uniform policy, sampled, lasts about as long as a random one (22 steps on average);
    its mode is a fixed function of the observation (here it balances for about 100 steps)."""
    config = ppo_rnn.Config(num_envs=4, num_steps=8, total_timesteps=64, num_eval_envs=64)
    lengths = {}
    for kind in ("greedy", "sampled"):
        train = ppo_rnn.make_train(dataclasses.replace(config, eval_policy=kind))
        state = train.init(jax.random.key(0))
        metrics = jax.jit(train.evaluate)(state, jax.random.key(1))
        lengths[kind] = float(metrics["episodic_length"])
    assert 16 < lengths["sampled"] < 30 and abs(lengths["greedy"] - lengths["sampled"]) > 20


def test_an_unknown_eval_policy_is_refused_with_the_choices():
    # The Config refuses it when built (a field of a few choices) ...
    with pytest.raises(
        ConfigError, match="eval_policy = 'mode' \\(choose one of 'greedy', 'sampled'"
    ):
        ppo.Config(eval_policy="mode")
    # ... and the trainer, for a config whose type does not say (a fork's plain `str` field).
    config = dataclasses.replace(ppo.Config(), total_timesteps=512)
    object.__setattr__(config, "eval_policy", "mode")
    with pytest.raises(ConfigError, match="eval_policy='mode': choose one of greedy, sampled"):
        ppo.make_train(config)
