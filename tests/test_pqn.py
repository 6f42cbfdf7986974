"""PQN: Q(lambda) returns by hand and against NumPy, probes, invariants, CLI, CartPole learning."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import pqn, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

# --- math


def test_q_lambda_returns_by_hand():
    # Three steps, two envs, gamma = lambda = 0.5. next_values[t] = max_a Q(next obs of step t).
    # env 0: step 1 ends by truncation (10 is the value of its final observation);
    # env 1: step 0 ends by termination. Step 2 is the last of the rollout: it bootstraps.
    rewards = jnp.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    next_values = jnp.array([[4.0, 4.0], [10.0, 5.0], [6.0, 6.0]])
    terminated = jnp.array([[False, True], [False, False], [False, False]])
    truncated = jnp.array([[False, False], [True, False], [False, False]])
    returns = pqn.q_lambda_returns(rewards, next_values, terminated, truncated, 0.5, 0.5)
    env0 = [
        1.0 + 0.5 * (0.5 * 4.0 + 0.5 * 7.0),  # 3.75: mixes V=4 with G_1 = 7
        2.0 + 0.5 * 10.0,  # 7: truncated, bootstraps from the final observation, cut there
        3.0 + 0.5 * 6.0,  # 6: last rollout step, bootstraps from its next value
    ]
    env1 = [
        1.0,  # terminated: no bootstrap at all
        2.0 + 0.5 * (0.5 * 5.0 + 0.5 * 6.0),  # 4.75
        3.0 + 0.5 * 6.0,  # 6
    ]
    np.testing.assert_allclose(returns, np.array([env0, env1]).T, rtol=1e-6)
    # The two off-by-one bugs give other numbers: truncation as termination (G_1 = 2 for env 0),
    # or the recursion not cut at the truncation (G_1 = 2 + 0.5 (5 + 0.5 * 6) = 6.0... != 7).
    as_termination = pqn.q_lambda_returns(
        rewards, next_values, terminated | truncated, truncated, 0.5, 0.5
    )
    assert float(as_termination[1, 0]) == pytest.approx(2.0)
    uncut = pqn.q_lambda_returns(rewards, next_values, terminated, truncated & False, 0.5, 0.5)
    assert float(uncut[1, 0]) == pytest.approx(2.0 + 0.5 * (0.5 * 10.0 + 0.5 * 6.0))


def q_lambda_reference(rewards, next_values, terminated, truncated, gamma, lam):
    """Textbook Peng's Q(lambda): n-step returns weighted by lambda, one env at a time."""
    num_steps, num_envs = rewards.shape
    returns = np.zeros_like(rewards)
    for env in range(num_envs):
        for t in range(num_steps):
            # lambda-weighted mix of the n-step returns that stay within the episode and rollout
            total, weight, discount, acc = 0.0, 1.0, 1.0, 0.0
            for k in range(t, num_steps):
                acc += discount * rewards[k, env]
                discount *= gamma
                if terminated[k, env]:
                    total += weight * acc
                    break
                n_step = acc + discount * next_values[k, env]
                if truncated[k, env] or k == num_steps - 1:
                    total += weight * n_step
                    break
                total += weight * (1 - lam) * n_step
                weight *= lam
            returns[t, env] = total
    return returns


@pytest.mark.parametrize("seed", [0, 1])
def test_q_lambda_returns_match_reference(seed):
    rng = np.random.default_rng(seed)
    shape = (23, 4)
    rewards, next_values = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    terminated = rng.random(shape) < 0.15
    truncated = (rng.random(shape) < 0.15) & ~terminated
    args = [jnp.array(x) for x in (rewards, next_values, terminated, truncated)]
    returns = pqn.q_lambda_returns(*args, 0.9, 0.7)
    expected = q_lambda_reference(rewards, next_values, terminated, truncated, 0.9, 0.7)
    np.testing.assert_allclose(returns, expected, rtol=1e-5, atol=1e-5)
    # lambda = 0: one-step Q-learning targets.
    one_step = rewards + 0.9 * (1 - terminated) * next_values
    np.testing.assert_allclose(pqn.q_lambda_returns(*args, 0.9, 0.0), one_step, rtol=1e-5)


def test_td_loss():
    assert float(pqn.td_loss(jnp.array([1.0, 3.0]), jnp.array([0.0, 1.0]))) == pytest.approx(1.25)


# --- probes


def train_probe(env: str, **overrides):
    config = pqn.Config(
        env=env,
        total_timesteps=16 * 8 * 60,
        num_envs=16,
        num_steps=8,
        num_minibatches=2,
        learning_rate=3e-3,
        anneal_lr=False,
        start_e=1.0,
        end_e=1.0,
        reward_scale=1.0,
        eval_every=16 * 8 * 60,
        num_eval_envs=2,
        hidden_size=32,
    )
    config = dataclasses.replace(config, **overrides)
    return jax.jit(pqn.make_train(config))(jax.random.key(0))


