"""MinAtar: image observations, the CNN torsos, sticky actions, presets and their bad input."""

import dataclasses
import json

import equinox as eqx
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import dqn, ppo, ppo_rnd, pqn, pqn_rnn, trainer
from canter.common.config import ConfigError
from canter.common.envs import MINATAR_GAMES, STICKY_ACTION_ENVS, make_env, register_env
from canter.common.envs.wrappers import StickyActions, base_state
from gymnax.environments import environment, spaces

from tests.checks import cli_in_process
from tests.test_invariants import assert_trees_close

MODULES = {"ppo": ppo, "pqn": pqn, "dqn": dqn}

# --- sticky actions


class EchoState(eqx.Module):
    time: jax.Array


class Echo(environment.Environment):
    """Observes the action it executed; episodes end (truncated) after 5 steps."""

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=5)

    def step_env(self, key, state, action, params):
        state = EchoState(state.time + 1)
        obs = jnp.asarray(action, jnp.float32)[None]
        return obs, state, jnp.float32(0), jnp.array(False), {}

    def reset_env(self, key, params):
        return jnp.full((1,), -1.0), EchoState(jnp.array(0))

    def action_space(self, params):
        return spaces.Discrete(4)

    def observation_space(self, params):
        return spaces.Box(-1.0, 3.0, (1,), jnp.float32)


