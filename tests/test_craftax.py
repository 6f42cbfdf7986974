"""`craftax:<game>` (common/envs/craftax.py): the gymnax-1.0 step, spare worlds and their refill."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError
from canter.common.envs import base_state, craftax, make_env, vector_step

from tests.checks import drawn_frames

NOOP = 0


def short_episodes(params, limit):
    """Craftax's params with a time limit of `limit` steps."""
    inner = params.inner.replace(max_timesteps=limit)
    return craftax.CraftaxParams(inner, limit)


@pytest.mark.parametrize(
    "game, obs_size, actions",
    [
        ("Craftax-Symbolic-v1", 8268, 43),
        ("Craftax-Classic-Symbolic-v1", 1345, 17),
    ],
)
@pytest.mark.slow  # each game's step traces: 5-15 s
def test_games_have_their_published_spaces_and_a_gymnax_step(game, obs_size, actions):
    env, params = make_env(craftax.PREFIX + game, action="discrete")
    assert env.observation_space(params).shape == (obs_size,)
    assert env.action_space(params).n == actions
    # Traced for their shapes, not run: run op by op, the full game's reset and step took about
    # 70 s; Classic's steps run in the tests below, through the same adapter.
    obs, state = jax.eval_shape(lambda key: env.reset(key, params), jax.random.key(0))
    assert obs.shape == (obs_size,) and obs.dtype == jnp.float32
    out = jax.eval_shape(lambda k, s: env.step(k, s, NOOP, params), jax.random.key(1), state)
    obs, state, reward, terminated, truncated, info = out
    assert obs.shape == (obs_size,) and reward.dtype == jnp.float32
    assert terminated.shape == truncated.shape == () and terminated.dtype == jnp.bool_
    assert info["final_observation"].shape == (obs_size,)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_a_time_limit_is_a_truncation_and_the_episode_goes_on_in_the_spare_world():
    env, params = make_env("craftax:Craftax-Classic-Symbolic-v1")
    params = short_episodes(params, 3)
    obs, state = env.reset(jax.random.key(2), params)
    inner = base_state(state)  # under EpisodeStats and FloatObservation
    spare_obs = inner.spare_obs
    for t in range(3):
        obs, state, reward, terminated, truncated, info = env.step(
            jax.random.key(10 + t), state, NOOP, params
        )
    assert bool(truncated) and not bool(terminated)  # the limit, not a death
    inner = base_state(state)
    np.testing.assert_array_equal(obs, spare_obs)  # the next episode starts in the spare
    assert not bool(inner.spare_fresh) and int(inner.state.timestep) == 0
    assert not np.array_equal(info["final_observation"], obs)
    assert int(state.ended) == 1  # episode statistics see the end
    assert float(state.ended_length) == 3


