"""PPO math against slow NumPy references and hand-computed values."""

import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms.ppo import compute_gae, policy_loss, value_loss


def gae_reference(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Textbook GAE, one environment and one step at a time."""
    num_steps, num_envs = rewards.shape
    advantages = np.zeros_like(rewards)
    for env in range(num_envs):
        running = 0.0
        for t in reversed(range(num_steps)):
            bootstrap = 0.0 if terminated[t, env] else next_values[t, env]
            delta = rewards[t, env] + gamma * bootstrap - values[t, env]
            if terminated[t, env] or truncated[t, env]:
                running = 0.0  # the next step belongs to another episode
            running = delta + gamma * lam * running
            advantages[t, env] = running
    return advantages, advantages + values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_reference(seed):
    rng = np.random.default_rng(seed)
    shape = (37, 5)
    rewards, values, next_values = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    terminated = rng.random(shape) < 0.1
    truncated = (rng.random(shape) < 0.1) & ~terminated
    assert terminated.any() and truncated.any()
    adv, ret = compute_gae(
        jnp.array(rewards),
        jnp.array(values),
        jnp.array(next_values),
        jnp.array(terminated),
        jnp.array(truncated),
        0.97,
        0.9,
    )
    adv_ref, ret_ref = gae_reference(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    np.testing.assert_allclose(adv, adv_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ret_ref, rtol=1e-5, atol=1e-5)


def test_gae_truncation_bootstraps_and_termination_does_not():
    # One env, three steps; step 0 ends by truncation, step 1 continues, step 2 terminates.
    rewards = jnp.array([[1.0], [2.0], [3.0]])
    values = jnp.array([[0.5], [0.25], [0.125]])
    next_values = jnp.array([[10.0], [0.125], [7.0]])  # 10: value of the final observation
    terminated = jnp.array([[False], [False], [True]])
    truncated = jnp.array([[True], [False], [False]])
    gamma, lam = 0.5, 0.5
    adv, _ = compute_gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    a2 = 3.0 - 0.125  # terminated: no bootstrap from 7.0
    a1 = (2.0 + 0.5 * 0.125 - 0.25) + gamma * lam * a2
    a0 = 1.0 + 0.5 * 10.0 - 0.5  # truncated: bootstrap from 10, recursion cut
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)
    # Treating the truncation as a termination would drop the 5.0 bootstrap: measurably wrong.
    wrong, _ = compute_gae(
        rewards, values, next_values, terminated | truncated, truncated, 0.5, 0.5
    )
    assert abs(float(wrong[0, 0]) - a0) == pytest.approx(5.0)


def test_policy_loss_by_hand():
    ratio = np.array([0.5, 1.0, 1.5, 1.1], np.float32)
    advantages = np.array([1.0, -2.0, 1.0, -1.0], np.float32)
    loss, clipfrac, approx_kl = policy_loss(jnp.log(ratio), jnp.array(advantages), 0.2)
    # min(r A, clip(r) A): 0.5*1=0.5 | -2 | min(1.5, 1.2)=1.2 | min(-1.1, -1.1)=-1.1
    assert float(loss) == pytest.approx(-(0.5 - 2.0 + 1.2 - 1.1) / 4, rel=1e-6)
    assert float(clipfrac) == pytest.approx(0.5)  # 0.5 and 1.5 lie outside [0.8, 1.2]
    expected_kl = np.mean((ratio - 1) - np.log(ratio))
    assert float(approx_kl) == pytest.approx(expected_kl, rel=1e-5)


def test_value_loss_by_hand():
    values = jnp.array([1.0, 3.0])
    old_values = jnp.array([0.0, 2.9])
    returns = jnp.array([0.0, 3.0])
    # Unclipped: (1-0)^2 = 1, (3-3)^2 = 0. Clipped to old +- 0.2: 0.2 -> 0.04; 3.0 -> 0.0.
    assert float(value_loss(values, old_values, returns, 0.2, False)) == pytest.approx(0.25)
    assert float(value_loss(values, old_values, returns, 0.2, True)) == pytest.approx(0.25)
    # Clipping bites when the clipped prediction is further from the target.
    values = jnp.array([0.0])
    old_values = jnp.array([1.0])
    returns = jnp.array([0.0])
    # Unclipped 0; clipped prediction 0.8 -> 0.64; max -> 0.64; half -> 0.32.
    assert float(value_loss(values, old_values, returns, 0.2, True)) == pytest.approx(0.32)
    assert float(value_loss(values, old_values, returns, 0.2, False)) == pytest.approx(0.0)
