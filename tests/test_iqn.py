"""IQN: the fraction embedding, the target samples, masks, invariants, CLI, CartPole learning."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import iqn, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    assert_resume_equals_whole_run,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

# --- math against NumPy


def numpy_quantiles(net: iqn.QNetwork, x: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """The network's quantiles [num_taus, num_actions], by loops over the paper's sums."""
    act = {"relu": lambda v: np.maximum(v, 0.0), "swish": lambda v: v / (1.0 + np.exp(-v))}
    activation = act[net.activation]
    weights = jax.tree.map(np.asarray, net)
    psi = x.reshape(-1).astype(np.float64)
    for layer in weights.torso:
        psi = activation(layer.weight @ psi + layer.bias)
    out = []
    for tau in taus:
        w, b = weights.embedding.weight, weights.embedding.bias
        phi = np.zeros(w.shape[0])
        for j in range(w.shape[0]):  # phi_j = ReLU(sum_i cos(pi i tau) w_ij + b_j), i from 0
            total = sum(np.cos(np.pi * i * tau) * w[j, i] for i in range(w.shape[1]))
            phi[j] = max(total + b[j], 0.0)
        h = psi * phi
        for layer in weights.head[:-1]:
            h = activation(layer.weight @ h + layer.bias)
        out.append(weights.head[-1].weight @ h + weights.head[-1].bias)
    return np.array(out)


@pytest.mark.parametrize("activation", ["relu", "swish"])
def test_the_fraction_embedding_multiplies_the_torso_features(activation):
    config = iqn.Config(torso_sizes=(5, 6), hidden_sizes=(4,), num_cosines=7, activation=activation)
    net = iqn.QNetwork((3,), 2, config, jax.random.key(0))
    x = np.array([0.3, -1.2, 0.8], np.float32)
    taus = np.array([0.0, 0.13, 0.5, 0.97], np.float32)
    expected = numpy_quantiles(net, x, taus)
    np.testing.assert_allclose(
        net(jnp.asarray(x), jnp.asarray(taus)), expected, rtol=1e-4, atol=1e-5
    )
    assert net.embedding.weight.shape == (6, 7)  # cosines -> the torso's last width
    assert not np.allclose(expected[0], expected[2])  # the fraction changes the quantiles


def test_quantile_target_matches_a_loop():
    rng = np.random.default_rng(0)
    batch, samples, actions = 6, 5, 3
    reward = rng.normal(size=batch).astype(np.float32)
    terminated = np.array([False, True, False, False, False, False])
    quantiles = rng.normal(size=(batch, samples, actions)).astype(np.float32)
    next_q = rng.normal(size=(batch, actions)).astype(np.float32)
    mask = rng.random((batch, actions)) < 0.6
    mask[2] = False  # no valid action: nothing to bootstrap from
    mask[3] = [True, True, True]
    args = [jnp.asarray(a) for a in (reward, terminated, quantiles, next_q)]
    for next_mask in (None, mask):
        target = iqn.quantile_target(*args, None if next_mask is None else jnp.asarray(mask), 0.9)
        expected = np.zeros((batch, samples))
        for i in range(batch):
            valid = [a for a in range(actions) if next_mask is None or next_mask[i, a]]
            best = max(valid, key=lambda a: next_q[i, a]) if valid else None
            for j in range(samples):
                bootstrap = 0.0 if terminated[i] or best is None else quantiles[i, j, best]
                expected[i, j] = reward[i] + 0.9 * bootstrap
        np.testing.assert_allclose(target, expected, rtol=1e-6, atol=1e-6)
    # The mask changed some greedy choice: the check above saw both paths.
    assert not np.array_equal(next_q.argmax(1), np.where(mask, next_q, -np.inf).argmax(1))


def test_act_is_greedy_on_the_midpoints_and_never_takes_a_masked_action(vmapped):
    state = jax.tree.map(lambda x: x[0], vmapped[0])  # seed 0's, with a fresh network
    net = iqn.QNetwork((4,), 3, TINY, jax.random.key(1))
    net = eqx.tree_at(lambda n: n.head[-1].bias, net, replace=jnp.zeros(3))  # no favourite
    state = dataclasses.replace(state, q_network=net)
    obs = 3 * jax.random.normal(jax.random.key(2), (16, 4))
    midpoints = np.array([0.125, 0.375, 0.625, 0.875])
    q = np.array([numpy_quantiles(net, np.asarray(o), midpoints).mean(0) for o in obs])
    greedy = iqn.act(state, obs, num_quantile_samples=4)
    np.testing.assert_array_equal(greedy, q.argmax(1))
    assert len(set(q.argmax(1).tolist())) > 1  # the observations disagree on the best action
    mask = np.ones((16, 3), bool)
    mask[np.arange(16), q.argmax(1)] = False  # the best action is never valid
    masked = np.asarray(iqn.act(state, obs, jnp.asarray(mask), num_quantile_samples=4))
    np.testing.assert_array_equal(masked, np.where(mask, q, -np.inf).argmax(1))
    assert np.all(mask[np.arange(16), masked])


# --- invariants, masks and a probe

# ProbeMasked (tests/probes.py) pays 0, 1 or 10 for one step and never allows action 2: the run
# must never take it, and learns to prefer action 1 (the probe of tests/test_masking.py).
TINY = iqn.Config(
    env="ProbeMasked",
    total_timesteps=4 * 160,
    num_envs=4,
    train_frequency=2,
    buffer_size=256,
    batch_size=16,
    learning_starts=80,
    learning_rate=3e-3,
    target_network_frequency=40,
    end_e=0.05,
    exploration_steps=320,
    eval_every=4 * 40,
    num_eval_envs=2,
    num_tau_samples=8,
    num_tau_prime_samples=8,
    num_quantile_samples=8,
    num_cosines=8,
    torso_sizes=(16,),
    hidden_sizes=(16,),
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(iqn.make_train(TINY))
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
    assert metrics["train"]["td_loss"].shape == (3, 4)
    assert np.all(np.isfinite(metrics["train"]["td_loss"]))  # warm-up ends in interval 0


def test_no_masked_action_is_taken_and_the_best_valid_one_is_learned(vmapped):
    state, metrics = vmapped
    train_returns = np.asarray(metrics["train"]["episodic_return"])
    eval_returns = np.asarray(metrics["eval"]["episodic_return"])
    stored = np.asarray(state.buffer.data.action)
    assert stored.size == 3 * 256 and not np.any(stored == 2)  # the buffer has wrapped
    assert np.asarray(state.buffer.data.next_mask).shape == (3, 256, 3)
    assert np.nanmax(train_returns) <= 1.0, train_returns  # a mean above 1: action 2 taken
    np.testing.assert_array_equal(eval_returns[:, -1], 1.0)  # greedy: the best valid action
    # The buffer holds env steps 385-640, all at epsilon 0.05: 97.5% action 1 when learned,
    # 50% for random valid actions (seeds 0-2, 2026-12-07: 97-98%).
    assert np.all(np.mean(stored == 1, axis=1) >= 0.9), np.mean(stored == 1, axis=1)


def test_schedules_count_updates_and_copy_the_target(vmapped):
    state, _ = vmapped
    # 160 iterations of 4 env steps, 2 updates each once 80 env steps are reached (iteration 19).
    assert np.all(np.asarray(state.opt_state[1][0].count) == 2 * (160 - 19))
    assert int(state.env_steps[0]) == 640 and int(state.buffer.size[0]) == 256
    # The last env step, 640, is a multiple of 40: the hard copy just happened.
    assert_trees_close(state.target_network, state.q_network, rtol=0, atol=0)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.q_network.embedding.weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.array_equal(state.buffer.data.action[0], state.buffer.data.action[1])


def test_the_target_network_is_the_one_bootstrapped_from(vmapped):
    # Seed 0's trained state, its stored transitions marked unterminated so that every target
    # bootstraps; one more iteration (2 updates) from it, its target network as is or with
    # every quantile raised by 100: the targets, the loss and the update follow the target
    # network. Bootstrapping from the online network (rejax's) would leave all three unchanged.
    state = jax.tree.map(lambda x: x[0], vmapped[0])
    state = eqx.tree_at(lambda s: s.buffer.data.terminated, state, replace_fn=jnp.zeros_like)
    raised = eqx.tree_at(
        lambda s: s.target_network.head[-1].bias, state, replace_fn=lambda b: b + 100
    )
    step = jax.jit(iqn.make_train(TINY).step)
    plain, plain_metrics = step(state, 160)
    high, high_metrics = step(raised, 160)
    # The quantiles are 0 or 1, their targets r + 0.99 Q(0, 1): about 1 or about 100.
    assert float(plain_metrics["td_loss"]) < 2 < 50 < float(high_metrics["td_loss"])
    gap = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), high.q_network, plain.q_network)
    assert max(jax.tree.leaves(gap)) > 1e-4


# --- configuration and presets


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "Pendulum-v1"],
        ["continuous action space", "iqn.py", "handles discrete"],
    )
    assert_refused_before_compiling("iqn", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(train_frequency=3), ["train_frequency = 3", "num_envs = 10"]),
        (dict(torso_sizes=(8, 0)), ["torso_sizes and hidden_sizes must be positive"]),
        (dict(kappa=-1.0), ["Out of range", "kappa = -1.0"]),
        (dict(num_tau_samples=0), ["Out of range", "num_tau_samples = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    with pytest.raises(ConfigError) as error:
        iqn.make_train(dataclasses.replace(iqn.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


def test_presets_translate_rejax_and_the_minatar_dqn():
    cartpole = iqn.Config(**iqn.PRESETS["CartPole-v1"])
    # rejax: one env, one update of one transition per env step, Polyak 0.99 every step.
    assert cartpole.env_steps_per_iteration == 1 and cartpole.updates_per_iteration == 1
    assert (cartpole.batch_size, cartpole.tau, cartpole.target_network_frequency) == (1, 0.01, 1)
    acrobot = iqn.Config(**iqn.PRESETS["Acrobot-v1"])
    # rejax: 10 envs, 5 updates (num_epochs) of 100 per iteration, a target every 500 steps.
    assert acrobot.env_steps_per_iteration == 10 and acrobot.updates_per_iteration == 5
    assert (acrobot.batch_size, acrobot.grad_clip, acrobot.tau) == (100, 10.0, 1.0)
    for config in (cartpole, acrobot):
        # rejax's epsilon 1 -> 0.01 over half the 1e5 steps, in env steps.
        assert float(iqn.linear_epsilon(config, jnp.array(25_000))) == pytest.approx(0.505)
    minatar = iqn.Config(**iqn.PRESETS["Breakout-MinAtar"])
    net = jax.eval_shape(lambda: iqn.QNetwork((10, 10, 4), 3, minatar, jax.random.key(0)))
    # The conv's 16 x 8 x 8 features times the embedding, then 128 units.
    assert net.embedding.weight.shape == (1024, 64) and net.torso == ()
    assert [layer.weight.shape for layer in net.head] == [(128, 1024), (3, 128)]


# --- slow: probes, single runs, the command line, resume


def probe_config(env: str, **overrides) -> iqn.Config:
    return dataclasses.replace(TINY, env=env, start_e=1.0, end_e=1.0, **overrides)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_time_limit_is_not_a_termination():
    train = iqn.make_train(probe_config("ProbeTimeLimit", gamma=0.5))
    state, _ = jax.jit(train)(jax.random.key(0))
    taus = jnp.tile(jnp.linspace(0.05, 0.95, 10), (1, 1))
    quantiles = jax.vmap(state.q_network)(jnp.zeros((1, 1)), taus)[0, :, 0]
    # Bootstrapping through the 3-step limit: every quantile of the constant return is 2;
    # cutting it gives about 1.42.
    np.testing.assert_allclose(quantiles, 2.0, atol=0.15)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_action_dependent_reward():
    state, metrics = jax.jit(iqn.make_train(probe_config("ProbeAction")))(jax.random.key(0))
    obs = jnp.array([[0.0], [1.0]])
    q = iqn.mean_quantiles(state.q_network, obs, jnp.tile(jnp.linspace(0.05, 0.95, 10), (2, 1)))
    np.testing.assert_allclose(q, [[1.0, 0.0], [0.0, 1.0]], atol=0.1)
    assert float(metrics["eval"]["episodic_return"][-1]) == 1.0


@pytest.mark.slow  # programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(iqn.make_train(TINY))(jax.random.key(2))
    assert_trees_close(jax.tree.map(lambda x: x[2], vmapped), single, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_with_the_rejax_network_then_evaluate_and_render(
    tmp_path, monkeypatch, capsys
):
    args = ["--total-timesteps", "400", "--learning-starts", "100", "--eval-every", "200"]
    args += ["--activation", "swish", "--torso-sizes", "16", "16", "--hidden-sizes", "16"]
    args += ["--grad-clip", "10", "--num-tau-samples", "8", "--num-quantile-samples", "4"]
    done = cli_run(
        "iqn", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "iqn" and summary["seeds"] == [0, 1]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["activation"] == "swish" and config["torso_sizes"] == [16, 16]
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


@pytest.mark.slow  # three runs compile and train
def test_resume_equals_whole_run(tmp_path):
    config = dataclasses.replace(TINY, num_seeds=2, total_timesteps=4 * 80)
    assert_resume_equals_whole_run(config, iqn.make_train, "iqn", tmp_path / "run")


# --- learning


@pytest.mark.learning_extra  # outside CI for time (tests/README.md)
def test_iqn_cartpole_preset_learns():
    # rejax's CartPole configuration (--preset CartPole-v1), 1e5 env steps, 4 seeds: greedy
    # evaluations 207, 260, 181 and 213 (128 episodes each, seeds 0-3, 2026-12-07; a random
    # policy: about 22), 3.5 min on the 2 busy cores. One evaluation, at the end: the only one
    # read (evaluations draw their own keys, so no training number moves).
    config = iqn.Config(**dict(iqn.PRESETS["CartPole-v1"], num_seeds=4, eval_every=100_000))
    result = trainer.run(config, iqn.make_train, algo="iqn", verbose=False)
    assert min(result.summary["eval_return"]) >= 150, result.summary
