"""Continuous-action PPO: math, probes, normalisation, invariants, CLI and learning."""

import dataclasses
import json

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo_continuous as pc
from canter.algorithms import trainer
from canter.common.config import ConfigError
from canter.common.envs import make_env
from canter.common.run.cli import house_hint

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

TINY = pc.Config(
    total_timesteps=4 * 8 * 6,
    num_envs=4,
    num_steps=8,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 8 * 2,
    num_eval_envs=2,
)

# --- math


def test_gaussian_log_prob_matches_distrax():
    rng = np.random.default_rng(0)
    action, mean, log_std = (jnp.array(rng.normal(size=3), jnp.float32) for _ in range(3))
    reference = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))
    got = pc.gaussian_log_prob(action, mean, log_std)
    np.testing.assert_allclose(got, reference.log_prob(action), rtol=1e-5)
    # By hand, one dimension: N(0.5; 0, 2) has log-density -0.5 (0.25)^2 - log 2 - log sqrt(2 pi).
    by_hand = -0.5 * 0.25**2 - np.log(2.0) - 0.5 * np.log(2 * np.pi)
    one = pc.gaussian_log_prob(jnp.array([0.5]), jnp.array([0.0]), jnp.log(jnp.array([2.0])))
    assert float(one) == pytest.approx(by_hand, rel=1e-6)


def test_tanh_log_det_jacobian_is_exact_and_stable():
    x = jnp.linspace(-3.0, 3.0, 7)
    naive = jnp.sum(jnp.log(1.0 - jnp.tanh(x) ** 2))
    np.testing.assert_allclose(pc.tanh_log_det_jacobian(x), naive, rtol=1e-5)
    derivative = jax.vmap(jax.grad(jnp.tanh))(x)  # d tanh / dx, by autodiff
    np.testing.assert_allclose(pc.tanh_log_det_jacobian(x), jnp.sum(jnp.log(derivative)), rtol=1e-5)
    far = pc.tanh_log_det_jacobian(jnp.array([40.0, -40.0]))  # 1 - tanh^2 is 0 in float32 there
    assert bool(jnp.isfinite(far)) and float(far) == pytest.approx(4 * (np.log(2) - 40), rel=1e-6)


def test_squashed_policy_outputs_mean_and_a_floor_on_the_std():
    config = dataclasses.replace(TINY, squash=True, hidden_size=8, num_layers=3)
    model = pc.ActorCritic(3, 2, config, jax.random.key(0))
    assert model.log_std is None and model.actor.layers[-1].weight.shape == (4, 8)
    assert len(model.actor.layers) == 4  # three hidden layers, then mean and raw scale
    raw = jnp.array([0.3, -0.2, -1e4, 2.0])  # the last layer's output: mean, then raw scale
    model = eqx.tree_at(lambda m: m.actor, model, lambda obs: raw)
    mean, log_std = model.policy(jnp.zeros(3))
    np.testing.assert_allclose(mean, [0.3, -0.2])
    std = jnp.exp(log_std)  # softplus(-1e4) = 0: the floor; softplus(2) + 0.001
    np.testing.assert_allclose(std, [0.001, np.log1p(np.exp(2.0)) + 0.001], rtol=1e-5)


def test_critic_sizes_and_activation_apart_from_the_actor():
    config = dataclasses.replace(
        TINY, hidden_size=4, num_layers=1, critic_hidden_size=6, critic_num_layers=3
    )
    model = pc.ActorCritic(3, 2, dataclasses.replace(config, activation="swish"), jax.random.key(1))
    assert [w.weight.shape for w in model.actor.layers] == [(4, 3), (2, 4)]
    assert [w.weight.shape for w in model.critic.layers] == [(6, 3), (6, 6), (6, 6), (1, 6)]
    x = jnp.array([0.5, -1.0, 2.0])
    hidden = jax.nn.swish(model.actor.layers[0](x))
    np.testing.assert_allclose(model.actor(x), model.actor.layers[1](hidden), rtol=1e-6)


