"""DQN: target and loss math, replay contents, probes, invariants, CLI, CartPole learning."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from canter.algorithms import dqn, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

# --- math against NumPy


def test_td_target_matches_reference():
    rng = np.random.default_rng(0)
    reward = rng.normal(size=32).astype(np.float32)
    terminated = rng.random(32) < 0.3
    q_target = rng.normal(size=(32, 3)).astype(np.float32)
    q_online = rng.normal(size=(32, 3)).astype(np.float32)
    args = [jnp.array(x) for x in (reward, terminated, q_target, q_online)]
    plain = dqn.td_target(*args, None, 0.9, False)
    double = dqn.td_target(*args, None, 0.9, True)
    ref_plain = np.array(
        [reward[i] + (0.0 if terminated[i] else 0.9 * q_target[i].max()) for i in range(32)]
    )
    ref_double = np.array(
        [
            reward[i] + (0.0 if terminated[i] else 0.9 * q_target[i, q_online[i].argmax()])
            for i in range(32)
        ]
    )
    np.testing.assert_allclose(plain, ref_plain, rtol=1e-6)
    np.testing.assert_allclose(double, ref_double, rtol=1e-6)
    assert not np.allclose(plain, double)  # the flag changes the target


def test_td_loss_mse_and_huber():
    q = jnp.array([0.0, 1.0, 3.0])
    target = jnp.array([0.5, 1.0, 0.0])
    assert float(dqn.td_loss(q, target, "mse")) == pytest.approx((0.25 + 0 + 9) / 3)
    # Huber, delta 1: 0.5 x^2 inside, |x| - 0.5 outside.
    assert float(dqn.td_loss(q, target, "huber")) == pytest.approx((0.125 + 0 + 2.5) / 3)


def test_polyak_update():
    online, target = {"w": jnp.array([1.0, 2.0])}, {"w": jnp.array([3.0, 6.0])}
    np.testing.assert_allclose(dqn.polyak_update(online, target, 0.25)["w"], [2.5, 5.0])
    np.testing.assert_array_equal(dqn.polyak_update(online, target, 0.0)["w"], target["w"])
    np.testing.assert_array_equal(dqn.polyak_update(online, target, 1.0)["w"], online["w"])


def test_dueling_head_mean_advantage_is_the_value():
    net = dqn.QNetwork((3,), 4, dqn.Config(hidden_sizes=(8,), dueling=True), jax.random.key(0))
    x = jnp.ones(3)
    hidden = jax.nn.relu(net.layers[0](x))
    np.testing.assert_allclose(net(x).mean(), net.value_head(hidden)[0], rtol=1e-5, atol=1e-6)


# --- probes and replay contents


def probe_config(env: str, **overrides) -> dqn.Config:
    config = dqn.Config(
        env=env,
        total_timesteps=4 * 1500,
        num_envs=4,
        train_frequency=4,
        buffer_size=1000,
        batch_size=64,
        learning_starts=200,
        learning_rate=1e-3,
        target_network_frequency=100,
        start_e=1.0,
        end_e=1.0,
        eval_every=4 * 1500,
        num_eval_envs=2,
        hidden_sizes=(32, 32),
    )
    return dataclasses.replace(config, **overrides)


def train_probe(env: str, **overrides):
    return jax.jit(dqn.make_train(probe_config(env, **overrides)))(jax.random.key(0))


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


def test_replay_stores_the_final_observation_of_truncated_episodes():
    # ProbeClock: observation time / 3, a 3-step limit; 30 iterations of warm-up, no updates.
    config = probe_config("ProbeClock", total_timesteps=4 * 30, learning_starts=10**6)
    train = dqn.make_train(config)
    state = jax.jit(train.init)(jax.random.key(0))
    state, _ = jax.jit(lambda s: jax.lax.scan(train.step, s, jnp.arange(30)))(state)
    data = state.buffer.data
    obs, next_obs = (
        np.round(3 * np.asarray(x[:120, 0])).tolist() for x in (data.obs, data.next_obs)
    )
    # Observations 0, 1/3, 2/3 lead to 1/3, 2/3 and the final 1.0, never to the reset 0.
    assert set(zip(obs, next_obs, strict=True)) == {(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)}
    assert not data.terminated[:120].any()


# --- invariants

TINY = dqn.Config(
    total_timesteps=4 * 60,
    num_envs=4,
    train_frequency=2,
    buffer_size=64,
    batch_size=8,
    learning_starts=40,
    target_network_frequency=16,
    eval_every=4 * 20,
    num_eval_envs=2,
    hidden_sizes=(16,),
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(dqn.make_train(TINY))
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
    # Warm-up ends at 40 env steps, inside the first interval of 80: losses are finite.
    assert np.all(np.isfinite(metrics["train"]["td_loss"]))


def test_schedules_count_updates(vmapped):
    state, _ = vmapped
    # 60 iterations of 4 env steps, 2 updates each once 40 env steps are reached (iteration 10).
    assert int(state.opt_state[0].count[0]) == 2 * (60 - 9)
    assert int(state.env_steps[0]) == 240 and int(state.buffer.size[0]) == 64


@pytest.mark.slow  # programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(dqn.make_train(TINY))(jax.random.key(2))
    assert_trees_close(jax.tree.map(lambda x: x[2], vmapped), single)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.q_network.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.allclose(state.buffer.data.obs[0], state.buffer.data.obs[1])


def test_target_network_follows_the_schedule(vmapped):
    state, _ = vmapped
    # Last env step 240 is a multiple of 16: the hard target copy just happened.
    assert_trees_close(state.target_network, state.q_network, rtol=0, atol=0)
    # Step by step: the target is the online network as it was at the last multiple of 16 env
    # steps (every 4th iteration of 4 envs), held between copies while the online one trains.
    train = dqn.make_train(TINY)
    step = jax.jit(train.step)
    state = jax.jit(train.init)(jax.random.key(0))
    copied = state.q_network
    for i in range(20):
        state, _ = step(state, i)
        if int(state.env_steps) % 16 == 0:
            copied = state.q_network
        assert_trees_close(state.target_network, copied, rtol=0, atol=0)
        if i >= 10 and int(state.env_steps) % 16:  # updates began at 40 env steps
            gap = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), state.q_network, copied)
            assert max(jax.tree.leaves(gap)) > 0, i  # the online network moved; the target not


# --- command line


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_with_every_flag_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    # The default path runs in the invariant tests; here the paper ablations, end to end.
    args = ["--total-timesteps", "400", "--learning-starts", "100", "--eval-every", "200"]
    args += ["--double-q", "--dueling", "--loss", "huber", "--hidden-sizes", "32", "16"]
    done = cli_run(
        "dqn", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "dqn" and summary["seeds"] == [0, 1]
    assert summary["env_steps"] == 400
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["double_q"] and config["dueling"] and config["loss"] == "huber"
    assert config["hidden_sizes"] == [32, 16]
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "Pendulum-v1"],
        ["continuous action space", "dqn.py", "handles discrete"],
    )
    assert_refused_before_compiling("dqn", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(train_frequency=3), ["train_frequency = 3", "num_envs = 10"]),
        (dict(buffer_size=4), ["buffer_size = 4", "num_envs = 10"]),
        (dict(total_timesteps=5), ["smaller than one iteration"]),
        (dict(batch_size=0), ["Out of range", "batch_size = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    # The same ConfigError the CLI turns into exit code 2, checked in-process (no jax import).
    with pytest.raises(ConfigError) as error:
        dqn.make_train(dataclasses.replace(dqn.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


# --- learning


@pytest.mark.learning
def test_dqn_cartpole_reaches_reference_return():
    # PureJaxRL's CartPole DQN config (the defaults), 5e5 env steps, 4 seeds. One evaluation, at
    # the end: the only one read (evaluations draw their own keys, so no training number moves).
    config = dqn.Config(env="CartPole-v1", num_seeds=4, eval_every=500_000)
    result = trainer.run(config, dqn.make_train, algo="dqn", verbose=False)
    assert result.summary["eval_return_mean"] >= 475, result.summary


def test_soft_target_updates_count_every_frequency_crossed():
    # 10 envs, an update and a target update due every env step: one iteration makes 10 of
    # each, so the target moves by 1 - (1 - tau)^10 towards the online network, not by tau.
    config = dqn.Config(
        num_envs=10,
        train_frequency=1,
        target_network_frequency=1,
        tau=0.005,
        learning_starts=0,
        batch_size=8,
        buffer_size=100,
        hidden_sizes=(8,),
    )
    train = dqn.make_train(config)
    before = jax.jit(train.init)(jax.random.key(0))
    after, _ = jax.jit(train.step)(before, 0)
    assert int(after.opt_state[0].count) == 10  # ten online updates
    expected = dqn.polyak_update(after.q_network, before.target_network, 1 - 0.995**10)
    assert_trees_close(after.target_network, expected, rtol=1e-6, atol=1e-7)
    one_step = dqn.polyak_update(after.q_network, before.target_network, 0.005)
    gap = jax.tree.leaves(
        jax.tree.map(lambda a, b: jnp.abs(a - b).max(), after.target_network, one_step)
    )
    assert max(float(g) for g in gap) > 1e-5  # the old single Polyak step is far off


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_a_run_started_from_python_resumes_from_python(tmp_path):
    # hidden_sizes is a tuple in the Config and a list in JSON: resuming compared them raw.
    config = dataclasses.replace(TINY, num_seeds=2)
    first = trainer.run(
        config,
        dqn.make_train,
        algo="dqn",
        run_dir=tmp_path,
        verbose=False,
        checkpoint_every=1,
        stop_after=1,
    )
    assert first.summary["intervals"] == 1
    resumed = trainer.run(
        config, dqn.make_train, algo="dqn", run_dir=tmp_path, resume=True, verbose=False
    )
    assert resumed.summary["complete"]
    _, whole = jax.jit(jax.vmap(dqn.make_train(config)))(trainer.seed_keys(0, 2))
    for name, value in whole["eval"].items():
        np.testing.assert_allclose(resumed.metrics["eval"][name], value, rtol=1e-4, atol=1e-4)


def test_minatar_preset_uses_the_references_rmsprop_without_momentum():
    # PyTorch's RMSprop(alpha=0.95, eps=0.01, centered=True), momentum 0, as the MinAtar
    # reference builds it: v = a v + (1 - a) g^2, m = a m + (1 - a) g,
    # p -= lr g / (sqrt(v - m^2) + eps).
    config = dqn.Config(**dqn.PRESETS["Breakout-MinAtar"])
    optimizer = dqn.make_optimizer(config)
    grads = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    params = jnp.zeros(3)
    state = optimizer.init(params)
    v, m, expected = np.zeros(3), np.zeros(3), np.zeros(3)
    for g in grads:
        updates, state = optimizer.update(jnp.asarray(g), state, params)
        params = optax.apply_updates(params, updates)
        v, m = 0.95 * v + 0.05 * g**2, 0.95 * m + 0.05 * g
        expected -= 2.5e-4 * g / (np.sqrt(v - m**2) + 0.01)
    np.testing.assert_allclose(params, expected, rtol=1e-5, atol=1e-9)


def test_minatar_preset_explores_uniformly_then_decays_over_100k_env_steps():
    # The reference: uniform actions for t < 5000, then 1.0 -> 0.1 linearly over 100,000 steps.
    config = dqn.Config(**dqn.PRESETS["Breakout-MinAtar"])
    steps = jnp.array([0, 4_999, 5_000, 55_000, 105_000, 10_000_000])
    epsilon = jax.vmap(lambda t: dqn.linear_epsilon(config, t))(steps)
    np.testing.assert_allclose(epsilon, [1.0, 1.0, 1.0, 0.55, 0.1, 0.1], atol=1e-6)
    # In env steps, whatever the budget: the same schedule in a shorter run.
    shorter = dataclasses.replace(config, total_timesteps=200_000)
    assert float(dqn.linear_epsilon(shorter, jnp.array(55_000))) == pytest.approx(0.55)


@pytest.mark.slow  # programs compiled for this test alone
def test_epsilon_in_the_training_loop_follows_the_schedule():
    config = dataclasses.replace(
        probe_config("CartPole-v1"),
        total_timesteps=4 * 30,
        eval_every=4,  # one iteration (4 env steps) per interval: its metrics are its own
        exploration_delay=30,
        exploration_steps=40,
        end_e=0.2,
    )
    _, metrics = jax.jit(dqn.make_train(config))(jax.random.key(0))
    steps = np.asarray(metrics["train"]["env_steps"])  # after the iteration's 4 steps
    expected = 1.0 - 0.8 * np.clip((steps - 30) / 40, 0.0, 1.0)
    np.testing.assert_allclose(metrics["train"]["epsilon"], expected, atol=1e-6)
    assert expected[0] == 1.0 and expected[-1] == pytest.approx(0.2)
