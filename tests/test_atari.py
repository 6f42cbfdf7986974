"""Atari through Gymnasium (`gymnasium:ALE/<Game>-v5`, common/envs/host.py): the standard
preprocessing with gymnax 1.0 semantics, the training-only signals, and ppo_atari.py."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra: pip install -e '.[atari]'")

from canter.algorithms import evaluate, ppo_atari, trainer  # noqa: E402
from canter.common.config import ConfigError  # noqa: E402
from canter.common.envs import make_env  # noqa: E402
from canter.common.envs.host import _seed, make_gymnasium  # noqa: E402

GAME = "gymnasium:ALE/Breakout-v5"
STEPS = 400  # random Breakout loses a life about every 40 steps and a game every 200


def rollout(env, params, keys, actions):
    """Reset `env` with `keys` and step it through `actions` [steps, envs], one jitted scan."""

    @jax.jit
    def run(keys, actions):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def step(state, action):
            obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(keys, state, action, params)
            rows = (obs, reward, terminated, truncated, info["final_observation"])
            return state, (*rows, info["life_lost"])

        state, rows = jax.lax.scan(step, state, actions)
        return obs, state, rows

    return run(keys, jnp.asarray(actions))


def reference(key_words: np.ndarray, actions: np.ndarray) -> dict:
    """The preprocessed Gymnasium env stepped by hand, gymnax 1.0 style, frames channels last;
    a life is lost where the lives counter drops."""
    env = make_gymnasium("ALE/Breakout-v5")
    obs, info = env.reset(seed=_seed(key_words))
    lives = info["lives"]
    rows = {
        "first": np.moveaxis(obs, 0, -1),
        "obs": [],
        "reward": [],
        "terminated": [],
        "truncated": [],
        "final": [],
        "life_lost": [],
    }
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(int(action))
        rows["final"].append(np.moveaxis(obs, 0, -1))
        rows["life_lost"].append(info["lives"] < lives)
        lives = info["lives"]
        if terminated or truncated:
            obs, info = env.reset()
            lives = info["lives"]
        for name, value in zip(
            ("obs", "reward", "terminated", "truncated"),
            (np.moveaxis(obs, 0, -1), reward, terminated, truncated),
            strict=True,
        ):
            rows[name].append(value)
    env.close()
    return {k: np.asarray(v) for k, v in rows.items()}


@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_preprocessed_atari_steps_equal_gymnasium_across_lives_and_games():
    env, params = make_env(GAME)
    host = env.unwrapped
    assert host.observation_space(params).shape == (84, 84, 4)
    assert params.max_steps_in_episode == 27_000  # 108,000 frames at frame skip 4
    keys = jax.random.split(jax.random.key(5), 2)
    actions = np.random.default_rng(1).integers(0, 4, size=(STEPS, 2))
    first, _, (obs, reward, terminated, truncated, final, life_lost) = rollout(
        host, params, keys, actions
    )
    assert obs.dtype == jnp.uint8 and obs.shape == (STEPS, 2, 84, 84, 4)
    games = lives = 0
    for i, words in enumerate(np.asarray(jax.random.key_data(keys))):
        ref = reference(words, actions[:, i])
        np.testing.assert_array_equal(first[i], ref["first"])
        np.testing.assert_array_equal(obs[:, i], ref["obs"])
        np.testing.assert_array_equal(final[:, i], ref["final"])
        np.testing.assert_array_equal(reward[:, i], ref["reward"])
        np.testing.assert_array_equal(terminated[:, i], ref["terminated"])
        np.testing.assert_array_equal(truncated[:, i], ref["truncated"])
        np.testing.assert_array_equal(life_lost[:, i], ref["life_lost"])
        games, lives = games + ref["terminated"].sum(), lives + ref["life_lost"].sum()
    assert games >= 1 and lives >= 5 * games, (games, lives)  # the walk crossed both kinds


@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_training_sees_lives_as_episodes_and_clipped_rewards_while_stats_and_eval_do_not():
    env, params = make_env(GAME)
    evaluation = env.evaluation_env  # the env below the training-only wrapper
    keys = jax.random.split(jax.random.key(7), 2)
    actions = np.random.default_rng(2).integers(0, 4, size=(STEPS, 2))
    # Both reset from the same keys: same seeds, so the same games on separate simulators.
    _, train_state, (_, reward, terminated, truncated, _, life_lost) = rollout(
        env, params, keys, actions
    )
    _, eval_state, (_, raw_reward, game_over, raw_truncated, _, _) = rollout(
        evaluation, params, keys, actions
    )
    np.testing.assert_array_equal(reward, np.sign(raw_reward))
    np.testing.assert_array_equal(terminated, game_over | life_lost)
    np.testing.assert_array_equal(truncated, raw_truncated)
    assert life_lost.sum() > game_over.sum() >= 1
    # Episode statistics (the training return) are whole games of raw score, on both.
    for state in (train_state, eval_state):
        for i in range(2):
            ends = np.flatnonzero(np.asarray(game_over[:, i]))
            assert state.ended[i] == len(ends) >= 1
            assert state.ended_return[i] == raw_reward[: ends[-1] + 1, i].sum()
            assert state.ended_length[i] == ends[-1] + 1


def test_no_frameskip_v4_is_the_same_game_without_sticky_actions():
    # CleanRL's id: the same preprocessing and limits as v5, the emulator never repeats actions.
    sticky = {}
    for game in ("ALE/Breakout-v5", "BreakoutNoFrameskip-v4"):
        env, params = make_env(f"gymnasium:{game}")
        assert env.unwrapped.observation_space(params).shape == (84, 84, 4)
        assert params.max_steps_in_episode == 27_000
        probe = make_gymnasium(game)
        assert probe.unwrapped._frameskip == 1  # AtariPreprocessing skips, max-pooling two
        sticky[game] = probe.unwrapped.ale.getFloat("repeat_action_probability")
        probe.close()
    assert sticky == {"ALE/Breakout-v5": 0.25, "BreakoutNoFrameskip-v4": 0.0}


def test_ppo_atari_refuses_what_its_network_cannot_take():
    with pytest.raises(ConfigError, match="needs 84x84 frames"):
        ppo_atari.make_train(ppo_atari.Config(env="Breakout-MinAtar"))
    with pytest.raises(ConfigError, match="needs image observations") as refused:
        ppo_atari.make_train(ppo_atari.Config(env="CartPole-v1"))
    assert "--network" not in str(refused.value)  # a flag ppo_atari.py does not have
    assert "ALE/<Game>-v5" in str(refused.value) and "algorithms/ppo.py" in str(refused.value)
    with pytest.raises(ConfigError, match="eval_max_steps"):
        ppo_atari.make_train(ppo_atari.Config(eval_max_steps=0))


@pytest.mark.slow
def test_ppo_atari_trains_repeats_its_numbers_and_evaluates(tmp_path):
    config = ppo_atari.Config(
        env=GAME,  # the default, named: the README's Atari command runs dry on this test's word
        num_seeds=2,
        num_envs=2,
        num_steps=16,
        num_minibatches=2,
        update_epochs=1,
        total_timesteps=2 * 16 * 4,
        eval_every=2 * 16 * 2,
        num_eval_envs=2,
        eval_max_steps=64,
    )
    result = trainer.run(
        config, ppo_atari.make_train, algo="ppo_atari", verbose=False, run_dir=tmp_path / "run"
    )
    losses = result.metrics["train"]["value_loss"]
    assert losses.shape == (2, 2) and np.isfinite(losses).all()
    assert np.all(result.metrics["eval"]["episodic_length"] <= 64)
    # The same seed gives the same numbers (simulators seeded from the run's keys).
    again = trainer.run(config, ppo_atari.make_train, algo="ppo_atari", verbose=False)
    np.testing.assert_array_equal(again.metrics["train"]["value_loss"], losses)
    # evaluate.py's main in this process (its command line: tests/test_run_management.py).
    gif = tmp_path / "game.gif"
    evaluated = evaluate.main(tmp_path / "run", episodes=1, gif=gif)
    assert len(evaluated["returns"]) == 2 and np.all(np.isfinite(evaluated["returns"]))
    assert gif.read_bytes().startswith(b"GIF8")


@pytest.mark.slow  # the 84x84 CNN compiles: about 10 s
def test_nature_cnn_shapes_and_init():
    model = eqx.filter_jit(ppo_atari.AtariActorCritic, donate="none")(4, 6, jax.random.key(0))
    logits, value = eqx.filter_jit(lambda m, x: m(x))(model, jnp.full((84, 84, 4), 255.0))
    assert logits.shape == (6,) and value.shape == ()
    assert [c.weight.shape for c in model.torso.convs] == [
        (32, 4, 8, 8),
        (64, 32, 4, 4),
        (64, 64, 3, 3),
    ]
    # Orthogonal rows of gain sqrt(2) over each flattened receptive field; zero biases.
    rows = model.torso.convs[1].weight.reshape(64, -1)
    np.testing.assert_allclose(rows @ rows.T, 2.0 * np.eye(64), atol=1e-4)
    assert all(not np.any(c.bias) for c in model.torso.convs)
    assert dataclasses.is_dataclass(ppo_atari.Config)