def q_values(state, observations):
    return jax.vmap(state.q_network)(jnp.array(observations, jnp.float32)[:, None])


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_one_step_discount():
    state, _ = train_probe("ProbeDiscount", gamma=0.5)
    np.testing.assert_allclose(q_values(state, [0.0, 1.0])[:, 0], [0.5, 1.0], atol=0.05)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_action_dependent_reward():
    state, metrics = train_probe("ProbeAction")
    q = q_values(state, [0.0, 1.0])
    np.testing.assert_allclose(q, [[1.0, 0.0], [0.0, 1.0]], atol=0.1)  # depends on obs and action
    assert float(metrics["eval"]["episodic_return"][-1]) == 1.0


def test_probe_time_limit_is_not_a_termination():
    state, _ = train_probe("ProbeTimeLimit", gamma=0.5)
    # Bootstrapping through the 3-step limit: Q = 1 / (1 - 0.5) = 2; cutting it: about 1.42.
    assert float(q_values(state, [0.0])[0, 0]) == pytest.approx(2.0, abs=0.1)


# --- invariants

TINY = pqn.Config(
    total_timesteps=4 * 8 * 6,
    num_envs=4,
    num_steps=8,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 8 * 2,
    num_eval_envs=2,
    hidden_size=16,
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(pqn.make_train(TINY))
    compiled = jax.jit(jax.vmap(train))
    compiled(trainer.seed_keys(7, 3))
    result = compiled(trainer.seed_keys(0, 3))
    assert counts == {"step": 1, "act": 1}  # traced once, whatever the keys
    return result


def test_every_leaf_is_an_array_and_metrics_have_their_shape(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    for leaf in jax.tree.leaves((state, metrics)):
        assert isinstance(leaf, jax.Array), type(leaf)
    assert {"td_loss", "q_values", "episodic_return", "epsilon"} <= set(metrics["train"])
    assert metrics["train"]["td_loss"].shape == (3, 3)
    assert np.all(np.isfinite(metrics["train"]["td_loss"]))
    # 6 iterations x 2 epochs x 2 minibatches; env steps counted per seed.
    assert state.env_steps.tolist() == [192] * 3
    assert int(state.opt_state[1][0].count[0]) == 24


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(pqn.make_train(TINY))(jax.random.key(1))
    assert_trees_close(jax.tree.map(lambda x: x[1], vmapped), single)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.q_network.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.allclose(state.obs[0], state.obs[1])


# --- command line


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--total-timesteps", "4096", "--eval-every", "2048", "--num-seeds", "2"]
    done = cli_run("pqn", monkeypatch, capsys, *args, "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "pqn" and summary["seeds"] == [0, 1]
    assert summary["env_steps"] == 4096
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "Pendulum-v1"],
        ["continuous action space", "pqn.py", "handles discrete"],
    )
    assert_refused_before_compiling("pqn", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(num_minibatches=3), ["num_envs * num_steps = 2048", "num_minibatches = 3"]),
        (dict(total_timesteps=100), ["smaller than one iteration", "2048"]),
        (dict(num_layers=0), ["Out of range", "num_layers = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    # The same ConfigError the CLI turns into exit code 2, checked in-process (no jax import).
    with pytest.raises(ConfigError) as error:
        pqn.make_train(dataclasses.replace(pqn.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


# --- learning


@pytest.mark.learning
def test_pqn_cartpole_reaches_reference_return():
    # purejaxql's CartPole PQN config (the defaults), 5e5 env steps, 4 seeds. One evaluation, at
    # the end: the only one read (evaluations draw their own keys, so no training number moves).
    # The claim is read on the training return of the epsilon-greedy policy (epsilon 0.2 at the
    # end; purejaxql logs one too): since issue 43 the mean over the episodes ended in the last
    # iteration, about five of them (32 envs x 64 steps), so one seed's figure swings: measured
    # 2026-11-29 at 275.5, 435.2, 500.0 and 387.6 (mean 399.6) on 2 devices. Thresholds: the
    # mean of the seeds 350 (as before issue 43, when the statistic averaged a whole interval and
    # read 385-400 per seed), each seed 200, under the worst. The greedy policy of the last
    # snapshot balances far beyond random (about 22) but can dip for one seed while it trains as
    # well as the others: measured 500, 500, 500, 500 on 2 devices and 262, 500, 500, 500 on one,
    # whose batch of 4 rounds differently; threshold 200, under the worst seed.
    config = pqn.Config(env="CartPole-v1", num_seeds=4, eval_every=500_000)
    result = trainer.run(config, pqn.make_train, algo="pqn", verbose=False)
    assert result.summary["final_return_mean"] >= 350, result.summary
    assert min(result.summary["final_return"]) >= 200, result.summary
    assert min(result.summary["eval_return"]) >= 200, result.summary