@pytest.mark.slow  # 32 Craftax worlds stepped and refilled: over a minute on 2 cores
def test_refill_gives_a_new_spare_to_the_envs_that_used_theirs_and_only_to_them():
    env, params = make_env("craftax:Craftax-Classic-Symbolic-v1")
    params = short_episodes(params, 2)
    num_envs = 32
    keys = jax.random.split(jax.random.key(3), num_envs)
    obs, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    # Half the envs start one step later (a no-op step each, then the batch steps together).
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    late = jnp.arange(num_envs) >= num_envs // 2
    _, stepped, *_ = step(keys, states, jnp.zeros(num_envs, jnp.int32), params)
    states = jax.tree.map(
        lambda a, b: jnp.where(late.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), states, stepped
    )
    before = base_state(states)
    batch_step = vector_step(env)
    _, after_states, _, terminated, truncated, _ = batch_step(
        jax.random.split(jax.random.key(4), num_envs),
        states,
        jnp.zeros(num_envs, jnp.int32),
        params,
    )
    after = base_state(after_states)
    ended = np.asarray(truncated)
    np.testing.assert_array_equal(ended, ~np.asarray(late))  # the early half hit the limit
    # 16 envs used their spare; 32 // RESET_RATIO = 2 new worlds go to the first two of them,
    # the rest wait (their spares stay marked used), and no other env's spare changes.
    count = num_envs // craftax.RESET_RATIO
    first = np.flatnonzero(ended)[:count]
    changed = np.asarray(jnp.any(after.spare_obs != before.spare_obs, axis=1))
    np.testing.assert_array_equal(np.flatnonzero(changed), first)
    np.testing.assert_array_equal(np.asarray(after.spare_fresh), ~ended | np.isin(range(32), first))
    assert len(np.unique(np.asarray(after.spare_obs)[first], axis=0)) == count
    # Later refills serve the ones waiting, `count` per call, until every spare is new.
    states = after_states
    for call in range(int(ended.sum()) // count - 1):
        states = env.unwrapped.refill(jax.random.key(100 + call), states, params)
    refilled = base_state(states)
    assert bool(refilled.spare_fresh.all())
    changed = np.asarray(jnp.any(refilled.spare_obs != before.spare_obs, axis=1))
    np.testing.assert_array_equal(changed, ended)
    assert len(np.unique(np.asarray(refilled.spare_obs)[ended], axis=0)) == int(ended.sum())


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_refill_generates_only_the_worlds_the_batch_used():
    env, params = make_env("craftax:Craftax-Classic-Symbolic-v1")
    keys = jax.random.split(jax.random.key(5), 32)  # 32 envs: up to 2 worlds per refill
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    refill = jax.jit(env.unwrapped.refill)
    same = refill(jax.random.key(6), states, params)  # no spare used: nothing changes
    assert all(jax.tree.leaves(jax.tree.map(jnp.array_equal, same, states)))
    inner = base_state(states)
    used_one = eqx_set(states, inner.spare_fresh.at[5].set(False))
    after = base_state(refill(jax.random.key(6), used_one, params))
    changed = np.asarray(jnp.any(after.spare_obs != inner.spare_obs, axis=1))
    np.testing.assert_array_equal(np.flatnonzero(changed), [5])  # env 0 (slot filler) untouched
    assert bool(after.spare_fresh.all())


def eqx_set(states, spare_fresh):
    """`states` with the Craftax state's `spare_fresh` replaced (under the wrappers' states)."""
    import equinox as eqx

    return eqx.tree_at(lambda s: base_state(s).spare_fresh, states, spare_fresh)


def test_unknown_games_and_pixels_are_refused_naming_the_valid_ones():
    with pytest.raises(ConfigError, match="Craftax-Classic-Symbolic-v1"):
        make_env("craftax:Craftax-Pixels-v1")
    with pytest.raises(
        ConfigError, match=r"craftax:Craftax-Symbolic-v1, .* \(pip install -e \".\[craftax\]\"\)"
    ):
        make_env("Craftax-Symbolic-v1")


@pytest.mark.slow  # 15-30 s on 2 busy cores: each game's preset builds its program
@pytest.mark.parametrize("game", craftax.GAMES)
def test_the_presets_build_the_reference_runs(game):
    """ppo.py's and ppo_rnn.py's presets are Craftax_Baselines' PPO and PPO-RNN at 1e6 env
    steps in the paper's 1M configuration (256 envs x 16 steps, lr 3e-4), its 1e9 defaults
    under `<game>-1e9`; pqn.py's is purejaxql's PQN (docs/notes/craftax-reference.md), and
    pqn_rnn.py's its PQN-RNN; ppo_rnd.py's CB's PPO-RND (its 1M sweep at lr 2e-4); ppo_trxl.py's
    TransformerXL_PPO_JAX's. All build (nothing compiles) with the shapes they name, and
    evaluate the sampled policy."""
    import dataclasses

    from canter.algorithms import ppo, ppo_rnd, ppo_rnn, ppo_trxl, pqn, pqn_rnn

    for module in (ppo, ppo_rnn):
        runs = {"": (256 * 16, 244, 3e-4, 4), "-1e9": (1024 * 64, 15258, 2e-4, 20)}
        for suffix, (batch, iterations, lr, evaluations) in runs.items():
            config = dataclasses.replace(module.Config(), **module.PRESETS[game + suffix])
            assert config.env == craftax.PREFIX + game and config.eval_policy == "sampled"
            assert (config.batch_size, config.num_iterations) == (batch, iterations)  # CB's
            assert config.learning_rate == lr and config.num_minibatches == 8
            assert config.eval_every % config.batch_size == 0  # whole iterations
            train = module.make_train(config)
            assert train.num_intervals == evaluations and train.env.name == config.env

    config = dataclasses.replace(ppo.Config(), **ppo.PRESETS[game])
    model = ppo.ActorCritic((8268,), 43, config, jax.random.key(0))
    widths = [layer.weight.shape for layer in model.actor.layers]
    assert widths == [(512, 8268), (512, 512), (512, 512), (43, 512)]
    head_layers = ppo_rnn.PRESETS[game]["head_layers"]
    model = ppo_rnn.RecurrentActorCritic(8268, 43, 512, head_layers, jax.random.key(0))
    assert model.embed.weight.shape == (512, 8268) and model.cell.hidden_size == 512
    for head, out in [(model.actor, 43), (model.critic, 1)]:
        assert [layer.weight.shape for layer in head.layers] == [(512, 512)] * 2 + [(out, 512)]
    # CB's head layers are orthogonal with gain 2: every singular value is 2.
    singular = np.linalg.svd(np.asarray(model.actor.layers[0].weight), compute_uv=False)
    np.testing.assert_allclose(singular, 2.0, rtol=1e-4)

    config = dataclasses.replace(pqn.Config(), **pqn.PRESETS[game])
    assert (config.num_envs, config.num_steps, config.batch_size) == (1024, 1, 1024)
    network = pqn.QNetwork((8268,), 43, config, jax.random.key(0))
    assert [layer.weight.shape[0] for layer in network.layers] == [1024] * 4 + [43]
    assert len(network.norms) == 4
    pqn.make_train(config)

    # pqn_rnn.py's: purejaxql's PQN-RNN (an LSTM of 512 over one layer of 512, no window), at
    # 1e9 in its own sizes and at 1e6 in PPO's, with the search's 4-step window (issue 71).
    runs = {"": (256, 16, 244, 4, 4), "-1e9": (1024, 128, 7629, 20, 0)}
    for suffix, (envs, steps, iterations, evaluations, window) in runs.items():
        config = dataclasses.replace(pqn_rnn.Config(), **pqn_rnn.PRESETS[game + suffix])
        assert (config.num_envs, config.num_steps, config.num_iterations) == (
            envs,
            steps,
            iterations,
        )
        assert (config.cell, config.memory_window, config.q_lambda) == ("lstm", window, 0.5)
        assert config.norm_obs  # purejaxql's NORM_INPUT (a BatchRenorm there; issue 71)
        assert config.eval_every % config.batch_size == 0  # whole iterations
        train = pqn_rnn.make_train(config)
        assert train.num_intervals == evaluations and train.env.name == config.env
    network = pqn_rnn.RecurrentQNetwork(8268, 43, config, jax.random.key(0))
    assert [layer.weight.shape for layer in network.layers] == [(512, 8268)]
    assert network.cell.hidden_size == 512 and network.cell.input_size == 512 + 43

    # ppo_rnd.py's: CB's PPO-RND, at 1e6 in its RND 1M sweep's sizes (lr 2e-4), at 1e9 in its own.
    runs = {"": (4096, 244, 4), "-1e9": (65536, 15258, 20)}
    for suffix, (batch, iterations, evaluations) in runs.items():
        config = dataclasses.replace(ppo_rnd.Config(), **ppo_rnd.PRESETS[game + suffix])
        assert (config.batch_size, config.num_iterations) == (batch, iterations)
        assert (config.learning_rate, config.int_coef, config.int_gamma) == (2e-4, 0.01, 0.99)
        assert not (config.norm_int_reward or config.norm_rnd_obs or config.int_episodic)
        assert config.eval_policy == "sampled" and config.eval_every % config.batch_size == 0
        train = ppo_rnd.make_train(config)
        assert train.num_intervals == evaluations and train.env.name == config.env
    target = jax.eval_shape(train.init, jax.random.key(0)).rnd.target
    shapes = [layer.weight.shape for layer in target.layers]
    obs_dim = int(np.prod(train.env.observation_space(train.env_params).shape))  # 8268, 1345
    assert shapes == [(256, obs_dim)] + [(256, 256)] * 2 + [(512, 256)]

    # ppo_trxl.py's: TransformerXL_PPO_JAX's Craftax config at 1e9 (1024 envs x 128 steps,
    # chunks of 64, lr 2e-4, gamma 0.999, entropy 0.002), its network and memory at PPO's 1M
    # sizes (256 x 16, lr 3e-4) with Craftax_Baselines' 1M gamma 0.99 and entropy 0.01 (the
    # rule for presets at a budget with no published configuration, issue 71).
    runs = {
        "": (256, 16, 16, 3e-4, 244, 4, 0.99, 0.01),
        "-1e9": (1024, 128, 64, 2e-4, 7629, 20, 0.999, 0.002),
    }
    for suffix, (envs, steps, chunk, lr, iterations, evaluations, gamma, ent) in runs.items():
        config = dataclasses.replace(ppo_trxl.Config(), **ppo_trxl.PRESETS[game + suffix])
        sizes = (config.num_envs, config.num_steps, config.grad_chunk, config.learning_rate)
        assert config.env == craftax.PREFIX + game and config.num_iterations == iterations
        assert sizes == (envs, steps, chunk, lr)
        network = (config.embed_size, config.num_heads, config.num_layers, config.memory_len)
        assert network == (256, 8, 2, 128) and (config.gamma, config.gae_lambda) == (gamma, 0.8)
        assert (config.ent_coef, config.num_minibatches) == (ent, 8)
        assert config.eval_policy == "sampled" and config.eval_every % config.batch_size == 0
        train = ppo_trxl.make_train(config)
        assert train.num_intervals == evaluations and train.env.name == config.env


@pytest.mark.slow  # two Craftax programs compile: about a minute on 2 cores
def test_the_speed_benchmark_runs_and_counts_the_ended_episodes(repo_root, tmp_path):
    import json
    import subprocess
    import sys

    # Classic: the full game's step compiled for 2-4 minutes here, and the script is the same.
    args = ["--game", "Craftax-Classic-Symbolic-v1", "--envs", "16", "--steps", "8"]
    args += ["--calls", "1", "--repeats", "1", "--out", tmp_path]
    # canter's way alone: each way is one more Craftax compile (about a minute here), and the
    # ways share the script's measuring and table code.
    command = [sys.executable, "benchmarks/speed/speed_craftax.py", "--ways", "canter"]
    done = subprocess.run(
        command + [str(a) for a in args], capture_output=True, text=True, cwd=repo_root, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "speed_craftax.json").read_text())
    (canter,) = record["ways"]["canter"]["rounds"]
    assert canter["steps"] == 16 * 8 and canter["steps_per_s"] > 0 and canter["ended"] == 0
    assert "| canter |" in (tmp_path / "speed_craftax.md").read_text()


