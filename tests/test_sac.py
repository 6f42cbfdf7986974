"""SAC: squashed-Gaussian density and soft targets, probes, invariants, CLI, Pendulum learning."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import sac, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

# --- math against NumPy


def test_squashed_gaussian_matches_reference():
    rng = np.random.default_rng(0)
    mean, log_std, noise = (rng.normal(size=3).astype(np.float32) for _ in range(3))
    scale, offset = np.array([2.0, 0.5, 1.0], np.float32), np.array([0.0, 1.0, -1.0], np.float32)
    action, log_prob = sac.squashed_gaussian(*map(jnp.array, (mean, log_std, noise, scale, offset)))
    u = mean + np.exp(log_std) * noise
    normal = -0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    jacobian = scale * (1 - np.tanh(u) ** 2)  # d action / d u, the action scale included
    np.testing.assert_allclose(action, offset + scale * np.tanh(u), rtol=1e-6)
    np.testing.assert_allclose(log_prob, np.sum(normal - np.log(jacobian)), rtol=1e-5)


def test_squashed_density_integrates_to_one_over_the_action_range():
    # One dimension, actions in [-2, 2]: forgetting log(scale) would integrate to 2, not 1.
    mean, log_std, scale = jnp.array([0.3]), jnp.array([-0.2]), jnp.array([2.0])
    noise = jnp.linspace(-8.0, 8.0, 20001)[:, None]
    density = jax.vmap(sac.squashed_gaussian, in_axes=(None, None, 0, None, None))
    actions, log_probs = density(mean, log_std, noise, scale, jnp.zeros(1))
    total = np.trapezoid(np.exp(np.asarray(log_probs)), np.asarray(actions[:, 0]))
    assert total == pytest.approx(1.0, abs=1e-3)
    assert float(actions.min()) > -2.0 and float(actions.max()) < 2.0


def test_soft_td_target_matches_reference():
    rng = np.random.default_rng(1)
    reward, log_prob = rng.normal(size=16), rng.normal(size=16)
    next_q = rng.normal(size=(16, 2))
    terminated = rng.random(16) < 0.3
    alpha, gamma = 0.3, 0.9
    args = map(jnp.array, (reward, terminated, next_q, log_prob, alpha))
    target = sac.soft_td_target(*args, gamma)
    expected = reward + gamma * (~terminated) * (next_q.min(axis=1) - alpha * log_prob)
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-6)


def test_twin_critics_are_independent():
    critic = sac.TwinCritic(3, 1, 8, jax.random.key(0))
    q = critic(jnp.ones(3), jnp.ones(1))
    assert q.shape == (2,) and float(q[0]) != float(q[1])


def test_critic_layer_norm_follows_each_hidden_activation():
    net = sac.MLP(4, 1, 8, jax.random.key(1), layer_norm=True)
    assert [n.shape for n in net.norms] == [(8,), (8,)]
    x = jnp.linspace(-1.0, 2.0, 4)
    hidden = net.norms[0](jax.nn.relu(net.layers[0](x)))
    hidden = net.norms[1](jax.nn.relu(net.layers[1](hidden)))
    np.testing.assert_allclose(net(x), net.layers[2](hidden), rtol=1e-6)
    plain = sac.MLP(4, 1, 8, jax.random.key(1))  # the same weights, no norms
    assert plain.norms is None and jnp.array_equal(plain.layers[0].weight, net.layers[0].weight)
    critic = sac.TwinCritic(3, 1, 8, jax.random.key(0), norm=True)
    assert critic.nets.norms[0].weight.shape == (2, 8)  # one LayerNorm per critic


# --- probes and replay contents


def probe_config(env: str, **overrides) -> sac.Config:
    config = sac.Config(
        env=env,
        total_timesteps=4 * 750,
        num_envs=4,
        train_frequency=4,
        buffer_size=3000,
        batch_size=64,
        learning_starts=200,
        policy_lr=3e-3,
        q_lr=3e-3,
        tau=0.05,
        eval_every=4 * 750,
        num_eval_envs=4,
        hidden_size=32,
    )
    return dataclasses.replace(config, **overrides)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_probe_action_dependent_reward_uses_the_action_scale():
    # Best actions +-1.5 lie outside [-1, 1]: reachable only through the action scale 2.
    train = sac.make_train(probe_config("ProbeContinuousAction"))
    state, metrics = jax.jit(train)(jax.random.key(0))
    mean, _ = jax.vmap(state.agent.actor)(jnp.array([[-1.5], [1.5]]))
    np.testing.assert_allclose(2.0 * jnp.tanh(mean[:, 0]), [-1.5, 1.5], atol=0.1)
    assert float(metrics["eval"]["episodic_return"][-1]) > -0.02


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_the_temperature_learns_at_its_own_rate():
    config = probe_config("ProbeContinuousAction", total_timesteps=4 * 100, learning_starts=40)
    frozen, _ = jax.jit(sac.make_train(dataclasses.replace(config, alpha_lr=0.0)))(
        jax.random.key(0)
    )
    assert float(frozen.agent.log_alpha) == pytest.approx(math.log(config.alpha), abs=1e-7)
    moving, _ = jax.jit(sac.make_train(config))(jax.random.key(0))  # alpha_lr None: q_lr
    assert abs(float(moving.agent.log_alpha) - math.log(config.alpha)) > 1e-3


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_probe_time_limit_is_not_a_termination():
    # Reward 1 forever, cut by a 3-step limit the observation does not show; gamma 0.5, no
    # entropy bonus.
    config = probe_config("ProbeContinuousTimeLimit", gamma=0.5, autotune=False, alpha=1e-6)
    state, _ = jax.jit(sac.make_train(config))(jax.random.key(0))
    q = jax.vmap(state.agent.critic)(jnp.zeros((3, 1)), jnp.array([[-1.0], [0.0], [1.0]]))
    # Bootstrapping through the limit: Q = 1 / (1 - 0.5) = 2; cutting it: about 1.42.
    np.testing.assert_allclose(q, 2.0, atol=0.1)


# --- invariants

# On ProbeContinuousClock (observation time / 3, a 3-step limit), so the replay test can see
# which observation was stored after a truncation.
TINY = sac.Config(
    env="ProbeContinuousClock",
    total_timesteps=2 * 60,
    num_envs=2,
    train_frequency=1,
    buffer_size=128,
    batch_size=8,
    learning_starts=40,
    eval_every=2 * 20,
    num_eval_envs=2,
    hidden_size=16,
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(sac.make_train(TINY))
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
    expected = {"value_loss", "actor_loss", "alpha", "entropy", "q_values", "episodic_return"}
    assert expected <= set(metrics["train"])
    assert metrics["train"]["alpha"].shape == (3, 3)
    assert np.all(np.isfinite(metrics["train"]["actor_loss"]))


def test_schedules_count_updates(vmapped):
    state, _ = vmapped
    # 60 iterations of 2 env steps, 2 updates each once 40 env steps are reached (iteration 20).
    assert int(state.agent.critic_opt_state[0].count[0]) == 2 * (60 - 19)
    # The temperature moved from its initial 0.2 (autotune), the target critics from the online.
    assert not np.isclose(float(jnp.exp(state.agent.log_alpha[0])), 0.2)
    online = state.agent.critic.nets.layers[0].weight[0]
    assert not np.allclose(state.agent.target_critic.nets.layers[0].weight[0], online)


def test_replay_stores_the_final_observation_of_truncated_episodes(vmapped):
    data = jax.tree.map(lambda x: np.asarray(x[0, :120]), vmapped[0].buffer.data)  # seed 0
    obs, next_obs = (np.round(3 * x[:, 0]).tolist() for x in (data.obs, data.next_obs))
    # Observations 0, 1/3, 2/3 lead to 1/3, 2/3 and the final 1.0, never to the reset 0.
    assert set(zip(obs, next_obs, strict=True)) == {(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)}
    # Warm-up actions (the first 40 env steps) are uniform over the whole box [-2, 2]^2.
    warm_up = data.action[:40]
    assert warm_up.min() < -1.5 and warm_up.max() > 1.5 and np.all(np.abs(warm_up) <= 2.0)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(sac.make_train(TINY))(jax.random.key(1))
    assert_trees_close(jax.tree.map(lambda x: x[1], vmapped), single, rtol=1e-4, atol=1e-5)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.agent.actor.net.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.allclose(state.buffer.data.action[0], state.buffer.data.action[1])


# --- command line


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--total-timesteps", "300", "--learning-starts", "100", "--eval-every", "150"]
    done = cli_run(
        "sac", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "sac" and summary["seeds"] == [0, 1]
    assert summary["env_steps"] == 300 and math.isfinite(summary["eval_return_mean"])
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "CartPole-v1"],
        ["discrete action space", "sac.py", "algorithms/dqn.py"],
    )
    assert_refused_before_compiling("sac", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(num_envs=4, train_frequency=3), ["train_frequency = 3", "num_envs = 4"]),
        (dict(total_timesteps=0), ["Out of range", "total_timesteps = 0"]),
        (dict(buffer_size=0), ["Out of range", "buffer_size = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    # The same ConfigError the CLI turns into exit code 2, checked in-process (no jax import).
    with pytest.raises(ConfigError) as error:
        sac.make_train(dataclasses.replace(sac.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


def test_the_playground_preset_is_brax_sac_at_its_published_sizes():
    """Playground's DM Control SAC as Brax counts it (docs/notes/playground-reference.md)."""
    config = sac.Config(**sac.PRESETS["CartpoleBalance"])
    assert config.env == "playground:CartpoleBalance" and config.updates_per_iteration == 8
    assert config.env_steps_per_iteration == 128 and config.num_iterations == 39_070
    assert (config.batch_size, config.buffer_size, config.learning_starts) == (512, 4_194_304, 8192)
    assert (config.alpha, config.alpha_lr, config.target_entropy_scale) == (1.0, 3e-4, 0.5)
    assert config.q_layer_norm and config.hidden_size == 256
    for task in ("CheetahRun", "HopperHop", "FingerSpin", "AcrobotSwingupSparse", "WalkerRun"):
        assert sac.Config(**sac.PRESETS[task]).total_timesteps == 10_000_640, task
    assert sac.Config(**sac.PRESETS["WalkerWalk"]).total_timesteps == 5_000_960
    # Brax: 64 steps of the envs before the first update, then 9 x 4,334 between evaluations.
    assert config.eval_every // config.env_steps_per_iteration == 4_334


# --- learning


@pytest.mark.learning_extra  # outside CI for time (tests/README.md)
def test_sac_pendulum_reaches_target_return():
    # The defaults (CleanRL's SAC with 64-unit networks), 5e4 env steps, 4 seeds.
    config = sac.Config(env="Pendulum-v1", num_seeds=4)
    result = trainer.run(config, sac.make_train, algo="sac", verbose=False)
    assert result.summary["eval_return_mean"] >= -250, result.summary
