"""`xminigrid:MiniGrid-<task>` (common/envs/minigrid.py): the gymnax-1.0 step around xminigrid,
its one-hot view, terminated and truncated apart, and the refusals."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError
from canter.common.envs import base_state, make_env, minigrid, registry, vector_mask, vector_step

from tests.checks import drawn_frames, needs

NEEDS_XMINIGRID = needs("xminigrid", "xminigrid")

FORWARD, RIGHT, LEFT = 0, 1, 2
TILES, COLOURS = 13, 12
GOAL, WALL, FLOOR = 6, 2, 1
# Empty-5x5: the agent starts at (1, 1) facing right, the goal is at (3, 3).
TO_THE_GOAL = (FORWARD, FORWARD, RIGHT, FORWARD, FORWARD)


def with_limit(params, limit):
    """MiniGrid params whose episodes xminigrid cuts after `limit` steps."""
    return minigrid.MiniGridParams(params.inner.replace(max_steps=limit), limit)


def play(env, params, actions, seed=0):
    """Reset, then step `actions` one at a time: the reset obs and every step's outputs."""
    obs, state = env.reset(jax.random.key(seed), params)
    steps = []
    for t, action in enumerate(actions):
        out = env.step(jax.random.key(100 + t), state, action, params)
        state = out[1]
        steps.append(out)
    return obs, steps


@pytest.mark.parametrize(
    "task, limit", [("MiniGrid-Empty-6x6", 144), ("MiniGrid-DoorKey-5x5", 250)]
)
@NEEDS_XMINIGRID
@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_tasks_have_one_hot_views_six_actions_and_a_gymnax_step(task, limit):
    env, params = make_env(minigrid.PREFIX + task, action="discrete")
    assert env.name == minigrid.PREFIX + task
    assert params.max_steps_in_episode == limit == params.inner.max_steps
    assert env.observation_space(params).shape == (7 * 7 * (TILES + COLOURS),)
    assert env.action_space(params).n == 6
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (1225,) and obs.dtype == jnp.float32
    obs, state, reward, terminated, truncated, info = env.step(
        jax.random.key(1), state, RIGHT, params
    )
    assert obs.shape == (1225,) and reward.dtype == jnp.float32 and float(reward) == 0.0
    assert not bool(terminated) and not bool(truncated)
    assert info["final_observation"].shape == (1225,)
    assert "final_action_mask" not in info  # no masks: nothing to compile
    assert vector_mask(env)(jax.tree.map(lambda x: x[None], state), params) is None
    assert int(base_state(state).state.step_num) == 1

    image_env, _ = make_env(minigrid.PREFIX + task, image=True)
    assert image_env.observation_space(params).shape == (7, 7, TILES + COLOURS)
    obs, _ = image_env.reset(jax.random.key(0), params)
    assert obs.shape == (7, 7, TILES + COLOURS) and obs.dtype == jnp.float32


@NEEDS_XMINIGRID
@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_the_view_is_xminigrids_tile_and_colour_ids_one_hot():
    import xminigrid

    env, params = make_env("xminigrid:MiniGrid-DoorKey-5x5", image=True)
    key = jax.random.key(3)
    obs, _ = env.reset(key, params)
    own_env, own_params = xminigrid.make("MiniGrid-DoorKey-5x5")
    raw = np.asarray(own_env.reset(own_params, key).observation)
    assert raw.shape == (7, 7, 2) and raw.dtype == np.uint8
    obs = np.asarray(obs)
    tiles, colours = obs[..., :TILES], obs[..., TILES:]
    np.testing.assert_array_equal(tiles.sum(-1), 1.0)
    np.testing.assert_array_equal(colours.sum(-1), 1.0)
    np.testing.assert_array_equal(tiles.argmax(-1), raw[..., 0])
    np.testing.assert_array_equal(colours.argmax(-1), raw[..., 1])
    assert {WALL, FLOOR} <= set(raw[..., 0].ravel())  # the 5x5 room is in view


@NEEDS_XMINIGRID
@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_reaching_the_goal_terminates_and_the_next_episode_starts_at_once():
    env, params = make_env("xminigrid:MiniGrid-Empty-5x5", image=True)
    assert params.max_steps_in_episode == 100
    first_obs, steps = play(env, params, TO_THE_GOAL)
    for _, _, reward, terminated, truncated, _ in steps[:-1]:
        assert float(reward) == 0.0 and not bool(terminated) and not bool(truncated)
    obs, state, reward, terminated, truncated, info = steps[-1]
    assert bool(terminated) and not bool(truncated)
    assert float(reward) == pytest.approx(1 - 0.9 * 5 / 100)  # xminigrid's speed bonus
    # The returned obs is a new episode's (Empty-5x5 always starts the same way); the final
    # observation is the agent's view on the goal: its own cell, bottom centre, shows the goal.
    np.testing.assert_array_equal(obs, first_obs)
    final = np.asarray(info["final_observation"])
    assert final[6, 3, :TILES].argmax() == GOAL and np.asarray(obs)[6, 3, :TILES].argmax() == FLOOR
    assert int(base_state(state).state.step_num) == 0
    assert int(state.ended) == 1  # episode statistics see the end
    assert float(state.ended_length) == 5
    assert float(state.ended_return) == pytest.approx(0.955)