# PPO on Craftax-Classic-Symbolic, 131,072 env steps: 64 envs x 64 steps, 4 minibatches, lr 3e-4,
# GAE lambda 0.8 and grad norm 1 (Craftax_Baselines' values), tanh MLPs 2x256. Measured here on
# the reference statistic (seeds 0-3, 2 CPU cores, 2026-12-02; the same 4-seed program as this
# test's config with num_seeds=4): final training returns 2.93, 3.14, 3.45, 3.52 against 1.42
# for uniformly random actions (256 episodes, benchmarks/returns/random_returns.py). The greedy
# policy's return stays near 1 at this budget (argmax play gets stuck), so the check reads the
# training return, the measure Craftax_Baselines reports. Threshold: halfway from random to the
# worst seed, (1.42 + 2.93) / 2. Twice the budget (262,144 steps: 3.89, 3.05, 3.92, 3.10,
# threshold 2.2 again) costs about twice the training on top of the same compile, for the same
# check. (On the statistic before issue 43, 2026-11-28: 3.44, 3.02, 3.23, 3.26.)
CLASSIC_PPO = dict(
    env="craftax:Craftax-Classic-Symbolic-v1",
    total_timesteps=131_072,
    eval_every=65_536,
    num_eval_envs=16,
    num_envs=64,
    num_steps=64,
    num_minibatches=4,
    learning_rate=3e-4,
    gae_lambda=0.8,
    max_grad_norm=1.0,
    hidden_size=256,
    # The first two of the four measured, one per CPU device of a test worker (three would be
    # padded to four: common/run/devices.py). Each must clear the threshold on its own.
    num_seeds=2,
)
RANDOM_CLASSIC_RETURN, CLASSIC_THRESHOLD = 1.42, 2.2


@pytest.mark.learning_extra
def test_ppo_learns_craftax_classic_beyond_random_actions():
    from canter.algorithms import ppo, trainer

    config = ppo.Config(**CLASSIC_PPO)
    result = trainer.run(config, ppo.make_train, algo="ppo", verbose=False)
    final = np.asarray(result.metrics["train"]["episodic_return"])[:, -1]
    assert np.all(final >= CLASSIC_THRESHOLD), final


@pytest.mark.slow  # Craftax's textures (about 10 s) and its renderer compiled
def test_gifs_draw_with_craftaxs_pixel_renderer():
    frames = drawn_frames("craftax:Craftax-Classic-Symbolic-v1", seeds=2)
    assert frames[0].shape == (144, 144, 3)  # 9 x 7 blocks of 16 pixels and the inventory
