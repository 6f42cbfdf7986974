"""JaxMARL's teams as one env (common/envs/jaxmarl.py): shapes, the team reward against the
agents' rewards, time limits told from real ends, the final observation, SMAX's masks and wins,
the world state, and the refusals either way between one agent's files and a team's envs."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError

from tests.checks import needs

pytestmark = needs("jaxmarl", "jaxmarl")


def rollout(name: str, steps: int, n: int = 4):
    """`steps` steps of `n` envs under uniformly random valid actions, as the training loop
    steps them; the records of every step."""
    from canter.common.envs import make_env, vector_mask, vector_step

    env, params = make_env(name, action="discrete", algorithm="ippo.py", agents=True)
    reset, step, valid = jax.vmap(env.reset, (0, None)), vector_step(env), vector_mask(env)

    def run(key):
        obs, state = reset(jax.random.split(key, n), params)

        def body(carry, key):
            obs, state = carry
            mask = valid(state, params)
            action_key, step_key = jax.random.split(key)
            logits = jnp.where(mask, 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits)
            out = step(jax.random.split(step_key, n), state, action, params)
            next_obs, state, reward, terminated, truncated, info = out
            record = dict(obs=obs, mask=mask, action=action, reward=reward, info=info)
            record.update(terminated=terminated, truncated=truncated, next_obs=next_obs)
            return (next_obs, state), record

        return jax.lax.scan(body, (obs, state), jax.random.split(key, steps))[1]

    return env, params, jax.jit(run)(jax.random.key(0))


def test_mpe_spread_is_a_team_of_three_that_only_truncates_at_26_steps():
    env, params, out = rollout("jaxmarl:MPE_simple_spread_v3", 60)
    assert env.observation_space(params).shape == (3, 18) and env.action_space(params).n == 5
    assert out["obs"].shape == (60, 4, 3, 18) and out["mask"].shape == (60, 4, 3, 5)
    assert params.max_steps_in_episode == 26  # JaxMARL tests its limit before counting the step
    ends = np.asarray(out["truncated"])
    assert not np.asarray(out["terminated"]).any()
    np.testing.assert_array_equal(np.flatnonzero(ends[:, 0]), [25, 51])  # every 26 steps
    # The team's reward is the agents' summed rewards (JaxMARL's reward["__all__"] for MPE).
    agents = np.asarray(out["info"]["agent_rewards"])
    np.testing.assert_allclose(out["reward"], agents.sum(-1), rtol=1e-6)
    assert not np.allclose(agents[..., 0], agents[..., 1])  # collisions differ per agent
    # At a truncation the final observation is the episode's last, not the new episode's first.
    final = np.asarray(out["info"]["final_observation"])
    np.testing.assert_array_equal(final[~ends], np.asarray(out["next_obs"])[~ends])
    assert not np.allclose(final[ends], np.asarray(out["next_obs"])[ends])


def test_smax_masks_wins_and_real_ends_and_world_state():
    env, params, out = rollout("jaxmarl:smax:3m", 101, n=8)
    assert env.observation_space(params).shape == (3, 75) and env.action_space(params).n == 8
    mask, action = np.asarray(out["mask"]), np.asarray(out["action"])
    assert mask[..., 4].all()  # stop is always available
    assert not mask.all()  # attacks need a target in range
    taken = np.take_along_axis(mask, action[..., None], -1)[..., 0]
    assert taken.all()
    terminated, truncated = np.asarray(out["terminated"]), np.asarray(out["truncated"])
    assert terminated.any() and not (terminated & truncated).any()
    # The team reward is every ally's (shared) reward (wins: the test below).
    agents = np.asarray(out["info"]["agent_rewards"])
    np.testing.assert_allclose(agents, np.repeat(np.asarray(out["reward"])[..., None], 3, -1))
    from canter.common.envs import base_state

    state = base_state(env.reset(jax.random.key(0), params)[1])
    assert env.unwrapped.world_state(state).shape == (72,)  # JaxMARL's: 12 per unit


def test_smax_time_out_truncates_and_a_wipe_out_terminates_with_a_win():
    """From states set by hand: at SMAX's step limit (its clock at 100) a step truncates, and
    the final world state is the one before the reset; with every enemy dead and the allies
    alive the step terminates, is won, and pays SMAX's +1 bonus."""
    from canter.common.envs import make_env

    env, params = make_env("jaxmarl:smax:3m", agents=True)
    team = env.unwrapped
    _, state = team.reset_env(jax.random.key(0), params)
    stop = jnp.full(3, 4)  # SMAX's action 4 is stop (0-3 move)
    late = state.inner.replace(state=state.inner.state.replace(step=100))
    obs, after, reward, terminated, info = team.step_env(
        jax.random.key(1), dataclasses.replace(state, inner=late), stop, params
    )
    assert bool(after.truncated) and not bool(terminated) and not bool(info["won"])
    np.testing.assert_allclose(info["final_world_state"], after.world)
    np.testing.assert_allclose(team.world_state(after), after.world)
    units = state.inner.state
    dead = dict(unit_alive=units.unit_alive.at[3:].set(False))
    dead["unit_health"] = units.unit_health.at[3:].set(0.0)  # SMAX reads life from health too
    wiped = state.inner.replace(state=units.replace(**dead))
    _, after, reward, terminated, info = team.step_env(
        jax.random.key(2), dataclasses.replace(state, inner=wiped), stop, params
    )
    assert bool(terminated) and bool(info["won"]) and not bool(after.truncated)
    assert float(reward) >= 1.0


