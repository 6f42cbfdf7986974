"""common/run/evaluation.py: greedy episodes stop early, with a full-length scan's numbers."""

import gymnax
import jax
import jax.numpy as jnp
import pytest
from canter.common.run import evaluation


def full_length(env, params, policy, key, num_envs):
    """The reference: every one of the env's max_steps_in_episode steps, in one scan."""
    reset_key, key = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, num_envs), params
    )

    def step(loop, step_key):
        obs, state, returns, lengths, done = loop
        action, _ = policy(obs, None)
        obs, state, reward, terminated, truncated, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(step_key, num_envs), state, action, params
        )
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        return (obs, state, returns, lengths, done | terminated | truncated), None

    zeros = jnp.zeros(num_envs)
    keys = jax.random.split(key, int(params.max_steps_in_episode))
    loop = (obs, state, zeros, zeros, jnp.zeros(num_envs, bool))
    (_, _, returns, lengths, _), _ = jax.lax.scan(step, loop, keys)
    return returns.mean(), lengths.mean()


@pytest.mark.parametrize("policy_name", ["left", "balance"])
def test_episodes_stop_after_the_last_one_ends_with_the_full_scans_numbers(policy_name):
    """CartPole (500-step limit): always pushing left ends every episode within one chunk, so
    the loop runs one chunk of policy calls instead of 500; a balancing policy runs longer
    episodes. Returns and lengths equal a full-length scan's, for the same key."""
    env, params = gymnax.make("CartPole-v1")
    calls = []

    def policy(obs, carry):
        jax.debug.callback(lambda: calls.append(1))
        if policy_name == "left":
            return jnp.zeros(obs.shape[0], jnp.int32), carry
        return (obs[:, 2] + obs[:, 3] > 0).astype(jnp.int32), carry  # lean towards the pole

    key = jax.random.key(5)
    got = jax.jit(lambda k: evaluation.run_episodes(env, params, policy, None, k, 8))(key)
    jax.effects_barrier()
    steps = len(calls)
    want_return, want_length = jax.jit(lambda k: full_length(env, params, policy, k, 8))(key)
    assert float(got["episodic_return"]) == pytest.approx(float(want_return))
    assert float(got["episodic_length"]) == pytest.approx(float(want_length))
    assert steps % evaluation.CHUNK == 0 and steps >= float(got["episodic_length"])
    if policy_name == "left":
        assert float(want_length) < 20 and steps == evaluation.CHUNK  # not 500
    else:
        assert float(want_length) > 100 and steps <= 500


def test_the_gif_overlay_counts_steps_from_the_reset(tmp_path, monkeypatch):
    from canter.algorithms import evaluate
    from PIL import Image, ImageDraw

    drawn = []
    monkeypatch.setattr(ImageDraw.ImageDraw, "text", lambda self, xy, text, **_: drawn.append(text))
    frames = [Image.new("RGB", (16, 16), (80 * k, 0, 0)) for k in range(3)]
    evaluate.save_gif(frames, [0.0, 1.0, 2.5], tmp_path / "episode.gif")
    # Frame k is the state after k steps: the reset first, with nothing earned yet.
    assert drawn == ["step 0  return 0.0", "step 1  return 1.0", "step 2  return 2.5"]
    assert Image.open(tmp_path / "episode.gif").n_frames == 3