@NEEDS_XMINIGRID
@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_the_step_limit_is_a_truncation_and_the_goal_on_its_last_step_a_termination():
    env, params = make_env("xminigrid:MiniGrid-Empty-5x5", image=True)
    short = with_limit(params, 3)
    first_obs, steps = play(env, short, (RIGHT,) * 4)
    ended = [(bool(terminated), bool(truncated)) for _, _, _, terminated, truncated, _ in steps]
    assert ended == [(False, False), (False, False), (False, True), (False, False)]
    obs, state, reward, _, _, info = steps[2]
    assert float(reward) == 0.0
    np.testing.assert_array_equal(obs, first_obs)  # a new episode, facing right again
    assert not np.array_equal(info["final_observation"], obs)  # three turns: facing up
    assert int(base_state(state).state.step_num) == 0 and int(state.ended) == 1
    assert float(state.ended_length) == 3

    _, steps = play(env, with_limit(params, 5), TO_THE_GOAL)
    _, _, reward, terminated, truncated, _ = steps[-1]
    assert bool(terminated) and not bool(truncated) and float(reward) == pytest.approx(0.1)


@NEEDS_XMINIGRID
@pytest.mark.slow  # the suite's adapter end to end: its programs compile
def test_the_task_list_is_xminigrids_minigrid_list_and_every_task_builds():
    import xminigrid

    installed = tuple(n for n in xminigrid.registered_environments() if n.startswith("MiniGrid-"))
    assert minigrid.TASKS == installed and len(installed) == 23
    for task in minigrid.TASKS:
        env, params = minigrid.make_minigrid_env(minigrid.PREFIX + task)
        view = 3 if task.startswith("MiniGrid-Memory") else 7  # as in MiniGrid's Memory
        assert env.observation_space(params).shape == (view, view, TILES + COLOURS), task
        assert env.action_space(params).n == 6, task
        assert params.max_steps_in_episode == params.inner.max_steps > 0, task


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
@NEEDS_XMINIGRID
def test_a_jitted_vmapped_batch_truncates_at_the_limit_and_terminates_only_with_a_reward():
    env, params = make_env("xminigrid:MiniGrid-DoorKey-5x5")
    num_envs, limit = 8, params.max_steps_in_episode
    keys = jax.random.split(jax.random.key(5), num_envs)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    step = vector_step(env)

    @jax.jit
    def rollout(states, key):
        def body(states, key):
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, 6)
            obs, states, reward, terminated, truncated, _ = step(
                jax.random.split(step_key, num_envs), states, actions, params
            )
            return states, (obs, reward, terminated, truncated)

        return jax.lax.scan(body, states, jax.random.split(key, limit))

    states, (obs, reward, terminated, truncated) = rollout(states, jax.random.key(6))
    assert obs.shape == (limit, num_envs, 1225)
    terminated, truncated, reward = map(np.asarray, (terminated, truncated, reward))
    # No episode reaches the limit before step 250; by then each has ended one way or the other.
    assert not truncated[:-1].any()
    np.testing.assert_array_equal(truncated[-1], ~terminated.any(axis=0))
    assert truncated[-1].any()  # random actions rarely open the door and reach the goal
    assert (reward[terminated] > 0).all() and (reward[~terminated] == 0).all()
    assert not (terminated & truncated).any()


def test_xland_and_unknown_tasks_are_refused():
    with pytest.raises(ConfigError, match="load_benchmark downloads"):
        make_env("xminigrid:XLand-MiniGrid-R1-9x9")
    with pytest.raises(ConfigError, match=r"Unknown MiniGrid task .*xminigrid:MiniGrid-Doo"):
        make_env("xminigrid:MiniGrid-DoorKey-7x7")
    with pytest.raises(ConfigError, match=r"xminigrid:MiniGrid-DoorKey-5x5 \(pip install"):
        make_env("MiniGrid-DoorKey-5x5")  # without the prefix


@NEEDS_XMINIGRID
def test_a_missing_package_is_refused_naming_the_extra_and_builds_once_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "xminigrid", None)
    registry._build.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"xminigrid extra: pip install -e \".\[xminigrid\]"):
            make_env("xminigrid:MiniGrid-Empty-6x6")
    finally:
        monkeypatch.undo()
        registry._build.cache_clear()
    env, _ = make_env("xminigrid:MiniGrid-Empty-6x6")  # back once the package is
    assert env.name == "xminigrid:MiniGrid-Empty-6x6"


@NEEDS_XMINIGRID
def test_gifs_draw_the_grid_with_xminigrids_renderer(tmp_path):
    from canter.algorithms import evaluate
    from PIL import Image

    frames = drawn_frames("xminigrid:MiniGrid-DoorKey-8x8", seeds=2, steps=2)
    # Through the GIF writer, as evaluate.py --gif: every frame is the env's, overlay drawn on.
    env, params = make_env("xminigrid:MiniGrid-DoorKey-8x8")
    _, state = env.reset(jax.random.key(0), params)
    gif = tmp_path / "episode.gif"
    evaluate.write_gif(env.unwrapped, params, [base_state(state)] * 2, [0.0, 1.0], gif)
    written = Image.open(gif)
    assert written.n_frames == 2 and written.size == frames[0].shape[1::-1]