def executed_actions(prob: float, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(executed action, episode ended) per step of one Echo env under StickyActions."""
    env = StickyActions(Echo(), prob)
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)

    def step(state, inputs):
        key, action = inputs
        _, state, _, terminated, truncated, info = env.step(key, state, action, params)
        return state, (info["final_observation"][0], terminated | truncated)

    keys = jax.random.split(jax.random.key(1), len(actions))
    _, (executed, ended) = jax.lax.scan(step, state, (keys, jnp.asarray(actions)))
    return np.asarray(executed, int), np.asarray(ended)


def test_sticky_actions_repeat_the_last_executed_action():
    actions = np.random.default_rng(0).integers(0, 4, 4000)
    assert np.array_equal(executed_actions(0.0, actions)[0], actions)  # never sticks
    assert not executed_actions(1.0, actions)[0].any()  # always the start action, 0
    executed, ended = executed_actions(0.25, actions)
    # Each step executes the agent's action or repeats the previous executed one, which is 0
    # at the start of every episode (MinAtar's reset convention).
    previous = np.concatenate([[0], np.where(ended[:-1], 0, executed[:-1])])
    assert np.all((executed == actions) | (executed == previous))
    differ = actions != previous
    stuck = np.mean(executed[differ] == previous[differ])
    assert abs(stuck - 0.25) < 0.03, stuck  # about 3,000 draws: 0.25 +- 0.008 (one std)
    assert ended.sum() == len(actions) // 5


def test_sticky_actions_refused_where_the_env_has_none():
    with pytest.raises(ConfigError, match="does not support sticky actions"):
        make_env("CartPole-v1", sticky_action_prob=0.1)
    config = ppo.Config(env="Acrobot-v1", sticky_action_prob=0.1)
    with pytest.raises(ConfigError, match="Breakout-MinAtar"):
        ppo.make_train(config)
    # A swept probability is checked for every point before anything compiles.
    with pytest.raises(ConfigError, match="does not support sticky actions"):
        trainer.run(
            ppo.Config(), ppo.make_train, algo="ppo", sweep={"sticky_action_prob": [0.0, 0.1]}
        )


# --- image observations and the networks


@pytest.mark.slow  # CNN programs compile: 7-9 s on 2 busy cores
def test_minatar_observations_keep_their_shape_for_a_cnn():
    for game in MINATAR_GAMES:  # every game's space; two games stepped (each step compiles)
        raw, _ = gymnax.make(f"{game}-MinAtar")
        channels = raw.observation_space(raw.default_params).shape[-1]
        env, params = make_env(f"{game}-MinAtar", image=True)
        assert env.observation_space(params).shape == (10, 10, channels)
        if game not in ("Breakout", "Seaquest"):
            continue
        obs, state = env.reset(jax.random.key(0), params)
        assert obs.shape == (10, 10, channels) and obs.dtype == jnp.float32
        _, _, _, _, _, info = env.step(jax.random.key(1), state, 0, params)
        assert info["final_observation"].shape == (10, 10, channels)
        assert isinstance(base_state(state), type(raw.reset(jax.random.key(0))[1]))
    flat, params = make_env("Breakout-MinAtar")
    assert flat.reset(jax.random.key(0), params)[0].shape == (400,)


def test_cnn_on_a_vector_env_is_refused():
    for module in MODULES.values():
        with pytest.raises(ConfigError, match="needs image observations"):
            module.make_train(module.Config(env="CartPole-v1", network="cnn"))


def reference_conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """3x3 'valid' convolution of an HxWxC image with (out, C, 3, 3) weights, as loops."""
    height, width, _ = x.shape
    out = np.zeros((height - 2, width - 2, weight.shape[0]))
    for i in range(height - 2):
        for j in range(width - 2):
            patch = x[i : i + 3, j : j + 3, :]  # 3 x 3 x C
            out[i, j] = np.einsum("hwc,ochw->o", patch, weight) + bias.reshape(-1)
    return out


def test_conv_torsos_read_channels_last_images_correctly():
    x = np.asarray(jax.random.uniform(jax.random.key(0), (10, 10, 4)))
    torso = ppo.ConvTorso(4, jax.random.key(1))
    conv = reference_conv(x, np.asarray(torso.conv.weight), np.asarray(torso.conv.bias))
    expected = np.maximum(conv, 0).transpose(2, 0, 1).reshape(-1)  # Equinox flattens CHW
    np.testing.assert_allclose(torso(jnp.asarray(x)), expected, rtol=1e-5, atol=1e-5)
    # PQN's torso normalises each cell over its 16 channels before the ReLU.
    torso = pqn.ConvTorso(4, jax.random.key(2))
    conv = reference_conv(x, np.asarray(torso.conv.weight), np.asarray(torso.conv.bias))
    normed = (conv - conv.mean(-1, keepdims=True)) / np.sqrt(conv.var(-1, keepdims=True) + 1e-5)
    expected = np.maximum(normed, 0).reshape(-1)
    np.testing.assert_allclose(torso(jnp.asarray(x)), expected, rtol=1e-4, atol=1e-4)
    net = dqn.QNetwork(
        (10, 10, 4), 3, dqn.Config(network="cnn", hidden_sizes=(8,)), jax.random.key(3)
    )
    conv = reference_conv(x, np.asarray(net.conv.weight), np.asarray(net.conv.bias))
    hidden = np.asarray(net.layers[0].weight) @ np.maximum(conv, 0).transpose(2, 0, 1).reshape(-1)
    hidden = np.maximum(hidden + np.asarray(net.layers[0].bias), 0)
    expected = np.asarray(net.layers[1].weight) @ hidden + np.asarray(net.layers[1].bias)
    np.testing.assert_allclose(net(jnp.asarray(x)), expected, rtol=1e-4, atol=1e-4)


def test_pqn_cnn_is_initialised_as_purejaxql():
    config = pqn.Config(network="cnn", hidden_size=512, num_layers=1)
    net = pqn.QNetwork((10, 10, 7), 6, config, jax.random.key(0))
    fan_ins = {"conv": 7 * 9, "hidden": 16 * 64, "out": 512}
    weights = {"conv": net.torso.conv.weight, "hidden": net.layers[0].weight}
    weights["out"] = net.layers[1].weight
    # Truncated normal at 2 std has 0.774 of the untruncated variance (flax rescales for it).
    for name, scale in (("conv", 2.0), ("hidden", 2.0), ("out", 1.0)):
        std = float(np.std(np.asarray(weights[name])))
        assert abs(std / np.sqrt(scale / fan_ins[name]) - 1) < 0.1, (name, std)
    assert not np.any(net.torso.conv.bias) and not np.any(net.layers[0].bias)


# --- presets


@pytest.mark.parametrize("name", sorted(MODULES))
def test_minatar_presets_cover_every_game(name):
    module = MODULES[name]
    minatar = {env: p for env, p in module.PRESETS.items() if env.endswith("-MinAtar")}
    assert sorted(minatar) == sorted(STICKY_ACTION_ENVS)  # the others are Craftax's
    for env, preset in minatar.items():
        config = module.Config(**preset)
        # The budget of each reference's published curves: MinAtar's DQN 5e6, the others 1e7.
        budget = 5_000_000 if name == "dqn" else 10_000_000
        assert config.env == env and config.total_timesteps == budget
    assert module.Config(**module.PRESETS["Breakout-MinAtar"]).network == (
        "mlp" if name == "ppo" else "cnn"
    )
    # gymnax-blines and purejaxql ran gymnax's MinAtar (no sticky actions); MinAtar's DQN 0.1.
    assert module.Config(**module.PRESETS["Asterix-MinAtar"]).sticky_action_prob == (
        0.1 if name == "dqn" else 0.0
    )


@pytest.mark.parametrize("module", [ppo, ppo_rnd], ids=["ppo", "ppo_rnd"])
def test_ppos_minatar_presets_evaluate_the_sampled_policy_as_gymnax_blines_reports(module):
    # gymnax-blines publishes its PPO's MinAtar returns for the sampled policy (issue 43).
    for game in MINATAR_GAMES:
        assert module.Config(**module.PRESETS[f"{game}-MinAtar"]).eval_policy == "sampled"


@pytest.mark.parametrize("game", MINATAR_GAMES)
def test_pqn_rnns_minatar_presets_train_as_pqns_with_the_recurrent_defaults_network(game):
    # No PQN-RNN MinAtar configuration is published: purejaxql's pqn_minatar.yaml training (as
    # pqn.py's presets) under pqn_rnn's default MLP and GRU, at pqn's 1e7 budget.
    env = f"{game}-MinAtar"
    config = pqn_rnn.Config(**pqn_rnn.PRESETS[env])
    reference = pqn.Config(**pqn.PRESETS[env])
    shared = ("total_timesteps", "num_envs", "num_steps", "learning_rate", "update_epochs")
    shared += ("num_minibatches", "max_grad_norm", "gamma", "q_lambda", "start_e", "end_e")
    shared += ("exploration_fraction", "reward_scale", "sticky_action_prob", "env")
    assert {f: getattr(config, f) for f in shared} == {f: getattr(reference, f) for f in shared}
    network = ("hidden_size", "num_layers", "cell", "memory_window")
    default = pqn_rnn.Config()
    assert [getattr(config, f) for f in network] == [getattr(default, f) for f in network]
    # Evaluation on purejaxql's TEST_ENVS (128); pqn.py's presets keep 32, a deviation they name.
    assert config.eval_every % config.batch_size == 0 and config.num_eval_envs == 128
    pqn_rnn.make_train(config)  # validates without compiling: 4 whole sequences per minibatch


def test_preset_for_another_env_fails_before_compiling(monkeypatch, capsys):
    args = ["--preset", "Breakout-MinAtar", "--env", "Asterix-MinAtar"]
    code, _, err = cli_in_process("pqn", monkeypatch, capsys, *args)
    assert code == 2 and "tuned for --env Breakout-MinAtar" in err, err


# --- the CNN variants train: invariants on a tiny budget


TINY = {
    "ppo": dict(
        num_envs=4,
        num_steps=8,
        num_minibatches=2,
        update_epochs=1,
        total_timesteps=64,
        eval_every=64,
    ),
    "pqn": dict(
        num_envs=4,
        num_steps=8,
        num_minibatches=2,
        update_epochs=1,
        total_timesteps=64,
        eval_every=64,
    ),
    "dqn": dict(
        num_envs=2,
        train_frequency=2,
        buffer_size=64,
        batch_size=8,
        learning_starts=8,
        target_network_frequency=8,
        total_timesteps=64,
        eval_every=4,
    ),
}


@pytest.mark.slow
# PPO's: the CNN torso's batching is blocks/layers.py's Conv2d in every file (each file's torso
# reads its images as the default tier checks, test_conv_torsos_...), and the vmapped-equals-
# single invariant of each file's training loop is its own test file's; each case compiled two
# CNN programs, 45-55 s here.
@pytest.mark.parametrize("name", ["ppo"])
def test_cnn_variant_runs_vmapped_equal_to_single_runs(name):
    module = MODULES[name]
    preset = {k: v for k, v in module.PRESETS["Breakout-MinAtar"].items() if k != "network"}
    tiny = dict(TINY[name], network="cnn", sticky_action_prob=0.1, num_eval_envs=2)
    config = module.Config(**{**preset, **tiny})
    train = module.make_train(config)
    state, metrics = jax.jit(jax.vmap(train))(trainer.seed_keys(0, 2))
    for leaf in jax.tree.leaves((state, metrics)):
        assert isinstance(leaf, jax.Array), type(leaf)
    assert state.obs.shape[2:] == (10, 10, 4)
    assert np.all(np.isfinite(metrics["eval"]["episodic_return"]))
    single = jax.jit(train)(jax.random.key(1))
    assert_trees_close(jax.tree.map(lambda x: x[1], (state, metrics)), single, 1e-4, 1e-4)
    leaves = jax.tree.leaves(eqx.filter(state, eqx.is_inexact_array))
    assert any(not np.allclose(leaf[0], leaf[1]) for leaf in leaves)  # seeds differ


@pytest.mark.slow
def test_cli_minatar_preset_records_its_settings_and_renders(tmp_path, monkeypatch, capsys):
    from tests.checks import assert_evaluates_and_renders, cli_run

    run_dir = tmp_path / "run"
    tiny = ["--num-envs", "4", "--num-steps", "8", "--num-minibatches", "2"]
    tiny += ["--total-timesteps", "64", "--eval-every", "32", "--num-eval-envs", "2"]
    preset = ["--preset", "Breakout-MinAtar", "--sticky-action-prob", "0.1", "--num-seeds", "2"]
    done = cli_run("pqn", monkeypatch, capsys, *preset, *tiny, "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["env"] == "Breakout-MinAtar" and saved["network"] == "cnn"
    assert saved["sticky_action_prob"] == 0.1 and saved["q_lambda"] == 0.65
    assert_evaluates_and_renders(run_dir, tmp_path / "episode.gif", entries=2)


@pytest.mark.slow  # CNN programs compile: 7-9 s on 2 busy cores
def test_registered_image_env_gets_the_cnn():
    """Any HxWxC env works with the CNN, e.g. one registered by a user."""
    register_env("Tiny-Image", lambda: gymnax.make("Freeway-MinAtar"))
    train = pqn.make_train(pqn.Config(env="Tiny-Image", network="cnn", **TINY["pqn"]))
    state = jax.jit(train.init)(jax.random.key(0))
    assert state.obs.shape == (4, 10, 10, 7)
    cfg = dataclasses.replace(pqn.Config(env="Tiny-Image"), sticky_action_prob=0.1)
    with pytest.raises(ConfigError, match="does not support sticky actions"):
        pqn.make_train(cfg)


def test_an_env_first_built_under_a_trace_holds_no_tracers():
    """evaluate.py's first make_train runs inside jit: MinAtar's action-set arrays must not be
    cached as that trace's tracers."""
    from canter.common.envs import registry

    registry._build.cache_clear()
    jax.jit(lambda x: (make_env("Breakout-MinAtar"), x)[1])(1.0)
    env, params = make_env("Breakout-MinAtar")
    obs, state = jax.jit(env.reset)(jax.random.key(0), params)
    assert jax.jit(env.step)(jax.random.key(1), state, 1, params)[0].shape == (400,)


@pytest.mark.learning_extra
def test_ppo_learns_breakout_minatar():
    """gymnax-blines' PPO preset on Breakout-MinAtar for 327,680 env steps (3% of the reference
    budget), 2 seeds, one per CPU device of a test worker (three would be padded to four).
    Measured with 4: training return over the last 10 iterations 6.3, 6.3, 7.5, 6.4 and greedy
    6.4, 6.4, 9.0, 7.4; random actions score about 0.2 per episode."""
    preset = ppo.PRESETS["Breakout-MinAtar"]
    # The training return is an interval's mean: four intervals, the last is what is judged.
    steps = 40 * 64 * 128
    # Evaluation greedy, as measured (the preset samples, as gymnax-blines' numbers do).
    sizes = {"total_timesteps": steps, "eval_every": 10 * 64 * 128, "num_seeds": 2}
    config = ppo.Config(**{**preset, **sizes, "eval_policy": "greedy"})
    summary = trainer.run(config, ppo.make_train, algo="ppo", verbose=False).summary
    assert summary["final_return_mean"] >= 5.0, summary
    assert min(summary["final_return"]) >= 4.0, summary
    assert summary["eval_return_mean"] >= 4.5, summary