@pytest.mark.slow  # Overcooked's 400-step episodes compile a larger program
def test_overcooked_truncates_at_400_and_rewards_the_team_sparse_reward():
    env, params, out = rollout("jaxmarl:overcooked:cramped_room", 401, n=2)
    assert env.observation_space(params).shape == (2, 520)
    ends = np.asarray(out["truncated"])
    np.testing.assert_array_equal(np.flatnonzero(ends[:, 0]), [399])
    assert not np.asarray(out["terminated"]).any()
    shaped = np.asarray(out["info"]["shaped_rewards"])
    assert shaped.shape == (401, 2, 2)
    np.testing.assert_array_equal(out["reward"], np.asarray(out["info"]["agent_rewards"])[..., 0])


def test_one_agents_files_and_team_files_refuse_each_others_envs():
    from canter.common.envs import make_env

    with pytest.raises(
        ConfigError, match="is a team of agents, and ppo.py trains one: use ippo.py or mappo.py"
    ):
        make_env("jaxmarl:smax:3m", action="discrete", algorithm="ppo.py")
    with pytest.raises(ConfigError, match="ippo.py trains a team of agents, and CartPole-v1"):
        make_env("CartPole-v1", action="discrete", algorithm="ippo.py", agents=True)
    with pytest.raises(ConfigError, match="Unknown smax map '4m'.*3m"):
        make_env("jaxmarl:smax:4m", agents=True)
    with pytest.raises(ConfigError, match="Unknown JaxMARL env 'jaxmarl:MPE_simple_tag_v3'"):
        make_env("jaxmarl:MPE_simple_tag_v3", agents=True)


@pytest.mark.parametrize(
    "name", ["jaxmarl:MPE_simple_spread_v3", "jaxmarl:smax:3m", "jaxmarl:overcooked:cramped_room"]
)
def test_every_family_draws_its_frames(name):
    from canter.common.envs import base_state, make_env

    env, params = make_env(name, agents=True)
    state = base_state(env.reset(jax.random.key(0), params)[1])
    (frame,) = env.unwrapped.frames([state], size=120)
    assert frame.shape == (120, 120, 3) and frame.dtype == np.uint8
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) >= 3  # a background and two kinds drawn
