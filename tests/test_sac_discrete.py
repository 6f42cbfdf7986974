"""Discrete SAC: expectations over actions, the temperature, masks, probes, invariants, CLI,
CartPole learning."""

import dataclasses
import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import sac_discrete, trainer
from canter.common.blocks.layers import Conv2d
from canter.common.config import ConfigError
from canter.common.envs import register_env

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    assert_resume_equals_whole_run,
    cli_run,
)
from tests.probes import ProbeMasked
from tests.test_invariants import assert_trees_close, counting

MASK = np.array([[True, False, True, True], [False, True, False, False], [True] * 4])


def softmax_loop(logits: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities and log-probabilities over each row's valid actions, 0 at masked ones."""
    probs, log_probs = np.zeros_like(logits), np.zeros_like(logits)
    for i, row in enumerate(logits):
        valid = np.flatnonzero(mask[i])
        top = row[valid].max()
        norm = top + np.log(sum(np.exp(row[a] - top) for a in valid))
        for a in valid:
            log_probs[i, a] = row[a] - norm
            probs[i, a] = np.exp(log_probs[i, a])
    return probs, log_probs


# --- math against NumPy


def test_masked_actions_get_probability_zero_and_no_nan():
    logits = np.array([[0.5, 40.0, -1.0, 2.0], [3.0, -2.0, 9.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    probs, log_probs = sac_discrete.policy_probs(jnp.array(logits), jnp.array(MASK))
    ref_probs, ref_log_probs = softmax_loop(logits, MASK)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(log_probs, ref_log_probs, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(probs)[~MASK] == 0.0) and np.all(np.asarray(log_probs)[~MASK] == 0)
    # A large temperature times the lowest logit overflowed to -inf, and 0 x -inf is NaN: the
    # soft value, its gradient and an all-masked row (a terminal state's) stay finite.
    q = jnp.ones((3, 2, 4))
    empty = jnp.array(MASK).at[2].set(False)

    def value(x):
        p, lp = sac_discrete.policy_probs(x, empty)
        return sac_discrete.soft_value(p, lp, q, jnp.array(5.0)).sum()

    assert np.isfinite(float(value(jnp.array(logits))))
    assert np.all(np.isfinite(np.asarray(jax.grad(value)(jnp.array(logits)))))
    p, lp = sac_discrete.policy_probs(jnp.array(logits), empty)
    assert float(jnp.abs(p[2]).sum() + jnp.abs(lp[2]).sum()) == 0.0  # nothing to bootstrap


def test_soft_target_is_the_expectation_over_the_next_actions():
    rng = np.random.default_rng(0)
    logits, next_q = rng.normal(size=(3, 4)), rng.normal(size=(3, 2, 4))
    reward, terminated = rng.normal(size=3), np.array([False, True, False])
    alpha, gamma = 0.3, 0.9
    probs, log_probs = sac_discrete.policy_probs(jnp.array(logits), jnp.array(MASK))
    args = (jnp.array(reward), jnp.array(terminated), probs, log_probs, jnp.array(next_q))
    target = sac_discrete.soft_td_target(*args, jnp.array(alpha), gamma)
    ref_probs, ref_log_probs = softmax_loop(logits, MASK)
    expected = []
    for i in range(3):
        value = sum(
            ref_probs[i, a] * (min(next_q[i, 0, a], next_q[i, 1, a]) - alpha * ref_log_probs[i, a])
            for a in range(4)
            if MASK[i, a]
        )
        expected.append(reward[i] + (0.0 if terminated[i] else gamma * value))
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-6)


def test_actor_loss_gradient_is_the_exact_expectation_over_actions():
    # Loss sum_a pi_a f_a with f = alpha log pi - min Q; its gradient in the logits is
    # pi_a (f_a - sum_b pi_b f_b) on valid actions, 0 on masked ones.
    rng = np.random.default_rng(1)
    logits, q = rng.normal(size=(3, 4)), rng.normal(size=(3, 2, 4))
    alpha = 0.7

    def loss(x):
        probs, log_probs = sac_discrete.policy_probs(x, jnp.array(MASK))
        return -sac_discrete.soft_value(probs, log_probs, jnp.array(q), jnp.array(alpha)).sum()

    ref_probs, ref_log_probs = softmax_loop(logits, MASK)
    f = alpha * ref_log_probs - q.min(axis=1)
    expected_loss = sum(ref_probs[i, a] * f[i, a] for i in range(3) for a in range(4) if MASK[i, a])
    expected_grad = np.zeros_like(logits)
    for i in range(3):
        mean = sum(ref_probs[i, b] * f[i, b] for b in range(4) if MASK[i, b])
        for a in np.flatnonzero(MASK[i]):
            expected_grad[i, a] = ref_probs[i, a] * (f[i, a] - mean)
    assert float(loss(jnp.array(logits))) == pytest.approx(expected_loss, rel=1e-5)
    np.testing.assert_allclose(jax.grad(loss)(jnp.array(logits)), expected_grad, atol=1e-6)


def test_target_entropy_and_temperature_loss():
    # CleanRL: -0.89 log(1 / |A|); with masks, over each state's valid actions (1 valid: 0).
    plain = sac_discrete.target_entropy(None, 4, 0.89)
    assert float(plain) == pytest.approx(-0.89 * math.log(1 / 4))
    masked = sac_discrete.target_entropy(jnp.array(MASK), 4, 0.89)
    np.testing.assert_allclose(masked, [0.89 * math.log(3), 0.0, 0.89 * math.log(4)], rtol=1e-6)
    logits = np.random.default_rng(2).normal(size=(3, 4))
    probs, log_probs = sac_discrete.policy_probs(jnp.array(logits), jnp.array(MASK))
    log_alpha = jnp.array(-0.4)
    loss, grad = jax.value_and_grad(sac_discrete.temperature_loss)(
        log_alpha, probs, log_probs, masked
    )
    ref_probs, ref_log_probs = softmax_loop(logits, MASK)
    terms = [
        sum(-math.exp(-0.4) * ref_probs[i, a] * (ref_log_probs[i, a] + masked[i]) for a in range(4))
        for i in range(3)
    ]
    assert float(loss) == pytest.approx(np.mean(terms), rel=1e-5)
    # d/d log alpha = alpha (entropy - target): alpha falls while the entropy is above target.
    entropy = -(ref_probs * ref_log_probs).sum(axis=1)
    expected = math.exp(-0.4) * np.mean(entropy - np.asarray(masked))
    assert float(grad) == pytest.approx(expected, rel=1e-5)


def test_kaiming_normal_init_and_the_minatar_torso():
    config = sac_discrete.Config(network="cnn", hidden_sizes=(32,))
    build = lambda: sac_discrete.Network((10, 10, 4), 6, config, jax.random.key(0))  # noqa: E731
    net = eqx.filter_eval_shape(build)  # shapes only: nothing compiles
    assert net.conv.weight.shape == (16, 4, 3, 3) and net.layers[0].weight.shape == (32, 16 * 64)
    assert eqx.filter_eval_shape(lambda: build()(jnp.ones((10, 10, 4)))).shape == (6,)
    key = jax.random.key(1)
    for layer in (eqx.nn.Linear(512, 64, key=key), Conv2d(8, 64, 3, key=key)):
        layer = sac_discrete.kaiming_normal(layer, key)
        fan_in = math.prod(layer.weight.shape[1:])  # 512; 8 x 3 x 3 (PyTorch's)
        # CleanRL's layer_init: N(0, 2 / fan_in) weights, zero biases.
        assert float(jnp.std(layer.weight)) == pytest.approx(math.sqrt(2 / fan_in), rel=0.05)
        assert float(jnp.mean(layer.weight)) == pytest.approx(0.0, abs=0.01)
        assert not np.any(np.asarray(layer.bias))


# --- invariants and masks


class ProbeMaskedClock(ProbeMasked):
    """ProbeMasked's rewards 0, 1, 10 and mask (action 2 never valid), observation time / 3, no
    termination, a 3-step limit: the best valid return is 3 (ignoring the mask: 30), and the
    final observation 1.0 differs from every one an agent acts on, so the replay test sees which
    was stored."""

    max_steps = 3

    def transition(self, state, action):
        return jnp.array([0.0, 1.0, 10.0])[action], jnp.array(False), (state.time + 1) / 3.0


register_env("ProbeMaskedClock", lambda: (ProbeMaskedClock(), ProbeMaskedClock().default_params))

# 120 iterations of 4 env steps, 2 updates each from 40 env steps; hard target copies every 8.
TINY = sac_discrete.Config(
    env="ProbeMaskedClock",
    total_timesteps=4 * 120,
    num_envs=4,
    train_frequency=2,
    buffer_size=256,
    batch_size=16,
    learning_starts=40,
    policy_lr=3e-3,
    q_lr=3e-3,
    gamma=0.5,
    tau=1.0,
    target_network_frequency=8,
    alpha=0.1,
    target_entropy_scale=0.2,
    eval_every=4 * 40,
    num_eval_envs=2,
    hidden_sizes=(16,),
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(sac_discrete.make_train(TINY))
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


def test_schedules_count_updates_and_copy_the_target(vmapped):
    state, _ = vmapped
    agent = state.agent
    # 120 iterations of 4 env steps, 2 updates each once 40 env steps are reached (iteration 9).
    for opt_state in (agent.critic_opt_state, agent.actor_opt_state, agent.alpha_opt_state):
        assert np.all(np.asarray(opt_state[0].count) == 2 * (120 - 9))
    # The last env step (480) is a multiple of 8: the hard target copy just happened.
    assert_trees_close(agent.target_critic, agent.critic, rtol=0, atol=0)
    assert np.all(np.asarray(agent.log_alpha) != np.float32(math.log(0.1)))  # autotuned


def test_no_masked_action_is_ever_taken_and_the_best_valid_one_is_learned(vmapped):
    state, metrics = vmapped
    data = state.buffer.data
    assert not np.any(np.asarray(data.action) == 2)
    assert np.all(np.asarray(data.mask) == [True, True, False])
    assert np.all(np.asarray(data.next_mask) == [True, True, False])
    train_returns = np.asarray(metrics["train"]["episodic_return"])
    assert np.nanmax(train_returns) <= 3.0, train_returns  # above 3: action 2 was taken
    # Greedy: action 1 at every step. Sampled, the last interval's return, seeds 0-2: 2.5, 3.0,
    # 3.0 (2026-12-07), where uniformly random valid actions return 1.5.
    assert np.all(np.asarray(metrics["eval"]["episodic_return"])[:, -1] == 3.0)
    assert np.all(train_returns[:, -1] >= 2.25), train_returns


def test_replay_stores_the_final_observation_of_truncated_episodes(vmapped):
    data = jax.tree.map(lambda x: np.asarray(x[0]), vmapped[0].buffer.data)  # seed 0
    obs, next_obs = (np.round(3 * x[:, 0]).tolist() for x in (data.obs, data.next_obs))
    # Observations 0, 1/3, 2/3 lead to 1/3, 2/3 and the final 1.0, never to the reset 0.
    assert set(zip(obs, next_obs, strict=True)) == {(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)}
    assert not data.terminated.any()


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.agent.actor.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.array_equal(state.buffer.data.action[0], state.buffer.data.action[1])


def test_critic_loss_sums_both_critics_errors_at_the_taken_actions(vmapped):
    critic = jax.tree.map(lambda x: x[0], vmapped[0].agent.critic)  # seed 0's, trained
    obs = jnp.linspace(0.0, 1.0, 5)[:, None]
    action, target = jnp.array([0, 2, 1, 2, 0]), jnp.linspace(-1.0, 1.0, 5)
    loss, q_mean = sac_discrete.critic_loss(critic, obs, action, target)
    q = np.asarray(jax.vmap(critic)(obs))  # [batch, 2, num_actions]
    assert not np.allclose(q[:, 0], q[:, 1])  # two independent critics
    taken = np.array([[q[i, c, int(action[i])] for c in range(2)] for i in range(5)])
    expected = sum(np.mean((taken[:, c] - np.asarray(target)) ** 2) for c in range(2))
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(q_mean) == pytest.approx(taken.mean(), rel=1e-5, abs=1e-6)


@pytest.mark.slow  # programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(sac_discrete.make_train(TINY))(jax.random.key(1))
    assert_trees_close(jax.tree.map(lambda x: x[1], vmapped), single, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # programs compiled for this test alone
def test_soft_target_updates_count_every_frequency_crossed():
    # 10 envs, an update and a target update due every env step: one iteration makes 10 of
    # each, so the target moves by 1 - (1 - tau)^10 towards the online critics, not by tau.
    config = sac_discrete.Config(
        num_envs=10,
        train_frequency=1,
        target_network_frequency=1,
        tau=0.005,
        learning_starts=0,
        batch_size=8,
        buffer_size=100,
        hidden_sizes=(8,),
    )
    train = sac_discrete.make_train(config)
    before = jax.jit(train.init)(jax.random.key(0))
    after, _ = jax.jit(train.step)(before, 0)
    assert int(after.agent.critic_opt_state[0].count) == 10
    expected = sac_discrete.polyak_update(
        after.agent.critic, before.agent.target_critic, 1 - 0.995**10
    )
    assert_trees_close(after.agent.target_critic, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.slow  # three runs through the runner, compiled for this test alone
def test_resume_equals_the_whole_run(tmp_path):
    config = dataclasses.replace(TINY, num_seeds=2, total_timesteps=4 * 40, eval_every=4 * 20)
    assert_resume_equals_whole_run(config, sac_discrete.make_train, "sac_discrete", tmp_path)


# --- probes


def probe_config(env: str, **overrides) -> sac_discrete.Config:
    config = sac_discrete.Config(
        env=env,
        total_timesteps=4 * 500,
        num_envs=4,
        train_frequency=4,
        buffer_size=1000,
        batch_size=64,
        learning_starts=200,
        policy_lr=3e-3,
        q_lr=3e-3,
        tau=0.05,
        target_network_frequency=4,
        eval_every=4 * 500,
        num_eval_envs=4,
        hidden_sizes=(32, 32),
    )
    return dataclasses.replace(config, **overrides)


@pytest.mark.slow  # a probe program compiles: 10-20 s on 2 busy cores
def test_probe_time_limit_is_not_a_termination():
    # Reward 1 forever, cut by a 3-step limit the observation does not show; gamma 0.5. One
    # action: probability 1, no entropy term, so the soft value is the plain one. At observation
    # 0 every ReLU of the zero-bias network is 0, so only the output bias learns, by at most the
    # learning rate an Adam step: lr 1e-2 reaches 2 in the 450 updates (3e-3 stopped at 1.12).
    config = probe_config("ProbeTimeLimit", gamma=0.5, q_lr=1e-2)
    state, _ = jax.jit(sac_discrete.make_train(config))(jax.random.key(0))
    q = jax.vmap(state.agent.critic)(jnp.zeros((1, 1)))
    # Bootstrapping through the limit: Q = 1 / (1 - 0.5) = 2; cutting it: about 1.42.
    np.testing.assert_allclose(q, 2.0, atol=0.1)


@pytest.mark.slow  # a probe program compiles: 10-20 s on 2 busy cores
def test_probe_action_dependent_reward():
    # One step: Q(o, a) is the reward whatever the temperature, and the greedy policy is right.
    state, metrics = jax.jit(sac_discrete.make_train(probe_config("ProbeAction")))(
        jax.random.key(0)
    )
    q = jax.vmap(state.agent.critic)(jnp.array([[0.0], [1.0]]))
    np.testing.assert_allclose(q, [[[1.0, 0.0]] * 2, [[0.0, 1.0]] * 2], atol=0.1)
    assert float(metrics["eval"]["episodic_return"][-1]) == 1.0


# --- command line and presets


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_sampled_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--total-timesteps", "400", "--learning-starts", "100", "--eval-every", "200"]
    args += ["--eval-policy", "sampled", "--hidden-sizes", "32"]
    done = cli_run(
        "sac_discrete",
        monkeypatch,
        capsys,
        *args,
        "--num-seeds",
        "2",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "sac_discrete" and summary["seeds"] == [0, 1]
    assert summary["env_steps"] == 400 and math.isfinite(summary["eval_return_mean"])
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "Pendulum-v1"],
        ["continuous action space", "sac_discrete.py", "handles discrete"],
    )
    assert_refused_before_compiling("sac_discrete", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(train_frequency=3), ["train_frequency = 3", "num_envs = 4"]),
        (dict(buffer_size=2), ["buffer_size = 2", "num_envs = 4"]),
        (dict(total_timesteps=3), ["smaller than one iteration"]),
        (dict(hidden_sizes=(64, 0)), ["hidden_sizes must be positive"]),
        (dict(network="cnn"), ["needs image observations"]),
        (dict(batch_size=0), ["Out of range", "batch_size = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    # The same ConfigError the CLI turns into exit code 2, checked in-process (no jax import).
    with pytest.raises(ConfigError) as error:
        sac_discrete.make_train(dataclasses.replace(sac_discrete.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


def test_minatar_preset_is_cleanrls_sac_atari_at_its_sizes():
    config = sac_discrete.Config(**sac_discrete.PRESETS["Breakout-MinAtar"])
    assert config.env == "Breakout-MinAtar" and config.network == "cnn"
    assert (config.batch_size, config.learning_starts, config.train_frequency) == (64, 20_000, 4)
    assert (config.tau, config.target_network_frequency) == (1.0, 8_000)
    assert (config.policy_lr, config.q_lr, config.target_entropy_scale) == (3e-4, 3e-4, 0.89)
    assert config.updates_per_iteration == 1 and config.env_steps_per_iteration == 4
    assert len(sac_discrete.PRESETS) == 5


# --- learning


@pytest.mark.learning  # 58 s in the learning tier (2026-12-07, beside a benchmark)
def test_sac_discrete_cartpole_nears_reference_return():
    # The defaults, 5e4 env steps, 4 seeds. One evaluation, at the end: the only one read
    # (evaluations draw their own keys, so no training number moves). Greedy returns with this
    # tier's XLA flags, seeds 0-7 (2026-12-07): 497.0, 454.5, 468.6, 487.4 (mean 476.9), 500,
    # 500, 333.4, 500; through the CLI, seeds 0-7: 495.5 to 500. A greedy policy of discrete SAC
    # moves between evaluations (one seed 500 -> 350 from 7.5e4 to 1e5 env steps): the bars sit
    # below seeds 0-3's mean and their lowest seed, far above a random policy's 22.
    config = sac_discrete.Config(env="CartPole-v1", num_seeds=4, eval_every=50_000)
    result = trainer.run(config, sac_discrete.make_train, algo="sac_discrete", verbose=False)
    returns = result.summary["eval_return"]
    assert result.summary["eval_return_mean"] >= 450 and min(returns) >= 400, returns