def test_running_stats_match_numpy_over_all_batches():
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=(n, 2)).astype(np.float32) for n in (5, 40, 17)]
    stats = pc.RunningStats(jnp.zeros(2), jnp.ones(2), jnp.float32(1e-4))
    for batch in batches:
        stats = pc.update_stats(stats, jnp.array(batch))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(stats.mean, everything.mean(0), rtol=1e-4)
    np.testing.assert_allclose(stats.var, everything.var(0), rtol=1e-3)
    assert float(stats.count) == pytest.approx(62, abs=1e-3)
    normalised = pc.normalize(jnp.array([[3.0, 1e6]]), stats)
    assert float(normalised[0, 1]) == 10.0  # clipped


# --- probes


def train_probe(env: str, steps: int = 60, **overrides):
    config = pc.Config(
        env=env,
        total_timesteps=8 * 16 * steps,
        num_envs=8,
        num_steps=16,
        num_minibatches=4,
        update_epochs=4,
        learning_rate=3e-3,
        eval_every=8 * 16 * (steps // 3),
        **overrides,
    )
    return jax.jit(pc.make_train(config))(jax.random.key(0))


def values(state, observations):
    obs = pc.normalize(jnp.array(observations, jnp.float32)[:, None], state.obs_stats)
    return jax.vmap(state.model.value)(obs)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_constant_reward_and_statistics_untouched_when_off():
    state, _ = train_probe("ProbeContinuous", norm_reward=False)
    assert float(values(state, [0.0])[0]) == pytest.approx(1.0, abs=0.05)
    assert float(state.return_stats.count) == pytest.approx(1e-4)  # reward scaling off
    assert float(state.obs_stats.count) == pytest.approx(8 * 16 * 60, abs=1e-2)


def test_time_limit_bootstraps_and_rewards_scale_by_return_std():
    # Reward 1 forever, 3-step time limit, gamma 1/2: within an episode the running discounted
    # returns are 1, 1.5, 1.75, so the reward scale is their std (about 0.312), exactly.
    gamma, returns = 0.5, np.array([1.0, 1.5, 1.75])
    state, metrics = train_probe("ProbeContinuousTimeLimit", gamma=gamma, clip_vloss=False)
    assert_episodes_read_and_cleared(state, metrics)
    stats = state.return_stats
    np.testing.assert_allclose([stats.mean, stats.var], [returns.mean(), returns.var()], rtol=1e-3)
    scale = returns.std()
    v = float(values(state, [0.0])[0])
    assert v == pytest.approx(1 / (1 - gamma) / scale, abs=0.2)  # 6.41, in scaled units
    assert abs(v - 1.42 / scale) > 1.0  # the limit taken as a termination: 1.42 unscaled


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_squashed_policy_learns_interior_actions_and_scaled_rewards():
    # Bounds [-2, 2]: the env gets 2 tanh(u); the best actions (o, -o / 2) are inside. Rewards
    # x 10 change the values the critic learns, not the best action.
    state, metrics = train_probe(
        "ProbeTwoDimAction", steps=90, squash=True, norm_reward=False, reward_scale=10.0
    )
    obs = pc.normalize(jnp.array([[0.0], [1.0]]), state.obs_stats)
    mean, _ = jax.vmap(state.model.policy)(obs)
    np.testing.assert_allclose(2.0 * jnp.tanh(mean), [[0.0, 0.0], [1.0, -0.5]], atol=0.15)
    assert float(metrics["eval"]["episodic_return"][-1]) > -0.05
    assert -0.5 < float(jnp.mean(values(state, [0.0, 1.0]))) < 0.1  # about 10 x (-0.0x)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_action_dependent_reward_and_frozen_statistics_at_evaluation():
    state, metrics = train_probe("ProbeTwoDimAction", steps=90)
    obs = pc.normalize(jnp.array([[0.0], [1.0]]), state.obs_stats)
    mean = jax.vmap(state.model.actor)(obs)
    np.testing.assert_allclose(mean, [[0.0, 0.0], [1.0, -0.5]], atol=0.15)
    # Observations are 0 or 1 at random: mean 1/2, variance 1/4, one sample per env step.
    stats = state.obs_stats
    assert float(stats.count) == pytest.approx(8 * 16 * 90, abs=1e-2)
    np.testing.assert_allclose([stats.mean[0], stats.var[0]], [0.5, 0.25], atol=0.02)
    assert float(metrics["eval"]["episodic_return"][-1]) > -0.05
    # Evaluation reads the statistics stored in the state: corrupting them ruins the policy.
    evaluate = jax.jit(pc.make_train(pc.Config(env="ProbeTwoDimAction")).evaluate)
    good = evaluate(state, jax.random.key(1))["episodic_return"]
    shifted = eqx.tree_at(lambda s: s.obs_stats.mean, state, stats.mean + 2.0)
    bad = evaluate(shifted, jax.random.key(1))["episodic_return"]
    assert float(good) > -0.05 and float(bad) < float(good) - 0.1


# --- invariants


@pytest.fixture(scope="module")
def traced():
    """A compiled vmapped run, its output for seeds 0-2 and the counts of traces so far."""
    train, counts = counting(pc.make_train(TINY))
    compiled = jax.jit(jax.vmap(train))
    return compiled, compiled(trainer.seed_keys(0, 3)), counts


@pytest.fixture(scope="module")
def vmapped(traced):
    return traced[1]


def test_every_state_leaf_is_an_array(vmapped):
    for leaf in jax.tree.leaves(vmapped):
        assert isinstance(leaf, jax.Array), type(leaf)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_vmapped_seed_equals_single_run_and_seeds_differ(vmapped):
    train = jax.jit(pc.make_train(TINY))
    single = train(jax.random.key(2))
    assert_trees_close(jax.tree.map(lambda x: x[2], vmapped), single)
    state, metrics = vmapped
    assert not np.allclose(
        state.model.actor.layers[0].weight[0], state.model.actor.layers[0].weight[1]
    )
    assert not np.allclose(state.obs_stats.mean[0], state.obs_stats.mean[1])
    expected = {"episodic_return", "policy_loss", "value_loss", "entropy", "approx_kl"}
    assert expected <= set(metrics["train"])


def test_train_traces_once(traced):
    compiled, _, counts = traced
    compiled(trainer.seed_keys(5, 3))
    assert counts == {"step": 1, "act": 1}


@pytest.mark.parametrize("squash", [False, True])
@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_unchanged_parameters_give_ratio_one(squash):
    # With learning rate 0 every minibatch sees the rollout's parameters: the stored log-probs
    # (of the unclipped or unsquashed actions, on the normalised observations) must come back.
    config = dataclasses.replace(TINY, learning_rate=0.0, env="ProbeTwoDimAction", squash=squash)
    train = pc.make_train(config)
    state = jax.jit(train.init)(jax.random.key(0))
    if not squash:
        state = eqx.tree_at(lambda s: s.model.log_std, state, jnp.full(2, 1.0))  # many clipped
    step = jax.jit(train.step)
    for i in range(2):
        state, metrics = step(state, i)
        assert float(metrics["approx_kl"]) < 1e-10 and float(metrics["clipfrac"]) == 0.0


# --- errors and CLI


def test_discrete_env_names_ppo_and_ppo_names_this_file():
    # The error names the env's kind of actions; the CLI's message adds the house's files for it.
    with pytest.raises(ConfigError, match="discrete action space") as caught:
        pc.make_train(dataclasses.replace(TINY, env="CartPole-v1"))
    assert "algorithms/ppo.py" in house_hint(caught.value)
    with pytest.raises(ConfigError, match="continuous action space") as caught:
        make_env("Pendulum-v1", action="discrete", algorithm="ppo.py")
    assert "algorithms/ppo_continuous.py" in house_hint(caught.value)


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    args = ["--total-timesteps", "8192", "--eval-every", "4096", "--num-eval-envs", "2"]
    done = cli_run(
        "ppo_continuous", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(run_dir)
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["algo"] == "ppo_continuous" and summary["env"] == "Pendulum-v1"
    assert len(summary["eval_return"]) == 2 and summary["env_steps"] == 8192
    assert_evaluates_and_renders(run_dir, tmp_path / "episode.gif", 2)


BAD_INPUT = [
    (["--env", "CartPole-v1"], ["discrete action space", "algorithms/ppo.py"]),
    (["--num-minibatches", "5"], ["num_envs * num_steps = 4096", "num_minibatches = 5"]),
    (["--total-timesteps", "100"], ["smaller than one iteration", "4096"]),
    (["--preset", "Hopper"], ["--preset 'Hopper' is unknown", "MountainCarContinuous-v0"]),
]


@pytest.mark.parametrize("args, needles", BAD_INPUT)
def test_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys, args, needles):
    check = (tmp_path, monkeypatch, capsys)
    assert_refused_before_compiling("ppo_continuous", args, needles, *check)


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_preset_sets_defaults_that_flags_override(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    args = ["--preset", "MountainCarContinuous-v0", "--gamma", "0.98", "--total-timesteps", "4096"]
    done = cli_run(
        "ppo_continuous",
        monkeypatch,
        capsys,
        *args,
        "--eval-every",
        "4096",
        "--run-dir",
        str(run_dir),
    )
    assert done.returncode == 0, done.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env"] == "MountainCarContinuous-v0" and config["learning_rate"] == 1e-3
    assert config["gamma"] == 0.98  # the flag wins over the preset
    shown = cli_run("ppo_continuous", monkeypatch, capsys, "--help").stdout
    assert "--preset MountainCarContinuous-v0" in shown and "--gamma 0.99" in shown


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_the_playground_and_brax_presets_are_brax_ppo_at_the_published_sizes():
    """Playground's DM Control PPO and Brax's notebook PPO, as Brax counts its batches
    (docs/notes/playground-reference.md); tests/test_physics.py builds and runs a preset."""
    cheetah = pc.Config(**pc.PRESETS["CheetahRun"])
    assert cheetah.env == "playground:CheetahRun" and cheetah.batch_size == 2048 * 16 * 30
    assert cheetah.batch_size // cheetah.num_minibatches == 1024 * 30  # Brax's minibatch
    assert cheetah.num_iterations == 90 and cheetah.squash and not cheetah.norm_reward
    assert (cheetah.gamma, cheetah.reward_scale, cheetah.clip_coef) == (0.995, 10.0, 0.3)
    assert pc.Config(**pc.PRESETS["WalkerRun"]).num_iterations == 180
    assert pc.Config(**pc.PRESETS["FingerSpin"]).gamma == 0.95
    assert set(pc.PRESETS) >= {f"{task}" for task in pc.PLAYGROUND_TASKS}
    model = pc.ActorCritic(17, 6, cheetah, jax.random.key(0))  # CheetahRun's sizes
    assert [w.weight.shape[0] for w in model.actor.layers] == [32] * 4 + [12]
    assert [w.weight.shape[0] for w in model.critic.layers] == [256] * 5 + [1]
    assert model.actor.activation == "swish"
    assert cheetah.num_iterations // (cheetah.eval_every // cheetah.batch_size) == 9  # evals
    for name, per_update in [("ant", 2048 * 32 * 5), ("humanoid", 1024 * 32 * 10)]:
        config = pc.Config(**pc.PRESETS[name])
        assert config.batch_size == per_update and config.num_iterations * per_update == 50_135_040
    halfcheetah = pc.Config(**pc.PRESETS["halfcheetah"])
    assert halfcheetah.batch_size == 512 * 32 * 20 and halfcheetah.num_iterations == 19 * 9


# --- learning


@pytest.mark.learning_extra  # outside CI for time (tests/README.md)
def test_pendulum_reaches_target():
    # Issue target: mean final eval return >= -200 over 8 seeds within 1e6 env steps.
    config = pc.Config(env="Pendulum-v1", num_seeds=8)
    result = trainer.run(config, pc.make_train, algo="ppo_continuous", verbose=False)
    assert result.summary["eval_return_mean"] >= -200, result.summary
    assert result.summary["final_return_mean"] >= -250, result.summary
